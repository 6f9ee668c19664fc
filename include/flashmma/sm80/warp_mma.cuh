// SPDX-License-Identifier: Apache-2.0
// The two warp-level GEMMs of attention, on a warp's R = BlockM / Warps query rows:
//   scores[R, BlockN]  = Q[R, HeadDim] K_tile[BlockN, HeadDim]^T
//   output[R, HeadDim] += P[R, BlockN] V_tile[BlockN, HeadDim]
// Operands come from shared memory through ldmatrix (Q, K, V) or from registers (Q when kept
// there, P always). Fragment layouts: traits/fragment_map.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/ldmatrix.cuh"
#include "flashmma/ptx/mma.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/traits/fragment_map.hpp"
#include "flashmma/traits/smem_layout.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {
namespace sm80 {

// Accumulators of a warp: one set of C fragments per m16 row tile.
template <class Config>
using ScoreFragments = float[Config::kRowTiles][Config::kScoreTiles][4];
template <class Config>
using OutputFragments = float[Config::kRowTiles][Config::kOutputTiles][4];
template <class Config>
using QFragments = uint32_t[Config::kRowTiles][Config::kHeadDimSlices][4];

template <int Rows, int Cols>
FLASHMMA_DEVICE void fill_zero(float (&fragments)[Rows][Cols][4]) {
#pragma unroll
  for (int r = 0; r < Rows; ++r) {
#pragma unroll
    for (int c = 0; c < Cols; ++c) {
#pragma unroll
      for (int i = 0; i < 4; ++i) fragments[r][c][i] = 0.f;
    }
  }
}

template <class Config>
using BlockOffsets = LdmatrixOffsets<Config::kSmemLayout, Config::kHeadDim>;

// Where this lane points ldmatrix for the A fragments of a row-major tile (Q).
template <class Config>
FLASHMMA_DEVICE BlockOffsets<Config> a_fragment_offsets(int lane) {
  const fragment::Coord source = fragment::ldmatrix_a_x4_source(lane);
  return BlockOffsets<Config>(source.row, source.col);
}

// The A fragment of k16 slice `slice` of the 16 rows starting at `first_row` (a multiple of 16)
// of a row-major tile.
template <class Config, class Element>
FLASHMMA_DEVICE void load_a_fragment(uint32_t (&a)[4], const Element* tile,
                                     const BlockOffsets<Config>& offsets, int first_row,
                                     int slice) {
  ptx::ldmatrix_x4(a, ptx::smem_address(tile + offsets.at(first_row, slice * kMmaK)));
}

template <class Config, class Element>
FLASHMMA_DEVICE void load_q_fragments(QFragments<Config>& q, const Element* q_tile,
                                      int warp_first_row, int lane) {
  const BlockOffsets<Config> offsets = a_fragment_offsets<Config>(lane);
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
    for (int slice = 0; slice < Config::kHeadDimSlices; ++slice) {
      load_a_fragment<Config>(q[rt][slice], q_tile, offsets, warp_first_row + rt * kMmaM, slice);
    }
  }
}

// scores = Q K^T for one K tile. Q comes from registers when the config keeps it there, else
// from shared memory one k16 slice at a time. Each K fragment pair feeds every row tile.
template <class Config, class Element>
FLASHMMA_DEVICE void compute_scores(ScoreFragments<Config>& scores,
                                    const QFragments<Config>& q_registers, const Element* q_tile,
                                    const Element* k_tile, int warp_first_row, int lane) {
  fill_zero(scores);
  const BlockOffsets<Config> q_offsets = a_fragment_offsets<Config>(lane);
  const fragment::Coord source = fragment::ldmatrix_b_x4_source(lane);
  const BlockOffsets<Config> k_offsets(source.row, source.col);
#pragma unroll
  for (int slice = 0; slice < Config::kHeadDimSlices; ++slice) {
    uint32_t q_slice[Config::kRowTiles][4];
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
      if constexpr (Config::kQInRegisters) {
#pragma unroll
        for (int i = 0; i < 4; ++i) q_slice[rt][i] = q_registers[rt][slice][i];
      } else {
        load_a_fragment<Config>(q_slice[rt], q_tile, q_offsets, warp_first_row + rt * kMmaM,
                                slice);
      }
    }
#pragma unroll
    for (int pair = 0; pair < Config::kScoreTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, ptx::smem_address(k_tile + k_offsets.at(pair * 16, slice * kMmaK)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
#pragma unroll
      for (int rt = 0; rt < Config::kRowTiles; ++rt) {
        ptx::mma_m16n8k16_acc<Element>(scores[rt][2 * pair], q_slice[rt], b_first);
        ptx::mma_m16n8k16_acc<Element>(scores[rt][2 * pair + 1], q_slice[rt], b_second);
      }
    }
  }
}

// output += P V for one V tile. P is read straight from the score registers: the C fragments
// of score tiles 2s and 2s + 1 form the A fragment of key slice s. Each V fragment pair feeds
// every row tile.
template <class Config, class Element>
FLASHMMA_DEVICE void accumulate_output(OutputFragments<Config>& output,
                                       const ScoreFragments<Config>& probabilities,
                                       const Element* v_tile, int lane) {
  const fragment::Coord source = fragment::ldmatrix_b_trans_x4_source(lane);
  const BlockOffsets<Config> v_offsets(source.row, source.col);
#pragma unroll
  for (int slice = 0; slice < Config::kKeySlices; ++slice) {
    uint32_t a[Config::kRowTiles][4];
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
      const float(&low)[4] = probabilities[rt][2 * slice];
      const float(&high)[4] = probabilities[rt][2 * slice + 1];
      a[rt][0] = pack_pair<Element>(low[0], low[1]);
      a[rt][1] = pack_pair<Element>(low[2], low[3]);
      a[rt][2] = pack_pair<Element>(high[0], high[1]);
      a[rt][3] = pack_pair<Element>(high[2], high[3]);
    }
#pragma unroll
    for (int pair = 0; pair < Config::kOutputTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b,
                             ptx::smem_address(v_tile + v_offsets.at(slice * kMmaK, pair * 16)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
#pragma unroll
      for (int rt = 0; rt < Config::kRowTiles; ++rt) {
        ptx::mma_m16n8k16_acc<Element>(output[rt][2 * pair], a[rt], b_first);
        ptx::mma_m16n8k16_acc<Element>(output[rt][2 * pair + 1], a[rt], b_second);
      }
    }
  }
}

}  // namespace sm80
}  // namespace flashmma
