// SPDX-License-Identifier: Apache-2.0
// Which lane holds which element of the mma.sync.m16n8k16 fragments, and which row address each
// lane hands to ldmatrix. The kernels compute their indices with these functions, and the CPU
// tests prove them against the PTX ISA's tables, so a layout mistake shows up without a GPU.
//
// Within a warp, lane = 4 * group + quad_lane (group = lane / 4 in 0..7, quad_lane in 0..3).
//
//   C / D (16 x 8, fp32, 4 registers):   reg 0,1 -> row group,     cols 2*quad_lane + {0,1}
//                                        reg 2,3 -> row group + 8, cols 2*quad_lane + {0,1}
//   A (16 x 16, 4 registers of 2 x 16-bit): reg 0 -> row group,     k 2*quad_lane + {0,1}
//                                           reg 1 -> row group + 8, k 2*quad_lane + {0,1}
//                                           reg 2 -> row group,     k 8 + 2*quad_lane + {0,1}
//                                           reg 3 -> row group + 8, k 8 + 2*quad_lane + {0,1}
//   B (16 x 8, 2 registers of 2 x 16-bit):  reg 0 -> k 2*quad_lane + {0,1},     col group
//                                           reg 1 -> k 8 + 2*quad_lane + {0,1}, col group
//
// Consequence used by the kernel: the C fragments of two adjacent n8 tiles (keys 0-7, 8-15)
// hold exactly the elements of one A fragment of k16 (A reg 0 = C0 regs 0,1; reg 1 = C0 regs 2,3;
// reg 2 = C1 regs 0,1; reg 3 = C1 regs 2,3), so P = softmax(S) stays in registers for P V.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace fragment {

inline constexpr int kWarpSize = 32;
inline constexpr int kLanesPerRow = 4;  // a C-fragment row lives on 4 consecutive lanes

struct Coord {
  int row;
  int col;
  friend constexpr bool operator==(Coord a, Coord b) { return a.row == b.row && a.col == b.col; }
  friend constexpr bool operator!=(Coord a, Coord b) { return !(a == b); }
};

FLASHMMA_HOST_DEVICE constexpr int lane_group(int lane) { return lane / kLanesPerRow; }
FLASHMMA_HOST_DEVICE constexpr int lane_in_quad(int lane) { return lane % kLanesPerRow; }

// Accumulator register `reg` (0..3) of lane `lane`: (row, col) of the 16 x 8 tile.
FLASHMMA_HOST_DEVICE constexpr Coord c_coord(int lane, int reg) {
  return Coord{lane_group(lane) + 8 * (reg / 2), 2 * lane_in_quad(lane) + reg % 2};
}

// Element `half_index` (0 or 1) of A register `reg` (0..3): (row, k).
FLASHMMA_HOST_DEVICE constexpr Coord a_coord(int lane, int reg, int half_index) {
  return Coord{lane_group(lane) + 8 * (reg % 2),
               8 * (reg / 2) + 2 * lane_in_quad(lane) + half_index};
}

// Element `half_index` (0 or 1) of B register `reg` (0..1): (k, col).
FLASHMMA_HOST_DEVICE constexpr Coord b_coord(int lane, int reg, int half_index) {
  return Coord{8 * reg + 2 * lane_in_quad(lane) + half_index, lane_group(lane)};
}

// ldmatrix .x4: lane L supplies the address of row L % 8 of matrix L / 8. These return, for a
// lane, the (row, col) of the 16-bit element at the start of the row it must point at.

// A operand of a 16 x 16 block, row-major in shared memory: matrices are
// (rows 0-7, k 0-7), (rows 8-15, k 0-7), (rows 0-7, k 8-15), (rows 8-15, k 8-15) = A regs 0..3.
FLASHMMA_HOST_DEVICE constexpr Coord ldmatrix_a_x4_source(int lane) {
  return Coord{lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)};
}

// B operand for two adjacent n8 tiles from a row-major [n, k] tile (K of Q K^T): matrices are
// (n 0-7, k 0-7), (n 0-7, k 8-15), (n 8-15, k 0-7), (n 8-15, k 8-15)
// = B regs {0, 1} of the first n8 tile, then B regs {0, 1} of the second. Returns (n, k).
FLASHMMA_HOST_DEVICE constexpr Coord ldmatrix_b_x4_source(int lane) {
  return Coord{lane % 8 + 8 * (lane / 16), 8 * ((lane / 8) % 2)};
}

// B operand for two adjacent n8 tiles from a row-major [k, n] tile (V of P V), read with .trans:
// matrices are (k 0-7, n 0-7), (k 8-15, n 0-7), (k 0-7, n 8-15), (k 8-15, n 8-15)
// = B regs {0, 1} of the first n8 tile, then of the second. Returns (k, n).
FLASHMMA_HOST_DEVICE constexpr Coord ldmatrix_b_trans_x4_source(int lane) {
  return Coord{lane % 8 + 8 * ((lane / 8) % 2), 8 * (lane / 16)};
}

// What ldmatrix (without .trans) delivers: element `half_index` of the register for matrix m,
// in lane `lane`, is row lane / 4, col 2 * (lane % 4) + half_index of that 8 x 8 matrix.
// With .trans the row and col are swapped.
FLASHMMA_HOST_DEVICE constexpr Coord ldmatrix_element(int lane, int half_index, bool transposed) {
  return transposed ? Coord{2 * lane_in_quad(lane) + half_index, lane_group(lane)}
                    : Coord{lane_group(lane), 2 * lane_in_quad(lane) + half_index};
}

}  // namespace fragment
}  // namespace flashmma
