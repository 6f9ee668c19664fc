// SPDX-License-Identifier: Apache-2.0
// Checks, before a launch, that the code the driver loaded for a kernel is code that can run it.
//
// nvcc compiles a kernel once per target of the build. For a target below the kernel's minimum
// architecture the body is compiled out (its instructions do not exist there) and replaced by a
// trap. Such a target can still be what runs: a binary that holds only compute_75 PTX (CUDA 13's
// default without -arch, or CMake's default CUDA_ARCHITECTURES) is JIT-compiled by the driver for
// an sm_90 GPU, and cudaFuncAttributes::binaryVersion then reports 90. ptxVersion keeps the
// virtual architecture the code came from, so both are checked.
#pragma once

#include <cuda_runtime.h>

#include <string>

#include "flashmma/device.hpp"
#include "flashmma/status.hpp"

namespace flashmma {
namespace detail {

inline std::string architecture_build_hint(int min_compute_capability) {
  return "build for CUDA architectures " + std::to_string(min_compute_capability) +
         " or newer: nvcc -arch=sm_80 (or -gencode for sm_80 and sm_90a), or CMake's "
         "CUDA_ARCHITECTURES \"80;90a\" (CMake's default is older)";
}

// Ok when `kernel` has loadable code compiled for `min_compute_capability` or newer.
inline Status check_kernel_image(const void* kernel, int min_compute_capability,
                                 const char* kernel_name) {
  cudaFuncAttributes attributes{};
  const cudaError_t error = cudaFuncGetAttributes(&attributes, kernel);
  if (error == cudaErrorNoKernelImageForDevice || error == cudaErrorInvalidDeviceFunction) {
    cudaGetLastError();  // not sticky: clear it so the caller's next check does not see it
    return Status::error(ErrorCode::kUnsupportedDevice,
                         std::string("flashmma: ") + kernel_name +
                             " has no code this GPU can load (" + cudaGetErrorName(error) +
                             "); " + architecture_build_hint(min_compute_capability));
  }
  if (Status s = cuda_status(error, "cudaFuncGetAttributes"); !s) return s;
  if (attributes.ptxVersion < min_compute_capability ||
      attributes.binaryVersion < min_compute_capability) {
    return Status::error(
        ErrorCode::kUnsupportedDevice,
        std::string("flashmma: ") + kernel_name + " needs code compiled for sm_" +
            std::to_string(min_compute_capability) + " or newer, but the build holds only code "
            "for compute_" + std::to_string(attributes.ptxVersion) + " (loaded as sm_" +
            std::to_string(attributes.binaryVersion) + "), in which its body is compiled out; " +
            architecture_build_hint(min_compute_capability));
  }
  return Status::success();
}

}  // namespace detail
}  // namespace flashmma
