// SPDX-License-Identifier: Apache-2.0
// One warp's share of a block: its BlockM / Warps query rows, their O accumulators and running
// softmax statistics, and the three steps it applies to every visible K/V tile:
//
//   scores(S, K_j)               S = Q K_j^T                              (warp_mma.cuh)
//   softmax(S, first_key)        transform and mask S as the score policy says, P = exp(S - m),
//                                rescale O                 (attention/score_softmax.cuh)
//   accumulate(P, V_j)           O += P V_j, P straight from the score registers
//
// The schedules in mainloop.cuh decide when each step runs relative to the copies and barriers.
#pragma once

#include <cstdint>

#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/attention/score_softmax.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/sm80/warp_mma.cuh"

namespace flashmma {
namespace sm80 {

// Rows: how the warp's rows map to (head, query) (sequence_info.hpp's QueryRows or PackableRows).
// Dropout: NoDropout or PhiloxDropout (attention/dropout.hpp).
template <class ConfigType, class Policy, class Rows = QueryRows, class Dropout = NoDropout>
struct WarpAttention {
  using Config = ConfigType;
  using Element = typename Config::element_type;

  const Element* q_tile;  // the block's Q tile in shared memory
  int warp_first_row;     // first row of the warp's rows within the Q tile
  int lane;
  // Policy, coordinates and scales: the transform, mask and softmax of every kernel.
  ScoreSoftmax<Policy, Config::kBlockN, Config::kRescaleBeforeExp, Rows, Dropout> score_softmax;

  QFragments<Config> q_registers;  // unused (and removed by the compiler) unless kQInRegisters
  OutputFragments<Config> output;
  OnlineSoftmax row_stats[Config::kRowTiles];

  FLASHMMA_DEVICE void init() {
    fill_zero(output);
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) row_stats[rt].init();
  }

  FLASHMMA_DEVICE float lse_scale() const { return score_softmax.lse_scale(); }
  // Batch, head, and the query of the warp's first row.
  FLASHMMA_DEVICE const ScoreCoord& origin() const { return score_softmax.origin; }

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
    score_softmax(s, output, row_stats, first_key);
  }

  FLASHMMA_DEVICE void accumulate(const ScoreFragments<Config>& p, const Element* v_tile) {
    accumulate_output<Config>(output, p, v_tile, lane);
  }
};

}  // namespace sm80
}  // namespace flashmma
