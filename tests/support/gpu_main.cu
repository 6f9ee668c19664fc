// SPDX-License-Identifier: Apache-2.0
// Runner of the GPU tests. Without a usable CUDA device it reports the test as skipped (CTest's
// SKIP_RETURN_CODE) instead of failing, so that machines without a GPU still run the rest of the
// suite.
#include <cuda_runtime.h>

#include <cstdio>

#include "support/catch_session.hpp"

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipping (%s)\n",
                error != cudaSuccess ? cudaGetErrorName(error) : "0 devices");
    return FLASHMMA_SKIP_RETURN_CODE;
  }
  return flashmma::test::run_catch_session(argc, argv);
}
