// SPDX-License-Identifier: Apache-2.0
// One warp's share of a block: its BlockM / Warps query rows, their O accumulators and running
// softmax statistics, and the three steps it applies to every visible K/V tile:
//
//   scores(S, K_j)       S = Q K_j^T                              (warp_mma.cuh)
//   softmax(S, j)        mask S where the tile needs it, P = exp(S - m), rescale O
//   accumulate(P, V_j)   O += P V_j, P straight from the score registers
//
// The schedules in mainloop.cuh decide when each step runs relative to the copies and barriers.
#pragma once

#include <cmath>
#include <cstdint>

#include "flashmma/kernels/mask.cuh"
#include "flashmma/kernels/online_softmax.cuh"
#include "flashmma/kernels/warp_mma.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {
namespace detail {

template <class Config>
struct WarpAttention {
  using Element = typename Config::element_type;

  const Element* q_tile;  // the block's Q tile in shared memory
  int warp_first_row;     // first row of the warp's rows within the Q tile
  int lane;
  AttentionMask mask;
  int64_t first_query;  // absolute row of the block's first query
  float scale_log2;     // softmax_scale * log2(e)

  QFragments<Config> q_registers;  // unused (and removed by the compiler) unless kQInRegisters
  OutputFragments<Config> output;
  OnlineSoftmax row_stats[Config::kRowTiles];

  FLASHMMA_DEVICE void init() {
    fill_zero(output);
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) row_stats[rt].init();
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

  // Scores of K/V tile `tile` to unnormalized probabilities, in place.
  FLASHMMA_DEVICE void softmax(ScoreFragments<Config>& s, int tile) {
    const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;
    if (mask.tile_needs_mask(first_query, first_key, Config::kBlockN)) {
      apply_mask(s, first_query + warp_first_row, first_key);
    }
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
      row_stats[rt].update<Config::kRescaleBeforeExp>(s[rt], output[rt], scale_log2);
    }
  }

  FLASHMMA_DEVICE void accumulate(const ScoreFragments<Config>& p, const Element* v_tile) {
    accumulate_output<Config>(output, p, v_tile, lane);
  }

 private:
  // Sets the scores of hidden (query, key) pairs to -inf. `row0` is the absolute row of the
  // warp's first row, `key0` the absolute key of the tile's first column.
  FLASHMMA_DEVICE void apply_mask(ScoreFragments<Config>& s, int64_t row0, int64_t key0) const {
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
      for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
        for (int reg = 0; reg < 4; ++reg) {
          const fragment::Coord c = fragment::c_coord(lane, reg);
          if (!mask.visible(row0 + rt * kMmaM + c.row, key0 + t * kMmaN + c.col)) {
            s[rt][t][reg] = -INFINITY;
          }
        }
      }
    }
  }
};

}  // namespace detail
}  // namespace flashmma
