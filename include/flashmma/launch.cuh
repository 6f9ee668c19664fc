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
// it (kernel_image.hpp) and raises the shared-memory limit at its first launch on a device, and
// launches.
#pragma once

#include <cuda_runtime.h>

#include <atomic>
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

// How a kernel type is launched on a device, once its image there has been checked.
enum class LaunchMode : int {
  kUnchecked = 0,
  kPlain = 1,       // after the kernels before it in the stream
  kOverlapped = 2,  // while they end (programmatic stream serialization)
};

// The checks of a kernel's first launch on a device: its loaded image (kernel_image.hpp) and
// the shared-memory limit raised to its need; `mode` receives how to launch it.
template <class Kernel>
Status prepare_launch(LaunchMode& mode) {
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
  // Overlapped with the kernel before it only where the loaded code holds the wait: code
  // compiled from compute_80 PTX (ptxVersion 80) has it compiled out, whatever GPU runs it.
  mode = WaitsForPrerequisiteGrids<Kernel>::value &&
                 loaded.ptxVersion >= kGridDependencyMinVersion
             ? LaunchMode::kOverlapped
             : LaunchMode::kPlain;
  return Status::success();
}

// The mode each kernel type's first launch on a device found, per device (kUnchecked before
// it): checking the image and raising the limit took microseconds on every launch, a fifth of
// the host's time for a decoding call. Devices numbered kRememberedDevices or more are checked
// at every launch.
inline constexpr int kRememberedDevices = 64;
template <class Kernel>
std::atomic<int>& remembered_mode(int device) {
  static std::atomic<int> modes[kRememberedDevices];  // zero-initialized: kUnchecked
  return modes[device];
}

// prepare_launch, and what it found remembered for the device (where there is a slot for it).
template <class Kernel>
Status prepare_and_remember(std::atomic<int>* remembered, LaunchMode& mode) {
  if (Status s = prepare_launch<Kernel>(mode); !s) return s;
  if (remembered != nullptr) remembered->store(static_cast<int>(mode), std::memory_order_release);
  return Status::success();
}

template <class Kernel>
cudaError_t launch_in_mode(LaunchMode mode, const typename Kernel::Params& params,
                           const GridShape& grid, cudaStream_t stream) {
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  attribute.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(grid.x, grid.y, grid.z);
  config.blockDim = dim3(Kernel::kThreads);
  config.dynamicSmemBytes = Kernel::kSmemBytes;
  config.stream = stream;
  config.attrs = &attribute;
  config.numAttrs = mode == LaunchMode::kOverlapped ? 1 : 0;
  return cudaLaunchKernelEx(&config, kernel_entry<Kernel>, params);
}

template <class Kernel>
Status launch_kernel(const typename Kernel::Params& params, const GridShape& grid,
                     cudaStream_t stream) {
  int device = 0;
  if (Status s = cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !s) return s;
  std::atomic<int>* const remembered =
      device >= 0 && device < kRememberedDevices ? &remembered_mode<Kernel>(device) : nullptr;
  LaunchMode mode = remembered != nullptr
                        ? static_cast<LaunchMode>(remembered->load(std::memory_order_acquire))
                        : LaunchMode::kUnchecked;
  const bool was_remembered = mode != LaunchMode::kUnchecked;
  if (!was_remembered) {
    if (Status s = prepare_and_remember<Kernel>(remembered, mode); !s) return s;
  }
  cudaError_t error = launch_in_mode<Kernel>(mode, params, grid, stream);
  if (error != cudaSuccess && was_remembered) {
    // A device reset since the first launch (cudaDeviceReset) forgets the shared-memory
    // limit: check and raise it again, once.
    cudaGetLastError();
    remembered->store(static_cast<int>(LaunchMode::kUnchecked), std::memory_order_release);
    if (Status s = prepare_and_remember<Kernel>(remembered, mode); !s) return s;
    error = launch_in_mode<Kernel>(mode, params, grid, stream);
  }
  if (error != cudaSuccess) cudaGetLastError();  // reported here, not at the next check
  return cuda_status(error, (std::string("launching ") + Kernel::kName).c_str());
}

}  // namespace detail
}  // namespace flashmma
