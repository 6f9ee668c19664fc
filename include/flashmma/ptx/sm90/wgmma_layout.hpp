// SPDX-License-Identifier: Apache-2.0
// Which thread of a warpgroup holds which element of a wgmma m64nNk16 accumulator and of its
// register A operand (RS), and where stmatrix must point to store accumulators. constexpr on host
// and device, so the CPU tests prove the equalities the Hopper path relies on.
//
// A warpgroup is 4 consecutive warps (128 threads); thread t has warp w = t / 32 and lane l,
// lane = 4 * group + quad_lane as in traits/fragment_map.hpp.
//
//   Accumulator, N / 2 fp32 registers, register i:
//     row = 16 w + group + 8 * (i / 2 % 2),   col = 8 * (i / 4) + 2 * quad_lane + i % 2
//   i.e. warp w owns rows 16 w .. 16 w + 15, and registers 4j .. 4j + 3 are exactly the
//   mma.sync m16n8 C fragment of columns 8j .. 8j + 7: the m16n8 C layout stacked along N.
//
//   A in registers (RS), 4 x b32, element `half` (0 = low 16 bits) of register r:
//     row = 16 w + group + 8 * (r % 2),       k = 8 * (r / 2) + 2 * quad_lane + half
//   i.e. the mma.sync m16n8k16 A fragment of rows 16 w .. 16 w + 15.
//
// Consequence (the "RS fragment identity"): the accumulator registers 8 s + 2 r and 8 s + 2 r + 1
// hold the two elements of A register r for the k16 slice s of the accumulator's columns, so
// P = softmax(S) feeds P V straight from S's registers, with no shuffle. (Measured on the H200.)
#pragma once

#include "flashmma/macros.hpp"
#include "flashmma/traits/fragment_map.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

inline constexpr int kWarpgroupThreads = 128;
inline constexpr int kWarpgroupWarps = 4;
inline constexpr int kWgmmaM = 64;
inline constexpr int kWgmmaRowsPerWarp = kWgmmaM / kWarpgroupWarps;  // 16
inline constexpr int kWgmmaARegisters = 4;

using fragment::Coord;

// Accumulator register `reg` (0 .. N/2 - 1) of warpgroup thread `thread`: (row, col) of 64 x N.
FLASHMMA_HOST_DEVICE constexpr Coord wgmma_accumulator_coord(int thread, int reg) {
  const int warp = thread / fragment::kWarpSize;
  const int lane = thread % fragment::kWarpSize;
  return Coord{kWgmmaRowsPerWarp * warp + fragment::lane_group(lane) + 8 * ((reg >> 1) & 1),
               8 * (reg >> 2) + 2 * fragment::lane_in_quad(lane) + (reg & 1)};
}

// Element `half` (0 or 1) of register A operand register `reg` (0..3): (row, k) of 64 x 16.
FLASHMMA_HOST_DEVICE constexpr Coord wgmma_a_coord(int thread, int reg, int half) {
  const int warp = thread / fragment::kWarpSize;
  const int lane = thread % fragment::kWarpSize;
  return Coord{kWgmmaRowsPerWarp * warp + fragment::lane_group(lane) + 8 * (reg % 2),
               8 * (reg / 2) + 2 * fragment::lane_in_quad(lane) + half};
}

// The accumulator register that holds element `half` of A register `reg` for k16 slice
// `k_slice` when an accumulator becomes the next wgmma's A operand (P of P V).
FLASHMMA_HOST_DEVICE constexpr int accumulator_for_a(int k_slice, int reg, int half) {
  return 8 * k_slice + 2 * reg + half;
}

// stmatrix .x4 of accumulator columns 16 b .. 16 b + 15 of a warp: registers hold accumulator
// pairs (8b, 8b+1), (8b+2, 8b+3), (8b+4, 8b+5), (8b+6, 8b+7), i.e. matrices (rows r..r+7, cols
// c..c+7), (rows r+8.., cols c..), (rows r.., cols c+8..), (rows r+8.., cols c+8..) with r = 16 w,
// c = 16 b: the A registers of slice b. Lane l points at row l % 8 of matrix l / 8; this returns
// the (row, col) of the 64 x N tile its address must hold.
FLASHMMA_HOST_DEVICE constexpr Coord wgmma_stmatrix_x4_destination(int thread, int column_block) {
  const int warp = thread / fragment::kWarpSize;
  const int lane = thread % fragment::kWarpSize;
  const int matrix = lane / 8;
  return Coord{kWgmmaRowsPerWarp * warp + lane % 8 + 8 * (matrix % 2),
               16 * column_block + 8 * (matrix / 2)};
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
