// SPDX-License-Identifier: Apache-2.0
// The end of a block: each warp normalizes its rows (O /= l, LSE = m + log l) and writes them,
// O staged through the warp's own rows of the Q tile (which no other warp reads) so that global
// stores are 16 bytes wide, LSE straight from registers.
#pragma once

#include <cstdint>

#include "flashmma/kernels/kernel_args.cuh"
#include "flashmma/kernels/online_softmax.cuh"
#include "flashmma/kernels/tile_io.cuh"
#include "flashmma/kernels/warp_attention.cuh"
#include "flashmma/kernels/warp_mma.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {
namespace detail {

// `staging` is the block's Q tile; the caller has made sure no copy into it is still in flight.
// `o_head` and `lse_head` point at row 0 of the block's (batch, head); lse_head may be null.
template <class Config, class Element>
FLASHMMA_DEVICE void write_output(WarpAttention<Config>& warp, Element* staging,
                                  const ForwardKernelArgs<Element>& args, Element* o_head,
                                  float* lse_head) {
  const int lane = warp.lane;
  float lse[Config::kRowTiles][kRowsPerThread];
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
    warp.row_stats[rt].finalize(warp.output[rt], args.softmax_scale, lse[rt]);
  }

  __syncwarp();  // the warp's last reads of its Q rows are done before they are overwritten
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
    for (int t = 0; t < Config::kOutputTiles; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const fragment::Coord c = fragment::c_coord(lane, 2 * half);
        *reinterpret_cast<uint32_t*>(
            staging + Config::layout::offset(warp.warp_first_row + rt * kMmaM + c.row,
                                             t * kMmaN + c.col)) =
            pack_pair<Element>(warp.output[rt][t][2 * half], warp.output[rt][t][2 * half + 1]);
      }
    }
  }
  __syncwarp();

  const int64_t first_row = warp.first_query + warp.warp_first_row;
  store_warp_rows<Config>(staging, warp.warp_first_row, o_head, args.o_strides.row, first_row,
                          args.seqlen_q, args.head_dim);
  if (lse_head != nullptr && fragment::lane_in_quad(lane) == 0) {
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row = first_row + rt * kMmaM + fragment::lane_group(lane) + 8 * r;
        if (row < args.seqlen_q) lse_head[row] = lse[rt][r];
      }
    }
  }
}

}  // namespace detail
}  // namespace flashmma
