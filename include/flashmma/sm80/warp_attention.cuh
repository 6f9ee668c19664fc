// SPDX-License-Identifier: Apache-2.0
// One warp's share of a block: its BlockM / Warps query rows, their O accumulators and running
// softmax statistics, and the three steps it applies to every visible K/V tile:
//
//   scores(S, K_j)               S = Q K_j^T                              (warp_mma.cuh)
//   softmax(S, first_key)        transform and mask S as the score policy says, P = exp(S - m),
//                                rescale O                                (online_softmax.cuh)
//   accumulate(P, V_j)           O += P V_j, P straight from the score registers
//
// The schedules in mainloop.cuh decide when each step runs relative to the copies and barriers.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashmma/attention/accumulator_walk.cuh"
#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/sm80/warp_mma.cuh"

namespace flashmma {
namespace sm80 {

template <class ConfigType, class Policy>
struct WarpAttention {
  using Config = ConfigType;
  using Element = typename Config::element_type;

  const Element* q_tile;  // the block's Q tile in shared memory
  int warp_first_row;     // first row of the warp's rows within the Q tile
  int lane;
  Policy policy;
  ScoreCoord origin;        // batch, head, and the query of the warp's first row (key unused)
  SequenceLengths lengths;
  IndexRange queries;       // the block's queries that exist
  float softmax_scale;
  // What the exponentials multiply raw scores by: softmax_scale * log2(e), or log2(e) alone
  // when the policy transforms scores (they are scaled before the transform).
  float exp2_scale;

  QFragments<Config> q_registers;  // unused (and removed by the compiler) unless kQInRegisters
  OutputFragments<Config> output;
  OnlineSoftmax row_stats[Config::kRowTiles];

  FLASHMMA_DEVICE void init() {
    fill_zero(output);
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) row_stats[rt].init();
  }

  // The scale of the row maxima in the LSE: scores are in softmax units unless transformed.
  FLASHMMA_DEVICE float lse_scale() const {
    return Policy::kTransformsScores ? 1.f : softmax_scale;
  }

  // Call once the Q tile is visible to the warp.
  FLASHMMA_DEVICE void load_q() {
    if constexpr (Config::kQInRegisters) {
      load_q_fragments<Config>(q_registers, q_tile, warp_first_row, lane);
    }
  }

  FLASHMMA_DEVICE void scores(ScoreFragments<Config>& s, const Element* k_tile) const {
    compute_scores<Config>(s, q_registers, q_tile, k_tile, warp_first_row, lane);
  }

  // Scores of the K/V tile whose first key is `first_key` to unnormalized probabilities.
  FLASHMMA_DEVICE void softmax(ScoreFragments<Config>& s, int64_t first_key) {
    if constexpr (Policy::kTransformsScores) transform(s, first_key);
    if (tile_needs_mask(policy, lengths, queries, first_key, Config::kBlockN)) {
      apply_mask(s, first_key);
    }
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
      row_stats[rt].update<Config::kRescaleBeforeExp>(s[rt], output[rt], exp2_scale);
    }
  }

  FLASHMMA_DEVICE void accumulate(const ScoreFragments<Config>& p, const Element* v_tile) {
    accumulate_output<Config>(output, p, v_tile, lane);
  }

 private:
  // Positions are at most 2^30 (score_policy.hpp), so the tile's first key fits in an int too.
  FLASHMMA_DEVICE ScoreCoord coord(int row, int key) const {
    return {origin.batch, origin.head, origin.query + row, key};
  }

  // Scaled scores to the policy's logits.
  FLASHMMA_DEVICE void transform(ScoreFragments<Config>& s, int64_t first_key) const {
    const int first = static_cast<int>(first_key);
    for_each_accumulator(s, lane, [&](int row, int column, float& score) {
      score = policy.transform(score * softmax_scale, coord(row, first + column), lengths);
    });
  }

  // Sets the scores of hidden (query, key) pairs, and of keys past the end, to -inf. The end
  // of the sequence is a column bound, compared in 32 bits; the key of a score is formed only for
  // a policy that masks. (A 64-bit key formed for every score let ptxas fold the tile index into
  // per-score address arithmetic and move the loop counter off the uniform datapath, which cost
  // the register-bound d = 128 tiles about 3% even on tiles that never take this branch.)
  FLASHMMA_DEVICE void apply_mask(ScoreFragments<Config>& s, int64_t first_key) const {
    const int64_t keys_left = lengths.seqlen_k - first_key;
    const int keys_in_tile =
        keys_left < Config::kBlockN ? static_cast<int>(keys_left) : Config::kBlockN;
    const int first = static_cast<int>(first_key);
    for_each_accumulator(s, lane, [&](int row, int column, float& score) {
      bool hidden = column >= keys_in_tile;
      if constexpr (Policy::kMasks) {
        // | rather than ||: a branch per score costs more than the test it would skip.
        hidden = hidden | !policy.visible(coord(row, first + column), lengths);
      }
      if (hidden) score = -INFINITY;
    });
  }
};

}  // namespace sm80
}  // namespace flashmma
