// SPDX-License-Identifier: Apache-2.0
// Catch2 runner of the CPU tests.
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

int main(int argc, char* argv[]) { return Catch::Session().run(argc, argv); }
