// SPDX-License-Identifier: Apache-2.0
// The launch path tells code compiled for sm_90 from code compiled for sm_90a. Both report
// binaryVersion 90, but only the second holds wgmma; a kernel written for sm_90a (arch_tag
// arch::Sm90a) must be refused when the GPU loaded its sm_90 build, and launched when it loaded
// its sm_90a build. tests/CMakeLists.txt builds this file twice:
//
//   test_arch_specific.sm90    CUDA_ARCHITECTURES 90-real;  expects kUnsupportedDevice, and the
//                              output untouched
//   test_arch_specific.sm90a   CUDA_ARCHITECTURES 90a-real; expects the kernel to run
//
// Either needs a compute capability 9.0 GPU: elsewhere the program exits 77 (CTest's "Skipped").
// A plain program: exit status 0 passed, 1 failed, 77 skipped.
#include <cuda_runtime.h>

#include <cstdio>
#include <string>

#include "flashmma/launch.cuh"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/traits/arch.hpp"

#ifndef EXPECT_ARCH_SPECIFIC
#error "build with -DEXPECT_ARCH_SPECIFIC=0 (sm_90) or 1 (sm_90a)"
#endif

namespace {

constexpr int kSkipped = 77;
constexpr int kWritten = 90;
constexpr int kUntouched = -1;

// The smallest kernel type written for sm_90a: its body writes a marker where sm_90a's
// architecture-specific features are compiled in, and traps elsewhere, as a wgmma wrapper does.
struct MarkerKernel {
  struct Params {
    int* out;
  };
  using arch_tag = flashmma::arch::Sm90a;
  static constexpr int kThreads = 32;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kSmemBytes = 0;
  static constexpr const char* kName = "MarkerKernel";

  static __device__ void run(const Params& params) {
#if defined(FLASHMMA_SM90A_ENABLED)
    if (threadIdx.x == 0) *params.out = kWritten;
#else
    flashmma::ptx::trap_missing_instruction();
#endif
  }
};

}  // namespace

int main() {
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::printf("no CUDA device: skipped\n");
    return kSkipped;
  }
  cudaDeviceProp properties{};
  if (cudaGetDeviceProperties(&properties, 0) != cudaSuccess) return 1;
  if (properties.major != 9 || properties.minor != 0) {
    std::printf("compute capability %d.%d, not 9.0: skipped\n", properties.major,
                properties.minor);
    return kSkipped;
  }

  int* out = nullptr;
  if (cudaMalloc(&out, sizeof(int)) != cudaSuccess) return 1;
  const int untouched = kUntouched;
  cudaMemcpy(out, &untouched, sizeof(int), cudaMemcpyHostToDevice);

  const flashmma::Status status = flashmma::detail::launch_kernel<MarkerKernel>(
      MarkerKernel::Params{out}, flashmma::GridShape{1, 1, 1}, nullptr);
  const cudaError_t sync = cudaDeviceSynchronize();
  int value = 0;
  cudaMemcpy(&value, out, sizeof(int), cudaMemcpyDeviceToHost);
  std::printf("launch_kernel: %s\nsynchronize: %s\noutput: %d\n",
              status.ok() ? "ok" : status.message().c_str(), cudaGetErrorName(sync), value);

  bool passed = false;
  if (EXPECT_ARCH_SPECIFIC) {
    passed = status.ok() && sync == cudaSuccess && value == kWritten;
  } else {
    passed = status.code() == flashmma::ErrorCode::kUnsupportedDevice &&
             status.message().find("without the architecture-specific features") !=
                 std::string::npos &&
             status.message().find("sm_90a") != std::string::npos && value == kUntouched;
  }
  std::printf("%s\n", passed ? "passed" : "FAILED");
  return passed ? 0 : 1;
}
