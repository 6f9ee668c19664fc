// SPDX-License-Identifier: Apache-2.0
// The backward pass entry points, in the forward's style:
//
//   flashmma::backward<Config>(params, stream)          one config with the built-in policy
//                                                       params ask for (mask, window, softcap,
//                                                       ALiBi): six kernels compiled
//   flashmma::backward<Config, Policy>(params, policy, stream)
//                                                       one config, your own policy (it must
//                                                       define transform_gradient if it
//                                                       transforms scores)
//   flashmma::backward(params, stream)                  the default config of the head dim:
//                                                       Hopper's on an sm_90 GPU where
//                                                       runs_sm90_backward_default says so
//                                                       (backward_plan.hpp), else the portable
//                                                       one (traits/backward_config.hpp)
//   flashmma::backward_default_config<Element, HeadDim>(params, stream)
//                                                       the same for one kernel head dim
//   flashmma::backward_with_dropout<Config>(params[, policy], stream)
//                                                       as backward<Config>, compiled with
//                                                       dropout (params.dropout_p)
//
// Config is a BackwardTileConfig (the portable mma.sync kernel, sm80/backward_kernel.cuh; dense
// and packed batches) or an Sm90BackwardTileConfig (the Hopper kernel, sm90/backward_kernel.cuh;
// dense batches, sm_90a code). Each validates everything first
// (backward_validate.hpp) and returns an error Status without launching or writing anything when
// an argument is wrong. A call is three launches on `stream`: the row preprocessing (D = dO . O,
// the LSE in base 2, dQ's accumulator zeroed), the main kernel, and dQ's conversion. dK and dV
// are sums in registers and deterministic; dQ is summed with fp32 atomics across key tiles, in
// any order (its last bits may change from run to run) or, with params.deterministic, in the
// order of the key tiles.
#pragma once

#if !defined(__CUDACC__)
#error "flashmma/backward.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc."
#else

#include <cuda_runtime.h>

#include <type_traits>

#include "flashmma/attention/backward_args.hpp"
#include "flashmma/attention/backward_rows.cuh"
#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/backward_params.hpp"
#include "flashmma/backward_plan.hpp"
#include "flashmma/backward_validate.hpp"
#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/forward.cuh"
#include "flashmma/kernel_families.hpp"
#include "flashmma/launch.cuh"
#include "flashmma/sm80/backward_kernel.cuh"
#include "flashmma/sm90/backward_kernel.cuh"
#include "flashmma/sm90/tensor_maps.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/backward_config.hpp"
#include "flashmma/traits/sm90_backward_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

// The backward kernel type backward<Config> runs for one score policy, for dense batches or
// (kVariableLengths, BackwardTileConfig only) packed sequences (its __global__ function is
// kernel_entry<BackwardKernelFor<Config, Policy, ...>>): a BackwardTileConfig runs the portable
// mma.sync kernel, an Sm90BackwardTileConfig the Hopper one.
template <class Config, class Policy, bool kVariableLengths = false, class Dropout = NoDropout>
using BackwardKernelFor =
    std::conditional_t<IsSm90BackwardTileConfig<Config>::value,
                       sm90::BackwardKernel<Config, Policy, Dropout>,
                       sm80::BackwardKernel<Config, Policy, kVariableLengths, Dropout>>;

namespace detail {

template <class Element>
BackwardArgs<Element> make_backward_args(const BackwardParams& p) {
  BackwardArgs<Element> args;
  args.forward = make_forward_args<Element>(p);
  args.d_o = static_cast<const Element*>(p.d_o);
  args.dq = static_cast<Element*>(p.dq);
  args.dk = static_cast<Element*>(p.dk);
  args.dv = static_cast<Element*>(p.dv);
  args.do_strides = p.do_strides;
  args.dq_strides = p.dq_strides;
  args.dk_strides = p.dk_strides;
  args.dv_strides = p.dv_strides;
  const BackwardWorkspace layout = backward_workspace_layout(p);
  auto* workspace = static_cast<unsigned char*>(p.workspace);
  args.dq_accum = reinterpret_cast<float*>(workspace + layout.dq_offset);
  args.lse_log2 = reinterpret_cast<float*>(workspace + layout.lse_log2_offset);
  args.delta = reinterpret_cast<float*>(workspace + layout.delta_offset);
  args.order = reinterpret_cast<int32_t*>(workspace + layout.order_offset);
  args.padded_rows = layout.padded_rows;
  args.accumulate_dkv = p.accumulate_dkv;
  args.deterministic = p.deterministic;
  return args;
}

// What Config's kernel takes beyond validate_for_kernel: the Hopper one dense batches only (a
// message of its own, before the forward's about Sm90TileConfig).
template <class Config>
Status check_backward_config_call(const BackwardParams& params) {
  if constexpr (IsSm90BackwardTileConfig<Config>::value) {
    if (params.cu_seqlens_q != nullptr || params.cu_seqlens_k != nullptr) {
      return invalid(
          "cu_seqlens_q / cu_seqlens_k (packed sequences) are not available on the sm_90a "
          "backward kernel yet (Sm90BackwardTileConfig): use a BackwardTileConfig, or "
          "backward(params), which runs them on one");
    }
  }
  (void)params;
  return Status::success();
}

// The three launches of a validated call. A portable kernel compiled with dropout (Dropout) is
// the one of packed sequences, which takes dense batches too, and runs every call given to it;
// the Hopper kernel takes dense batches, with or without dropout. Everything that can fail
// without the device (the Hopper kernel's tensor maps) is done before the first launch.
// kPackedKernels false (the default dispatch of a build without the variable-length kernels,
// which refuses packed calls first) compiles no portable kernel for packed sequences.
template <class Config, class Policy, class Dropout = NoDropout, bool kPackedKernels = true>
Status launch_backward(const BackwardParams& params, const Policy& policy,
                       const DeviceInfo& device, cudaStream_t stream) {
  using Element = typename Config::element_type;
  if (Status s = validate_for_device(device, backward_kernel_requirements<Config>()); !s) return s;
  const BackwardArgs<Element> args = make_backward_args<Element>(params);
  const auto preprocess = [&] {
    return launch_kernel<BackwardPreprocessKernel<Element>>(
        {args}, row_kernel_grid(args.padded_rows, params.heads_q, params.batch), stream);
  };
  const auto convert = [&] {
    return launch_kernel<BackwardConvertKernel<Element>>(
        {args}, row_kernel_grid(params.seqlen_q, params.heads_q, params.batch), stream);
  };
  if constexpr (IsSm90BackwardTileConfig<Config>::value) {
    using Kernel = sm90::BackwardKernel<Config, Policy, Dropout>;
    typename Kernel::Params kernel_params{{}, args, policy};
    if (Status s = sm90::make_backward_tensor_maps<Config>(params, kernel_params.maps); !s) {
      return s;
    }
    if (Status s = preprocess(); !s) return s;
    if (Status s = launch_kernel<Kernel>(kernel_params, Kernel::grid(params), stream); !s) {
      return s;
    }
    return convert();
  } else {
    if (Status s = preprocess(); !s) return s;
    const auto main_kernel = [&](auto variable_lengths) {
      using Kernel = BackwardKernelFor<Config, Policy, decltype(variable_lengths)::value, Dropout>;
      return launch_kernel<Kernel>({args, policy}, Kernel::grid(params), stream);
    };
    Status main_status = Status::success();
    if constexpr (Dropout::kEnabled) {
      main_status = main_kernel(std::true_type{});
    } else if constexpr (kPackedKernels) {
      const bool packed = params.cu_seqlens_q != nullptr || params.cu_seqlens_k != nullptr;
      main_status = packed ? main_kernel(std::true_type{}) : main_kernel(std::false_type{});
    } else {
      main_status = main_kernel(std::false_type{});
    }
    if (!main_status) return main_status;
    return convert();
  }
}

}  // namespace detail

// Runs Config with your own score policy (attention/score_policy.hpp): params' mask, window,
// softcap and ALiBi fields must be unset, as for forward<Config, Policy>.
template <class Config, class Policy>
[[nodiscard]] Status backward(const BackwardParams& params, const Policy& policy,
                              cudaStream_t stream = nullptr) {
  static_assert(IsBackwardConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...> or "
                "flashmma::Sm90BackwardTileConfig<...>");
  static_assert(check_backward_policy<Policy>(), "");
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = detail::validate_no_builtin_variant(params); !s) return s;
  if (Status s = detail::check_backward_config_call<Config>(params); !s) return s;
  if (Status s = validate_for_kernel(params, backward_kernel_requirements<Config>()); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_backward<Config>(params, policy, device, stream);
}

// Runs Config with the built-in policy params ask for (default_dispatch.hpp's six).
template <class Config>
[[nodiscard]] Status backward(const BackwardParams& params, cudaStream_t stream = nullptr) {
  static_assert(IsBackwardConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...> or "
                "flashmma::Sm90BackwardTileConfig<...>");
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = detail::check_backward_config_call<Config>(params); !s) return s;
  if (Status s = validate_for_kernel(params, backward_kernel_requirements<Config>()); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return visit_builtin_policy(params, [&](const auto& policy) {
    return detail::launch_backward<Config>(params, policy, device, stream);
  });
}

// Dropout (params.dropout_p, with the forward's seed and offset): Config's kernel compiled with
// it, one per policy (backward<Config> compiles none, so that calls without dropout build no
// third kernel). Takes dense and packed batches, and dropout_p = 0.
template <class Config, class Policy>
[[nodiscard]] Status backward_with_dropout(const BackwardParams& params, const Policy& policy,
                                           cudaStream_t stream = nullptr) {
  static_assert(IsBackwardConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...> or "
                "flashmma::Sm90BackwardTileConfig<...>");
  static_assert(check_backward_policy<Policy>(), "");
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = detail::validate_no_builtin_variant(params); !s) return s;
  if (Status s = detail::check_backward_config_call<Config>(params); !s) return s;
  if (Status s = validate_for_kernel(params, backward_kernel_requirements<Config, PhiloxDropout>());
      !s)
    return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_backward<Config, Policy, PhiloxDropout>(params, policy, device, stream);
}

template <class Config>
[[nodiscard]] Status backward_with_dropout(const BackwardParams& params,
                                           cudaStream_t stream = nullptr) {
  static_assert(IsBackwardConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...> or "
                "flashmma::Sm90BackwardTileConfig<...>");
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = detail::check_backward_config_call<Config>(params); !s) return s;
  if (Status s = validate_for_kernel(params, backward_kernel_requirements<Config, PhiloxDropout>());
      !s)
    return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return visit_builtin_policy(params, [&](const auto& policy) {
    using Policy = std::decay_t<decltype(policy)>;
    return detail::launch_backward<Config, Policy, PhiloxDropout>(params, policy, device, stream);
  });
}

namespace detail {

// One backward config of the default dispatch with the built-in policy, on a validated call
// whose families this build holds (check_backward_families); with dropout_p > 0, its kernels
// compiled with dropout. Only the families this build holds are instantiated.
template <class Config>
Status run_backward_config(const BackwardParams& params, const DeviceInfo& device,
                           cudaStream_t stream) {
  if (Status s = check_backward_config_call<Config>(params); !s) return s;
  const bool dropout = uses_dropout(params);
  const KernelRequirements requirements = dropout
                                              ? backward_kernel_requirements<Config, PhiloxDropout>()
                                              : backward_kernel_requirements<Config>();
  if (Status s = validate_for_kernel(params, requirements); !s) return s;
  return visit_compiled_policy(params, [&](const auto& policy) {
    using Policy = std::decay_t<decltype(policy)>;
    if constexpr (kDropoutFamily.compiled) {
      if (dropout) {
        return launch_backward<Config, Policy, PhiloxDropout>(params, policy, device, stream);
      }
    }
    return launch_backward<Config, Policy, NoDropout, kVariableLengthFamily.compiled>(
        params, policy, device, stream);
  });
}

// backward_default_config's choice and launch, once the call is validated and its families
// checked.
template <class Element, int HeadDim>
Status run_backward_default(const BackwardParams& params, cudaStream_t stream) {
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  using Hopper = Sm90DefaultBackwardConfigT<Element, HeadDim>;
  const bool sm90a_code =
      device.compute_capability == 90 &&
      detail::sm90a_code_loaded<sm90::BackwardKernel<Hopper, FullAttention>>();
  if (runs_sm90_backward_default(params, device, sm90a_code) &&
      validate_for_device(device, backward_kernel_requirements<Hopper>()).ok()) {
    return run_backward_config<Hopper>(params, device, stream);
  }
  return run_backward_config<DefaultBackwardConfigT<Element, HeadDim>>(params, device, stream);
}

}  // namespace detail

// The default of one kernel head dim (64, 128 or 256), with the built-in policy params ask for:
// the Hopper one where runs_sm90_backward_default says so (backward_plan.hpp), else the portable
// one. backward(params) picks the head dim; a program may call one head dim's directly to spread
// the defaults over translation units (the PyTorch extension does).
template <class Element, int HeadDim>
[[nodiscard]] Status backward_default_config(const BackwardParams& params,
                                             cudaStream_t stream = nullptr) {
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = check_backward_families(params); !s) return s;  // before the device
  if constexpr (!kBackwardFamily.compiled) {
    return Status::success();  // never: check_backward_families refused the call
  } else {
    return detail::run_backward_default<Element, HeadDim>(params, stream);
  }
}

// The default dispatch: the default backward config of the smallest kernel head dim (64, 128,
// 256) that holds params.head_dim, with the built-in policy, on Hopper's kernel where
// runs_sm90_backward_default (backward_plan.hpp) says so (dense batches on a compute capability
// 9.0 GPU running sm_90a code), else the portable one; with dropout_p > 0, their kernels compiled
// with dropout. A translation unit that calls it compiles 108 portable backward kernels (three
// head dims, two element types, six policies; dense batches, packed ones, and dropout) and 72
// Hopper ones (three head dims, two element types, six policies, with and without dropout; empty
// outside an sm_90a pass); backward<Config> compiles twelve (six policies, dense and packed
// batches) or six (Hopper). A template only so that including this header instantiates nothing.
template <int kUnused = 0>
[[nodiscard]] Status backward(const BackwardParams& params, cudaStream_t stream = nullptr) {
  if (Status s = validate_backward_params(params); !s) return s;
  if (Status s = check_backward_families(params); !s) return s;
  // Only the defaults this build holds (kernel_families.hpp) are instantiated.
  const auto run_head_dim = [&](auto element, auto head_dim) {
    using Element = decltype(element);
    constexpr int kHeadDim = decltype(head_dim)::value;
    if constexpr (kBackwardFamily.compiled && default_compiled<Element, kHeadDim>()) {
      return backward_default_config<Element, kHeadDim>(params, stream);
    } else {
      return check_backward_families(params);  // never: refused above
    }
  };
  const auto run = [&](auto element) {
    switch (backward_kernel_head_dim_for(params.head_dim)) {
      case 64: return run_head_dim(element, std::integral_constant<int, 64>{});
      case 128: return run_head_dim(element, std::integral_constant<int, 128>{});
      default: return run_head_dim(element, std::integral_constant<int, 256>{});
    }
  };
  if (params.dtype == ScalarType::kFloat16) return run(__half{});
  return run(__nv_bfloat16{});
}

}  // namespace flashmma

#include "flashmma/precompiled_backward_defaults.cuh"  // from flashmma::kernels, if linked

#endif  // __CUDACC__
