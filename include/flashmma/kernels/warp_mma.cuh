// SPDX-License-Identifier: Apache-2.0
// The two warp-level GEMMs of attention, on a warp's 16 query rows:
//   scores[16, BlockN]  = Q[16, HeadDim] K_tile[BlockN, HeadDim]^T
//   output[16, HeadDim] += P[16, BlockN] V_tile[BlockN, HeadDim]
// Operands come from shared memory through ldmatrix (Q, K, V) or from registers (Q when kept
// there, P always). Fragment layouts: traits/fragment_map.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/ldmatrix.cuh"
#include "flashmma/ptx/mma.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {

// The A fragment of k16 slice `slice` of the warp's 16 rows of a row-major tile.
template <class Config, class Element>
FLASHMMA_DEVICE void load_a_fragment(uint32_t (&a)[4], const Element* tile, int first_row,
                                     int slice, int lane) {
  const fragment::Coord source = fragment::ldmatrix_a_x4_source(lane);
  ptx::ldmatrix_x4(a, ptx::smem_address(tile + Config::layout::offset(
                                               first_row + source.row, slice * 16 + source.col)));
}

template <class Config, class Element>
FLASHMMA_DEVICE void load_q_fragments(uint32_t (&q)[Config::kHeadDimSlices][4],
                                      const Element* q_tile, int first_row, int lane) {
#pragma unroll
  for (int slice = 0; slice < Config::kHeadDimSlices; ++slice) {
    load_a_fragment<Config>(q[slice], q_tile, first_row, slice, lane);
  }
}

// One k16 slice of Q K^T for every pair of n8 score tiles.
template <class Config, class Element>
FLASHMMA_DEVICE void qk_slice(float (&scores)[Config::kScoreTiles][4], const uint32_t (&a)[4],
                              const Element* k_tile, int slice, int lane) {
  const fragment::Coord source = fragment::ldmatrix_b_x4_source(lane);
#pragma unroll
  for (int pair = 0; pair < Config::kScoreTiles / 2; ++pair) {
    uint32_t b[4];
    ptx::ldmatrix_x4(b, ptx::smem_address(k_tile + Config::layout::offset(
                                               pair * 16 + source.row, slice * 16 + source.col)));
    const uint32_t b_first[2] = {b[0], b[1]};
    const uint32_t b_second[2] = {b[2], b[3]};
    ptx::mma_m16n8k16_acc<Element>(scores[2 * pair], a, b_first);
    ptx::mma_m16n8k16_acc<Element>(scores[2 * pair + 1], a, b_second);
  }
}

// scores = Q K^T for one K tile. Q comes from registers when the config keeps it there.
template <class Config, class Element>
FLASHMMA_DEVICE void compute_scores(float (&scores)[Config::kScoreTiles][4],
                                    const uint32_t (&q_registers)[Config::kHeadDimSlices][4],
                                    const Element* q_tile, const Element* k_tile, int first_row,
                                    int lane) {
#pragma unroll
  for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) scores[t][i] = 0.f;
  }
#pragma unroll
  for (int slice = 0; slice < Config::kHeadDimSlices; ++slice) {
    if constexpr (Config::kQInRegisters) {
      qk_slice<Config>(scores, q_registers[slice], k_tile, slice, lane);
    } else {
      uint32_t a[4];
      load_a_fragment<Config>(a, q_tile, first_row, slice, lane);
      qk_slice<Config>(scores, a, k_tile, slice, lane);
    }
  }
}

// Two fp32 values as one register of two 16-bit elements (the first in the low half).
template <class Element>
FLASHMMA_DEVICE uint32_t pack_pair(float first, float second);

template <>
FLASHMMA_DEVICE uint32_t pack_pair<__half>(float first, float second) {
  const __half2 pair = __floats2half2_rn(first, second);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

template <>
FLASHMMA_DEVICE uint32_t pack_pair<__nv_bfloat16>(float first, float second) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(first, second);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// output += P V for one V tile. P is read straight from the score registers: the C fragments
// of score tiles 2s and 2s + 1 form the A fragment of key slice s.
template <class Config, class Element>
FLASHMMA_DEVICE void accumulate_output(float (&output)[Config::kOutputTiles][4],
                                       const float (&probabilities)[Config::kScoreTiles][4],
                                       const Element* v_tile, int lane) {
  const fragment::Coord source = fragment::ldmatrix_b_trans_x4_source(lane);
#pragma unroll
  for (int slice = 0; slice < Config::kKeySlices; ++slice) {
    const float(&low)[4] = probabilities[2 * slice];
    const float(&high)[4] = probabilities[2 * slice + 1];
    const uint32_t a[4] = {pack_pair<Element>(low[0], low[1]), pack_pair<Element>(low[2], low[3]),
                           pack_pair<Element>(high[0], high[1]),
                           pack_pair<Element>(high[2], high[3])};
#pragma unroll
    for (int pair = 0; pair < Config::kOutputTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(b, ptx::smem_address(v_tile + Config::layout::offset(
                                                      slice * 16 + source.row,
                                                      pair * 16 + source.col)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
      ptx::mma_m16n8k16_acc<Element>(output[2 * pair], a, b_first);
      ptx::mma_m16n8k16_acc<Element>(output[2 * pair + 1], a, b_second);
    }
  }
}

}  // namespace flashmma
