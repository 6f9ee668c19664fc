// SPDX-License-Identifier: Apache-2.0
// The shared-memory swizzles that TMA writes and wgmma reads (sm_90).
//
// Both move data in 16-byte chunks. A swizzled tile is cut into rows of one "span" (32, 64 or 128
// bytes); within each group of 8 rows the chunks of a row are permuted by XOR-ing the chunk index
// with bits of the row index, so that 8 rows read at the same logical chunk hit 8 different bank
// slots. The permutation is a function of the shared-memory address bits alone: the hardware
// applies it to absolute addresses, which is why every swizzled tile starts on a
// kSwizzleAlignment boundary and offsets here are taken from such a base.
//
//   kSwizzle128B: rows of 128 B (8 chunks), atom 8 rows = 1024 B. Chunk c of row r -> c ^ (r % 8).
//
//       row \ chunk   0 1 2 3 4 5 6 7
//         0           0 1 2 3 4 5 6 7
//         1           1 0 3 2 5 4 7 6
//         2           2 3 0 1 6 7 4 5      (physical chunk of each logical chunk)
//         ...
//         7           7 6 5 4 3 2 1 0
//
//   kSwizzle64B:  rows of 64 B (4 chunks), atom 512 B.  Chunk c of row r -> c ^ (r / 2 % 4).
//   kSwizzle32B:  rows of 32 B (2 chunks), atom 256 B.  Chunk c of row r -> c ^ (r / 4 % 2).
//   kNone:        no permutation.
//
// In address bits: the 128B, 64B and 32B swizzles XOR bits [7, 10), [7, 9) and [7, 8) of the
// byte offset into bits [4, 7), [4, 6) and [4, 5) (CuTe's Swizzle<3,4,3>, <2,4,3>, <1,4,3>).
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

enum class Swizzle : int { kNone, k32B, k64B, k128B };

// Every swizzled tile starts at a multiple of this (the 128B atom; the smaller atoms divide it).
// Measured on the H200: a tile TMA wrote at 1024k + 512 was read correctly only with the
// descriptor's base offset 0, so tiles are simply kept aligned.
inline constexpr uint32_t kSwizzleAlignment = 1024;
inline constexpr uint32_t kChunkBytes = 16;  // the unit every swizzle permutes

// Bytes of one swizzled row: the span its chunks are permuted within. For kNone, one 16-byte
// chunk (the row of a core matrix, the unswizzled layout's unit).
FLASHMMA_HOST_DEVICE constexpr uint32_t swizzle_span_bytes(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::k32B: return 32;
    case Swizzle::k64B: return 64;
    case Swizzle::k128B: return 128;
    default: return kChunkBytes;
  }
}

// The physical byte offset of logical byte offset `offset` from a kSwizzleAlignment-aligned base.
// The row-index bits (from bit 7 up) select which chunk bits (from bit 4 up) flip; the byte
// within a chunk never moves.
FLASHMMA_HOST_DEVICE constexpr uint32_t swizzle_byte_offset(Swizzle swizzle, uint32_t offset) {
  constexpr uint32_t kRowBitsShift = 3;  // row bits [7, ..) land on chunk bits [4, ..)
  switch (swizzle) {
    case Swizzle::k32B: return offset ^ ((offset & 0x080u) >> kRowBitsShift);
    case Swizzle::k64B: return offset ^ ((offset & 0x180u) >> kRowBitsShift);
    case Swizzle::k128B: return offset ^ ((offset & 0x380u) >> kRowBitsShift);
    default: return offset;
  }
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
