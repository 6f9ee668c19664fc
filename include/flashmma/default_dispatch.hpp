// SPDX-License-Identifier: Apache-2.0
// Which portable kernel flashmma::forward(params, stream) runs: the built-in policy and the
// default config of the head dim, written once. Host code: it names configs but compiles no
// kernel. (launch_plan.hpp adds the rest of the choice, the Hopper kernel and split-KV, and
// describe_default_kernel, which names the kernel for people.)
#pragma once

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>
#include <type_traits>

#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

// The built-in score policy forward(params) runs. Six kernels per config cover every
// combination of mask, window, softcap and ALiBi that params can ask for: the mask and the
// window are one runtime window, and each transform that is on has its own kernel, so a score
// pays only for what is on.
//   kFullAttention   no mask, no window, no transform                       FullAttention
//   kCausalMask      the causal mask, or the window (-1, 0), no transform   CausalMask
//   kSlidingWindow   any other window, no transform                         SlidingWindow
//   kSoftcap         a softcap, with any mask or window                     SoftcapWindow
//   kAlibi           ALiBi, with any mask or window                         AlibiWindow
//   kSoftcapAlibi    both, softcap first                                    SoftcapAlibiWindow
// The Hopper kernel runs kAlibi without a window, or under the causal mask, on kernels of their
// own (visit_sm90_policy).
enum class BuiltinPolicy : int {
  kFullAttention,
  kCausalMask,
  kSlidingWindow,
  kSoftcap,
  kAlibi,
  kSoftcapAlibi
};

using SoftcapWindow = Combined<Softcap, SlidingWindow>;
using AlibiWindow = Combined<AlibiBias, SlidingWindow>;
using SoftcapAlibiWindow = Combined<Softcap, AlibiWindow>;

// params' window with the causal mask folded in (causal is the window (left, 0)), and a side
// that hides no key of this problem made unbounded, which changes no result and lets the
// cheaper kernel run: the left side hides a key only if left < seqlen_k - 1 (the last query's
// first key is seqlen_k - 1 - left), the right side only if right < seqlen_q - 1 (query 0's last
// key is seqlen_k - seqlen_q + right). Expects validated params.
inline SlidingWindow effective_window(const ForwardParams& p) {
  SlidingWindow window;
  window.left = p.window_left;
  window.right = p.mask == MaskKind::kCausal ? 0 : p.window_right;
  if (window.left >= p.seqlen_k - 1) window.left = -1;
  if (window.right >= p.seqlen_q - 1) window.right = -1;
  return window;
}

// params.alibi_slopes as the policy.
inline AlibiBias builtin_alibi(const ForwardParams& p) {
  AlibiBias alibi;
  alibi.slopes = p.alibi_slopes;
  alibi.batch_stride = p.alibi_batch_stride;
  return alibi;
}

// Expects validated params.
inline BuiltinPolicy builtin_policy_for(const ForwardParams& p) {
  const bool softcap = p.softcap > 0.f;
  const bool alibi = p.alibi_slopes != nullptr;
  if (softcap && alibi) return BuiltinPolicy::kSoftcapAlibi;
  if (softcap) return BuiltinPolicy::kSoftcap;
  if (alibi) return BuiltinPolicy::kAlibi;
  const SlidingWindow window = effective_window(p);
  if (window.left < 0 && window.right < 0) return BuiltinPolicy::kFullAttention;
  if (window.left < 0 && window.right == 0) return BuiltinPolicy::kCausalMask;
  return BuiltinPolicy::kSlidingWindow;
}

// Which built-in policies a visit may instantiate beyond FullAttention and CausalMask: every one
// for a config the caller names (forward<Config>(params)); the default dispatch of a build that
// leaves some out (kernel_families.hpp) holds fewer.
struct EveryBuiltinPolicy {
  static constexpr bool kWindow = true;
  static constexpr bool kSoftcap = true;
  static constexpr bool kAlibi = true;
};

// Calls visit(policy) with the built-in policy forward(params) runs, as its own type. A policy
// that Held leaves out is never instantiated: its calls return otherwise() instead (an error).
template <class Held = EveryBuiltinPolicy, class Visitor, class Otherwise = std::nullptr_t>
decltype(auto) visit_builtin_policy(const ForwardParams& p, Visitor&& visit,
                                    Otherwise&& otherwise = nullptr) {
  const SlidingWindow window = effective_window(p);
  switch (builtin_policy_for(p)) {
    case BuiltinPolicy::kCausalMask: return visit(CausalMask{});
    case BuiltinPolicy::kSlidingWindow:
      if constexpr (Held::kWindow) return visit(window);
      else return otherwise();
    case BuiltinPolicy::kSoftcap:
      if constexpr (Held::kSoftcap) {
        return visit(SoftcapWindow{{}, Softcap::with_cap(p.softcap), window});
      } else {
        return otherwise();
      }
    case BuiltinPolicy::kAlibi:
      if constexpr (Held::kAlibi) return visit(AlibiWindow{{}, builtin_alibi(p), window});
      else return otherwise();
    case BuiltinPolicy::kSoftcapAlibi:
      if constexpr (Held::kSoftcap && Held::kAlibi) {
        return visit(SoftcapAlibiWindow{
            {}, Softcap::with_cap(p.softcap), AlibiWindow{{}, builtin_alibi(p), window}});
      } else {
        return otherwise();
      }
    case BuiltinPolicy::kFullAttention: break;
  }
  return visit(FullAttention{});
}

// The Hopper kernel's policy for a built-in one. ALiBi under a window that hides nothing, or
// under the causal window alone, runs AlibiBias or AlibiCausal there: kernels that carry no
// runtime window, as fast as a user's ALiBi functor, where AlibiWindow ran the 16k rows of
// docs/perf.md 4-6% slower (tuning log step 38). Every other policy is its own, and so is ALiBi
// on a tile whose consumers have fewer than 240 registers (the three-warpgroup d = 64 default,
// 160: AlibiBias spills 288 bytes there under the plain block order, AlibiWindow none). Two
// kernels more per Hopper default and element type; the portable and split kernels, the kernels
// compiled with dropout and the backward keep AlibiWindow (within 5% of the functor on the
// portable tile, step 28), so their kernel counts stay.
using AlibiCausal = Combined<AlibiBias, CausalMask>;

template <class Config, class Policy, class Visitor>
decltype(auto) visit_sm90_policy(const Policy& policy, Visitor&& visit) {
  if constexpr (std::is_same_v<Policy, AlibiWindow> && Config::kConsumerRegisters >= 240) {
    const SlidingWindow& window = policy.second;
    if (window.left < 0 && window.right < 0) return visit(policy.first);
    if (window.left < 0 && window.right == 0) return visit(AlibiCausal{{}, policy.first, {}});
  }
  return visit(policy);
}

template <class Policy>
struct IsCombined : std::false_type {};
template <class First, class Second>
struct IsCombined<Combined<First, Second>> : std::true_type {
  using first_type = First;
  using second_type = Second;
};

// A built-in policy type's name, as describe_default_kernel prints it: "FullAttention",
// "Combined<AlibiBias, CausalMask>".
template <class Policy>
std::string builtin_policy_type_name() {
  if constexpr (std::is_same_v<Policy, FullAttention>) {
    return "FullAttention";
  } else if constexpr (std::is_same_v<Policy, CausalMask>) {
    return "CausalMask";
  } else if constexpr (std::is_same_v<Policy, SlidingWindow>) {
    return "SlidingWindow";
  } else if constexpr (std::is_same_v<Policy, Softcap>) {
    return "Softcap";
  } else if constexpr (std::is_same_v<Policy, AlibiBias>) {
    return "AlibiBias";
  } else {
    static_assert(IsCombined<Policy>::value, "not a built-in score policy");
    return "Combined<" + builtin_policy_type_name<typename IsCombined<Policy>::first_type>() +
           ", " + builtin_policy_type_name<typename IsCombined<Policy>::second_type>() + ">";
  }
}

// Calls visit(Config{}) with the default config of one kernel head dim that forward() runs for
// a masked (kMasked) or unmasked policy on a device with `smem_per_block_optin` bytes of shared
// memory per block. kMasked is a template argument so that a dispatch instantiates only the two
// configs a policy can run on (its preferred one and the compact fallback), not all three.
template <class Element, int HeadDim, bool kMasked, class Visitor>
decltype(auto) visit_default_config(std::size_t smem_per_block_optin, Visitor&& visit) {
  using Defaults = DefaultConfig<Element, HeadDim>;
  using Preferred = std::conditional_t<kMasked, typename Defaults::causal, typename Defaults::type>;
  if (default_tile<Element, HeadDim>(kMasked, smem_per_block_optin) == DefaultTile::kCompact) {
    return visit(typename Defaults::compact{});
  }
  return visit(Preferred{});
}

// Calls visit(std::integral_constant<int, D>{}) for the kernel head dim D that serves
// `head_dim`, or out_of_range() when none does.
template <class Visitor, class OutOfRange>
decltype(auto) visit_kernel_head_dim(int64_t head_dim, Visitor&& visit, OutOfRange&& out_of_range) {
  switch (kernel_head_dim_for(head_dim)) {
    case 32: return visit(std::integral_constant<int, 32>{});
    case 64: return visit(std::integral_constant<int, 64>{});
    case 96: return visit(std::integral_constant<int, 96>{});
    case 128: return visit(std::integral_constant<int, 128>{});
    case 160: return visit(std::integral_constant<int, 160>{});
    case 192: return visit(std::integral_constant<int, 192>{});
    case 224: return visit(std::integral_constant<int, 224>{});
    case 256: return visit(std::integral_constant<int, 256>{});
    default: return out_of_range();
  }
}

// "TileConfig<fp16, HeadDim 128, BlockM 256, BlockN 64, 8 warps, 2 stages, XOR swizzle,
// 1 block/SM, rescale before exp, sm_80>": every knob of a config, by name.
template <class Config>
std::string describe_config() {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  std::ostringstream os;
  if constexpr (IsSm90TileConfig<Config>::value) {
    os << "Sm90TileConfig<" << ElementTraits<typename Config::element_type>::kName
       << ", HeadDim " << Config::kHeadDim << ", BlockM " << Config::kBlockM << ", BlockN "
       << Config::kBlockN << ", " << Config::kStages << " stages, "
       << Config::kConsumerWarpgroups << " consumer warpgroups, registers "
       << Config::kProducerRegisters << "/" << Config::kConsumerRegisters << ", "
       << (Config::kOverlapSoftmax            ? "softmax overlapped"
           : Config::kIssuesProductsTogether ? "products overlapped"
                                              : "sequential")
       << (Config::kPingPong ? ", ping-pong" : "") << (Config::kPersistent ? ", persistent" : "")
       << ", "
       << Config::arch_tag::kName << ">";
  } else {
    os << "TileConfig<" << ElementTraits<typename Config::element_type>::kName << ", HeadDim "
       << Config::kHeadDim << ", BlockM " << Config::kBlockM << ", BlockN " << Config::kBlockN
       << ", " << Config::kWarps << " warps, " << Config::kStages << " stages, "
       << (Config::kSmemLayout == SmemLayout::kXorSwizzle ? "XOR swizzle" : "padded rows") << ", "
       << Config::kMinBlocksPerSm << " block/SM, rescale "
       << (Config::kRescaleBeforeExp ? "before" : "after") << " exp, "
       << Config::arch_tag::kName << ">";
  }
  return os.str();
}

}  // namespace flashmma
