// SPDX-License-Identifier: Apache-2.0
// The built-in score policies, with FlashAttention-2's semantics, and their composition.
//
//   FullAttention             every key, scores unchanged
//   CausalMask                query i sees keys j <= i + d, d = seqlen_k - seqlen_q: the window
//                             {-1, 0} with its bounds known at compile time
//   SlidingWindow{l, r}       query i sees keys [i + d - l, i + d + r], d = seqlen_k - seqlen_q;
//                             -1 leaves a side unbounded: causal is {-1, 0}, none is {-1, -1}
//   AlibiBias{slopes, stride} adds -slope(b, h) * |i + d - j| to the scaled score
//   Softcap{cap}              cap * tanh(score / cap), on the scaled score
//   Combined<A, B>            visible where both are; B's transform applied after A's
//
// FlashAttention-2 applies the softcap to the scaled score, then the ALiBi bias, then the mask:
// Combined<Softcap, Combined<AlibiBias, SlidingWindow>> is that order.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"
#if defined(__CUDACC__)
#include "flashmma/ptx/math.cuh"
#endif

namespace flashmma {

using FullAttention = ScorePolicyBase;

struct SlidingWindow : ScorePolicyBase {
  static constexpr bool kMasks = true;
  static constexpr bool kKeyIntervalMask = true;  // query i: [i + d - left, i + d + right]

  int64_t left = -1;   // keys before the diagonal a query sees; -1: all of them
  int64_t right = -1;  // keys after the diagonal a query sees; -1: all of them

  static constexpr SlidingWindow causal() { return SlidingWindow{{}, -1, 0}; }

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord& c, const SequenceLengths& lengths) const {
    // Key minus diagonal key, in 64 bits: it spans (-2^32, 2^32) and is compared with bounds
    // that may be any int64.
    const int64_t offset = int64_t{c.key} - (c.query + lengths.diagonal());
    // The bounds are the same for every score, so they are worked out once; the two tests are
    // combined without a branch, which per score would cost more than the tests.
    const int64_t lowest = left < 0 ? INT64_MIN : -left;
    const int64_t highest = right < 0 ? INT64_MAX : right;
    return (offset >= lowest) & (offset <= highest);
  }

  FLASHMMA_HOST_DEVICE IndexRange key_range(const IndexRange& queries,
                                            const SequenceLengths& lengths) const {
    const int64_t d = lengths.diagonal();
    return {left < 0 ? 0 : queries.begin + d - left,
            right < 0 ? lengths.seqlen_k : queries.end - 1 + d + right + 1};
  }

  FLASHMMA_HOST_DEVICE IndexRange query_range(const IndexRange& keys,
                                              const SequenceLengths& lengths) const {
    const int64_t d = lengths.diagonal();
    // Query i sees key j iff j - left <= i + d <= j + right.
    return {right < 0 ? 0 : keys.begin - d - right,
            left < 0 ? lengths.seqlen_q : keys.end - 1 - d + left + 1};
  }

  FLASHMMA_HOST_DEVICE bool all_visible(const IndexRange& queries, const IndexRange& keys,
                                        const SequenceLengths& lengths) const {
    const int64_t d = lengths.diagonal();
    // The last query's left bound and the first query's right bound are the tightest.
    return (left < 0 || keys.begin >= queries.end - 1 + d - left) &&
           (right < 0 || keys.end - 1 <= queries.begin + d + right);
  }
};

struct CausalMask : ScorePolicyBase {
  static constexpr bool kMasks = true;
  // Its keys are one interval too, [0, i + d], but its per-score test is already a single 32-bit
  // comparison: the interval's per-row ends cost the portable d = 64 causal tile an 8-byte spill
  // and the others 8 instructions (and save the Hopper ones 16), so it keeps visible().

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord& c, const SequenceLengths& lengths) const {
    return c.key <= c.query + lengths.diagonal();
  }
  FLASHMMA_HOST_DEVICE IndexRange key_range(const IndexRange& queries,
                                            const SequenceLengths& lengths) const {
    return {0, queries.end - 1 + lengths.diagonal() + 1};
  }
  FLASHMMA_HOST_DEVICE IndexRange query_range(const IndexRange& keys,
                                              const SequenceLengths& lengths) const {
    return {keys.begin - lengths.diagonal(), lengths.seqlen_q};
  }
  FLASHMMA_HOST_DEVICE bool all_visible(const IndexRange& queries, const IndexRange& keys,
                                        const SequenceLengths& lengths) const {
    return keys.end - 1 <= queries.begin + lengths.diagonal();
  }
};

struct AlibiBias : ScorePolicyBase {
  static constexpr bool kTransformsScores = true;

  const float* slopes = nullptr;  // fp32 device pointer: slope of (b, h) at slopes[b * batch_stride + h]
  int64_t batch_stride = 0;       // 0: one slope per head, shared by the batch

  FLASHMMA_HOST_DEVICE float slope(int64_t batch, int64_t head) const {
    return slopes[batch * batch_stride + head];
  }

  FLASHMMA_HOST_DEVICE float transform(float scaled_score, const ScoreCoord& c,
                                       const SequenceLengths& lengths) const {
    // The distance in 32-bit integers (positions are at most 2^30, so it lies in
    // (-2^30, 2^30)), then one conversion: as two conversions and a float subtraction it was
    // up to 8% slower on the Hopper kernel and 192 instructions longer on the portable one (d = 128,
    // docs/tuning-log.md step 30). Exact below 2^24, within an ulp of the distance above.
    const int32_t distance = c.query + lengths.diagonal() - c.key;
    return scaled_score -
           slope(c.batch, c.head) * static_cast<float>(distance < 0 ? -distance : distance);
  }

  FLASHMMA_HOST_DEVICE float transform_gradient(float, float, const ScoreCoord&,
                                                const SequenceLengths&) const {
    return 1.f;  // a bias
  }
};

struct Softcap : ScorePolicyBase {
  static constexpr bool kTransformsScores = true;

  float cap = 0.f;          // > 0
  float inverse_cap = 0.f;  // 1 / cap

  static Softcap with_cap(float cap) { return Softcap{{}, cap, 1.f / cap}; }

  FLASHMMA_HOST_DEVICE float transform(float scaled_score, const ScoreCoord&,
                                       const SequenceLengths&) const {
#if defined(__CUDA_ARCH__)
    return cap * ptx::tanh_fast(scaled_score * inverse_cap);  // absolute error about 1e-7 * cap
#else
    return cap * tanhf(scaled_score * inverse_cap);
#endif
  }

  // d/ds cap * tanh(s / cap) = 1 - tanh^2(s / cap), from the logit the forward formed.
  FLASHMMA_HOST_DEVICE float transform_gradient(float, float logit, const ScoreCoord&,
                                                const SequenceLengths&) const {
    const float t = logit * inverse_cap;
    return 1.f - t * t;
  }
};

template <class First, class Second>
struct Combined : ScorePolicyBase {
  static constexpr bool kMasks = First::kMasks || Second::kMasks;
  static constexpr bool kTransformsScores = First::kTransformsScores || Second::kTransformsScores;
  // Two intervals intersect in one, and key_range below intersects them exactly.
  static constexpr bool kKeyIntervalMask =
      kMasks && (First::kKeyIntervalMask || !First::kMasks) &&
      (Second::kKeyIntervalMask || !Second::kMasks);

  First first;
  Second second;

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord& c, const SequenceLengths& lengths) const {
    return policy_visible(first, c, lengths) && policy_visible(second, c, lengths);
  }

  FLASHMMA_HOST_DEVICE float transform(float scaled_score, const ScoreCoord& c,
                                       const SequenceLengths& lengths) const {
    float score = scaled_score;
    if constexpr (First::kTransformsScores) score = first.transform(score, c, lengths);
    if constexpr (Second::kTransformsScores) score = second.transform(score, c, lengths);
    return score;
  }

  // The chain rule: B'(A(s)) * A'(s), with A(s) formed again where both transform.
  FLASHMMA_HOST_DEVICE float transform_gradient(float scaled_score, float logit,
                                                const ScoreCoord& c,
                                                const SequenceLengths& lengths) const {
    if constexpr (First::kTransformsScores && Second::kTransformsScores) {
      const float inner = first.transform(scaled_score, c, lengths);
      return first.transform_gradient(scaled_score, inner, c, lengths) *
             second.transform_gradient(inner, logit, c, lengths);
    } else if constexpr (First::kTransformsScores) {
      return first.transform_gradient(scaled_score, logit, c, lengths);
    } else if constexpr (Second::kTransformsScores) {
      return second.transform_gradient(scaled_score, logit, c, lengths);
    } else {
      return 1.f;
    }
  }

  FLASHMMA_HOST_DEVICE IndexRange key_range(const IndexRange& queries,
                                            const SequenceLengths& lengths) const {
    return policy_key_range(first, queries, lengths)
        .intersect(policy_key_range(second, queries, lengths));
  }

  FLASHMMA_HOST_DEVICE IndexRange query_range(const IndexRange& keys,
                                              const SequenceLengths& lengths) const {
    return policy_query_range(first, keys, lengths)
        .intersect(policy_query_range(second, keys, lengths));
  }

  FLASHMMA_HOST_DEVICE bool all_visible(const IndexRange& queries, const IndexRange& keys,
                                        const SequenceLengths& lengths) const {
    return policy_all_visible(first, queries, keys, lengths) &&
           policy_all_visible(second, queries, keys, lengths);
  }
};

}  // namespace flashmma
