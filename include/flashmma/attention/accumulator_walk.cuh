// SPDX-License-Identifier: Apache-2.0
// The one walk over a warp's accumulator tiles: every (row, column, value) a lane holds, with
// the row and column relative to the tiles' first. The score mask and the score transforms run
// on it. The layout is that of the m16n8 C fragment (traits/fragment_map.hpp), which is also the
// per-warp layout of Hopper's wgmma m64nN accumulators (16 rows per warp, stacked along N).
#pragma once

#include "flashmma/macros.hpp"
#include "flashmma/traits/fragment_map.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// Calls visit(index, row, column) for each element of accumulators shaped
// [kRowTiles][kColumnTiles][4], tiles of 16 x 8 (row tile rt covers rows [16 rt, 16 rt + 16),
// column tile t columns [8 t, 8 t + 8)); index names the element, for any number of arrays of
// that shape (its fields are compile-time constants once the loops unroll).
struct AccumulatorIndex {
  int rt;   // row tile
  int t;    // column tile
  int reg;  // register of the C fragment
};

template <int kRowTiles, int kColumnTiles, class Visitor>
FLASHMMA_DEVICE void for_each_accumulator_index(int lane, Visitor&& visit) {
#pragma unroll
  for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
    for (int t = 0; t < kColumnTiles; ++t) {
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) {
        const fragment::Coord c = fragment::c_coord(lane, reg);
        visit(AccumulatorIndex{rt, t, reg}, rt * kMmaM + c.row, t * kMmaN + c.col);
      }
    }
  }
}

// Calls visit(row, column, value&) for each element of acc[kRowTiles][kColumnTiles][4].
template <int kRowTiles, int kColumnTiles, class Visitor>
FLASHMMA_DEVICE void for_each_accumulator(float (&acc)[kRowTiles][kColumnTiles][4], int lane,
                                          Visitor&& visit) {
  for_each_accumulator_index<kRowTiles, kColumnTiles>(
      lane, [&](const AccumulatorIndex& i, int row, int column) {
        visit(row, column, acc[i.rt][i.t][i.reg]);
      });
}

}  // namespace flashmma
