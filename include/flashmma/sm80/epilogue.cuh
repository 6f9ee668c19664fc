// SPDX-License-Identifier: Apache-2.0
// The end of a block: each warp normalizes its rows (O /= l, LSE = m + log l) and writes them,
// O staged through the warp's own rows of the Q tile (which no other warp reads) so that global
// stores are 16 bytes wide, LSE straight from registers.
#pragma once

#include <cstdint>

#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/sm80/tile_io.cuh"
#include "flashmma/sm80/warp_attention.cuh"
#include "flashmma/sm80/warp_mma.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {
namespace sm80 {

// O /= l for the warp's rows (times dropout's scale), and their LSE.
template <class Warp>
FLASHMMA_DEVICE void finalize_rows(Warp& warp,
                                   float (&lse)[Warp::Config::kRowTiles][kRowsPerThread]) {
#pragma unroll
  for (int rt = 0; rt < Warp::Config::kRowTiles; ++rt) {
    warp.row_stats[rt].finalize(warp.output[rt], warp.lse_scale(), lse[rt],
                                warp.score_softmax.output_scale());
  }
}

// `staging` is the block's Q tile; the caller has made sure no copy into it is still in flight.
// `seq` is the work tile's SequenceInfo.
// `head_dim` is the runtime head dim: columns past it are not written.
template <class Warp, class Element, class Sequence>
FLASHMMA_DEVICE void write_output(Warp& warp, Element* staging, const Sequence& seq,
                                  int head_dim) {
  using Config = typename Warp::Config;
  const int lane = warp.lane;
  float lse[Config::kRowTiles][kRowsPerThread];
  finalize_rows(warp, lse);

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

  const int64_t first_row = seq.row_of(warp.origin());
  store_warp_rows<Config>(staging, warp.warp_first_row, seq.o, seq.o_row_stride, first_row,
                          seq.rows, head_dim);
  if (seq.lse != nullptr && fragment::lane_in_quad(lane) == 0) {
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row = first_row + rt * kMmaM + fragment::lane_group(lane) + 8 * r;
        if (row < seq.rows) seq.lse[row * seq.row_map.index_step()] = lse[rt][r];
      }
    }
  }
}

// Split-KV: the warp's rows normalized over this split's keys, as fp32 partials of split `split`
// in the workspace (attention/split_kv.hpp), straight from registers: each thread holds pairs of
// adjacent columns, stored as 8 bytes. A split that saw no key of a row writes O = 0 and
// LSE = -inf, which the combine step weighs 0.
template <class Warp, class Sequence>
FLASHMMA_DEVICE void write_partial_output(Warp& warp, const SplitOutput& out, const Sequence& seq,
                                          unsigned split, int head_dim) {
  using Config = typename Warp::Config;
  const int lane = warp.lane;
  float lse[Config::kRowTiles][kRowsPerThread];
  finalize_rows(warp, lse);
  const int64_t first_row = seq.row_of(warp.origin());
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const int64_t tile_row = first_row + rt * kMmaM + fragment::lane_group(lane) + 8 * half;
      if (tile_row >= seq.rows) continue;
      const int64_t row = seq.row_output_index(tile_row);
#pragma unroll
      for (int t = 0; t < Config::kOutputTiles; ++t) {
        const int column = t * kMmaN + 2 * fragment::lane_in_quad(lane);
        if (column < head_dim) {
          *reinterpret_cast<float2*>(out.partial_o + out.layout.o_index(split, row, column)) =
              make_float2(warp.output[rt][t][2 * half], warp.output[rt][t][2 * half + 1]);
        }
      }
      if (fragment::lane_in_quad(lane) == 0) {
        out.partial_lse[out.layout.lse_index(split, row)] = lse[rt][half];
      }
    }
  }
}

}  // namespace sm80
}  // namespace flashmma
