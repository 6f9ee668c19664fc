// SPDX-License-Identifier: Apache-2.0
// The forward pass entry points.
//
//   flashmma::forward<Config>(params, stream)  runs one TileConfig with the built-in policy
//                                              params ask for (mask, window, softcap, ALiBi);
//   flashmma::forward<Config, Policy>(params, policy, stream)
//                                              runs one TileConfig with your own score policy;
//   flashmma::forward(params, stream)          picks the default config for dtype, head dim,
//                                              policy and device (traits/default_configs.hpp).
//
// Both validate everything first and return an error Status without launching or writing
// anything when an argument is wrong. A launch failure is returned too. Faults during the kernel
// are asynchronous, as for any CUDA kernel: they surface at the caller's next synchronization.
#pragma once

#if !defined(__CUDACC__)
#error "flashmma/flashmma.cuh and flashmma/forward.cuh hold CUDA kernels: include them from a .cu file compiled by nvcc. Host-compiler code may include flashmma/params.hpp, status.hpp, validate.hpp, device.hpp, default_dispatch.hpp and version.hpp, and call a forward() compiled elsewhere (or link flashmma::kernels)."
#else  // the whole header: one error above, not a cascade of them

#include <cuda_runtime.h>

#include <cmath>
#include <sstream>
#include <string>
#include <type_traits>

#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/kernel_families.hpp"
#include "flashmma/kernel_image.hpp"
#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/dropout.hpp"
#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/kv_append.cuh"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/launch.cuh"
#include "flashmma/launch_plan.hpp"
#include "flashmma/sm80/forward_kernel.cuh"
#include "flashmma/sm90/forward_kernel.cuh"
#include "flashmma/sm90/tensor_maps.hpp"
#include "flashmma/split_launch.cuh"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/sm90_default_configs.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

// The forward kernel type forward<Config> runs for one score policy (for cudaFuncGetAttributes
// and profilers: its __global__ function is kernel_entry<ForwardKernelFor<Config, Policy>>).
// A TileConfig runs the portable mma.sync kernel, an Sm90TileConfig the Hopper one.
template <class Config, class Policy, class Dropout = NoDropout>
using ForwardKernelFor =
    std::conditional_t<IsSm90TileConfig<Config>::value,
                       sm90::ForwardKernel<Config, Policy, SchedulerFor<Policy>, Dropout>,
                       sm80::ForwardKernel<Config, Policy, SchedulerFor<Policy>, NoKVPages,
                                           Dropout>>;

// The Hopper kernel the default dispatch runs for packed or ragged sequences
// (launch_plan.hpp's variable_length_prefill): forward<Config> runs dense batches only.
template <class Config, class Policy>
using Sm90VariableLengthKernelFor =
    sm90::ForwardKernel<Config, Policy, SchedulerFor<Policy>, NoDropout,
                        /*kVariableLengths=*/true>;

namespace detail {

// The kernel-side view of params: typed pointers, folded constants.
template <class Element>
ForwardArgs<Element> make_forward_args(const ForwardParams& p) {
  ForwardArgs<Element> args;
  args.q = static_cast<const Element*>(p.q);
  args.k = static_cast<const Element*>(p.k);
  args.v = static_cast<const Element*>(p.v);
  args.o = static_cast<Element*>(p.o);
  args.lse = p.lse;
  args.seqlen_q = p.seqlen_q;
  args.seqlen_k = p.seqlen_k;
  args.heads_q = p.heads_q;
  args.head_dim = static_cast<int>(p.head_dim);
  args.group_size = p.group_size();
  args.q_strides = p.q_strides;
  args.k_strides = p.k_strides;
  args.v_strides = p.v_strides;
  args.o_strides = p.o_strides;
  const float scale = std::isnan(p.softmax_scale)
                          ? 1.0f / std::sqrt(static_cast<float>(p.head_dim))
                          : p.softmax_scale;
  args.softmax_scale = scale;
  args.softmax_scale_log2 = scale * kLog2e;
  args.cu_seqlens_q = p.cu_seqlens_q;
  args.cu_seqlens_k = p.cu_seqlens_k;
  args.seqused_k = p.seqused_k;
  args.lse_batch_stride = lse_batch_stride(p);
  args.lse_head_stride = lse_head_stride(p);
  args.block_table = p.block_table;
  args.block_table_batch_stride = p.block_table_batch_stride;
  args.page_size = static_cast<int32_t>(p.page_size);
  args.num_pages = static_cast<int32_t>(p.num_pages);
  args.kv_batch_index = p.kv_batch_index;
  args.kv_batch_entries = p.kv_batch_entries;
  args.pack_gqa = false;  // the split kernel's launch says (launch_plan.hpp's packs_gqa)
  args.dropout = make_dropout_args(p.dropout_p, p.dropout_seed, p.dropout_offset);
  return args;
}

// Config's split kernel (split_launch.cuh) on a validated call, in the plan's splits;
// kPagedKernels: whether its KVPages kernel is compiled (launch_split_forward).
template <class Config, class Policy, class Dropout = NoDropout, bool kPagedKernels = true>
Status launch_split_kernel(const ForwardParams& params, const Policy& policy,
                           const DeviceInfo& device, const SplitPlan& plan, cudaStream_t stream) {
  if (Status s = validate_for_device(device, kernel_requirements<Config>()); !s) return s;
  ForwardArgs<typename Config::element_type> args =
      make_forward_args<typename Config::element_type>(params);
  args.pack_gqa = packs_gqa(params);
  return launch_split_forward<Config, Policy, Dropout, kPagedKernels>(params, policy, args, plan.in,
                                                                      plan.splits, stream);
}

// forward_with_dropout's calls: dense or packed sequences, no cache (with dropout_p = 0 too).
inline Status check_training_call(const ForwardParams& p, const char* entry) {
  if (p.block_table != nullptr || p.k_new != nullptr || p.kv_batch_index != nullptr) {
    return Status::error(
        ErrorCode::kInvalidArgument,
        std::string("flashmma: ") + entry +
            " runs training calls: no block_table, k_new or kv_batch_index (use forward<Config> "
            "for a KV cache)");
  }
  return Status::success();
}

// A Hopper config's kernel on a validated call, its blocks walking the tiles as `walk` says
// (persistent configs; launch_dense_kernel's walk is persistent_walk's, a probe's may be forced)
// or one per tile; kVariableLengths: its kernel for variable lengths.
template <class Config, class Policy, class Dropout = NoDropout, bool kVariableLengths = false>
Status launch_sm90_kernel(const ForwardParams& params, const Policy& policy,
                          const DeviceInfo& device, const PersistentWalk& walk,
                          cudaStream_t stream) {
  static_assert(IsSm90TileConfig<Config>::value, "launch_sm90_kernel runs Sm90TileConfig kernels");
  static_assert(!kVariableLengths || !Dropout::kEnabled,
                "variable lengths have a kernel of their own on Hopper configs, without dropout");
  using Kernel = std::conditional_t<kVariableLengths, Sm90VariableLengthKernelFor<Config, Policy>,
                                    ForwardKernelFor<Config, Policy, Dropout>>;
  using TileScheduler = typename Kernel::TileScheduler;  // SchedulerFor<Policy>, or its walk
  SchedulerInputs in = scheduler_inputs<Config>(params, device);
  typename TileScheduler::Params scheduler;
  if constexpr (Config::kPersistent) {
    in.concurrent_blocks = walk.blocks;
    scheduler = TileScheduler::make_params(
        in, walk.tile_counter, walk.tile_counter != nullptr ? next_launch_epoch() : 0u);
  } else {
    scheduler = TileScheduler::make_params(in);
  }
  typename Kernel::Params kernel_params{
      {}, make_forward_args<typename Config::element_type>(params), policy, scheduler};
  if (Status s = sm90::make_forward_tensor_maps<Config>(params, kernel_params.maps); !s) return s;
  return launch_kernel<Kernel>(kernel_params, TileScheduler::grid(in), stream);
}

// Config's own kernel (one block per work tile, every key, or a persistent Hopper config's blocks
// walking the tiles where persistent_walk says) on a validated call that its split kernel does
// not take; kVariableLengths (Hopper configs): its kernel for variable lengths.
template <class Config, class Policy, class Dropout = NoDropout, bool kVariableLengths = false>
Status launch_dense_kernel(const ForwardParams& params, const Policy& policy,
                           const DeviceInfo& device, cudaStream_t stream) {
  static_assert(!kVariableLengths || IsSm90TileConfig<Config>::value,
                "variable lengths have a kernel of their own on Hopper configs");
  if (Status s = validate_for_device(device, kernel_requirements<Config>()); !s) return s;
  if constexpr (IsSm90TileConfig<Config>::value) {
    PersistentWalk walk;  // one block per tile
    if constexpr (Config::kPersistent) {
      walk = persistent_walk<Config>(params, device, Policy::kMasks);
    }
    return launch_sm90_kernel<Config, Policy, Dropout, kVariableLengths>(params, policy, device,
                                                                         walk, stream);
  } else {
    using Kernel = ForwardKernelFor<Config, Policy, Dropout>;
    using Scheduler = SchedulerFor<Policy>;
    const SchedulerInputs in = scheduler_inputs<Config>(params, device);
    typename Kernel::Params kernel_params{
        make_forward_args<typename Config::element_type>(params), policy,
        Scheduler::make_params(in)};
    return launch_kernel<Kernel>(kernel_params, Scheduler::grid(in), stream);
  }
}

// A KV append (params.k_new): the append kernel writes the new rows into the cache, the new
// lengths and the rotated queries into the workspace (after the split partials of
// `split_bytes`), then `attend(attention_params)` runs the attention with those as seqused_k and
// Q, on the same stream.
// A call on Config's kernel compiled with dropout: the sm_90a kernel (dense batches), or the
// portable split kernel (dense and packed).
template <class Config, class Policy>
Status launch_dropout_forward(const ForwardParams& params, const Policy& policy,
                              const DeviceInfo& device, cudaStream_t stream) {
  if constexpr (IsSm90TileConfig<Config>::value) {
    return launch_dense_kernel<Config, Policy, PhiloxDropout>(params, policy, device, stream);
  } else {
    SplitPlan plan;
    if (Status s = plan_split_kernel<Config>(params, device, /*assume_workspace=*/false,
                                             /*decoding_sized_too=*/false, plan);
        !s)
      return s;
    return launch_split_kernel<Config, Policy, PhiloxDropout>(params, policy, device, plan,
                                                              stream);
  }
}

template <class Element, class Attend>
Status launch_append_then(const ForwardParams& params, std::size_t split_bytes, Attend&& attend,
                          cudaStream_t stream) {
  const AppendWorkspace layout = append_layout(params, split_bytes);
  const std::size_t needed = layout.bytes;
  if (params.workspace == nullptr || params.workspace_bytes < needed) {
    std::ostringstream os;
    os << "flashmma: k_new (a KV append) needs a workspace of " << needed
       << " bytes for the new lengths" << (params.rotary_cos != nullptr ? ", the rotated queries" : "")
       << " and any split partials (params.workspace, params.workspace_bytes; "
          "forward_workspace_bytes() says how much); got "
       << (params.workspace == nullptr ? std::string("none")
                                       : std::to_string(params.workspace_bytes) + " bytes");
    return Status::error(ErrorCode::kInvalidArgument, os.str());
  }
  auto* workspace = static_cast<unsigned char*>(params.workspace);
  const bool rotary = params.rotary_cos != nullptr;

  using Append = KVAppendKernel<Element>;
  typename Append::Params append;
  append.k_new = static_cast<const Element*>(params.k_new);
  append.v_new = static_cast<const Element*>(params.v_new);
  append.k_new_strides = params.k_new_strides;
  append.v_new_strides = params.v_new_strides;
  append.seqlen_new = params.seqlen_new;
  // The cache is written: params.hpp asks for writable K and V with k_new.
  append.k_cache = const_cast<Element*>(static_cast<const Element*>(params.k));
  append.v_cache = const_cast<Element*>(static_cast<const Element*>(params.v));
  append.k_cache_strides = params.k_strides;
  append.v_cache_strides = params.v_strides;
  append.capacity = params.seqlen_k;
  append.cache_seqlens = params.cache_seqlens;
  append.kv_batch_index = params.kv_batch_index;
  append.kv_batch_entries = params.kv_batch_entries;
  append.block_table = params.block_table;
  append.block_table_batch_stride = params.block_table_batch_stride;
  append.page_size = static_cast<int32_t>(params.page_size);
  append.num_pages = static_cast<int32_t>(params.num_pages);
  append.q = static_cast<const Element*>(params.q);
  append.q_strides = params.q_strides;
  append.q_rotated = rotary ? reinterpret_cast<Element*>(workspace + layout.queries_offset) : nullptr;
  append.seqlen_q = params.seqlen_q;
  append.heads_q = params.heads_q;
  append.rotate_queries_per_row =
      params.mask == MaskKind::kCausal || params.window_left >= 0 || params.window_right >= 0;
  append.rotary_cos = static_cast<const Element*>(params.rotary_cos);
  append.rotary_sin = static_cast<const Element*>(params.rotary_sin);
  append.rotary_dim = static_cast<int>(params.rotary_dim);
  append.rotary_interleaved = params.rotary_interleaved;
  append.rotary_positions = params.rotary_positions;
  append.lengths = reinterpret_cast<int32_t*>(workspace + layout.lengths_offset);
  append.batch = params.batch;
  append.heads_kv = params.heads_kv;
  append.head_dim = static_cast<int>(params.head_dim);
  if (Status s = launch_kernel<Append>(append, GridShape{Append::blocks(append), 1, 1}, stream); !s)
    return s;

  ForwardParams attention = params;
  attention.k_new = attention.v_new = nullptr;
  attention.k_new_strides = attention.v_new_strides = TensorStrides{};
  attention.seqlen_new = 0;
  attention.cache_seqlens = nullptr;
  attention.rotary_cos = attention.rotary_sin = nullptr;
  attention.rotary_dim = attention.rotary_positions = 0;
  attention.seqused_k = append.lengths;
  if (rotary) {
    attention.q = append.q_rotated;
    attention.q_strides = bshd_strides(params.seqlen_q, params.heads_q, params.head_dim);
  }
  return attend(attention);
}

// Config's kernels (its split kernel where plan_split_kernel says, else its own) on a validated
// call: forward<Config>'s launch, once the device is known.
template <class Config, class Policy>
Status launch_forward(const ForwardParams& params, const Policy& policy, const DeviceInfo& device,
                      cudaStream_t stream) {
  SplitPlan plan;
  if (Status s = plan_split_kernel<Config>(params, device, /*assume_workspace=*/false,
                                           /*decoding_sized_too=*/false, plan);
      !s)
    return s;
  if constexpr (!IsSm90TileConfig<Config>::value) {
    if (appends_kv(params)) {
      SplitPlan planned;  // the partials' bytes as forward_workspace_bytes<Config> counted them
      if (Status s = plan_split_kernel<Config>(params, device, true, false, planned); !s) return s;
      return launch_append_then<typename Config::element_type>(
          params, split_bytes(params, planned),
          [&](const ForwardParams& attention) {
            return launch_forward<Config>(attention, policy, device, stream);
          },
          stream);
    }
    if (plan.on_split_kernel) {
      return launch_split_kernel<Config>(params, policy, device, plan, stream);
    }
  }
  return launch_dense_kernel<Config>(params, policy, device, stream);
}

// The built-in policy of params' mask, window, softcap and ALiBi (default_dispatch.hpp).
// The Hopper kernel runs some of them as narrower types (visit_sm90_policy).
template <class Config>
Status launch_forward(const ForwardParams& params, const DeviceInfo& device, cudaStream_t stream) {
  return visit_builtin_policy(params, [&](const auto& policy) {
    if constexpr (IsSm90TileConfig<Config>::value) {
      return visit_sm90_policy<Config>(policy, [&](const auto& sm90_policy) {
        return launch_forward<Config>(params, sm90_policy, device, stream);
      });
    } else {
      return launch_forward<Config>(params, policy, device, stream);
    }
  });
}

}  // namespace detail

// Runs Config with the built-in policy params ask for: six kernels are compiled, one per
// BuiltinPolicy (default_dispatch.hpp), and two more for an Sm90TileConfig (visit_sm90_policy's
// ALiBi kernels).
template <class Config>
[[nodiscard]] Status forward(const ForwardParams& params, cudaStream_t stream = nullptr) {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  if (Status s = validate_params(params); !s) return s;
  if (Status s = validate_for_kernel(params, kernel_requirements<Config>()); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_forward<Config>(params, device, stream);
}

// Runs Config's kernel with your own score policy (attention/score_policy.hpp): exactly one
// kernel is compiled. params.mask must be MaskKind::kNone and params' window, softcap and ALiBi
// fields unset: a policy that wants the causal mask or a built-in says so itself
// (Combined<MyPolicy, CausalMask>).
template <class Config, class Policy>
[[nodiscard]] Status forward(const ForwardParams& params, const Policy& policy,
                             cudaStream_t stream = nullptr) {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  static_assert(check_score_policy<Policy>(), "");
  if (Status s = validate_params(params); !s) return s;
  if (Status s = detail::validate_no_builtin_variant(params); !s) return s;
  if (Status s = validate_for_kernel(params, kernel_requirements<Config>()); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_forward<Config>(params, policy, device, stream);
}

// Attention with dropout (params.dropout_p, attention/philox.hpp's mask) on Config's kernels
// compiled with it, one per policy: a TileConfig's split kernel, which takes dense and packed
// sequences (no KV cache), or the sm_90a kernel of an Sm90TileConfig (dense batches).
// forward<Config> compiles no dropout, so that calls without it build no second kernel; the
// default forward(params) runs both.
template <class Config>
[[nodiscard]] Status forward_with_dropout(const ForwardParams& params,
                                          cudaStream_t stream = nullptr) {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  if (Status s = validate_params(params); !s) return s;
  if (Status s = detail::check_training_call(params, "forward_with_dropout"); !s) return s;
  if (Status s = validate_for_kernel(params, kernel_requirements<Config, PhiloxDropout>()); !s)
    return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return visit_builtin_policy(params, [&](const auto& policy) {
    return detail::launch_dropout_forward<Config>(params, policy, device, stream);
  });
}

template <class Config, class Policy>
[[nodiscard]] Status forward_with_dropout(const ForwardParams& params, const Policy& policy,
                                          cudaStream_t stream = nullptr) {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  static_assert(check_score_policy<Policy>(), "");
  if (Status s = validate_params(params); !s) return s;
  if (Status s = detail::validate_no_builtin_variant(params); !s) return s;
  if (Status s = detail::check_training_call(params, "forward_with_dropout"); !s) return s;
  if (Status s = validate_for_kernel(params, kernel_requirements<Config, PhiloxDropout>()); !s)
    return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::launch_dropout_forward<Config>(params, policy, device, stream);
}

namespace detail {

// A Hopper default's kernel (Sm90DefaultConfig's `type`, or its walking twin) on one call: on
// dense sequences with the policy as visit_sm90_policy narrows it; on packed and ragged ones
// through its kernel for variable lengths, compiled for the causal mask and none only (the
// policies variable_length_prefill and walks_sm90_default route here).
template <class Config, class Policy>
Status launch_sm90_default_kernel(const ForwardParams& params, const Policy& policy,
                                  const DeviceInfo& device, cudaStream_t stream) {
  if (has_variable_lengths(params)) {
    if constexpr ((std::is_same_v<Policy, FullAttention> || std::is_same_v<Policy, CausalMask>) &&
                  kVariableLengthFamily.compiled) {
      return launch_dense_kernel<Config, Policy, NoDropout, /*kVariableLengths=*/true>(
          params, policy, device, stream);
    } else {  // never: the route is not taken for other policies; never the dense kernel
      return Status::error(ErrorCode::kInvalidArgument,
                           "flashmma: variable lengths with this policy have no Hopper kernel "
                           "(launch_plan.hpp's variable_length_prefill)");
    }
  }
  return visit_sm90_policy<Config>(policy, [&](const auto& sm90_policy) {
    return launch_dense_kernel<Config>(params, sm90_policy, device, stream);
  });
}

// The Hopper default's walking twin (Sm90DefaultConfig's `walking`) on a call whose blocks walk
// (walks_sm90_default: no mask or the causal one; dense, or packed and ragged sequences).
template <class Element, int HeadDim, class Policy>
Status launch_walking_twin(const ForwardParams& params, const Policy& policy,
                           const DeviceInfo& device, cudaStream_t stream) {
  using Hopper = Sm90DefaultConfig<Element, HeadDim>;
  if constexpr (Hopper::kWalks && (std::is_same_v<Policy, FullAttention> ||
                                   std::is_same_v<Policy, CausalMask>)) {
    return launch_sm90_default_kernel<typename Hopper::walking>(params, policy, device, stream);
  } else {  // never: walks_sm90_default is false for these
    return Status::error(ErrorCode::kInvalidArgument,
                         "flashmma: no walking twin for this head dim and policy");
  }
}

}  // namespace detail

// Runs the default of one kernel head dim with the built-in policy params ask for, on one of
// three kernels (launch_plan.hpp's default_route): the split kernel of SplitKernelConfig for
// paged caches, appends, decoding-sized calls, calls it splits and variable lengths that the
// Hopper default does not take (variable_length_prefill: prefill-sized packed or ragged
// sequences run there on a compute capability 9.0 GPU); else the Hopper default
// (traits/sm90_default_configs.hpp) where runs_sm90_default says so (its persistent twin where
// walks_sm90_default says the blocks walk); else the portable one
// (traits/default_configs.hpp): the general config when the policy masks nothing, the causal one
// when it does, the compact one on a GPU whose per-block shared memory cannot hold those. A
// translation unit that calls it compiles one kernel per BuiltinPolicy and config it may run
// (and a split kernel for paged caches).
template <class Element, int HeadDim>
[[nodiscard]] Status forward_default_config(const ForwardParams& params,
                                            cudaStream_t stream = nullptr) {
  if (Status s = validate_params(params); !s) return s;
  if (Status s = check_forward_families(params); !s) return s;  // before the device: no GPU needed
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  // Only the policies this build holds (kernel_families.hpp) are instantiated.
  return detail::visit_compiled_policy(params, [&](const auto& policy) {
    using Policy = std::decay_t<decltype(policy)>;
    using Split = SplitKernelConfigT<Element, HeadDim>;
    constexpr bool kPaged = kPagedFamily.compiled;
    using Hopper = Sm90DefaultConfig<Element, HeadDim>;
    detail::DefaultRoute route;
    detail::SplitPlan plan;
    const auto sm90a_code = [] {
      if constexpr (Hopper::kAvailable) {
        return detail::sm90a_code_loaded<ForwardKernelFor<typename Hopper::type, Policy>>();
      } else {
        return false;
      }
    };
    if (Status s = detail::default_route<Element, HeadDim>(
            params, device, sm90a_code, /*assume_workspace=*/false, route, plan);
        !s)
      return s;
    if constexpr (kDropoutFamily.compiled) {
      if (uses_dropout(params)) {  // kernels compiled with dropout (default_route says which)
        if constexpr (Hopper::kAvailable) {
          if (route == detail::DefaultRoute::kHopper) {
            return detail::launch_dropout_forward<typename Hopper::type>(params, policy, device,
                                                                        stream);
          }
        }
        if (Status s = validate_for_kernel(params, kernel_requirements<Split, PhiloxDropout>());
            !s)
          return s;
        return detail::launch_dropout_forward<Split>(params, policy, device, stream);
      }
    }
    if (route == detail::DefaultRoute::kSplitKernel) {
      if (Status s = validate_for_kernel(params, kernel_requirements<Split>()); !s) return s;
      if (appends_kv(params)) {
        detail::SplitPlan planned;  // as forward_workspace_bytes(params) counted the partials
        if (Status s = detail::default_route<Element, HeadDim>(params, device, sm90a_code, true,
                                                               route, planned);
            !s)
          return s;
        return detail::launch_append_then<Element>(
            params, detail::split_bytes(params, planned),
            [&](const ForwardParams& attention) {
              detail::SplitPlan attention_plan;
              if (Status s = detail::plan_split_kernel<Split>(attention, device, false, true,
                                                              attention_plan);
                  !s)
                return s;
              return detail::launch_split_kernel<Split, Policy, NoDropout, kPaged>(
                  attention, policy, device, attention_plan, stream);
            },
            stream);
      }
      return detail::launch_split_kernel<Split, Policy, NoDropout, kPaged>(params, policy, device,
                                                                          plan, stream);
    }
    if (route == detail::DefaultRoute::kHopper &&
        detail::walks_sm90_default<Element, HeadDim, Policy>(params, device)) {
      return detail::launch_walking_twin<Element, HeadDim>(params, policy, device, stream);
    }
    if constexpr (Hopper::kAvailable) {
      if (route == detail::DefaultRoute::kHopper) {
        return detail::launch_sm90_default_kernel<typename Hopper::type>(params, policy, device,
                                                                         stream);
      }
    }
    return visit_default_config<Element, HeadDim, Policy::kMasks>(
        device.smem_per_block_optin, [&](auto config) {
          using Portable = decltype(config);
          if (Status s = validate_for_kernel(params, kernel_requirements<Portable>()); !s) {
            return s;
          }
          return detail::launch_dense_kernel<Portable>(params, policy, device, stream);
        });
  });
}

// Whether this translation unit's kernels hold sm_90a code that the current GPU loaded: the
// `sm90a_code` of describe_default_kernel (launch_plan.hpp) for a program that compiles the
// default dispatch itself. (One that links flashmma::kernels asks about the library's build: it
// holds sm_90a code when CMAKE_CUDA_ARCHITECTURES had 90a.)
namespace detail {
struct TranslationUnitProbe {};  // names the probe kernel; no forward kernel is compiled for it
}  // namespace detail

template <int kUnused = 0>
bool sm90a_code_loaded() {
  return detail::sm90a_code_loaded<detail::TranslationUnitProbe>();
}

namespace detail {

// Only the (element type, head dim) defaults this build holds (kernel_families.hpp) are
// instantiated; a call for another gets check_forward_families' error.
template <class Element>
Status forward_default(const ForwardParams& params, cudaStream_t stream) {
  return visit_kernel_head_dim(
      params.head_dim,
      [&](auto head_dim) {
        constexpr int kHeadDim = decltype(head_dim)::value;
        if constexpr (default_compiled<Element, kHeadDim>()) {
          return forward_default_config<Element, kHeadDim>(params, stream);
        } else {
          if (Status s = validate_params(params); !s) return s;
          return check_forward_families(params);
        }
      },
      [&] { return validate_params(params); });  // head_dim out of range: report it
}

}  // namespace detail

// Default dispatch. A translation unit that calls it compiles every default config of both
// element types with every built-in policy it runs on (132 portable kernels and 152 Hopper ones,
// the latter empty outside an sm_90a pass, with their split-KV and dropout twins; 28 of the
// Hopper ones run packed prefill, launch_plan.hpp's variable_length_prefill, and 16 are the
// d = 64 and 128 defaults' walking twins, Sm90DefaultConfig's `walking`, dense and packed); call
// forward<Config> to compile just one config (six kernels, eight on Hopper), or link
// flashmma::kernels to compile none. It is a template only so that merely including this header
// instantiates nothing.
template <int kUnused = 0>
[[nodiscard]] Status forward(const ForwardParams& params, cudaStream_t stream = nullptr) {
  if (Status s = validate_params(params); !s) return s;
  if (params.dtype == ScalarType::kFloat16) return detail::forward_default<__half>(params, stream);
  return detail::forward_default<__nv_bfloat16>(params, stream);
}

}  // namespace flashmma

#include "flashmma/precompiled_defaults.cuh"  // the defaults from flashmma::kernels, if linked

#endif  // __CUDACC__
