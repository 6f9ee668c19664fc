// SPDX-License-Identifier: Apache-2.0
// Runner of the CPU tests.
#include "support/catch_session.hpp"

int main(int argc, char* argv[]) { return flashmma::test::run_catch_session(argc, argv); }
