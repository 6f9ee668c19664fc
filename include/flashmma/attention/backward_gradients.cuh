// SPDX-License-Identifier: Apache-2.0
// Where every backward kernel's gradients go, whatever its GEMMs: a warp's accumulator fragments
// (the m16n8 C layout, which is also a warp's share of a wgmma accumulator: 16 rows, stacked
// along N; attention/accumulator_walk.cuh) written out once the block is done, and the fp32 dQ
// accumulator's atomic sums with the deterministic order around them.
//
//   add_dq_rows      a warp's 16 query rows of dQ, added with vector reductions
//   store_gradient   a warp's 16 key rows of dK or dV, stored (or added: accumulate_dkv)
//   DqTurn           the deterministic order of dQ's sums (params.deterministic): a block adds
//                    the dQ of a query tile once the last key tile before it that sees the tile
//                    has added its own, then records that it has. That earlier block was
//                    launched first and waits only on earlier ones, so every wait ends.
#pragma once

#include <cstdint>

#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/ordering.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/red.cuh"
#include "flashmma/traits/fragment_map.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// dQ of a warp's 16 query rows (from `first_query`) and kTiles n8 column tiles (from
// `first_column`), added to the fp32 accumulator rows of the head (row stride head_dim); rows
// past the sequence and columns past the head dim are skipped. A lane's two rows get one address
// and one predicate each, and every column is an immediate offset from it unless the head dim
// ends inside the warp's columns.
template <int kTiles>
FLASHMMA_DEVICE void add_dq_rows(float* accumulator, const float (&dq)[kTiles][4],
                                 int first_query, int first_column, int seqlen_q, int head_dim,
                                 int lane) {
  const fragment::Coord c = fragment::c_coord(lane, 0);
  const int query = first_query + c.row;
  float* const row = accumulator + static_cast<int64_t>(query) * head_dim + first_column + c.col;
  float* const row_below = row + 8 * head_dim;
  const bool all_columns = first_column + kTiles * kMmaN <= head_dim;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    if (query + 8 * half >= seqlen_q) continue;
    float* const target = half == 0 ? row : row_below;
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
      if (all_columns || first_column + t * kMmaN + c.col < head_dim) {
        ptx::red_add_pair(target + t * kMmaN, dq[t][2 * half], dq[t][2 * half + 1]);
      }
    }
  }
}

// A warp's 16 rows of dK or dV (from `first_key`) and kTiles n8 column tiles (from
// `first_column`), as element pairs; with `accumulate`, added to what the rows hold.
template <class Element, int kTiles>
FLASHMMA_DEVICE void store_gradient(Element* rows, int64_t row_stride,
                                    const float (&grad)[kTiles][4], int first_key,
                                    int first_column, int seqlen_k, int head_dim,
                                    bool accumulate, int lane) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const fragment::Coord c = fragment::c_coord(lane, 2 * half);
      const int key = first_key + c.row;
      const int column = first_column + t * kMmaN + c.col;
      if (key >= seqlen_k || column >= head_dim) continue;
      uint32_t* pair = reinterpret_cast<uint32_t*>(rows + key * row_stride + column);
      float first = grad[t][2 * half];
      float second = grad[t][2 * half + 1];
      if (accumulate) {
        const float2 old = unpack_pair<Element>(*pair);
        first += old.x;
        second += old.y;
      }
      *pair = pack_pair<Element>(first, second);
    }
  }
}

// The deterministic order around one query tile's dQ sums. The threads that add dQ call wait()
// before and pass() after, all of them; `leader` is one of them, and `sync` a barrier over all
// of them (__syncthreads, or a named barrier where a producer warpgroup does not add).
template <class Sync>
struct DqTurn {
  int32_t* order;  // the query tile's counter
  bool leader;
  Sync sync;

  template <class Policy>
  FLASHMMA_DEVICE void wait(const Policy& policy, const SequenceLengths& lengths, int key_tile,
                            int query_tile, int block_n, int block_m) const {
    if (leader) {
      const int32_t turn = static_cast<int32_t>(
          previous_key_tile_seeing(policy, lengths, key_tile, query_tile, block_n, block_m) + 1);
      while (ptx::load_acquire(order) != turn) {
      }
    }
    sync();
  }
  FLASHMMA_DEVICE void pass(int key_tile) const {
    __threadfence();  // this thread's reductions, before the flag
    sync();           // every thread's
    if (leader) ptx::store_release(order, key_tile + 1);
  }
};

template <class Sync>
FLASHMMA_DEVICE DqTurn<Sync> make_dq_turn(int32_t* order, bool leader, Sync sync) {
  return DqTurn<Sync>{order, leader, sync};
}

}  // namespace flashmma
