// SPDX-License-Identifier: Apache-2.0
// Where a wgmma operand tile of 16-bit elements lives in shared memory, and the descriptor of each
// of its k16 slices: the canonical layouts wgmma reads (the same ones TMA writes with the same
// swizzle), so a kernel places, loads and describes a tile from one definition.
//
// A tile is `kMnExtent` x `kKExtent` elements: M x K for A, N x K for B (element (mn, k)).
//   K-major: K is contiguous (Q and K of Q K^T).
//   MN-major: M or N is contiguous (V as the B of P V, N = head dim: wgmma's imm-trans-b = 1;
//   the backward's dS^T tile as the A of dQ = dS K, M = queries: imm-trans-a = 1).
//
// K-major, swizzled (span S = 32, 64 or 128 bytes, T = S / 2 elements):
//   the K extent is cut into sub-tiles of T columns; sub-tile j holds kMnExtent rows of S bytes,
//   row mn at byte j * kMnExtent * S + mn * S, swizzled (swizzle.hpp).
//   SBO = 8 * S (from one 8-row group to the next); LBO unused (a k16 slice lies in one row of S
//   bytes; encoded as 1, which the hardware ignores: measured for 128B).
//   Slice s starts at sub-tile 16 s / T, byte (16 s % T) * 2: for 128B, +32 B per slice and the
//   next sub-tile every 4 slices.
// K-major, unswizzled: core matrices of 8 rows x 16 bytes (8 x 8 elements, 128 contiguous bytes);
//   the K extent / 8 core matrices of an 8-row group follow each other.
//   LBO = 128 (between the two K-adjacent core matrices of a slice), SBO = kKExtent * 16 (between
//   8-row groups); slice s starts at 256 s.
// MN-major, swizzled: the MN extent is cut into chunks of T columns; chunk j holds kKExtent rows
//   (one per k) of S bytes, row k at j * kKExtent * S + k * S, swizzled.
//   LBO = kKExtent * S (between MN chunks), SBO = 8 * S (between groups of 8 k); slice s starts at
//   16 s * S. (LBO and SBO swap roles against K-major; the unswizzled MN-major layout swaps them
//   once more and is not offered here.)
//
// Measured on the H200: 128B K-major A and B, 128B MN-major B, unswizzled K-major. MN-major A
// follows the MN-major B rule (tests/gpu/test_sm90_wgmma_ss.cu). The 32B and
// 64B forms follow the same rule and are checked by tests/gpu/test_sm90_wgmma_ss.cu.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/sm90/smem_descriptor.hpp"
#include "flashmma/ptx/sm90/swizzle.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

// Which extent of an operand is contiguous. The value is wgmma's imm-trans-a/b operand.
enum class Major : int { kK = 0, kMN = 1 };

inline constexpr int kOperandElementBytes = 2;  // fp16, bf16
inline constexpr int kWgmmaK = 16;              // K of one wgmma on 16-bit inputs
inline constexpr int kCoreMatrixRows = 8;       // rows of a core matrix, and of a swizzle atom
inline constexpr uint32_t kCoreMatrixBytes = 128;

template <Major kMajor, Swizzle kSwizzle, int kMnExtent, int kKExtent>
struct OperandTile {
  static_assert(kKExtent > 0 && kKExtent % kWgmmaK == 0,
                "OperandTile: the K extent must be a positive multiple of 16 (wgmma's k16)");
  static_assert(kMnExtent > 0 && kMnExtent % kCoreMatrixRows == 0,
                "OperandTile: the M or N extent must be a positive multiple of 8");
  static_assert(kMajor == Major::kK || kSwizzle != Swizzle::kNone,
                "OperandTile: an MN-major tile needs a 32B, 64B or 128B swizzle");

  static constexpr Major kMajorLayout = kMajor;
  static constexpr Swizzle kSwizzleLayout = kSwizzle;
  static constexpr int kMnSize = kMnExtent;
  static constexpr int kKSize = kKExtent;
  static constexpr uint32_t kSpanBytes = swizzle_span_bytes(kSwizzle);
  static constexpr int kSpanElements = static_cast<int>(kSpanBytes) / kOperandElementBytes;
  static constexpr int kKSteps = kKExtent / kWgmmaK;

  // Bytes the tile occupies: whole sub-tiles or chunks (a partly used one counts whole).
  static constexpr uint32_t kBytes =
      kSwizzle == Swizzle::kNone
          ? static_cast<uint32_t>(kMnExtent * kKExtent * kOperandElementBytes)
      : kMajor == Major::kK
          ? static_cast<uint32_t>((kKExtent + kSpanElements - 1) / kSpanElements) * kMnExtent *
                kSpanBytes
          : static_cast<uint32_t>((kMnExtent + kSpanElements - 1) / kSpanElements) * kKExtent *
                kSpanBytes;

  static constexpr uint32_t kLeadingByteOffset =
      kSwizzle == Swizzle::kNone ? kCoreMatrixBytes
      : kMajor == Major::kK      ? kChunkBytes  // unused by the hardware; field value 1
                                 : static_cast<uint32_t>(kKExtent) * kSpanBytes;
  static constexpr uint32_t kStrideByteOffset =
      kSwizzle == Swizzle::kNone ? static_cast<uint32_t>(kKExtent) * kChunkBytes
                                 : kCoreMatrixRows * kSpanBytes;

  // Byte offset of element (mn, k) from the tile's start, which must be kSwizzleAlignment-aligned.
  static FLASHMMA_HOST_DEVICE constexpr uint32_t byte_offset(int mn, int k) {
    if constexpr (kSwizzle == Swizzle::kNone) {
      constexpr int kCoreElements = static_cast<int>(kChunkBytes) / kOperandElementBytes;
      return static_cast<uint32_t>(mn / kCoreMatrixRows) * kStrideByteOffset +
             static_cast<uint32_t>(k / kCoreElements) * kCoreMatrixBytes +
             static_cast<uint32_t>(mn % kCoreMatrixRows) * kChunkBytes +
             static_cast<uint32_t>(k % kCoreElements * kOperandElementBytes);
    } else if constexpr (kMajor == Major::kK) {
      const uint32_t logical =
          static_cast<uint32_t>(k / kSpanElements) * kMnExtent * kSpanBytes +
          static_cast<uint32_t>(mn) * kSpanBytes +
          static_cast<uint32_t>(k % kSpanElements * kOperandElementBytes);
      return swizzle_byte_offset(kSwizzle, logical);
    } else {
      const uint32_t logical =
          static_cast<uint32_t>(mn / kSpanElements) * kKExtent * kSpanBytes +
          static_cast<uint32_t>(k) * kSpanBytes +
          static_cast<uint32_t>(mn % kSpanElements * kOperandElementBytes);
      return swizzle_byte_offset(kSwizzle, logical);
    }
  }

  // Byte offset of the start of k16 slice `k_step`: the unswizzled offset of its element
  // (0, 16 k_step), which the hardware swizzles itself.
  static FLASHMMA_HOST_DEVICE constexpr uint32_t k_step_offset(int k_step) {
    const int k = kWgmmaK * k_step;
    if constexpr (kSwizzle == Swizzle::kNone) {
      return static_cast<uint32_t>(k_step) * 2 * kCoreMatrixBytes;
    } else if constexpr (kMajor == Major::kK) {
      return static_cast<uint32_t>(k / kSpanElements) * kMnExtent * kSpanBytes +
             static_cast<uint32_t>(k % kSpanElements * kOperandElementBytes);
    } else {
      return static_cast<uint32_t>(k) * kSpanBytes;
    }
  }

  // The wgmma descriptor of k16 slice `k_step` of the tile at shared address `tile_address`:
  // the tile's descriptor plus a constant, so that in an unrolled k loop the compiler builds the
  // descriptor once and adds an immediate per slice.
  static FLASHMMA_HOST_DEVICE constexpr uint64_t descriptor(uint32_t tile_address, int k_step) {
    return advance_smem_descriptor(
        make_smem_descriptor(tile_address, kLeadingByteOffset, kStrideByteOffset, kSwizzle),
        k_step_offset(k_step));
  }
};

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
