// SPDX-License-Identifier: Apache-2.0
// Runner of the GPU tests. It reports the test as skipped (CTest's SKIP_RETURN_CODE) instead of
// failing where it cannot run: on a machine without a usable CUDA device, and on a GPU for which
// the test holds no code. The second happens where the tests were built for other architectures
// than this GPU's (FLASHMMA_TEST_CUDA_ARCHITECTURES, tests/CMakeLists.txt): the message names them
// and the option to change. It is compiled once per set of test architectures
// (flashmma_gpu_runner), so that the probe below holds exactly the targets the test's kernels hold.
#include <cuda_runtime.h>

#include <cstdio>

#include "support/catch_session.hpp"

namespace {

// Empty: it only tells whether this program holds code the current GPU can load.
__global__ void kernel_image_probe() {}

}  // namespace

int main(int argc, char* argv[]) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipping (%s)\n",
                error != cudaSuccess ? cudaGetErrorName(error) : "0 devices");
    return FLASHMMA_SKIP_RETURN_CODE;
  }
  cudaFuncAttributes attributes{};
  const cudaError_t probe = cudaFuncGetAttributes(&attributes, kernel_image_probe);
  if (probe == cudaErrorNoKernelImageForDevice || probe == cudaErrorInvalidDeviceFunction) {
    int device = 0;
    cudaDeviceProp properties{};
    cudaGetDevice(&device);
    cudaGetDeviceProperties(&properties, device);
    std::printf("this test holds no code for the GPU (%s, compute capability %d.%d): it was "
                "built for CUDA architectures %s; configure with "
                "-DFLASHMMA_TEST_CUDA_ARCHITECTURES=<this GPU's, e.g. 80 or 90a>: skipping\n",
                properties.name, properties.major, properties.minor, FLASHMMA_TEST_ARCHITECTURES);
    return FLASHMMA_SKIP_RETURN_CODE;
  }
  return flashmma::test::run_catch_session(argc, argv);
}
