// SPDX-License-Identifier: Apache-2.0
// Which kernels the default dispatch (forward(params), backward(params) and the library
// flashmma::kernels) holds. Each family can be left out of a build, so that a program that never
// asks for it does not pay its compile time:
//
//   FLASHMMA_DISABLE_BACKWARD         backward(params)
//   FLASHMMA_DISABLE_DROPOUT          dropout_p > 0, forward and backward
//   FLASHMMA_DISABLE_VARLEN           cu_seqlens_q, cu_seqlens_k, seqused_k
//   FLASHMMA_DISABLE_PAGEDKV          block_table (a paged KV cache)
//   FLASHMMA_DISABLE_SLIDING_WINDOW   a window other than the causal mask, without a transform
//   FLASHMMA_DISABLE_SOFTCAP          softcap > 0
//   FLASHMMA_DISABLE_ALIBI            alibi_slopes
//   FLASHMMA_DISABLE_FP16, FLASHMMA_DISABLE_BF16           one element type
//   FLASHMMA_DISABLE_HEAD_DIM_32 ... FLASHMMA_DISABLE_HEAD_DIM_256   one kernel head dim
//
// CMake's options of the same names (FLASHMMA_KERNEL_DTYPES and FLASHMMA_KERNEL_HEAD_DIMS for the
// last two rows) make them PUBLIC compile definitions of flashmma::kernels, so that the library
// and every unit that links it agree; a header-only program may define them itself. A call that
// needs a kernel left out gets kUnsupportedDevice ("the build cannot run the kernel") with a
// message that names the option, before the device is queried or anything is launched.
// Configs named explicitly (forward<Config>, backward<Config>, ...) compile what they name and
// are not affected.
#pragma once

#include <cstdint>
#include <string>
#include <type_traits>
#include <utility>

#include "flashmma/backward_params.hpp"
#include "flashmma/default_dispatch.hpp"
#include "flashmma/kernel_family_switches.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/backward_config.hpp"
#include "flashmma/traits/default_configs.hpp"

namespace flashmma {

// Whether this build holds the default kernels of an element type (__half, __nv_bfloat16).
template <class Element>
constexpr bool element_compiled() {
  return std::is_same_v<Element, __half> ? kFloat16Family.compiled : kBFloat16Family.compiled;
}

// Whether this build holds the default kernels of (Element, kernel head dim).
template <class Element, int HeadDim>
constexpr bool default_compiled() {
  return element_compiled<Element>() && head_dim_compiled(HeadDim);
}

namespace detail {

// "flashmma: dropout_p > 0 needs the dropout kernels, left out of this build by
// FLASHMMA_DISABLE_DROPOUT; configure flashmma with -DFLASHMMA_DISABLE_DROPOUT=OFF"
inline Status left_out(const std::string& what, const char* kernels, const std::string& macro,
                       const std::string& option) {
  return Status::error(ErrorCode::kUnsupportedDevice, "flashmma: " + what + " needs " + kernels +
                                                          ", left out of this build by " + macro +
                                                          "; configure flashmma with " + option);
}

inline Status check_family(bool needed, const char* what, const KernelFamily& family) {
  if (!needed || family.compiled) return Status::success();
  return left_out(what, family.kernels, family.macro, family.option);
}

inline Status check_element(const ForwardParams& p) {
  return p.dtype == ScalarType::kFloat16 ? check_family(true, "dtype fp16", kFloat16Family)
                                         : check_family(true, "dtype bf16", kBFloat16Family);
}

// `kernel_head_dim`: the forward's or the backward's for p.head_dim (0: none, which validation
// reports).
inline Status check_head_dim(const ForwardParams& p, int kernel_head_dim) {
  if (kernel_head_dim == 0 || head_dim_compiled(kernel_head_dim)) return Status::success();
  const std::string d = std::to_string(kernel_head_dim);
  return left_out("head_dim " + std::to_string(p.head_dim) + " (kernel head dim " + d + ")",
                  "the head dim's kernels",
                  "FLASHMMA_KERNEL_HEAD_DIMS (FLASHMMA_DISABLE_HEAD_DIM_" + d + ")",
                  "-DFLASHMMA_KERNEL_HEAD_DIMS=\"...;" + d + "\"");
}

// The families of a call's features, forward or backward. Expects validated params.
inline Status check_feature_families(const ForwardParams& p) {
  if (Status s = check_family(uses_dropout(p), "dropout_p > 0", kDropoutFamily); !s) return s;
  if (Status s = check_family(has_variable_lengths(p),
                              "cu_seqlens_q / cu_seqlens_k / seqused_k (variable lengths)",
                              kVariableLengthFamily);
      !s)
    return s;
  if (Status s = check_family(paged_kv(p), "block_table (a paged KV cache)", kPagedFamily); !s)
    return s;
  switch (builtin_policy_for(p)) {
    case BuiltinPolicy::kSlidingWindow:
      return check_family(true, "a sliding window (window_left / window_right)", kWindowFamily);
    case BuiltinPolicy::kSoftcap: return check_family(true, "softcap > 0", kSoftcapFamily);
    case BuiltinPolicy::kAlibi: return check_family(true, "alibi_slopes", kAlibiFamily);
    case BuiltinPolicy::kSoftcapAlibi:
      if (Status s = check_family(true, "softcap > 0", kSoftcapFamily); !s) return s;
      return check_family(true, "alibi_slopes", kAlibiFamily);
    case BuiltinPolicy::kFullAttention:
    case BuiltinPolicy::kCausalMask: break;
  }
  return Status::success();
}

}  // namespace detail

// Whether this build's default dispatch holds the kernels a forward(params) call runs on; the
// error names the option that builds them. Expects validated params (validate_params).
inline Status check_forward_families(const ForwardParams& p) {
  if (Status s = detail::check_element(p); !s) return s;
  if (Status s = detail::check_head_dim(p, kernel_head_dim_for(p.head_dim)); !s) return s;
  return detail::check_feature_families(p);
}

// The same for backward(params), whose kernel head dims are 64, 128 and 256: a head dim runs
// on the smallest of them that holds it, if FLASHMMA_KERNEL_HEAD_DIMS lists it.
inline Status check_backward_families(const BackwardParams& p) {
  if (Status s = detail::check_family(true, "backward(params)", kBackwardFamily); !s) return s;
  if (Status s = detail::check_element(p); !s) return s;
  if (Status s = detail::check_head_dim(p, backward_kernel_head_dim_for(p.head_dim)); !s) return s;
  return detail::check_feature_families(p);
}

namespace detail {

// The built-in policies this build's default dispatch holds (visit_builtin_policy's Held).
struct CompiledBuiltinPolicies {
  static constexpr bool kWindow = kWindowFamily.compiled;
  static constexpr bool kSoftcap = kSoftcapFamily.compiled;
  static constexpr bool kAlibi = kAlibiFamily.compiled;
};

// Calls visit(policy) with the built-in policy of params for the policies this build holds; the
// others are never instantiated (check_forward_families refuses their calls first, and returns
// the same error here).
template <class Visitor>
Status visit_compiled_policy(const ForwardParams& p, Visitor&& visit) {
  return visit_builtin_policy<CompiledBuiltinPolicies>(
      p, std::forward<Visitor>(visit), [&] { return check_forward_families(p); });
}

}  // namespace detail
}  // namespace flashmma
