// SPDX-License-Identifier: Apache-2.0
// Catch2's implementation, for both runners.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "support/catch_session.hpp"

int flashmma::test::run_catch_session(int argc, char* argv[]) {
  return Catch::Session().run(argc, argv);
}
