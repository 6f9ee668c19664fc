// SPDX-License-Identifier: Apache-2.0
// Checks, before a launch, that the code the driver loaded for a kernel is code that can run it.
//
// nvcc compiles a kernel once per target of the build. For a target below the kernel's minimum
// architecture the body is compiled out (its instructions do not exist there) and replaced by a
// trap. Such a target can still be what runs: a binary that holds only compute_75 PTX (CUDA 13's
// default without -arch, or CMake's default CUDA_ARCHITECTURES) is JIT-compiled by the driver for
// an sm_90 GPU, and cudaFuncAttributes::binaryVersion then reports 90. ptxVersion keeps the
// virtual architecture the code came from, so both are checked.
//
// Code for sm_90 and code for sm_90a both report 90 there, yet wgmma exists only in the second.
// For a kernel written for an architecture-specific target, the launch path (launch.cuh) also
// asks a probe kernel compiled in the same module: its static shared memory is
// kArchSpecificMarkerBytes only in the sm_90a pass, so cudaFuncGetAttributes tells the two
// apart without launching anything (and so also under stream capture).
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
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

// Ok when `kernel` has loadable code compiled for `min_compute_capability` or newer;
// `attributes` receives what the runtime reports of that code.
inline Status check_kernel_image(const void* kernel, int min_compute_capability,
                                 const char* kernel_name, cudaFuncAttributes& attributes) {
  attributes = cudaFuncAttributes{};
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

// The static shared memory of the architecture-feature probe in an sm_90a module.
inline constexpr int kArchSpecificMarkerBytes = 48;

// Whether the module of `probe` (launch.cuh's arch_feature_probe, instantiated beside the
// kernel) was compiled with sm_90a's architecture-specific features; `binary_version` receives
// the architecture of the code the GPU loaded for it.
inline Status read_arch_specific_image(const void* probe, bool& arch_specific,
                                       int& binary_version) {
  cudaFuncAttributes attributes{};
  const cudaError_t error = cudaFuncGetAttributes(&attributes, probe);
  if (error != cudaSuccess) cudaGetLastError();  // not sticky: keep it from the next check
  if (Status s = cuda_status(error, "cudaFuncGetAttributes"); !s) return s;
  arch_specific =
      attributes.sharedSizeBytes == static_cast<std::size_t>(kArchSpecificMarkerBytes);
  binary_version = attributes.binaryVersion;
  return Status::success();
}

// Ok when the module of `probe` was compiled with sm_90a's architecture-specific features.
inline Status check_arch_specific_image(const void* probe, const char* arch_name,
                                        const char* kernel_name) {
  bool arch_specific = false;
  int binary_version = 0;
  if (Status s = read_arch_specific_image(probe, arch_specific, binary_version); !s) return s;
  if (arch_specific) return Status::success();
  return Status::error(
      ErrorCode::kUnsupportedDevice,
      std::string("flashmma: ") + kernel_name + " is written for " + arch_name +
          " but the code this GPU loaded was compiled for sm_" +
          std::to_string(binary_version) +
          " without the architecture-specific features (wgmma, setmaxnreg), so its body is "
          "compiled out; build for " + arch_name + ": nvcc -arch=" + arch_name +
          ", or CMake's CUDA_ARCHITECTURES \"" + std::string(arch_name).substr(3) + "\"");
}

}  // namespace detail
}  // namespace flashmma
