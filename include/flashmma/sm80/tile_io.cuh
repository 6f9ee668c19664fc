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
namespace sm80 {

// Block-wide copy of [Rows, HeadDim] tiles of a [seqlen, head_dim] matrix into shared memory.
//
// Thread t copies the 16-byte chunks t, t + kThreads, t + 2 kThreads, ... of the tile, so
// consecutive threads copy consecutive chunks of a row (coalesced). When kThreads is a multiple
// of the chunks per row, a thread keeps one column and steps down kRowStep rows at a time, so
// its global addresses are one base plus multiples of kRowStep * row_stride. Its shared-memory
// offsets are one base plus compile-time constants too when the step keeps row % 8 (and so the
// swizzle) unchanged, or the rows are padded; otherwise each is computed from its row. The
// per-thread part is computed once per kernel, not per tile.
//
// Rows at or past the end of the sequence and columns at or past head_dim are zero-filled, so
// partial tiles and head-dim padding contribute nothing to either GEMM. The copies are only
// issued: the caller commits and waits.
template <class Config, int Rows>
class TileCopy {
  using Layout = typename Config::layout;
  static constexpr int kChunks = Rows * Config::kChunksPerRow;
  static constexpr bool kFixedColumn = Config::kThreads % Config::kChunksPerRow == 0;
  static constexpr int kRowStep = kFixedColumn ? Config::kThreads / Config::kChunksPerRow : 0;
  // Every thread's chunks all lie in rows below Rows.
  static constexpr bool kWholeRows =
      kFixedColumn ? Rows % (kFixedColumn ? kRowStep : 1) == 0 : kChunks % Config::kThreads == 0;
  static constexpr bool kAffineSmem = Config::kSmemLayout == SmemLayout::kPaddedRows ||
                                      kRowStep % kChunksPerSwizzleGroup == 0;

 public:
  FLASHMMA_DEVICE TileCopy(int64_t row_stride, int head_dim) : row_stride_(row_stride) {
    const int thread = static_cast<int>(threadIdx.x);
    first_row_ = thread / Config::kChunksPerRow;
    column_ = (thread % Config::kChunksPerRow) * kElementsPerChunk;
    column_in_bounds_ = column_ < head_dim;
    head_dim_ = head_dim;
    thread_offset_ = first_row_ * row_stride_ + column_;
  }

  // Copies rows [first_row, first_row + Rows) of `matrix`; only the first `rows_left` of them
  // exist (rows_left may exceed Rows).
  template <class Element>
  FLASHMMA_DEVICE void issue(Element* smem_tile, const Element* matrix, int64_t first_row,
                             int64_t rows_left) const {
    if constexpr (kFixedColumn) {
      // The tile's offset (the same for every thread) plus the thread's own, computed once: kept
      // apart so that the per-tile product stays on the uniform datapath. Written as one
      // product of the summed rows, the compiler multiplied per thread on every copy, which cost
      // the register-bound 256 x 64 d = 128 tile 3.5% on an H200.
      const Element* source = matrix + first_row * row_stride_ + thread_offset_;
      Element* const destination = smem_tile + Layout::offset(first_row_, column_);
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const int row = first_row_ + i * kRowStep;
        if (Rows % kRowStep != 0 && row >= Rows) break;
        const bool in_bounds = column_in_bounds_ && row < rows_left;
        Element* const chunk_destination =
            kAffineSmem ? destination + i * kRowStep * Layout::kRowStride
                        : smem_tile + Layout::offset(row, column_);
        ptx::cp_async_cg_16(ptx::smem_address(chunk_destination), in_bounds ? source : matrix,
                            in_bounds);
        source += kRowStep * row_stride_;
      }
    } else {
#pragma unroll
      for (int i = 0; i < kChunksPerThread; ++i) {
        const int chunk = static_cast<int>(threadIdx.x) + i * Config::kThreads;
        if (kChunks % Config::kThreads != 0 && chunk >= kChunks) break;
        const int row = chunk / Config::kChunksPerRow;
        const int column = (chunk % Config::kChunksPerRow) * kElementsPerChunk;
        const bool in_bounds = column < head_dim_ && row < rows_left;
        const Element* source = matrix + (first_row + row) * row_stride_ + column;
        ptx::cp_async_cg_16(ptx::smem_address(smem_tile + Layout::offset(row, column)),
                            in_bounds ? source : matrix, in_bounds);
      }
    }
  }

  // The same for a tile whose rows are not evenly spaced (a paged KV cache): row r of the tile
  // starts at row_address(r), a valid address for every r < Rows, asked for the first
  // `rows_left` rows only (the others are zero-filled). Every address is taken before the first
  // copy is issued, so that their loads overlap: taken one copy at a time, each copy waited for
  // its own, which cost pages of 16 keys 6-9% of their decoding speed on an H200.
  template <class Element, class RowAddress>
  FLASHMMA_DEVICE void issue_gathered(Element* smem_tile, RowAddress&& row_address,
                                      int64_t rows_left) const {
    const int rows = rows_left < Rows ? static_cast<int>(rows_left) : Rows;
    const Element* sources[kChunksPerThread];
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int row = chunk_row(i);
      sources[i] = row_address(kWholeRows || row < Rows ? row : 0) + chunk_column(i);
    }
#pragma unroll
    for (int i = 0; i < kChunksPerThread; ++i) {
      const int row = chunk_row(i);
      if (!kWholeRows && row >= Rows) break;
      const bool in_bounds =
          row < rows && (kFixedColumn ? column_in_bounds_ : chunk_column(i) < head_dim_);
      Element* const destination =
          kFixedColumn && kAffineSmem
              ? smem_tile + Layout::offset(first_row_, column_) + i * kRowStep * Layout::kRowStride
              : smem_tile + Layout::offset(row, chunk_column(i));
      ptx::cp_async_cg_16(ptx::smem_address(destination), sources[i], in_bounds);
    }
  }

 private:
  static constexpr int kChunksPerThread = (kChunks + Config::kThreads - 1) / Config::kThreads;

  // This thread's i-th chunk of a tile: its row (at or past Rows: the chunk does not exist) and
  // column.
  FLASHMMA_DEVICE int chunk_row(int i) const {
    if constexpr (kFixedColumn) {
      return first_row_ + i * kRowStep;
    } else {
      return (static_cast<int>(threadIdx.x) + i * Config::kThreads) / Config::kChunksPerRow;
    }
  }
  FLASHMMA_DEVICE int chunk_column(int i) const {
    if constexpr (kFixedColumn) {
      return column_;
    } else {
      return (static_cast<int>(threadIdx.x) + i * Config::kThreads) % Config::kChunksPerRow *
             kElementsPerChunk;
    }
  }

  int64_t row_stride_;
  int64_t thread_offset_;  // first_row_ * row_stride_ + column_
  int first_row_;
  int column_;
  int head_dim_;
  bool column_in_bounds_;
};

// The warp's kRowsPerWarp rows of a staged output tile, from shared memory to global memory in
// 16-byte stores (each row is written by consecutive lanes: coalesced). Rows at or past `seqlen`
// and columns at or past `head_dim` are not written.
template <class Config, class Element>
FLASHMMA_DEVICE void store_warp_rows(const Element* smem_tile, int first_tile_row, Element* matrix,
                                     int64_t row_stride, int64_t first_row, int64_t seqlen,
                                     int head_dim) {
  using Layout = typename Config::layout;
  constexpr int kChunks = Config::kRowsPerWarp * Config::kChunksPerRow;
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

}  // namespace sm80
}  // namespace flashmma
