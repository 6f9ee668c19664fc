// SPDX-License-Identifier: Apache-2.0
// The warp-level GEMMs of the backward pass on mma.sync, each on one m16 row tile of a warp:
//
//   rows_times_rows_t   acc[16, N]  = A[16 rows of a tile, HeadDim] B[N rows of a tile, HeadDim]^T
//                       S^T = K Q^T and dP^T = V dO^T (K, V, Q, dO in the [rows, HeadDim] tile
//                       layout of the config)
//   registers_times_tile acc[16, C] += A[16, K] (C fragments in registers) B[K rows, C columns]
//                       dV += P^T dO and dK += dS^T Q (P^T and dS^T straight from registers,
//                       as the forward's P V)
//   transposed_times_tile acc[16, C] = A[16, BlockN] B[BlockN, C columns], with A stored
//                       transposed in shared memory (dS^T, [BlockN, BlockM] padded rows)
//                       dQ = dS K
//
// Fragment layouts and ldmatrix sources: traits/fragment_map.hpp.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/ldmatrix.cuh"
#include "flashmma/ptx/mma.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/sm80/warp_mma.cuh"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {
namespace sm80 {

template <int kTiles>
FLASHMMA_DEVICE void fill_zero(float (&fragments)[kTiles][4]) {
#pragma unroll
  for (int t = 0; t < kTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) fragments[t][i] = 0.f;
  }
}

// acc = A[a_first_row, +16) B[0, 8 kTiles)^T over the head dim.
template <class Config, int kTiles, class Element>
FLASHMMA_DEVICE void rows_times_rows_t(float (&acc)[kTiles][4], const Element* a_tile,
                                       int a_first_row, const Element* b_tile, int lane) {
  static_assert(kTiles % 2 == 0, "B rows are loaded 16 at a time");
  fill_zero(acc);
  const BlockOffsets<Config> a_offsets = a_fragment_offsets<Config>(lane);
  const fragment::Coord source = fragment::ldmatrix_b_x4_source(lane);
  const BlockOffsets<Config> b_offsets(source.row, source.col);
#pragma unroll
  for (int slice = 0; slice < Config::kHeadDimSlices; ++slice) {
    uint32_t a[4];
    load_a_fragment<Config>(a, a_tile, a_offsets, a_first_row, slice);
#pragma unroll
    for (int pair = 0; pair < kTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4(b, ptx::smem_address(b_tile + b_offsets.at(pair * 16, slice * kMmaK)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair], a, b_first);
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair + 1], a, b_second);
    }
  }
}

// acc += A B[0, 8 kKTiles) x [first_column, + 8 kTiles): A's C fragments of key-tiles 2s and
// 2s + 1 form its A fragment of k16 slice s (fragment_map.hpp).
template <class Config, int kTiles, int kKTiles, class Element>
FLASHMMA_DEVICE void registers_times_tile(float (&acc)[kTiles][4], const float (&a)[kKTiles][4],
                                          const Element* b_tile, int first_column, int lane) {
  static_assert(kTiles % 2 == 0 && kKTiles % 2 == 0, "operands come in k16 / n16 steps");
  const fragment::Coord source = fragment::ldmatrix_b_trans_x4_source(lane);
  const BlockOffsets<Config> b_offsets(source.row, source.col);
#pragma unroll
  for (int slice = 0; slice < kKTiles / 2; ++slice) {
    const float(&low)[4] = a[2 * slice];
    const float(&high)[4] = a[2 * slice + 1];
    const uint32_t a_fragment[4] = {
        pack_pair<Element>(low[0], low[1]), pack_pair<Element>(low[2], low[3]),
        pack_pair<Element>(high[0], high[1]), pack_pair<Element>(high[2], high[3])};
#pragma unroll
    for (int pair = 0; pair < kTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(
          b, ptx::smem_address(b_tile + b_offsets.at(slice * kMmaK, first_column + pair * 16)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair], a_fragment, b_first);
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair + 1], a_fragment, b_second);
    }
  }
}

// acc = A B: A is rows [a_first_row, +16) of a [16 kKSlices... ] matrix stored transposed,
// a_t[k][row] with row stride kAStride elements; B is [k, first_column + 8 kTiles) of a
// [rows, HeadDim] tile in the config's layout. ldmatrix .trans turns each stored 8 x 8 block of
// A^T into the A fragment's block: lane L points at stored row (k) 8 (L / 16) + L % 8 of
// matrix L / 8, whose A rows start at 8 ((L / 8) % 2).
template <class Config, int kTiles, int kKSlices, int kAStride, class Element>
FLASHMMA_DEVICE void transposed_times_tile(float (&acc)[kTiles][4], const Element* a_t,
                                           int a_first_row, const Element* b_tile,
                                           int first_column, int lane) {
  static_assert(kTiles % 2 == 0, "B columns are loaded 16 at a time");
  fill_zero(acc);
  const Element* a_lane =
      a_t + (8 * (lane / 16) + lane % 8) * kAStride + a_first_row + 8 * ((lane / 8) % 2);
  const fragment::Coord source = fragment::ldmatrix_b_trans_x4_source(lane);
  const BlockOffsets<Config> b_offsets(source.row, source.col);
#pragma unroll
  for (int slice = 0; slice < kKSlices; ++slice) {
    uint32_t a[4];
    ptx::ldmatrix_x4_trans(a, ptx::smem_address(a_lane + slice * kMmaK * kAStride));
#pragma unroll
    for (int pair = 0; pair < kTiles / 2; ++pair) {
      uint32_t b[4];
      ptx::ldmatrix_x4_trans(
          b, ptx::smem_address(b_tile + b_offsets.at(slice * kMmaK, first_column + pair * 16)));
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair], a, b_first);
      ptx::mma_m16n8k16_acc<Element>(acc[2 * pair + 1], a, b_second);
    }
  }
}

}  // namespace sm80
}  // namespace flashmma
