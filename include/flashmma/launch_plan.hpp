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
#include "flashmma/kernel_families.hpp"
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

// How a persistent Hopper config's kernel runs a call (Sm90TileConfig's Persistent;
// attention/scheduler.hpp's PersistentScheduler): `blocks` walking the tiles (0: one block per
// tile), balanced by the counter in the caller's workspace (nullptr: none given, or the fixed
// snake of a grid too large to count).
struct PersistentWalk {
  int64_t blocks = 0;
  unsigned long long* tile_counter = nullptr;
};

// `masks`: the policy's kMasks (which of Config's Sm90WalkLimits applies). `assume_counter`: as
// if the workspace held the counter (tile_counter stays nullptr).
template <class Config>
PersistentWalk persistent_walk(const ForwardParams& p, const DeviceInfo& device, bool masks,
                               bool assume_counter = false) {
  using Limits = Sm90WalkLimits<Config>;
  const SchedulerInputs in = scheduler_inputs<Config>(p, device);
  const bool countable = in.m_blocks * in.heads * in.batch <= 2147483647;
  const bool given = p.workspace != nullptr && p.workspace_bytes >= kTileCounterBytes;
  const bool counted = countable && (given || assume_counter);
  PersistentWalk walk;
  walk.blocks = persistent_blocks(in, Config::kBlockN,
                                  masks ? Limits::kMaskedKeyTiles : Limits::kKeyTiles,
                                  blocks_per_sm<Config>(device) * device.sm_count, counted);
  if (walk.blocks > 0 && counted && given) {
    walk.tile_counter = static_cast<unsigned long long*>(p.workspace);
  }
  return walk;
}

// The workspace bytes of the tile counter a call on Config would walk with, under the policy
// of the longer of its Sm90WalkLimits (a policy under the other may then run one block per
// tile); 0 where Config is not persistent or the call runs one block per tile whatever it is
// given.
template <class Config>
std::size_t tile_counter_bytes(const ForwardParams& p, const DeviceInfo& device) {
  if constexpr (IsSm90TileConfig<Config>::value) {
    if constexpr (Config::kPersistent) {
      using Limits = Sm90WalkLimits<Config>;
      constexpr bool kLongerMasked = Limits::kMaskedKeyTiles > Limits::kKeyTiles;
      const SchedulerInputs in = scheduler_inputs<Config>(p, device);
      const bool countable = in.m_blocks * in.heads * in.batch <= 2147483647;
      return countable && persistent_walk<Config>(p, device, kLongerMasked, true).blocks > 0
                 ? kTileCounterBytes
                 : 0;
    }
  }
  return 0;
}

// Whether forward(params) runs the Hopper default's walking twin (Sm90DefaultConfig's kWalks)
// for a call it runs on the Hopper default with `Policy`: no mask or the causal one, no dropout,
// where the call's blocks would walk. Packed and ragged batches walk too: their tiles are counted
// to the longest sequence, and a tile past its sequence's queries is skipped by producer and
// consumers alike.
template <class Element, int HeadDim, class Policy>
bool walks_sm90_default(const ForwardParams& p, const DeviceInfo& device) {
  using Hopper = Sm90DefaultConfig<Element, HeadDim>;
  if constexpr (Hopper::kWalks && (std::is_same_v<Policy, FullAttention> ||
                                   std::is_same_v<Policy, CausalMask>)) {
    return !uses_dropout(p) &&
           persistent_walk<typename Hopper::walking>(p, device, Policy::kMasks).blocks > 0;
  } else {
    return false;
  }
}

// Whether a call on the split kernel packs the query heads of a GQA group into one work tile
// (sequence_info.hpp's PackableRows): one query per sequence (decoding) over GQA heads. Each K/V
// tile is then read once per group instead of once per query head, and the group's heads fill
// rows of the tile that would otherwise be padding.
// Not under dropout, whose mask is drawn per query head of a row tile.
inline bool packs_gqa(const ForwardParams& p) {
  return p.seqlen_q == 1 && p.group_size() > 1 && !uses_dropout(p);
}

// The rows of one (head, batch)'s work tiles on the split kernel: the queries, or the query
// heads of a group when packed.
inline int64_t split_kernel_rows(const ForwardParams& p) {
  return packs_gqa(p) ? p.seqlen_q * p.group_size() : p.seqlen_q;
}

// The split kernel's scheduler inputs: when packed, the grid's heads are the K/V heads.
template <class Config>
SchedulerInputs split_scheduler_inputs(const ForwardParams& p, const DeviceInfo& device) {
  SchedulerInputs in = scheduler_inputs<Config>(p, device);
  in.m_blocks = (split_kernel_rows(p) + Config::kBlockM - 1) / Config::kBlockM;
  if (packs_gqa(p)) in.heads = p.heads_kv;
  return in;
}

// The split count of a call on Config (1: no split), for the scheduler inputs `in` of its split
// kernel. `assume_workspace` plans as if a workspace were given (forward_workspace_bytes asks
// what the automatic choice would need).
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

// Whether a call runs on Config's split kernel, in how many splits, on which grid.
struct SplitPlan {
  bool on_split_kernel = false;
  int splits = 1;
  SchedulerInputs in{};  // the split kernel's (split_scheduler_inputs)
};

// The plan of a call on Config: the split kernel takes every call that splits, that has variable
// lengths, pages or an append (runs_on_split_kernel), and every call it packs (packs_gqa);
// `decoding_sized_too` (the default dispatch, on SplitKernelConfig) adds every call whose work
// tiles' rows fit one tile, which it runs with fewer padded rows than the general tiles.
// forward<Config> leaves those on Config's own kernel.
template <class Config>
Status plan_split_kernel(const ForwardParams& p, const DeviceInfo& device, bool assume_workspace,
                         bool decoding_sized_too, SplitPlan& plan) {
  plan = SplitPlan{};
  if constexpr (IsSm90TileConfig<Config>::value) {
    // No split kernel on sm_90a: a split count is refused, the rest validate_for_kernel refuses.
    return plan_splits<Config>(p, device, scheduler_inputs<Config>(p, device), assume_workspace,
                               plan.splits);
  } else {
    plan.in = split_scheduler_inputs<Config>(p, device);
    if (Status s = plan_splits<Config>(p, device, plan.in, assume_workspace, plan.splits); !s) {
      return s;
    }
    plan.on_split_kernel = plan.splits > 1 || runs_on_split_kernel(p) || packs_gqa(p) ||
                           (decoding_sized_too && split_kernel_rows(p) <= Config::kBlockM);
    return Status::success();
  }
}

// The requirements of the Hopper default's kernels for variable lengths (variable_length_prefill
// below): the dense kernel's, with cu_seqlens and seqused_k.
template <class Hopper>
KernelRequirements sm90_variable_length_requirements() {
  KernelRequirements req = kernel_requirements<Hopper>();
  req.variable_lengths = true;
  return req;
}

// Whether forward(params) runs the Hopper default `Hopper` for a call that the split kernel does
// not take (plan_split_kernel): on a compute capability 9.0 GPU whose loaded code holds sm_90a
// (`sm90a_code`; forward.cuh asks the kernel's module), when TMA can describe every tensor
// (sm90/tensor_maps.hpp). Anything else runs the portable kernel, which takes every valid call.
// Dropout: whether the kernel is the one compiled with dropout (attention/dropout.hpp).
template <class Hopper, class Dropout = NoDropout>
bool runs_sm90_default(const ForwardParams& p, const DeviceInfo& device, bool sm90a_code) {
  if (!sm90a_code || device.compute_capability != 90) return false;
  const KernelRequirements kernel = has_variable_lengths(p)
                                        ? sm90_variable_length_requirements<Hopper>()
                                        : kernel_requirements<Hopper, Dropout>();
  return validate_for_kernel(p, kernel).ok() &&
         validate_for_device(device, kernel_requirements<Hopper>()).ok() &&
         sm90::check_tma_layout(p).ok();
}

// A call of variable lengths (cu_seqlens_q, cu_seqlens_k, seqused_k) that the Hopper default
// takes from the split kernel, on kernels of its own (sm90::ForwardKernel<..., kVariableLengths>):
// prefill-sized (more rows than the split kernel's one tile), unsplit, without dropout or a
// cache's pages, batch index or append, and with no window, softcap or ALiBi but the causal mask
// (two kernels per Hopper default and element type; the others run on the split kernel).
// Decoding-sized calls stay on the split kernel, whose split-KV and packed GQA serve them.
template <class SplitConfig>
bool variable_length_prefill(const ForwardParams& p, const SplitPlan& plan) {
  const BuiltinPolicy policy = builtin_policy_for(p);
  return has_variable_lengths(p) && plan.splits == 1 && !packs_gqa(p) && !uses_dropout(p) &&
         split_kernel_rows(p) > SplitConfig::kBlockM && !paged_kv(p) &&
         p.kv_batch_index == nullptr && !appends_kv(p) &&
         (policy == BuiltinPolicy::kFullAttention || policy == BuiltinPolicy::kCausalMask);
}

// The three kernels forward(params) chooses among for one (element type, head dim), in order.
enum class DefaultRoute { kSplitKernel, kHopper, kPortable };

// Which of them forward_default_config<Element, HeadDim> runs, with the split kernel's plan.
// Expects validated params.
// `sm90a_code()` says whether the Hopper kernel's loaded code holds sm_90a (asked only when the
// split kernel does not take the call).
template <class Element, int HeadDim, class Sm90aCode>
Status default_route(const ForwardParams& p, const DeviceInfo& device, Sm90aCode&& sm90a_code,
                     bool assume_workspace, DefaultRoute& route, SplitPlan& plan) {
  if (Status s = plan_split_kernel<SplitKernelConfigT<Element, HeadDim>>(
          p, device, assume_workspace, /*decoding_sized_too=*/true, plan);
      !s)
    return s;
  route = DefaultRoute::kPortable;
  if (uses_dropout(p)) {
    // Kernels compiled with dropout: the Hopper default's where it takes the call, else the
    // split kernel's (dense and packed batches). No general portable kernel has dropout: one
    // kernel per policy and head dim fewer to compile.
    route = DefaultRoute::kSplitKernel;
    if constexpr (Sm90DefaultConfig<Element, HeadDim>::kAvailable) {
      if (!plan.on_split_kernel && device.compute_capability == 90 &&
          runs_sm90_default<typename Sm90DefaultConfig<Element, HeadDim>::type, PhiloxDropout>(
              p, device, sm90a_code())) {
        route = DefaultRoute::kHopper;
      }
    }
    return Status::success();
  }
  if (plan.on_split_kernel) {
    route = DefaultRoute::kSplitKernel;
    if constexpr (Sm90DefaultConfig<Element, HeadDim>::kAvailable) {
      if (variable_length_prefill<SplitKernelConfigT<Element, HeadDim>>(p, plan) &&
          device.compute_capability == 90 &&
          runs_sm90_default<typename Sm90DefaultConfig<Element, HeadDim>::type>(p, device,
                                                                                sm90a_code())) {
        route = DefaultRoute::kHopper;
      }
    }
  } else if constexpr (Sm90DefaultConfig<Element, HeadDim>::kAvailable) {
    if (device.compute_capability == 90 &&
        runs_sm90_default<typename Sm90DefaultConfig<Element, HeadDim>::type>(p, device,
                                                                              sm90a_code())) {
      route = DefaultRoute::kHopper;
    }
  }
  return Status::success();
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

// The bytes of the split partials of a plan (0 without a split).
inline std::size_t split_bytes(const ForwardParams& params, const SplitPlan& plan) {
  return plan.splits > 1 ? split_layout(params, plan.splits).bytes : 0;
}

// The whole workspace of a call planned as if a workspace were given: the partials, then a KV
// append's lengths and queries.
inline std::size_t workspace_bytes(const ForwardParams& params, const SplitPlan& plan) {
  const std::size_t bytes = split_bytes(params, plan);
  return appends_kv(params) ? append_layout(params, bytes).bytes : bytes;
}

}  // namespace detail

// The workspace bytes forward<Config>(params) needs for its split-KV partials (0 when the call
// would not split: params.num_splits 1, or an automatic choice of 1) and, for a KV append, the
// new lengths and rotated queries. An automatic count
// (num_splits 0) is planned as if a workspace were given, so that the caller can then give one.
// A persistent Hopper config's call whose blocks would walk its tiles asks kTileCounterBytes
// (the counter that balances them; without it, the kernel runs one block per tile).
template <class Config>
[[nodiscard]] Status forward_workspace_bytes(const ForwardParams& params, std::size_t& bytes) {
  bytes = 0;
  if (Status s = validate_params(params); !s) return s;
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  detail::SplitPlan plan;
  if (Status s = detail::plan_split_kernel<Config>(params, device, /*assume_workspace=*/true,
                                                   /*decoding_sized_too=*/false, plan);
      !s)
    return s;
  bytes = detail::workspace_bytes(params, plan);
  if (bytes == 0) bytes = detail::tile_counter_bytes<Config>(params, device);
  return Status::success();
}

namespace detail {

// Calls visit(element_tag, head_dim) for the element type and kernel head dim of a call
// (out_of_range() for a head dim above 256).
template <class Visitor, class OutOfRange>
decltype(auto) visit_element_and_head_dim(const ForwardParams& params, Visitor&& visit,
                                          OutOfRange&& out_of_range) {
  const auto walk = [&](auto element_tag) {
    return visit_kernel_head_dim(
        params.head_dim, [&](auto head_dim) { return visit(element_tag, head_dim); },
        out_of_range);
  };
  return params.dtype == ScalarType::kFloat16 ? walk(__half{}) : walk(__nv_bfloat16{});
}

}  // namespace detail

// The same for forward(params): the bytes of the kernel it would run.
[[nodiscard]] inline Status forward_workspace_bytes(const ForwardParams& params,
                                                    std::size_t& bytes) {
  bytes = 0;
  if (Status s = validate_params(params); !s) return s;
  if (Status s = check_forward_families(params); !s) return s;  // a call forward() refuses
  DeviceInfo device;
  if (Status s = query_device(device); !s) return s;
  return detail::visit_element_and_head_dim(
      params,
      [&](auto element_tag, auto head_dim) {
        detail::DefaultRoute route;
        detail::SplitPlan plan;
        if (Status s = detail::default_route<decltype(element_tag), decltype(head_dim)::value>(
                params, device, [] { return false; }, /*assume_workspace=*/true, route, plan);
            !s)
          return s;
        bytes = detail::workspace_bytes(params, plan);
        // A call the Hopper default may take (the loaded code decides) walks its tiles with a
        // counter where the default has a walking twin.
        using Hopper = Sm90DefaultConfig<decltype(element_tag), decltype(head_dim)::value>;
        if constexpr (Hopper::kWalks) {
          if (bytes == 0 && plan.splits == 1 && device.compute_capability == 90) {
            bytes = detail::tile_counter_bytes<typename Hopper::walking>(params, device);
          }
        }
        return Status::success();
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
//    lengths, or a decoding-sized call, without a split)
//   "... in 4 splits, packed GQA, then split_combine_kernel" (one query over GQA heads)
//   "sm80::ForwardKernel<TileConfig<...>, CausalMask, SplitScheduler, KVPages> in 3 splits, then
//    split_combine_kernel" (a paged KV cache)
//   "kv_append_kernel, then sm80::ForwardKernel<...> in 1 split" (a KV append)
//   "sm90::ForwardKernel<Sm90TileConfig<...>, FullAttention, PlainScheduler, PhiloxDropout>"
//   (dropout: the kernels compiled with it)
//   "sm90::ForwardKernel<Sm90TileConfig<...>, CausalMask, HeaviestFirstScheduler,
//    VariableLengths>" (packed or ragged prefill on a compute capability 9.0 GPU)
//   "sm90::ForwardKernel<Sm90TileConfig<..., persistent, sm_90a>, FullAttention,
//    PlainScheduler> on 132 blocks walking its tiles" (the Hopper default's walking twin,
//    without a mask or with the causal one, dense or with ", VariableLengths": params.workspace
//    holds the tile counter, and the keys are few; walks_sm90_default)
// A call that needs a kernel this build left out gets check_forward_families' error.
// `sm90a_code` says whether the program's kernels hold sm_90a code for the GPU (forward.cuh's
// sm90a_code_loaded() answers it for the calling translation unit; a host-only program that
// links flashmma::kernels built for 90a passes true). An invalid `params` gets
// validate_params()'s error instead.
[[nodiscard]] inline Status describe_default_kernel(const ForwardParams& params,
                                                    const DeviceInfo& device, bool sm90a_code,
                                                    std::string& description) {
  if (Status s = validate_params(params); !s) return s;
  if (Status s = check_forward_families(params); !s) return s;  // no kernel to describe
  const std::string dropout = uses_dropout(params) ? ", PhiloxDropout" : "";
  Status status = Status::success();
  description = detail::visit_element_and_head_dim(
      params,
      [&](auto element_tag, auto head_dim) {
        using Element = decltype(element_tag);
        constexpr int kHeadDim = decltype(head_dim)::value;
        detail::DefaultRoute route;
        detail::SplitPlan plan;
        status = detail::default_route<Element, kHeadDim>(
            params, device, [&] { return sm90a_code; }, /*assume_workspace=*/false, route, plan);
        if (!status) return std::string();
        return visit_builtin_policy(params, [&](const auto& policy) {
          using Policy = std::decay_t<decltype(policy)>;
          const std::string policy_name = builtin_policy_type_name<Policy>();
          // The Hopper kernels for packed and ragged sequences, the walking twin's among them.
          const std::string scheduler = std::string(SchedulerFor<Policy>::kName) +
                                        (has_variable_lengths(params) ? ", VariableLengths" : "");
          if (route == detail::DefaultRoute::kHopper) {
            if constexpr (Sm90DefaultConfig<Element, kHeadDim>::kAvailable) {
              using Hopper = typename Sm90DefaultConfig<Element, kHeadDim>::type;
              if constexpr (Sm90DefaultConfig<Element, kHeadDim>::kWalks) {
                if (detail::walks_sm90_default<Element, kHeadDim, Policy>(params, device)) {
                  using Walking = typename Sm90DefaultConfig<Element, kHeadDim>::walking;
                  const detail::PersistentWalk walk =
                      detail::persistent_walk<Walking>(params, device, Policy::kMasks);
                  return detail::forward_kernel_name<Walking>(policy_name, scheduler.c_str()) +
                         " on " + std::to_string(walk.blocks) + " blocks walking its tiles";
                }
              }
              if (uses_dropout(params)) {  // kernels compiled with dropout keep the policy
                return detail::forward_kernel_name<Hopper>(
                    policy_name, (SchedulerFor<Policy>::kName + dropout).c_str());
              }
              if (has_variable_lengths(params)) {  // variable_length_prefill's kernels
                return detail::forward_kernel_name<Hopper>(policy_name, scheduler.c_str());
              }
              return visit_sm90_policy<Hopper>(policy, [&](const auto& sm90_policy) {
                using Sm90Policy = std::decay_t<decltype(sm90_policy)>;
                return detail::forward_kernel_name<Hopper>(builtin_policy_type_name<Sm90Policy>(),
                                                           SchedulerFor<Sm90Policy>::kName);
              });
            }
          }
          if (route == detail::DefaultRoute::kPortable) {
            return visit_default_config<Element, kHeadDim, Policy::kMasks>(
                device.smem_per_block_optin, [&](auto config) {
                  return detail::forward_kernel_name<decltype(config)>(
                      policy_name, SchedulerFor<Policy>::kName);
                });
          }
          const std::string split_kernel =
              std::string(SplitScheduler::kName) + (paged_kv(params) ? ", KVPages" : "") + dropout;
          const std::string name = detail::forward_kernel_name<SplitKernelConfigT<Element, kHeadDim>>(
              policy_name, split_kernel.c_str());
          const std::string packed = detail::packs_gqa(params) ? ", packed GQA" : "";
          if (plan.splits == 1) return name + " in 1 split" + packed;
          return name + " in " + std::to_string(plan.splits) + " splits" + packed +
                 ", then split_combine_kernel";
        });
      },
      [] { return std::string(); });
  if (!status) return status;
  if (appends_kv(params)) description = std::string(kKVAppendKernelName) + ", then " + description;
  return Status::success();
}

}  // namespace flashmma
