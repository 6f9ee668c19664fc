// SPDX-License-Identifier: Apache-2.0
// What a launch looks like on a device, worked out on the host without compiling a kernel: the
// schedulers' inputs, the split-KV split count and the workspace that needs, whether the default
// dispatch runs the Hopper kernel, and a description of the kernel it runs. Host code may include
// it (forward_workspace_bytes and describe_default_kernel are callable from a .cpp file).
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/kv_append.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/params.hpp"
#include "flashmma/sm90/tensor_maps.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/sm90_default_configs.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {
namespace detail {

// What the schedulers size their grids and groups from.
template <class Config>
SchedulerInputs scheduler_inputs(const ForwardParams& p, const DeviceInfo& device) {
  SchedulerInputs in;
  in.m_blocks = (p.seqlen_q + Config::kBlockM - 1) / Config::kBlockM;
  in.heads = p.heads_q;
  in.batch = p.batch;
  in.seqlen_k = p.seqlen_k;
  in.head_dim = p.head_dim;
  in.group_size = p.group_size();
  in.element_bytes = static_cast<int64_t>(sizeof(typename Config::element_type));
  in.block_m = Config::kBlockM;
  in.l2_bytes = static_cast<int64_t>(device.l2_cache_bytes);
  return in;
}

// How many blocks of Config an SM holds at once, from the config alone (no kernel needs to be
// compiled to ask, so forward_workspace_bytes stays cheap): the least of what its shared
// memory (with the 1 KiB per block the runtime reserves), its threads and its registers allow.
// Registers: ptxas gives a thread at most 65536 / (threads x MinBlocksPerSm), capped at 255 and
// allocated in steps of 8, and the flashmma kernels use about all of it.
template <class Config>
int64_t blocks_per_sm(const DeviceInfo& device) {
  constexpr int64_t kRegisterFile = 65536;
  constexpr int64_t kReservedSmemPerBlock = 1024;
  int64_t registers = kRegisterFile / (int64_t{Config::kThreads} * Config::kMinBlocksPerSm);
  registers = (registers > 255 ? 256 : registers / 8 * 8);
  int64_t blocks = kRegisterFile / (Config::kThreads * registers);
  const int64_t by_threads = device.max_threads_per_sm / Config::kThreads;
  const int64_t by_smem = static_cast<int64_t>(device.smem_per_sm) /
                          (static_cast<int64_t>(Config::kSmemBytes) + kReservedSmemPerBlock);
  if (by_threads < blocks) blocks = by_threads;
  if (by_smem < blocks) blocks = by_smem;
  return blocks > 0 ? blocks : 1;
}

// The split count of a call on Config (1: no split). `assume_workspace` plans as if a workspace
// were given (forward_workspace_bytes asks what the automatic choice would need).
template <class Config>
Status plan_splits(const ForwardParams& p, const DeviceInfo& device, const SchedulerInputs& in,
                   bool assume_workspace, int& splits) {
  splits = 1;
  if (p.num_splits == 1) return Status::success();
  if constexpr (IsSm90TileConfig<Config>::value) {
    if (p.num_splits > 1) {
      return Status::error(ErrorCode::kInvalidArgument,
                           "num_splits > 1 is not available on the sm_90a kernel yet "
                           "(Sm90TileConfig); use 0 or 1, or a TileConfig");
    }
    return Status::success();
  } else {
    const int64_t key_tiles = (p.seqlen_k + Config::kBlockN - 1) / Config::kBlockN;
    if (p.num_splits > 1) {
      splits = static_cast<int>(key_tiles < p.num_splits ? key_tiles : p.num_splits);
    } else if (p.workspace != nullptr || assume_workspace) {
      const int64_t concurrent = blocks_per_sm<Config>(device) * device.sm_count;
      splits = choose_split_count({in.m_blocks * in.heads * in.batch, key_tiles, concurrent});
    }
    if (splits > 1 && in.m_blocks * splits > 2147483647) splits = 1;  // the grid's x limit
    return Status::success();
  }
}

// Whether forward(params) runs the Hopper default `Hopper` rather than the portable default
// `Portable` of the same head dim: on a compute capability 9.0 GPU whose loaded code holds
// sm_90a (`sm90a_code`; forward.cuh asks the kernel's module), when TMA can describe every
// tensor (sm90/tensor_maps.hpp) and the portable plan does not split the call (the Hopper kernel
// has no split-KV yet; a decoding-sized call with a workspace runs split on the portable one).
// Anything else runs the portable kernel, which takes every valid call.
template <class Portable, class Hopper>
bool runs_sm90_default(const ForwardParams& p, const DeviceInfo& device, bool sm90a_code) {
  if (!sm90a_code || device.compute_capability != 90) return false;
  if (!validate_for_kernel(p, kernel_requirements<Hopper>()).ok() ||
      !validate_for_device(device, kernel_requirements<Hopper>()).ok() ||
      !sm90::check_tma_layout(p).ok()) {
    return false;
  }
  int splits = 1;
  return plan_splits<Portable>(p, device, scheduler_inputs<Portable>(p, device), false, splits)
             .ok() &&
         splits == 1;
}

// The workspace layout of a split call.
inline SplitWorkspace split_layout(const ForwardParams& p, int splits) {
  return split_workspace(splits, lse_rows(p), p.head_dim);
}

// The workspace of a KV append call (attention/kv_append.hpp), after `split_bytes` of partials.
inline AppendWorkspace append_layout(const ForwardParams& p, std::size_t split_bytes) {
  const int64_t rotated_query_elements = p.rotary_cos != nullptr ? p.q_elements() : 0;
  return append_workspace(split_bytes, p.batch, rotated_query_elements, kElementBytes);
}

// Checks that the caller's workspace holds the partials of `splits` splits.
inline Status check_workspace(const ForwardParams& p, int splits) {
  const SplitWorkspace layout = split_layout(p, splits);
  if (p.workspace != nullptr && p.workspace_bytes >= layout.bytes) return Status::success();
  std::ostringstream os;
  os << "num_splits = " << splits << " needs a workspace of " << layout.bytes
     << " bytes (params.workspace, params.workspace_bytes; forward_workspace_bytes() says how "
        "much a call needs); got "
     << (p.workspace == nullptr ? std::string("none")
                                : std::to_string(p.workspace_bytes) + " bytes");
  return Status::error(ErrorCode::kInvalidArgument, os.str());
}

// The bytes of the split partials of Config's plan for the call, planned as if a workspace were
// given (0 without a split).
template <class Config>
Status split_workspace_bytes(const ForwardParams& params, const DeviceInfo& device,
                             std::size_t& bytes) {
  int splits = 1;
  if (Status s = plan_splits<Config>(params, device, scheduler_inputs<Config>(params, device),
                                     /*assume_workspace=*/true, splits);
      !s)
    return s;
  bytes = splits > 1 ? split_layout(params, splits).bytes : 0;
  return Status::success();
}

// The whole workspace of the call: the partials, then a KV append's lengths and queries.
template <class Config>
Status workspace_bytes(const ForwardParams& params, const DeviceInfo& device,
                       std::size_t& bytes) {
  if (Status s = split_workspace_bytes<Config>(params, device, bytes); !s) return s;
  if (appends_kv(params)) bytes = append_layout(params, bytes).bytes;
  return Status::success();
}

}  // namespace detail

// The workspace bytes forward<Config>(params) needs for its split-KV partials (0 when the call
// would not split: params.num_splits 1, or an automatic choice of 1) and, for a KV append, the
// new lengths and rotated queries. An automatic count
// (num_splits 0) is planned as if a workspace were given, so that the caller can then give one.
template <class Config>
[[nodiscard]] Status forward_workspace_bytes(const ForwardParams& params, std::size_t& bytes) {
  bytes = 0;
  if (Status s = validate_params(params); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::workspace_bytes<Config>(params, device, bytes);
}

// The same for forward(params): the bytes of the default config it would run.
[[nodiscard]] inline Status forward_workspace_bytes(const ForwardParams& params,
                                                    std::size_t& bytes) {
  bytes = 0;
  if (Status s = validate_params(params); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return visit_default_kernel(
      params, device.smem_per_block_optin,
      [&](const auto&, auto config) {
        return detail::workspace_bytes<decltype(config)>(params, device, bytes);
      },
      [&] { return validate_params(params); });
}

namespace detail {

// "sm80::ForwardKernel<TileConfig<...>, CausalMask, HeaviestFirstScheduler>": a forward kernel
// type, spelled as people read it (the architecture's namespace follows the config's kind).
template <class Config>
std::string forward_kernel_name(const std::string& policy_name, const char* scheduler_name) {
  return std::string(IsSm90TileConfig<Config>::value ? "sm90" : "sm80") + "::ForwardKernel<" +
         describe_config<Config>() + ", " + policy_name + ", " + scheduler_name + ">";
}

}  // namespace detail

// The kernel forward(params) launches on `device`, for people and tests:
//   "sm90::ForwardKernel<Sm90TileConfig<...>, CausalMask, HeaviestFirstScheduler>"
//   "sm80::ForwardKernel<TileConfig<...>, FullAttention, PlainScheduler>"
//   "sm80::ForwardKernel<TileConfig<...>, FullAttention, SplitScheduler> in 4 splits, then
//    split_combine_kernel"
//   "sm80::ForwardKernel<TileConfig<...>, CausalMask, SplitScheduler> in 1 split" (variable
//    lengths without a split)
//   "sm80::ForwardKernel<TileConfig<...>, CausalMask, SplitScheduler, KVPages> in 3 splits, then
//    split_combine_kernel" (a paged KV cache)
//   "kv_append_kernel, then sm80::ForwardKernel<...> in 1 split" (a KV append)
// `sm90a_code` says whether the program's kernels hold sm_90a code for the GPU (forward.cuh's
// sm90a_code_loaded() answers it for the calling translation unit; a host-only program that
// links flashmma::kernels built for 90a passes true). An invalid `params` gets
// validate_params()'s error instead.
[[nodiscard]] inline Status describe_default_kernel(const ForwardParams& params,
                                                    const DeviceInfo& device, bool sm90a_code,
                                                    std::string& description) {
  if (Status s = validate_params(params); !s) return s;
  const std::string policy_name = builtin_policy_name(builtin_policy_for(params));
  description = visit_default_kernel(
      params, device.smem_per_block_optin,
      [&](const auto& policy, auto config) {
        using Policy = std::decay_t<decltype(policy)>;
        using Portable = decltype(config);
        using Hopper = Sm90DefaultConfig<typename Portable::element_type, Portable::kHeadDim>;
        if constexpr (Hopper::kAvailable) {
          if (detail::runs_sm90_default<Portable, typename Hopper::type>(params, device,
                                                                         sm90a_code)) {
            return detail::forward_kernel_name<typename Hopper::type>(
                policy_name, SchedulerFor<Policy>::kName);
          }
        }
        int splits = 1;
        if (Status s = detail::plan_splits<Portable>(
                params, device, detail::scheduler_inputs<Portable>(params, device), false,
                splits);
            !s || (splits == 1 && !detail::runs_on_split_kernel(params))) {
          return detail::forward_kernel_name<Portable>(policy_name, SchedulerFor<Policy>::kName);
        }
        const std::string split_kernel = paged_kv(params) ? std::string(SplitScheduler::kName) +
                                                                ", KVPages"
                                                          : SplitScheduler::kName;
        if (splits == 1) {  // variable lengths or pages: the split kernel, unsplit
          return detail::forward_kernel_name<Portable>(policy_name, split_kernel.c_str()) +
                 " in 1 split";
        }
        return detail::forward_kernel_name<Portable>(policy_name, split_kernel.c_str()) +
               " in " + std::to_string(splits) + " splits, then split_combine_kernel";
      },
      [] { return std::string(); });
  if (appends_kv(params)) description = std::string(kKVAppendKernelName) + ", then " + description;
  return Status::success();
}

}  // namespace flashmma
