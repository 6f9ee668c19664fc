// SPDX-License-Identifier: Apache-2.0
// Runs the Catch2 session of a test executable. Catch2 (v2's implementation; v3 is a library) is
// compiled once, in catch_session.cpp (by the host compiler: through nvcc it costs several seconds
// more), and the two runners cpu_main.cpp and gpu_main.cu only add a main() around this call.
#pragma once

namespace flashmma {
namespace test {

// Catch2's exit code: 0 when every test passed.
int run_catch_session(int argc, char* argv[]);

}  // namespace test
}  // namespace flashmma
