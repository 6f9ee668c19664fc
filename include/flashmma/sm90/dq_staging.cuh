// SPDX-License-Identifier: Apache-2.0
// dQ of a query tile on its way to the fp32 accumulator, in the Hopper backward: each consumer
// warpgroup stores its wgmma accumulators into a staging tile in shared memory, and one thread per
// row then adds the row's run of columns to the accumulator with one bulk reduction
// (cp.reduce.async.bulk ... add.f32, ptx/sm90/tma.cuh).
//
// Why not the portable kernel's vector reductions (add_dq_rows: 8 bytes per thread and
// instruction, 32 of them per thread and step at d = 256): on the H200 at d = 256 the kernel ran
// at 273-289 TFLOP/s with them and 529-555 with no dQ sums at all (same build otherwise, tuning
// log step 43), so the sums, not the GEMMs, set its pace; a bulk reduction hands L2 whole rows.
//
// Rows are kPitch floats apart, 4 more than the tile's columns: the 8 rows of a warp's fragment
// store then start 4 banks apart, and its 256 bytes take two wavefronts, the fewest they can.
// The bulk reductions read the rows as they are (contiguous runs), so the pad is not swizzling.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/sm90/tma.cuh"
#include "flashmma/traits/fragment_map.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {
namespace sm90 {

template <int kPitch>
struct DqStagingTile {
  static_assert(kPitch % 4 == 0, "staging rows must start 16-byte aligned (bulk reductions)");
  float* base;  // 16-byte aligned

  // A warp's 16 rows from `first_row` and kTiles n8 column tiles from `first_column` (the m16n8
  // C layout; a warpgroup's wgmma accumulators are its four warps' shares).
  template <int kTiles>
  FLASHMMA_DEVICE void store(const float (&dq)[kTiles][4], int first_row, int first_column,
                             int lane) const {
    const fragment::Coord c = fragment::c_coord(lane, 0);
    float* const row = base + (first_row + c.row) * kPitch + first_column + c.col;
#pragma unroll
    for (int half = 0; half < 2; ++half) {
#pragma unroll
      for (int t = 0; t < kTiles; ++t) {
        *reinterpret_cast<float2*>(row + half * 8 * kPitch + t * kMmaN) =
            make_float2(dq[t][2 * half], dq[t][2 * half + 1]);
      }
    }
  }

  // Adds the tile row `row`'s columns [first_column, first_column + columns), clipped to
  // head_dim (a multiple of 8: the run stays a multiple of 16 bytes), to `accumulator_row` (the
  // accumulator's row, 16-byte aligned). The issuing thread commits and waits (tma_store_*).
  FLASHMMA_DEVICE void add_row(float* accumulator_row, int row, int first_column, int columns,
                               int head_dim) const {
    const int end = first_column + columns < head_dim ? first_column + columns : head_dim;
    if (end <= first_column) return;
    ptx::sm90::bulk_reduce_add(accumulator_row + first_column, base + row * kPitch + first_column,
                               static_cast<uint32_t>(end - first_column) * sizeof(float));
  }
};

}  // namespace sm90
}  // namespace flashmma
