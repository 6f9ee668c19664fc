// SPDX-License-Identifier: Apache-2.0
// The score-policy contract: what a kernel asks of an attention variant, in logical coordinates
// only (batch, query head, query position, key position), never in fragments or tiles of one
// architecture. The forward and backward kernels of every architecture take the same policy.
//
// A policy is a copyable struct derived from ScorePolicyBase, passed by value to the kernel. It
// says, through two compile-time flags, what it does; a flag left false costs nothing, because
// the kernel never calls the hooks behind it:
//
//   kMasks             some (query, key) pairs are hidden: visible() says which, and key_range()
//                      / query_range() / all_visible() let kernels skip whole tiles
//   kTransformsScores  transform() maps a scaled score to the logit that enters the softmax
//   kKeyIntervalMask   (with kMasks) the keys each query sees are one interval, and
//                      key_range({i, i + 1}) is exactly query i's: kernels then mask a row by
//                      comparing keys with its two ends, not by calling visible() per score;
//                      the ends must lie within (-2^31, 2^31) for every query of a tile (those
//                      past seqlen_q included), as any position plus or minus a length does
//
// The hooks (ScorePolicyBase gives every one a default that is correct for any policy):
//
//   bool visible(ScoreCoord, SequenceLengths)
//   float transform(float scaled_score, ScoreCoord, SequenceLengths)
//       scaled_score is softmax_scale * q.k: the kernel owns the scale and applies it first.
//       Hidden pairs are set to -inf after the transform, so transform() never sees them.
//   float transform_gradient(float scaled_score, float logit, ScoreCoord, SequenceLengths)
//       d logit / d scaled_score at that score, given both (logit = transform(scaled_score)):
//       the backward pass's chain rule. A policy that transforms scores must define it (the
//       backward checks, check_backward_policy); a bias has 1.
//   IndexRange key_range(IndexRange queries, SequenceLengths)
//       a superset of the keys that some query of `queries` may see; the default is every key
//   IndexRange query_range(IndexRange keys, SequenceLengths)
//       a superset of the queries that see some key of `keys` (the backward's tile skipping)
//   bool all_visible(IndexRange queries, IndexRange keys, SequenceLengths)
//       true only if every pair of the block is visible (the kernel then skips the per-element
//       mask); the default, false, is always correct
//
// Positions are those of the sequence: query in [0, seqlen_q), key in [0, seqlen_k). Masks that
// relate the two are aligned to the bottom-right corner (the last query faces the last key):
// SequenceLengths::diagonal() is the key on query 0's diagonal. Coordinates and lengths are
// 32-bit; the ranges are 64-bit, so that a range hook may add window sizes to positions freely.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashmma/attention/index_range.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

// One score's logical coordinates. They are 32-bit: validate_params refuses sequences of more
// than 2^30 positions (the grid already bounds batch and heads), so a policy's arithmetic on
// them is 32-bit, as a user writes it. Per score that matters: a distance formed and converted
// in 64 bits costs a policy written the obvious way about 40% of the kernel's time at d = 128.
struct ScoreCoord {
  int32_t batch;
  int32_t head;   // query head
  int32_t query;  // position in [0, seqlen_q)
  int32_t key;    // position in [0, seqlen_k)
};

// The lengths of one sequence (of one batch entry), at most 2^30 (validate.hpp's kMaxSeqlen).
struct SequenceLengths {
  int32_t seqlen_q;
  int32_t seqlen_k;

  // Query i's diagonal key under bottom-right alignment is i + diagonal(); i + diagonal() is
  // below seqlen_k and above -seqlen_q, so it never overflows.
  FLASHMMA_HOST_DEVICE int32_t diagonal() const { return seqlen_k - seqlen_q; }
};

// Narrowing from the 64-bit counts of params and host loops (every position, head and batch
// index is below 2^30 once the params are validated), in one place.
FLASHMMA_HOST_DEVICE ScoreCoord score_coord(int64_t batch, int64_t head, int64_t query,
                                            int64_t key) {
  return {static_cast<int32_t>(batch), static_cast<int32_t>(head), static_cast<int32_t>(query),
          static_cast<int32_t>(key)};
}
FLASHMMA_HOST_DEVICE SequenceLengths sequence_lengths(int64_t seqlen_q, int64_t seqlen_k) {
  return {static_cast<int32_t>(seqlen_q), static_cast<int32_t>(seqlen_k)};
}

// Sees every pair and changes no score. Derive from it and override what your variant changes.
struct ScorePolicyBase {
  static constexpr bool kMasks = false;
  static constexpr bool kTransformsScores = false;
  static constexpr bool kKeyIntervalMask = false;

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord&, const SequenceLengths&) const {
    return true;
  }
  FLASHMMA_HOST_DEVICE float transform(float scaled_score, const ScoreCoord&,
                                       const SequenceLengths&) const {
    return scaled_score;
  }
  FLASHMMA_HOST_DEVICE float transform_gradient(float, float, const ScoreCoord&,
                                                const SequenceLengths&) const {
    return 1.f;  // of the identity above; a policy that transforms defines its own
  }
  FLASHMMA_HOST_DEVICE IndexRange key_range(const IndexRange&,
                                            const SequenceLengths& lengths) const {
    return {0, lengths.seqlen_k};
  }
  FLASHMMA_HOST_DEVICE IndexRange query_range(const IndexRange&,
                                              const SequenceLengths& lengths) const {
    return {0, lengths.seqlen_q};
  }
  FLASHMMA_HOST_DEVICE bool all_visible(const IndexRange&, const IndexRange&,
                                        const SequenceLengths&) const {
    return false;
  }
};

// The contract, checked where a kernel is instantiated: one message per broken rule.
template <class Policy>
constexpr bool check_score_policy() {
  static_assert(std::is_base_of<ScorePolicyBase, Policy>::value,
                "a score policy must derive from flashmma::ScorePolicyBase (which gives every "
                "hook a correct default: see attention/score_policy.hpp)");
  static_assert(std::is_trivially_copyable<Policy>::value,
                "a score policy is passed to the kernel by value: it must be trivially copyable "
                "(plain values and device pointers, no owning members)");
  static_assert(std::is_same<decltype(Policy::kMasks), const bool>::value &&
                    std::is_same<decltype(Policy::kTransformsScores), const bool>::value,
                "a score policy's kMasks and kTransformsScores must be static constexpr bool");
  static_assert(std::is_same<decltype(Policy::kKeyIntervalMask), const bool>::value,
                "a score policy's kKeyIntervalMask must be static constexpr bool");
  static_assert(!Policy::kKeyIntervalMask || Policy::kMasks,
                "kKeyIntervalMask describes the shape of a mask: set kMasks too, or leave "
                "kKeyIntervalMask false");
  static_assert(
      std::is_same<decltype(std::declval<const Policy&>().visible(
                       std::declval<ScoreCoord>(), std::declval<SequenceLengths>())),
                   bool>::value,
      "a score policy's visible(ScoreCoord, SequenceLengths) const must return bool");
  static_assert(
      std::is_same<decltype(std::declval<const Policy&>().transform(
                       0.f, std::declval<ScoreCoord>(), std::declval<SequenceLengths>())),
                   float>::value,
      "a score policy's transform(float, ScoreCoord, SequenceLengths) const must return float");
  static_assert(
      std::is_same<decltype(std::declval<const Policy&>().key_range(
                       std::declval<IndexRange>(), std::declval<SequenceLengths>())),
                   IndexRange>::value &&
          std::is_same<decltype(std::declval<const Policy&>().query_range(
                           std::declval<IndexRange>(), std::declval<SequenceLengths>())),
                       IndexRange>::value,
      "a score policy's key_range / query_range(IndexRange, SequenceLengths) const must return "
      "IndexRange");
  static_assert(
      std::is_same<decltype(std::declval<const Policy&>().all_visible(
                       std::declval<IndexRange>(), std::declval<IndexRange>(),
                       std::declval<SequenceLengths>())),
                   bool>::value,
      "a score policy's all_visible(IndexRange, IndexRange, SequenceLengths) const must return "
      "bool");
  return true;
}

// What the backward pass asks on top of check_score_policy: a policy that transforms scores
// says how its transform's derivative looks (ScorePolicyBase's is that of the identity, so
// inheriting it would silently drop the transform from the gradients).
template <class Policy>
constexpr bool check_backward_policy() {
  static_assert(check_score_policy<Policy>(), "");
  static_assert(
      std::is_same<decltype(std::declval<const Policy&>().transform_gradient(
                       0.f, 0.f, std::declval<ScoreCoord>(), std::declval<SequenceLengths>())),
                   float>::value,
      "a score policy's transform_gradient(float, float, ScoreCoord, SequenceLengths) const "
      "must return float");
  static_assert(!Policy::kTransformsScores ||
                    !std::is_same<decltype(&Policy::transform_gradient),
                                  decltype(&ScorePolicyBase::transform_gradient)>::value,
                "a score policy with kTransformsScores must define transform_gradient(scaled_"
                "score, logit, ScoreCoord, SequenceLengths), d logit / d scaled_score, for the "
                "backward pass (1 for a bias)");
  return true;
}

// What kernels call: the hooks behind a false flag are never called.
template <class Policy>
FLASHMMA_HOST_DEVICE bool policy_visible(const Policy& policy, const ScoreCoord& c,
                                         const SequenceLengths& lengths) {
  if constexpr (Policy::kMasks) {
    return policy.visible(c, lengths);
  } else {
    return true;
  }
}

// The keys some query of `queries` may see, within [0, seqlen_k).
template <class Policy>
FLASHMMA_HOST_DEVICE IndexRange policy_key_range(const Policy& policy, const IndexRange& queries,
                                                 const SequenceLengths& lengths) {
  if constexpr (Policy::kMasks) {
    return policy.key_range(queries, lengths).clamp(0, lengths.seqlen_k);
  } else {
    return {0, lengths.seqlen_k};
  }
}

// The keys query `query` sees, within [0, seqlen_k), for a policy whose mask is one interval
// per query (kKeyIntervalMask) or that masks nothing.
template <class Policy>
FLASHMMA_HOST_DEVICE IndexRange policy_row_keys(const Policy& policy, int64_t query,
                                                const SequenceLengths& lengths) {
  static_assert(!Policy::kMasks || Policy::kKeyIntervalMask,
                "policy_row_keys needs a policy whose visible keys are one interval per query");
  return policy_key_range(policy, IndexRange{query, query + 1}, lengths);
}

// The queries that see some key of `keys`, within [0, seqlen_q).
template <class Policy>
FLASHMMA_HOST_DEVICE IndexRange policy_query_range(const Policy& policy, const IndexRange& keys,
                                                   const SequenceLengths& lengths) {
  if constexpr (Policy::kMasks) {
    return policy.query_range(keys, lengths).clamp(0, lengths.seqlen_q);
  } else {
    return {0, lengths.seqlen_q};
  }
}

// True when the policy hides no pair of queries x keys (the sequence bounds aside).
template <class Policy>
FLASHMMA_HOST_DEVICE bool policy_all_visible(const Policy& policy, const IndexRange& queries,
                                             const IndexRange& keys,
                                             const SequenceLengths& lengths) {
  if constexpr (Policy::kMasks) {
    return policy.all_visible(queries, keys, lengths);
  } else {
    return true;
  }
}

}  // namespace flashmma
