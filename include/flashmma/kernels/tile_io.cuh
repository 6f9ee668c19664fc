// SPDX-License-Identifier: Apache-2.0
// Moving tiles between global and shared memory: block-wide cp.async loads with zero fill, and
// the warp-wide 16-byte stores of the epilogue.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/traits/smem_layout.hpp"

namespace flashmma {

// One [Rows, HeadDim] tile of a [seqlen, head_dim] matrix, starting at row `first_row`, into
// shared memory. Rows at or past `seqlen` and columns at or past `head_dim` are zero-filled, so
// partial tiles and head-dim padding contribute nothing to either GEMM. Every thread of the block
// calls this; consecutive threads copy consecutive 16-byte chunks of a row (coalesced).
// The copies are only issued: the caller commits and waits.
template <class Config, int Rows, class Element>
FLASHMMA_DEVICE void load_tile_async(Element* smem_tile, const Element* matrix, int64_t row_stride,
                                     int64_t first_row, int64_t seqlen, int head_dim) {
  using Layout = typename Config::layout;
  constexpr int kChunks = Rows * Config::kChunksPerRow;
  constexpr int kChunksPerThread = (kChunks + Config::kThreads - 1) / Config::kThreads;
#pragma unroll
  for (int i = 0; i < kChunksPerThread; ++i) {
    const int chunk_index = static_cast<int>(threadIdx.x) + i * Config::kThreads;
    if (kChunks % Config::kThreads != 0 && chunk_index >= kChunks) break;
    const int row = chunk_index / Config::kChunksPerRow;
    const int col = (chunk_index % Config::kChunksPerRow) * kElementsPerChunk;
    const int64_t global_row = first_row + row;
    const bool in_bounds = global_row < seqlen && col < head_dim;
    const Element* source = in_bounds ? matrix + global_row * row_stride + col : matrix;
    ptx::cp_async_cg_16(ptx::smem_address(smem_tile + Layout::offset(row, col)), source,
                        in_bounds);
  }
}

// The warp's 16 rows of a staged output tile, from shared memory to global memory in 16-byte
// stores (each row is written by consecutive lanes: coalesced). Rows at or past `seqlen` and
// columns at or past `head_dim` are not written.
template <class Config, class Element>
FLASHMMA_DEVICE void store_warp_rows(const Element* smem_tile, int first_tile_row, Element* matrix,
                                     int64_t row_stride, int64_t first_row, int64_t seqlen,
                                     int head_dim) {
  using Layout = typename Config::layout;
  constexpr int kRows = 16;
  constexpr int kChunks = kRows * Config::kChunksPerRow;
  constexpr int kWarpSize = 32;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
#pragma unroll
  for (int i = 0; i < (kChunks + kWarpSize - 1) / kWarpSize; ++i) {
    const int chunk_index = lane + i * kWarpSize;
    if (kChunks % kWarpSize != 0 && chunk_index >= kChunks) break;
    const int row = chunk_index / Config::kChunksPerRow;
    const int col = (chunk_index % Config::kChunksPerRow) * kElementsPerChunk;
    const int64_t global_row = first_row + row;
    if (global_row < seqlen && col < head_dim) {
      const uint4 chunk =
          *reinterpret_cast<const uint4*>(smem_tile + Layout::offset(first_tile_row + row, col));
      *reinterpret_cast<uint4*>(matrix + global_row * row_stride + col) = chunk;
    }
  }
}

}  // namespace flashmma
