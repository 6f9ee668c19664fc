// SPDX-License-Identifier: Apache-2.0
// The forward pass entry points.
//
//   flashmma::forward<Config>(params, stream)  runs the kernel of one TileConfig;
//   flashmma::forward(params, stream)          picks the default config for dtype, head dim,
//                                              mask and device (traits/default_configs.hpp).
//
// Both validate everything first and return an error Status without launching or writing
// anything when an argument is wrong. A launch failure is returned too. Faults during the kernel
// are asynchronous, as for any CUDA kernel: they surface at the caller's next synchronization.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <string>

#include "flashmma/kernels/forward_kernel.cuh"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

namespace detail {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return Status::error(ErrorCode::kCudaError, std::string("flashmma: ") + what + " failed: " +
                                                  cudaGetErrorName(error) + " (" +
                                                  cudaGetErrorString(error) + ")");
}

}  // namespace detail

// Reads what validate_for_device() needs from the current device.
[[nodiscard]] inline Status query_device(DeviceInfo& info) {
  int device = 0;
  if (Status s = detail::cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !s) return s;
  int major = 0, minor = 0, smem_optin = 0, l2_bytes = 0;
  if (Status s = detail::cuda_status(
          cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device),
          "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
      !s)
    return s;
  if (Status s = detail::cuda_status(
          cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device),
          "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
      !s)
    return s;
  if (Status s = detail::cuda_status(
          cudaDeviceGetAttribute(&smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
          "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
      !s)
    return s;
  if (Status s = detail::cuda_status(
          cudaDeviceGetAttribute(&l2_bytes, cudaDevAttrL2CacheSize, device),
          "cudaDeviceGetAttribute(L2CacheSize)");
      !s)
    return s;
  info.compute_capability = major * 10 + minor;
  info.smem_per_block_optin = static_cast<std::size_t>(smem_optin);
  info.l2_cache_bytes = static_cast<std::size_t>(l2_bytes);
  return Status::success();
}

// The kernel-side view of params: typed pointers, folded constants.
template <class Config>
ForwardKernelArgs<typename Config::element_type> make_kernel_args(const ForwardParams& p,
                                                                  const DeviceInfo& device) {
  using Element = typename Config::element_type;
  ForwardKernelArgs<Element> args;
  args.q = static_cast<const Element*>(p.q);
  args.k = static_cast<const Element*>(p.k);
  args.v = static_cast<const Element*>(p.v);
  args.o = static_cast<Element*>(p.o);
  args.lse = p.lse;
  args.seqlen_q = p.seqlen_q;
  args.seqlen_k = p.seqlen_k;
  args.heads_q = p.heads_q;
  args.head_dim = static_cast<int>(p.head_dim);
  args.group_size = p.heads_q / p.heads_kv;
  args.q_strides = p.q_strides;
  args.k_strides = p.k_strides;
  args.v_strides = p.v_strides;
  args.o_strides = p.o_strides;
  const float scale = std::isnan(p.softmax_scale)
                          ? 1.0f / std::sqrt(static_cast<float>(p.head_dim))
                          : p.softmax_scale;
  args.softmax_scale = scale;
  args.softmax_scale_log2 = scale * kLog2e;
  args.causal_groups =
      causal_group_count(p.heads_q * p.batch, p.seqlen_k, p.head_dim, args.group_size,
                         static_cast<int64_t>(sizeof(Element)), Config::kBlockM,
                         static_cast<int64_t>(device.l2_cache_bytes));
  return args;
}

namespace detail {

// The rest of forward<Config> once the call has passed validate_params and validate_for_kernel
// and the device is known: the device check, then the launch. forward_default_config comes here
// with the DeviceInfo it queried to pick the config, so the device is queried once per call.
template <class Config>
Status launch_forward(const ForwardParams& params, const DeviceInfo& device, cudaStream_t stream) {
  if (Status s = validate_for_device(device, kernel_requirements<Config>()); !s) return s;

  const bool causal = params.mask == MaskKind::kCausal;
  const auto kernel = causal ? forward_kernel<Config, true> : forward_kernel<Config, false>;
  // A binary built without an sm_80+ target would run an empty kernel body; refuse instead.
  cudaFuncAttributes attributes{};
  if (Status s = cuda_status(cudaFuncGetAttributes(&attributes, kernel),
                             "cudaFuncGetAttributes(forward_kernel)");
      !s)
    return s;
  if (attributes.binaryVersion < Config::arch_tag::kMinComputeCapability) {
    return Status::error(ErrorCode::kUnsupportedDevice,
                         "flashmma: the forward kernel was compiled for sm_" +
                             std::to_string(attributes.binaryVersion) +
                             " only; build with CUDA architectures 80 or newer");
  }
  if (Status s = cuda_status(
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(Config::kSmemBytes)),
          "cudaFuncSetAttribute(MaxDynamicSharedMemorySize)");
      !s)
    return s;

  const ForwardKernelArgs<typename Config::element_type> args =
      make_kernel_args<Config>(params, device);
  const dim3 grid(static_cast<unsigned>((params.seqlen_q + Config::kBlockM - 1) / Config::kBlockM),
                  static_cast<unsigned>(params.heads_q), static_cast<unsigned>(params.batch));
  kernel<<<grid, Config::kThreads, Config::kSmemBytes, stream>>>(args);
  return cuda_status(cudaGetLastError(), "launching forward_kernel");
}

}  // namespace detail

template <class Config>
[[nodiscard]] Status forward(const ForwardParams& params, cudaStream_t stream = nullptr) {
  static_assert(IsTileConfig<Config>::value, "Config must be a flashmma::TileConfig<...>");
  if (Status s = validate_params(params); !s) return s;
  if (Status s = validate_for_kernel(params, kernel_requirements<Config>()); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_forward<Config>(params, device, stream);
}

// Runs the default of one kernel head dim (traits/default_configs.hpp): the general config, the
// causal one under the causal mask, or the compact one on a GPU whose per-block shared memory
// cannot hold those. A translation unit that calls it compiles the head dim's distinct defaults
// (two to four kernels).
template <class Element, int HeadDim>
[[nodiscard]] Status forward_default_config(const ForwardParams& params,
                                            cudaStream_t stream = nullptr) {
  if (Status s = validate_params(params); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  // forward<Config> on the device already queried.
  const auto run = [&](auto config_tag) {
    using Config = decltype(config_tag);
    if (Status s = validate_for_kernel(params, kernel_requirements<Config>()); !s) return s;
    return detail::launch_forward<Config>(params, device, stream);
  };
  using Defaults = DefaultConfig<Element, HeadDim>;
  switch (default_variant<Element, HeadDim>(params.mask == MaskKind::kCausal,
                                            device.smem_per_block_optin)) {
    case DefaultVariant::kCausal: return run(typename Defaults::causal{});
    case DefaultVariant::kCompact: return run(typename Defaults::compact{});
    case DefaultVariant::kGeneral: break;
  }
  return run(typename Defaults::type{});
}

namespace detail {

template <class Element>
Status forward_default(const ForwardParams& params, cudaStream_t stream) {
  switch (kernel_head_dim_for(params.head_dim)) {
    case 32: return forward_default_config<Element, 32>(params, stream);
    case 64: return forward_default_config<Element, 64>(params, stream);
    case 96: return forward_default_config<Element, 96>(params, stream);
    case 128: return forward_default_config<Element, 128>(params, stream);
    case 160: return forward_default_config<Element, 160>(params, stream);
    case 192: return forward_default_config<Element, 192>(params, stream);
    case 224: return forward_default_config<Element, 224>(params, stream);
    case 256: return forward_default_config<Element, 256>(params, stream);
    default: return validate_params(params);  // head_dim out of range: report it
  }
}

}  // namespace detail

// Default dispatch. A translation unit that calls it compiles every default config of both
// element types (48 kernels); call forward<Config> to compile just one config (two kernels, one
// per mask). It is a template only so that merely including this header instantiates nothing.
template <int kUnused = 0>
[[nodiscard]] Status forward(const ForwardParams& params, cudaStream_t stream = nullptr) {
  if (Status s = validate_params(params); !s) return s;
  if (params.dtype == ScalarType::kFloat16) return detail::forward_default<__half>(params, stream);
  return detail::forward_default<__nv_bfloat16>(params, stream);
}

}  // namespace flashmma
