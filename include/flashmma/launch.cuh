// SPDX-License-Identifier: Apache-2.0
// The one launch path of every kernel type. A kernel type (sm80/forward_kernel.cuh is one)
// says what it needs as members:
//
//   Params                 its parameters, passed by value as __grid_constant__
//   kThreads               threads per block
//   kMinBlocksPerSm        for __launch_bounds__
//   kSmemBytes             dynamic shared memory per block
//   kName                  for messages
//   arch_tag               the architecture it is written for (traits/arch.hpp)
//   static void run(const Params&)   the body, on the device
//
// The host picks a kernel type and its grid; launch_kernel checks that the loaded code suits
// it (kernel_image.hpp), raises the shared-memory limit, and launches.
#pragma once

#include <cuda_runtime.h>

#include <string>
#include <type_traits>

#include "flashmma/attention/scheduler.hpp"
#include "flashmma/device.hpp"
#include "flashmma/kernel_image.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/status.hpp"

namespace flashmma {

template <class Kernel>
__global__ void __launch_bounds__(Kernel::kThreads, Kernel::kMinBlocksPerSm)
    kernel_entry(const __grid_constant__ typename Kernel::Params params) {
  Kernel::run(params);
}

namespace detail {

// Never launched: cudaFuncGetAttributes reads its static shared memory, which says whether its
// module, the kernel's, holds sm_90a code (kernel_image.hpp). A template on the kernel so that it
// is compiled in the kernel's own translation unit and module.
template <class Kernel>
__global__ void arch_feature_probe(int* sink) {
#if defined(FLASHMMA_SM90A_ENABLED)
  __shared__ int marker[kArchSpecificMarkerBytes / sizeof(int)];
  marker[threadIdx.x % (kArchSpecificMarkerBytes / sizeof(int))] = static_cast<int>(threadIdx.x);
  __syncthreads();
  sink[threadIdx.x] = marker[(threadIdx.x + 1) % (kArchSpecificMarkerBytes / sizeof(int))];
#else
  (void)sink;
#endif
}

// Whether the code the GPU loaded for Kernel's module holds sm_90a's features (wgmma, TMA):
// what the default dispatch asks before it picks a Hopper kernel. False where it cannot tell.
template <class Kernel>
bool sm90a_code_loaded() {
  bool arch_specific = false;
  int binary_version = 0;
  return read_arch_specific_image(reinterpret_cast<const void*>(arch_feature_probe<Kernel>),
                                  arch_specific, binary_version)
             .ok() &&
         arch_specific;
}

// Whether a kernel type waits for the grids before it (ptx/grid_dependency.cuh) before it
// reads anything, and so may be launched while they run: its optional member
// `static constexpr bool kWaitsForPrerequisiteGrids = true`.
template <class Kernel, class = void>
struct WaitsForPrerequisiteGrids : std::false_type {};
template <class Kernel>
struct WaitsForPrerequisiteGrids<Kernel, std::void_t<decltype(Kernel::kWaitsForPrerequisiteGrids)>>
    : std::bool_constant<Kernel::kWaitsForPrerequisiteGrids> {};

// The compute capability whose code has griddepcontrol (ptx/grid_dependency.cuh).
inline constexpr int kGridDependencyMinVersion = 90;

template <class Kernel>
Status launch_kernel(const typename Kernel::Params& params, const GridShape& grid,
                     cudaStream_t stream) {
  const auto entry = kernel_entry<Kernel>;
  // A build without code for the kernel's architecture must not launch a compiled-out body.
  cudaFuncAttributes loaded{};
  if (Status s = check_kernel_image(reinterpret_cast<const void*>(entry),
                                    Kernel::arch_tag::kMinComputeCapability, Kernel::kName,
                                    loaded);
      !s)
    return s;
  if constexpr (Kernel::arch_tag::kArchSpecific) {
    if (Status s = check_arch_specific_image(reinterpret_cast<const void*>(arch_feature_probe<Kernel>),
                                             Kernel::arch_tag::kName, Kernel::kName);
        !s)
      return s;
  }
  if (Status s = cuda_status(
          cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(Kernel::kSmemBytes)),
          "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
      !s)
    return s;
  const std::string what = std::string("launching ") + Kernel::kName;
  // Overlapped with the kernel before it only where the loaded code holds the wait: code
  // compiled from compute_80 PTX (ptxVersion 80) has it compiled out, whatever GPU runs it.
  if constexpr (WaitsForPrerequisiteGrids<Kernel>::value) {
    if (loaded.ptxVersion >= kGridDependencyMinVersion) {
      cudaLaunchAttribute attribute{};
      attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
      attribute.val.programmaticStreamSerializationAllowed = 1;
      cudaLaunchConfig_t config{};
      config.gridDim = dim3(grid.x, grid.y, grid.z);
      config.blockDim = dim3(Kernel::kThreads);
      config.dynamicSmemBytes = Kernel::kSmemBytes;
      config.stream = stream;
      config.attrs = &attribute;
      config.numAttrs = 1;
      const cudaError_t error = cudaLaunchKernelEx(&config, entry, params);
      if (error != cudaSuccess) cudaGetLastError();  // reported here, not at the next check
      return cuda_status(error, what.c_str());
    }
  }
  entry<<<dim3(grid.x, grid.y, grid.z), Kernel::kThreads, Kernel::kSmemBytes, stream>>>(params);
  return cuda_status(cudaGetLastError(), what.c_str());
}

}  // namespace detail
}  // namespace flashmma
