// SPDX-License-Identifier: Apache-2.0
// What every backward kernel does to a tile of recomputed scores, whatever the GEMM: the score
// policy's transform and mask, the probabilities from the forward's LSE, and dS from dP.
//
// The backward keeps the transposed scores S^T = K Q^T in a warp's accumulators (rows are keys,
// columns queries; attention/accumulator_walk.cuh), so that P^T and dS^T are the A operands of
// dV += P^T dO and dK += dS^T Q straight from registers. For each (key j, query i):
//
//   logit  = transform(scale s)                 (or s itself, scaled inside the exponential)
//   P      = 2^(logit log2(e) - LSE_i log2(e))  0 where the policy or the sequence ends hide it
//   factor = transform_gradient(scale s, logit) (only for a policy that transforms scores)
//   dS     = P (dP - D_i) factor
//
// LSE_i log2(e) and D_i come per query from the workspace (attention/backward_rows.cuh): +inf
// for a row that saw no key, so its P is 0 with or without the mask.
#pragma once

#include <cstdint>

#include "flashmma/attention/accumulator_walk.cuh"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/math.cuh"

namespace flashmma {

// Every score kept: no dropout.
struct KeepAll {
  static constexpr bool kEnabled = false;
  float scale = 1.f;
  FLASHMMA_DEVICE bool kept(int, int) const { return true; }
};

template <class Policy>
struct BackwardScores {
  Policy policy;
  SequenceLengths lengths;
  int32_t batch;
  int32_t head;  // query head of the current tile
  float softmax_scale;
  float softmax_scale_log2;
  int lane;

  // Gradient factors: one per score for a policy that transforms scores, else none (the
  // compiler drops an array it never reads).
  static constexpr bool kFactors = Policy::kTransformsScores;

  // One score's probability: P = 2^(logit log2(e) - reference), 0 where the policy or the
  // sequence's end hides the key (when needs_mask); `factor` receives d logit / d scaled score for
  // a policy that transforms scores.
  FLASHMMA_DEVICE float probability(float score, const ScoreCoord& c, float reference,
                                    bool needs_mask, float& factor) const {
    float p;
    if constexpr (Policy::kTransformsScores) {
      const float scaled = score * softmax_scale;
      const float logit = policy.transform(scaled, c, lengths);
      factor = policy.transform_gradient(scaled, logit, c, lengths);
      p = ptx::ex2_approx(fmaf(logit, kLog2e, -reference));
    } else {
      p = ptx::ex2_approx(fmaf(score, softmax_scale_log2, -reference));
    }
    if (needs_mask) {
      // | rather than ||: a branch per score costs more than the test it would skip.
      const bool hidden = (c.key >= lengths.seqlen_k) | !policy_visible(policy, c, lengths);
      if (hidden) p = 0.f;
    }
    return p;
  }

  // Raw scores S^T (row r: key first_key + r; column c: query first_query + c) to P^T, in place;
  // `factor` receives d logit / d scaled score. `lse_log2` holds the tile's queries' LSE * log2(e).
  template <int kRowTiles, int kTiles>
  FLASHMMA_DEVICE void probabilities(float (&s)[kRowTiles][kTiles][4],
                                     float (&factor)[kRowTiles][kTiles][4], const float* lse_log2,
                                     int first_key, int first_query, bool needs_mask) const {
    for_each_accumulator_index<kRowTiles, kTiles>(
        lane, [&](const AccumulatorIndex& i, int row, int column) {
          float& score = s[i.rt][i.t][i.reg];
          const ScoreCoord c{batch, head, first_query + column, first_key + row};
          score = probability(score, c, lse_log2[column], needs_mask, factor[i.rt][i.t][i.reg]);
        });
  }

  // Both steps in one pass over S^T and dP^T, for a kernel that holds the two at once (the
  // Hopper backward): the gradient factor is a temporary instead of an array as large as S^T
  // (which made the d = 64 Hopper tile spill 296 bytes under softcap). `keep` is KeepAll or a
  // dropout mask (attention/dropout.cuh's KeptScores): dP is scaled where kept and 0 where
  // dropped before dS = P (dP - D), and P^T keeps only the kept probabilities (unscaled).
  template <int kRowTiles, int kTiles, class Keep>
  FLASHMMA_DEVICE void probabilities_and_gradients(float (&s)[kRowTiles][kTiles][4],
                                                   float (&dp)[kRowTiles][kTiles][4],
                                                   const float* lse_log2, const float* delta,
                                                   int first_key, int first_query,
                                                   bool needs_mask, const Keep& keep) const {
    for_each_accumulator_index<kRowTiles, kTiles>(
        lane, [&](const AccumulatorIndex& i, int row, int column) {
          float& score = s[i.rt][i.t][i.reg];
          const ScoreCoord c{batch, head, first_query + column, first_key + row};
          float factor = 1.f;
          const float p = probability(score, c, lse_log2[column], needs_mask, factor);
          float grad = dp[i.rt][i.t][i.reg];
          if constexpr (Keep::kEnabled) {
            const bool kept = keep.kept(i.t, i.reg);
            grad = kept ? grad * keep.scale : 0.f;
            score = kept ? p : 0.f;
          } else {
            score = p;
          }
          float ds = p * (grad - delta[column]);
          if constexpr (kFactors) ds *= factor;
          dp[i.rt][i.t][i.reg] = ds;
        });
  }

  // dP^T to dS^T in place, from P^T (probabilities) and the tile's queries' D.
  template <int kRowTiles, int kTiles>
  FLASHMMA_DEVICE void gradients(float (&dp)[kRowTiles][kTiles][4],
                                 const float (&p)[kRowTiles][kTiles][4],
                                 const float (&factor)[kRowTiles][kTiles][4],
                                 const float* delta) const {
    for_each_accumulator_index<kRowTiles, kTiles>(
        lane, [&](const AccumulatorIndex& i, int, int column) {
          float ds = p[i.rt][i.t][i.reg] * (dp[i.rt][i.t][i.reg] - delta[column]);
          if constexpr (kFactors) ds *= factor[i.rt][i.t][i.reg];
          dp[i.rt][i.t][i.reg] = ds;
        });
  }
};

}  // namespace flashmma
