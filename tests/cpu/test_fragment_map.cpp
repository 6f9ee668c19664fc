// SPDX-License-Identifier: Apache-2.0
// The fragment maps of traits/fragment_map.hpp against the PTX ISA's tables for
// mma.m16n8k16 with .f16/.bf16 operands and .f32 accumulators, and against what ldmatrix
// delivers. The ISA numbers fragment elements a0..a7, b0..b3, c0..c3 across a thread's
// registers, two 16-bit elements per A/B register; the functions below transcribe its tables
// element by element.
#include "support/catch.hpp"

#include <flashmma/traits/fragment_map.hpp>

#include <array>
#include <string>

namespace {

namespace fragment = flashmma::fragment;
using fragment::Coord;

constexpr int kLanes = 32;
constexpr int kARegisters = 4;
constexpr int kBRegisters = 2;
constexpr int kCRegisters = 4;
constexpr int kHalves = 2;  // 16-bit elements per 32-bit register

int group_id(int lane) { return lane >> 2; }
int thread_id_in_group(int lane) { return lane % 4; }

// PTX ISA, "Matrix Fragments for mma.m16n8k16 with floating point type", multiplicand A:
//   row = groupID       for a0, a1, a4, a5;  groupID + 8  for a2, a3, a6, a7
//   col = threadID_in_group * 2 + (i & 0x1)       for a0..a3
//         threadID_in_group * 2 + (i & 0x1) + 8   for a4..a7
Coord isa_a(int lane, int i) {
  const bool lower_rows = i < 2 || (i >= 4 && i < 6);
  const int row = lower_rows ? group_id(lane) : group_id(lane) + 8;
  const int col = thread_id_in_group(lane) * 2 + (i & 0x1) + (i < 4 ? 0 : 8);
  return Coord{row, col};
}

// Multiplicand B (16 x 8):
//   row = threadID_in_group * 2 + (i & 0x1)       for b0, b1
//         threadID_in_group * 2 + (i & 0x1) + 8   for b2, b3
//   col = groupID
Coord isa_b(int lane, int i) {
  const int row = thread_id_in_group(lane) * 2 + (i & 0x1) + (i < 2 ? 0 : 8);
  return Coord{row, group_id(lane)};
}

// Accumulators C and D (16 x 8, .f32):
//   row = groupID for c0, c1;  groupID + 8 for c2, c3
//   col = threadID_in_group * 2 + (i & 0x1)
Coord isa_c(int lane, int i) {
  const int row = i < 2 ? group_id(lane) : group_id(lane) + 8;
  return Coord{row, thread_id_in_group(lane) * 2 + (i & 0x1)};
}

// ldmatrix (.m8n8, .b16): "each thread receives two elements of a row": thread t holds, of every
// matrix it loads, row t / 4 at columns 2 * (t % 4) and 2 * (t % 4) + 1. With .trans each matrix
// is transposed as it loads, so the same thread receives column t / 4 at rows 2 * (t % 4) + {0, 1}
// of the matrix as stored.
Coord isa_ldmatrix(int lane, int half, bool transposed) {
  const int major = lane / 4;
  const int minor = 2 * (lane % 4) + half;
  return transposed ? Coord{minor, major} : Coord{major, minor};
}

}  // namespace

namespace Catch {
template <>
struct StringMaker<Coord> {
  static std::string convert(Coord c) {
    return "(" + std::to_string(c.row) + ", " + std::to_string(c.col) + ")";
  }
};
}  // namespace Catch

TEST_CASE("Fragment maps match the PTX ISA tables", "[fragment]") {
  for (int lane = 0; lane < kLanes; ++lane) {
    CAPTURE(lane);
    CHECK(fragment::lane_group(lane) == group_id(lane));
    CHECK(fragment::lane_in_quad(lane) == thread_id_in_group(lane));
    for (int reg = 0; reg < kARegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(reg, half);
        CHECK(fragment::a_coord(lane, reg, half) == isa_a(lane, kHalves * reg + half));
      }
    }
    for (int reg = 0; reg < kBRegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(reg, half);
        CHECK(fragment::b_coord(lane, reg, half) == isa_b(lane, kHalves * reg + half));
      }
    }
    for (int reg = 0; reg < kCRegisters; ++reg) {
      CAPTURE(reg);
      CHECK(fragment::c_coord(lane, reg) == isa_c(lane, reg));
    }
  }
}

TEST_CASE("Fragments cover their tile exactly once over a warp", "[fragment]") {
  std::array<std::array<int, 16>, 16> a_count{};
  std::array<std::array<int, 8>, 16> b_count{};  // [k][n]
  std::array<std::array<int, 8>, 16> c_count{};
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int reg = 0; reg < kARegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        const Coord a = fragment::a_coord(lane, reg, half);
        REQUIRE(a.row >= 0);
        REQUIRE(a.row < 16);
        REQUIRE(a.col >= 0);
        REQUIRE(a.col < 16);
        ++a_count[a.row][a.col];
      }
    }
    for (int reg = 0; reg < kBRegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        const Coord b = fragment::b_coord(lane, reg, half);
        REQUIRE(b.row >= 0);
        REQUIRE(b.row < 16);
        REQUIRE(b.col >= 0);
        REQUIRE(b.col < 8);
        ++b_count[b.row][b.col];
      }
    }
    for (int reg = 0; reg < kCRegisters; ++reg) {
      const Coord c = fragment::c_coord(lane, reg);
      REQUIRE(c.row >= 0);
      REQUIRE(c.row < 16);
      REQUIRE(c.col >= 0);
      REQUIRE(c.col < 8);
      ++c_count[c.row][c.col];
    }
  }
  for (int row = 0; row < 16; ++row) {
    for (int col = 0; col < 16; ++col) {
      CAPTURE(row, col);
      CHECK(a_count[row][col] == 1);
      if (col < 8) {
        CHECK(b_count[row][col] == 1);
        CHECK(c_count[row][col] == 1);
      }
    }
  }
}

TEST_CASE("C fragments of two adjacent n8 tiles form one k16 A fragment", "[fragment]") {
  // A register r holds what the accumulators of n8 tile r / 2 hold in registers 2 * (r % 2) and
  // 2 * (r % 2) + 1, the second tile's columns shifted by 8: P = softmax(S) feeds P V directly.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int reg = 0; reg < kARegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(lane, reg, half);
        const int tile = reg / 2;
        const Coord c = fragment::c_coord(lane, 2 * (reg % 2) + half);
        CHECK(fragment::a_coord(lane, reg, half) == Coord{c.row, c.col + 8 * tile});
      }
    }
  }
}

TEST_CASE("ldmatrix_element matches the ISA's description of ldmatrix", "[fragment][ldmatrix]") {
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int half = 0; half < kHalves; ++half) {
      for (bool transposed : {false, true}) {
        CAPTURE(lane, half, transposed);
        CHECK(fragment::ldmatrix_element(lane, half, transposed) ==
              isa_ldmatrix(lane, half, transposed));
      }
    }
  }
}

namespace {

// Simulates ldmatrix .x4: lane L points at the start of row L % 8 of matrix L / 8 (`source`,
// in the coordinates of the tile as stored); returns the stored (row, col) that `lane` receives
// in register `matrix`, element `half`.
template <class Source>
Coord ldmatrix_x4_delivers(Source source, int lane, int matrix, int half, bool transposed) {
  const Coord in_matrix = fragment::ldmatrix_element(lane, half, transposed);
  const Coord row_start = source(8 * matrix + in_matrix.row);
  return Coord{row_start.row, row_start.col + in_matrix.col};
}

// Every lane's row start must be 16-byte aligned (a multiple of 8 elements) and, together, the
// 32 lanes must name 32 different rows of 8 elements.
template <class Source>
void check_row_starts(Source source) {
  std::array<std::array<int, 2>, 16> used{};  // 16 rows x 2 chunks of a 16 x 16 block
  for (int lane = 0; lane < kLanes; ++lane) {
    const Coord start = source(lane);
    CAPTURE(lane, start);
    REQUIRE(start.col % 8 == 0);
    REQUIRE(start.row >= 0);
    REQUIRE(start.row < 16);
    REQUIRE(start.col >= 0);
    REQUIRE(start.col < 16);
    ++used[start.row][start.col / 8];
  }
  for (const auto& row : used) {
    CHECK(row[0] == 1);
    CHECK(row[1] == 1);
  }
}

}  // namespace

TEST_CASE("ldmatrix.x4 with ldmatrix_a_x4_source loads an A fragment", "[fragment][ldmatrix]") {
  const auto source = [](int lane) { return fragment::ldmatrix_a_x4_source(lane); };
  check_row_starts(source);
  // A is stored row-major [m, k]; matrix i lands in A register i.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int reg = 0; reg < kARegisters; ++reg) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(lane, reg, half);
        CHECK(ldmatrix_x4_delivers(source, lane, reg, half, false) ==
              fragment::a_coord(lane, reg, half));
      }
    }
  }
}

TEST_CASE("ldmatrix.x4 with ldmatrix_b_x4_source loads B of two n8 tiles from [n, k]",
          "[fragment][ldmatrix]") {
  const auto source = [](int lane) { return fragment::ldmatrix_b_x4_source(lane); };
  check_row_starts(source);
  // K is stored row-major [n, k]; matrix i lands in B register i % 2 of n8 tile i / 2.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int matrix = 0; matrix < 4; ++matrix) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(lane, matrix, half);
        const int tile = matrix / 2;
        const Coord b = fragment::b_coord(lane, matrix % 2, half);  // (k, n within the tile)
        const Coord stored = ldmatrix_x4_delivers(source, lane, matrix, half, false);  // (n, k)
        CHECK(stored == Coord{b.col + 8 * tile, b.row});
      }
    }
  }
}

TEST_CASE("ldmatrix.x4.trans with ldmatrix_b_trans_x4_source loads B of two n8 tiles from [k, n]",
          "[fragment][ldmatrix]") {
  const auto source = [](int lane) { return fragment::ldmatrix_b_trans_x4_source(lane); };
  check_row_starts(source);
  // V is stored row-major [k, n]; matrix i lands in B register i % 2 of n8 tile i / 2.
  for (int lane = 0; lane < kLanes; ++lane) {
    for (int matrix = 0; matrix < 4; ++matrix) {
      for (int half = 0; half < kHalves; ++half) {
        CAPTURE(lane, matrix, half);
        const int tile = matrix / 2;
        const Coord b = fragment::b_coord(lane, matrix % 2, half);  // (k, n within the tile)
        const Coord stored = ldmatrix_x4_delivers(source, lane, matrix, half, true);  // (k, n)
        CHECK(stored == Coord{b.row, b.col + 8 * tile});
      }
    }
  }
}
