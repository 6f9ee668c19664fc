// SPDX-License-Identifier: Apache-2.0
// Catch2's session, for both runners. Catch2 v2 is one header: CATCH_CONFIG_RUNNER compiles its
// implementation here, without a main(). v3 is a compiled library and ignores the macro.
#define CATCH_CONFIG_RUNNER
#include "support/catch.hpp"

#include "support/catch_session.hpp"

int flashmma::test::run_catch_session(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
