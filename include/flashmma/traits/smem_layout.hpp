// SPDX-License-Identifier: Apache-2.0
// Shared-memory layouts of a [rows, head_dim] tile of 16-bit elements.
//
// Every access to these tiles is a 16-byte chunk (8 elements): cp.async writes one chunk per
// thread, ldmatrix reads 8 rows of one chunk per 8x8 matrix. Shared memory has 32 banks of 4
// bytes, i.e. 8 chunk slots per 128-byte line; 8 rows read at the same logical chunk must land in
// 8 different slots to be served in one wavefront. Two layouts achieve that:
//
//   kPaddedRows:  row stride = head_dim + 8 elements. Consecutive rows shift by one slot.
//                 Wastes 16 bytes per row; works for every head dim.
//
//   kXorSwizzle:  row stride = head_dim (dense); chunk c of row r is stored at chunk
//                 (c & ~7) | ((c ^ r) & 7). Within each group of 8 chunks the 8 rows of a
//                 ldmatrix hit 8 distinct slots. Needs head_dim % 64 == 0 (whole groups of 8).
//
//     row r \ chunk:  0 1 2 3 4 5 6 7
//        0            0 1 2 3 4 5 6 7
//        1            1 0 3 2 5 4 7 6
//        2            2 3 0 1 6 7 4 5     (physical chunk of each logical chunk)
//        ...
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {

enum class SmemLayout : int { kPaddedRows, kXorSwizzle };

inline constexpr int kElementsPerChunk = 8;  // 16 bytes of a 16-bit type
inline constexpr int kChunksPerSwizzleGroup = 8;
inline constexpr int kPaddingElements = 8;

template <SmemLayout Layout, int HeadDim>
struct TileLayout {
  static_assert(HeadDim % kElementsPerChunk == 0,
                "HeadDim must be a multiple of 8: tiles move in 16-byte chunks");
  static_assert(Layout != SmemLayout::kXorSwizzle || HeadDim % 64 == 0,
                "SmemLayout::kXorSwizzle needs HeadDim % 64 == 0 (whole groups of 8 chunks); "
                "use SmemLayout::kPaddedRows for this head dim");

  // Elements between the starts of two consecutive rows.
  static constexpr int kRowStride =
      Layout == SmemLayout::kPaddedRows ? HeadDim + kPaddingElements : HeadDim;

  // Element offset of logical (row, col) inside the tile.
  static constexpr FLASHMMA_HOST_DEVICE int offset(int row, int col) {
    if constexpr (Layout == SmemLayout::kPaddedRows) {
      return row * kRowStride + col;
    } else {
      const int chunk = col / kElementsPerChunk;
      const int group_base = chunk & ~(kChunksPerSwizzleGroup - 1);
      const int swizzled = group_base | ((chunk ^ row) & (kChunksPerSwizzleGroup - 1));
      return row * kRowStride + swizzled * kElementsPerChunk + col % kElementsPerChunk;
    }
  }

  // Elements a tile of `rows` rows occupies.
  static constexpr FLASHMMA_HOST_DEVICE int tile_elements(int rows) { return rows * kRowStride; }
};

// Offsets of the 16 x 16 blocks a lane reads with ldmatrix .x4, with the lane's own part
// computed once. The lane points at logical (row0 + lane_row, col0 + lane_col), where row0 is a
// multiple of 8, col0 a multiple of 16, and lane_col 0 or 8 (traits/fragment_map.hpp).
//
// Why: offset() at every (row0, col0) of an unrolled loop leaves the compiler one address
// register per distinct col0 (and per row tile for Q), all live through the main loop: 32 of
// the 255 registers at d = 128. Here the lane part depends only on col0 % 64 under the XOR
// swizzle (4 parts) and on nothing under padded rows (1 part); the rest is a constant the
// ldmatrix takes as an immediate. Under the swizzle that holds because row0 % 8 == 0 leaves the
// XOR key (row % 8) to the lane, and col0 = 64 g + 16 q with 2 q + lane_col / 8 < 8 keeps the
// XOR inside group g:
//   chunk(row0 + lane_row, col0 + lane_col) = 8 g + ((2 q + lane_col / 8) ^ (lane_row % 8)).
template <SmemLayout Layout, int HeadDim>
class LdmatrixOffsets {
  using Tile = TileLayout<Layout, HeadDim>;
  static constexpr int kBlockCols = 16;

 public:
  static constexpr int kLaneParts = Layout == SmemLayout::kXorSwizzle ? 4 : 1;

  FLASHMMA_HOST_DEVICE LdmatrixOffsets(int lane_row, int lane_col) {
    for (int part = 0; part < kLaneParts; ++part) {
      lane_part_[part] = Tile::offset(lane_row, part * kBlockCols + lane_col);
    }
  }

  // Element offset of the lane's address in the block at (row0, col0).
  FLASHMMA_HOST_DEVICE int at(int row0, int col0) const {
    constexpr int kPeriod = kLaneParts * kBlockCols;  // columns after which the parts repeat
    return lane_part_[(col0 / kBlockCols) % kLaneParts] + row0 * Tile::kRowStride +
           (col0 - col0 % kPeriod);
  }

 private:
  int lane_part_[kLaneParts];
};

}  // namespace flashmma
