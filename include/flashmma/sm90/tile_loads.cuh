// SPDX-License-Identifier: Apache-2.0
// What every Hopper kernel does to reach its tiles: the dynamic shared memory aligned for the
// 128B swizzle, and TMA loads through the rank-4 maps of sm90/tensor_maps.hpp ({head dim, rows,
// heads, batch}, boxes of 64 head-dim columns).
#pragma once

#include <cuda.h>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/ptx/sm90.cuh"
#include "flashmma/traits/sm90_tile_config.hpp"

namespace flashmma {
namespace sm90 {

// The first byte of dynamic shared memory at a swizzle atom (1024 bytes; the dynamic allocation
// is only 16-byte aligned, and the kernels' shared-memory sizes count the slack).
FLASHMMA_DEVICE unsigned char* swizzle_aligned(unsigned char* smem_raw) {
  const uint32_t raw_address = ptx::smem_address(smem_raw);
  const uint32_t aligned_address =
      (raw_address + ptx::sm90::kSwizzleAlignment - 1) & ~(ptx::sm90::kSwizzleAlignment - 1);
  return smem_raw + (aligned_address - raw_address);
}

// One box at TMA coordinates {column, row, head, batch} (positions are at most 2^30).
FLASHMMA_DEVICE void load_box(void* destination, const CUtensorMap* map, int column, int64_t row,
                              int64_t head, int64_t batch, uint64_t* barrier) {
  const int32_t coords[4] = {column, static_cast<int32_t>(row), static_cast<int32_t>(head),
                             static_cast<int32_t>(batch)};
  ptx::sm90::tma_load_tile<4>(destination, map, coords, barrier);
}

// kRows rows from `row` over kSubTiles sub-tiles of 64 head-dim columns, one box each: sub-tile
// d lands at destination + d * kRows * 128 bytes (the K-major operand tiles' layout).
template <int kRows, int kSubTiles>
FLASHMMA_DEVICE void load_rows(unsigned char* destination, const CUtensorMap* map, int64_t row,
                               int64_t head, int64_t batch, uint64_t* barrier) {
  constexpr int kSubTileRowBytes = kSm90SubTileElements * 2;  // 16-bit elements
#pragma unroll
  for (int d = 0; d < kSubTiles; ++d) {
    load_box(destination + d * kRows * kSubTileRowBytes, map, d * kSm90SubTileElements, row, head,
             batch, barrier);
  }
}

}  // namespace sm90
}  // namespace flashmma
