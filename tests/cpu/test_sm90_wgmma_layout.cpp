// SPDX-License-Identifier: Apache-2.0
// The wgmma fragment maps on the CPU: hand-written points of the accumulator and A layouts, the
// accumulator as the mma.sync m16n8 C layout stacked along N (why one online softmax serves the
// sm80 and sm90 paths), the RS fragment identity (accumulators feed the next wgmma's A), and
// where stmatrix puts accumulators.
#include "support/catch.hpp"

#include <flashmma/ptx/sm90/wgmma_layout.hpp>
#include <flashmma/traits/fragment_map.hpp>

#include <set>
#include <utility>

namespace {

namespace fragment = flashmma::fragment;
namespace sm90 = flashmma::ptx::sm90;
using fragment::Coord;

constexpr int kMaxN = 256;

}  // namespace

TEST_CASE("wgmma accumulator layout at hand-picked points", "[sm90][wgmma_layout]") {
  // Thread 0: rows 0 and 8, columns 0, 1, 8, 9, ...
  CHECK(sm90::wgmma_accumulator_coord(0, 0) == Coord{0, 0});
  CHECK(sm90::wgmma_accumulator_coord(0, 1) == Coord{0, 1});
  CHECK(sm90::wgmma_accumulator_coord(0, 2) == Coord{8, 0});
  CHECK(sm90::wgmma_accumulator_coord(0, 4) == Coord{0, 8});
  // Thread 1 (quad lane 1): columns 2 and 3.
  CHECK(sm90::wgmma_accumulator_coord(1, 1) == Coord{0, 3});
  // Thread 37: warp 1, lane 5 (row group 1, quad lane 1); register 6 -> row 16 + 1 + 8, col 8 + 2.
  CHECK(sm90::wgmma_accumulator_coord(37, 6) == Coord{25, 10});
  // The last register of the last thread at N = 256 is the tile's last element.
  CHECK(sm90::wgmma_accumulator_coord(127, 127) == Coord{63, 255});

  // A: thread 37, register 3 (rows + 8, k + 8), high half.
  CHECK(sm90::wgmma_a_coord(37, 3, 1) == Coord{25, 11});
  CHECK(sm90::wgmma_a_coord(0, 0, 0) == Coord{0, 0});
  CHECK(sm90::wgmma_a_coord(127, 3, 1) == Coord{63, 15});
}

TEST_CASE("wgmma accumulators cover the 64 x N tile once", "[sm90][wgmma_layout]") {
  for (int n : {16, 64, 96, 176, 256}) {
    std::set<std::pair<int, int>> seen;
    for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
      for (int reg = 0; reg < n / 2; ++reg) {
        const Coord at = sm90::wgmma_accumulator_coord(thread, reg);
        REQUIRE(at.row >= 0);
        REQUIRE(at.row < sm90::kWgmmaM);
        REQUIRE(at.col >= 0);
        REQUIRE(at.col < n);
        seen.insert({at.row, at.col});
      }
    }
    CHECK(seen.size() == static_cast<std::size_t>(sm90::kWgmmaM * n));
  }
}

TEST_CASE("wgmma accumulator = mma.sync m16n8 C fragments stacked along N, one warp per 16 rows",
          "[sm90][wgmma_layout]") {
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    const int warp = thread / fragment::kWarpSize;
    const int lane = thread % fragment::kWarpSize;
    for (int reg = 0; reg < kMaxN / 2; ++reg) {
      const Coord c = fragment::c_coord(lane, reg % 4);  // register reg % 4 of n8 tile reg / 4
      const Coord stacked{16 * warp + c.row, 8 * (reg / 4) + c.col};
      INFO("thread " << thread << ", register " << reg);
      REQUIRE(sm90::wgmma_accumulator_coord(thread, reg) == stacked);
    }
  }
}

TEST_CASE("wgmma register A = mma.sync m16n8k16 A fragment, one warp per 16 rows",
          "[sm90][wgmma_layout]") {
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    const int warp = thread / fragment::kWarpSize;
    const int lane = thread % fragment::kWarpSize;
    for (int reg = 0; reg < sm90::kWgmmaARegisters; ++reg) {
      for (int half = 0; half < 2; ++half) {
        const Coord a = fragment::a_coord(lane, reg, half);
        INFO("thread " << thread << ", register " << reg << ", half " << half);
        REQUIRE(sm90::wgmma_a_coord(thread, reg, half) == Coord{16 * warp + a.row, a.col});
      }
    }
  }
}

TEST_CASE("RS fragment identity: accumulator registers are the next wgmma's A registers",
          "[sm90][wgmma_layout]") {
  // For every k16 slice s of the accumulator's columns, A register r holds accumulators
  // 8 s + 2 r (low half) and 8 s + 2 r + 1 (high half), at the same (row, column - 16 s).
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    for (int slice = 0; slice < kMaxN / 16; ++slice) {
      for (int reg = 0; reg < sm90::kWgmmaARegisters; ++reg) {
        for (int half = 0; half < 2; ++half) {
          const int accumulator = sm90::accumulator_for_a(slice, reg, half);
          const Coord from = sm90::wgmma_accumulator_coord(thread, accumulator);
          const Coord a = sm90::wgmma_a_coord(thread, reg, half);
          INFO("thread " << thread << ", slice " << slice << ", register " << reg);
          REQUIRE(from == Coord{a.row, 16 * slice + a.col});
        }
      }
    }
  }
  CHECK(sm90::accumulator_for_a(0, 0, 0) == 0);
  CHECK(sm90::accumulator_for_a(1, 3, 1) == 15);
}

TEST_CASE("stmatrix x4 of accumulator pairs lands each element where the accumulator says",
          "[sm90][wgmma_layout]") {
  // stmatrix register m of lane L holds, for matrix m, row L / 4 and columns 2 (L % 4) + {0, 1}
  // (fragment::ldmatrix_element). The registers are the A registers of slice b, i.e. accumulator
  // pairs; the lane that points at a row must be the one whose address the element needs.
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    const int warp = thread / fragment::kWarpSize;
    const int lane = thread % fragment::kWarpSize;
    for (int block = 0; block < kMaxN / 16; ++block) {
      for (int matrix = 0; matrix < 4; ++matrix) {
        for (int half = 0; half < 2; ++half) {
          const Coord in_matrix = fragment::ldmatrix_element(lane, half, false);
          // The lane whose address is row in_matrix.row of this matrix:
          const int pointing_lane = 8 * matrix + in_matrix.row;
          const Coord row_start = sm90::wgmma_stmatrix_x4_destination(
              warp * fragment::kWarpSize + pointing_lane, block);
          const Coord stored{row_start.row, row_start.col + in_matrix.col};
          const int accumulator = sm90::accumulator_for_a(block, matrix, half);
          INFO("thread " << thread << ", block " << block << ", matrix " << matrix);
          REQUIRE(stored == sm90::wgmma_accumulator_coord(thread, accumulator));
        }
      }
    }
  }
  CHECK(sm90::wgmma_stmatrix_x4_destination(0, 0) == Coord{0, 0});
  // Lane 9 points at row 1 of matrix 1 (rows + 8, columns + 0).
  CHECK(sm90::wgmma_stmatrix_x4_destination(9, 0) == Coord{9, 0});
  // Thread 50: warp 1, lane 18 -> row 2 of matrix 2 (rows + 0, columns + 8) of block 2.
  CHECK(sm90::wgmma_stmatrix_x4_destination(50, 2) == Coord{18, 40});
}
