// SPDX-License-Identifier: Apache-2.0
// The shared-memory tile layouts: every element has its own place, 16-byte chunks stay whole,
// and the 8 rows one ldmatrix matrix reads fall in 8 different bank slots.
#include "support/catch.hpp"

#include <flashmma/traits/smem_layout.hpp>

#include <set>
#include <tuple>

namespace {

using flashmma::SmemLayout;
using flashmma::TileLayout;

constexpr int kTileRows = 64;       // as many rows as the largest BlockN
constexpr int kElementBytes = 2;    // fp16 and bf16
constexpr int kChunkBytes = 16;
constexpr int kChunkElements = kChunkBytes / kElementBytes;
constexpr int kSlotsPerLine = 8;    // 32 banks of 4 bytes = 8 chunk slots of 16 bytes
constexpr int kLdmatrixRows = 8;    // rows of one 8x8 matrix, served in one wavefront

// Padded rows for every head dim a TileConfig accepts (multiples of 16), and the XOR swizzle for
// the multiples of 64.
using Layouts = std::tuple<
    TileLayout<SmemLayout::kPaddedRows, 16>, TileLayout<SmemLayout::kPaddedRows, 32>,
    TileLayout<SmemLayout::kPaddedRows, 48>, TileLayout<SmemLayout::kPaddedRows, 64>,
    TileLayout<SmemLayout::kPaddedRows, 96>, TileLayout<SmemLayout::kPaddedRows, 128>,
    TileLayout<SmemLayout::kPaddedRows, 160>, TileLayout<SmemLayout::kPaddedRows, 224>,
    TileLayout<SmemLayout::kPaddedRows, 256>, TileLayout<SmemLayout::kXorSwizzle, 64>,
    TileLayout<SmemLayout::kXorSwizzle, 128>, TileLayout<SmemLayout::kXorSwizzle, 192>,
    TileLayout<SmemLayout::kXorSwizzle, 256>>;

// The head dim a TileLayout was instantiated with.
template <class Layout>
struct HeadDimOf;
template <SmemLayout L, int D>
struct HeadDimOf<TileLayout<L, D>> {
  static constexpr int value = D;
};

}  // namespace

TEMPLATE_LIST_TEST_CASE("Tile layout maps a tile one-to-one into its footprint", "[smem]",
                        Layouts) {
  using Layout = TestType;
  constexpr int kHeadDim = HeadDimOf<Layout>::value;
  const int footprint = Layout::tile_elements(kTileRows);
  CHECK(footprint >= kTileRows * kHeadDim);

  std::set<int> offsets;
  for (int row = 0; row < kTileRows; ++row) {
    for (int col = 0; col < kHeadDim; ++col) {
      const int offset = Layout::offset(row, col);
      INFO("row " << row << ", col " << col << " -> " << offset);
      REQUIRE(offset >= 0);
      REQUIRE(offset < footprint);
      offsets.insert(offset);
    }
  }
  CHECK(offsets.size() == static_cast<std::size_t>(kTileRows * kHeadDim));
}

TEMPLATE_LIST_TEST_CASE("Tile layout keeps 16-byte chunks whole and aligned", "[smem]", Layouts) {
  using Layout = TestType;
  constexpr int kHeadDim = HeadDimOf<Layout>::value;
  for (int row = 0; row < kTileRows; ++row) {
    for (int chunk_start = 0; chunk_start < kHeadDim; chunk_start += kChunkElements) {
      const int base = Layout::offset(row, chunk_start);
      INFO("row " << row << ", chunk at col " << chunk_start);
      REQUIRE(base * kElementBytes % kChunkBytes == 0);
      for (int i = 1; i < kChunkElements; ++i) {
        REQUIRE(Layout::offset(row, chunk_start + i) == base + i);
      }
    }
  }
}

TEMPLATE_LIST_TEST_CASE("Tile layout: 8 consecutive rows of a chunk hit 8 distinct bank slots",
                        "[smem]", Layouts) {
  using Layout = TestType;
  constexpr int kHeadDim = HeadDimOf<Layout>::value;
  // ldmatrix reads 8 rows at the same logical chunk; any 8 consecutive rows may be asked for
  // (the tiles are read from every 8-row boundary, and 16-row blocks from any 16-row boundary).
  for (int first_row = 0; first_row + kLdmatrixRows <= kTileRows; ++first_row) {
    for (int chunk_start = 0; chunk_start < kHeadDim; chunk_start += kChunkElements) {
      std::set<int> slots;
      for (int row = first_row; row < first_row + kLdmatrixRows; ++row) {
        const int byte = Layout::offset(row, chunk_start) * kElementBytes;
        slots.insert(byte / kChunkBytes % kSlotsPerLine);
      }
      INFO("rows " << first_row << ".." << first_row + kLdmatrixRows - 1 << ", chunk at col "
                   << chunk_start);
      REQUIRE(slots.size() == static_cast<std::size_t>(kLdmatrixRows));
    }
  }
}

TEST_CASE("Tile layout row strides", "[smem]") {
  STATIC_REQUIRE(TileLayout<SmemLayout::kPaddedRows, 96>::kRowStride == 104);
  STATIC_REQUIRE(TileLayout<SmemLayout::kXorSwizzle, 128>::kRowStride == 128);
  STATIC_REQUIRE(TileLayout<SmemLayout::kPaddedRows, 64>::tile_elements(64) == 64 * 72);
  STATIC_REQUIRE(TileLayout<SmemLayout::kXorSwizzle, 64>::tile_elements(64) == 64 * 64);
}

TEST_CASE("XOR swizzle matches the table drawn in smem_layout.hpp", "[smem]") {
  using Layout = TileLayout<SmemLayout::kXorSwizzle, 64>;
  // Physical chunk of logical chunks 0..7 for rows 0, 1, 2.
  const int table[3][8] = {{0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6},
                           {2, 3, 0, 1, 6, 7, 4, 5}};
  for (int row = 0; row < 3; ++row) {
    for (int chunk = 0; chunk < 8; ++chunk) {
      CAPTURE(row, chunk);
      CHECK(Layout::offset(row, chunk * kChunkElements) ==
            row * 64 + table[row][chunk] * kChunkElements);
    }
  }
  // Beyond the first group of 8 chunks the pattern repeats inside each group.
  using Wide = TileLayout<SmemLayout::kXorSwizzle, 128>;
  CHECK(Wide::offset(1, 8 * kChunkElements) == 128 + 9 * kChunkElements);
  CHECK(Wide::offset(3, 15 * kChunkElements) == 3 * 128 + 12 * kChunkElements);
}

// LdmatrixOffsets<L, D> for the TileLayout<L, D> a test instantiates.
template <class Layout>
struct OffsetsOf;
template <SmemLayout L, int D>
struct OffsetsOf<TileLayout<L, D>> {
  using type = flashmma::LdmatrixOffsets<L, D>;
};

TEMPLATE_LIST_TEST_CASE("LdmatrixOffsets agrees with offset() for every block a lane reads",
                        "[smem]", Layouts) {
  using Layout = TestType;
  using Offsets = typename OffsetsOf<Layout>::type;
  constexpr int kHeadDim = HeadDimOf<Layout>::value;
  constexpr int kBlockRows = 16;
  constexpr int kBlockCols = 16;
  // A lane of ldmatrix .x4 points at any of the 16 rows of a block, at column 0 or 8 of it;
  // blocks start at multiples of 8 rows (16 in the kernels) and of 16 columns.
  for (int lane_row = 0; lane_row < kBlockRows; ++lane_row) {
    for (int lane_col : {0, kChunkElements}) {
      const Offsets offsets(lane_row, lane_col);
      for (int row0 = 0; row0 + kBlockRows <= kTileRows; row0 += kLdmatrixRows) {
        for (int col0 = 0; col0 < kHeadDim; col0 += kBlockCols) {
          INFO("lane (" << lane_row << ", " << lane_col << "), block (" << row0 << ", " << col0
                        << ")");
          REQUIRE(offsets.at(row0, col0) == Layout::offset(row0 + lane_row, col0 + lane_col));
        }
      }
    }
  }
}

TEST_CASE("LdmatrixOffsets keeps four lane parts under the swizzle and one under padding",
          "[smem]") {
  STATIC_REQUIRE(flashmma::LdmatrixOffsets<SmemLayout::kXorSwizzle, 128>::kLaneParts == 4);
  STATIC_REQUIRE(flashmma::LdmatrixOffsets<SmemLayout::kPaddedRows, 96>::kLaneParts == 1);
}
