// SPDX-License-Identifier: Apache-2.0
// The sm_90 shared-memory layouts on the CPU: the wgmma descriptor's bit fields, the TMA/wgmma
// swizzles and the operand-tile offsets and descriptors, each against values written out by hand
// from the PTX ISA's tables and the layouts drawn in the headers (not recomputed by the same
// formulas).
#include "support/catch.hpp"

#include <flashmma/ptx/sm90/operand_tile.hpp>
#include <flashmma/ptx/sm90/smem_descriptor.hpp>
#include <flashmma/ptx/sm90/swizzle.hpp>

#include <cstdint>
#include <set>

namespace {

namespace sm90 = flashmma::ptx::sm90;
using sm90::Major;
using sm90::Swizzle;

// Physical chunk of logical chunk c in row r of one swizzle atom, copied from the tables of the
// PTX ISA ("Shared memory matrix layout", swizzling modes) and swizzle.hpp's drawing.
constexpr int kSwizzle128BChunks[8][8] = {
    {0, 1, 2, 3, 4, 5, 6, 7}, {1, 0, 3, 2, 5, 4, 7, 6}, {2, 3, 0, 1, 6, 7, 4, 5},
    {3, 2, 1, 0, 7, 6, 5, 4}, {4, 5, 6, 7, 0, 1, 2, 3}, {5, 4, 7, 6, 1, 0, 3, 2},
    {6, 7, 4, 5, 2, 3, 0, 1}, {7, 6, 5, 4, 3, 2, 1, 0}};
constexpr int kSwizzle64BChunks[8][4] = {{0, 1, 2, 3}, {0, 1, 2, 3}, {1, 0, 3, 2}, {1, 0, 3, 2},
                                         {2, 3, 0, 1}, {2, 3, 0, 1}, {3, 2, 1, 0}, {3, 2, 1, 0}};
constexpr int kSwizzle32BChunks[8][2] = {{0, 1}, {0, 1}, {0, 1}, {0, 1},
                                         {1, 0}, {1, 0}, {1, 0}, {1, 0}};

template <int kChunks>
void check_swizzle_table(Swizzle swizzle, const int (&table)[8][kChunks]) {
  constexpr uint32_t kRowBytes = kChunks * 16;
  // Two atoms: the pattern repeats from one to the next.
  for (uint32_t atom = 0; atom < 2; ++atom) {
    for (uint32_t row = 0; row < 8; ++row) {
      for (uint32_t chunk = 0; chunk < kChunks; ++chunk) {
        for (uint32_t byte = 0; byte < 16; byte += 5) {
          const uint32_t atom_base = atom * 8 * kRowBytes;
          const uint32_t logical = atom_base + row * kRowBytes + chunk * 16 + byte;
          const uint32_t expected = atom_base + row * kRowBytes + table[row][chunk] * 16 + byte;
          INFO("row " << row << ", chunk " << chunk << ", byte " << byte << " of atom " << atom);
          REQUIRE(sm90::swizzle_byte_offset(swizzle, logical) == expected);
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("sm90 swizzles permute 16-byte chunks as the PTX ISA tables say", "[sm90][swizzle]") {
  check_swizzle_table(Swizzle::k128B, kSwizzle128BChunks);
  check_swizzle_table(Swizzle::k64B, kSwizzle64BChunks);
  check_swizzle_table(Swizzle::k32B, kSwizzle32BChunks);
  for (uint32_t offset : {0u, 17u, 144u, 1023u, 5000u}) {
    CHECK(sm90::swizzle_byte_offset(Swizzle::kNone, offset) == offset);
  }
  // A few single offsets, worked by hand: row 7, chunk 2, byte 6 (0x3A6) -> chunk 5 (0x3D6).
  CHECK(sm90::swizzle_byte_offset(Swizzle::k128B, 0x3A6) == 0x3D6);
  // Row 9 (row 1 of the second atom), chunk 0, byte 12 -> chunk 1.
  CHECK(sm90::swizzle_byte_offset(Swizzle::k128B, 1024 + 128 + 12) == 1024 + 128 + 16 + 12);
  // 64B: row 5 (bytes 320..383), chunk 3 -> chunk 1.
  CHECK(sm90::swizzle_byte_offset(Swizzle::k64B, 320 + 48 + 2) == 320 + 16 + 2);
  // 32B: row 6 (bytes 192..223), chunk 0 -> chunk 1.
  CHECK(sm90::swizzle_byte_offset(Swizzle::k32B, 192 + 3) == 192 + 16 + 3);
}

TEST_CASE("sm90 swizzles are permutations within each atom", "[sm90][swizzle]") {
  for (Swizzle swizzle : {Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    std::set<uint32_t> seen;
    for (uint32_t offset = 0; offset < sm90::kSwizzleAlignment; ++offset) {
      const uint32_t physical = sm90::swizzle_byte_offset(swizzle, offset);
      REQUIRE(physical < sm90::kSwizzleAlignment);
      seen.insert(physical);
    }
    CHECK(seen.size() == sm90::kSwizzleAlignment);
  }
  CHECK(sm90::swizzle_span_bytes(Swizzle::kNone) == 16);
  CHECK(sm90::swizzle_span_bytes(Swizzle::k32B) == 32);
  CHECK(sm90::swizzle_span_bytes(Swizzle::k64B) == 64);
  CHECK(sm90::swizzle_span_bytes(Swizzle::k128B) == 128);
}

TEST_CASE("sm90 smem descriptor puts each field at its bits", "[sm90][descriptor]") {
  // start 0x400 -> 0x40 at bits 0-13; LBO 16 -> 1 at 16-29; SBO 1024 -> 0x40 at 32-45;
  // 128B swizzle -> 1 at 62-63.
  CHECK(sm90::make_smem_descriptor(0x400, 16, 1024, Swizzle::k128B) == 0x4000004000010040ull);
  // 64B -> 2, 32B -> 3, none -> 0 at bits 62-63.
  CHECK(sm90::make_smem_descriptor(0, 0, 0, Swizzle::k64B) == 0x8000000000000000ull);
  CHECK(sm90::make_smem_descriptor(0, 0, 0, Swizzle::k32B) == 0xC000000000000000ull);
  CHECK(sm90::make_smem_descriptor(0x10, 0, 0, Swizzle::kNone) == 0x1ull);
  // Base offset 4 at bits 49-51.
  CHECK(sm90::make_smem_descriptor(0, 0, 0, Swizzle::k128B, 4) == 0x4008000000000000ull);
  // The largest fields: address 0x3FFF0 -> 0x3FFF; LBO and SBO (2^14 - 1) * 16 -> 0x3FFF.
  CHECK(sm90::make_smem_descriptor(0x3FFF0, 0x3FFF0, 0x3FFF0, Swizzle::kNone) ==
        0x00003FFF3FFF3FFFull);
  // Only the 18-bit shared-window address is kept, and the low 4 bits are dropped.
  CHECK(sm90::make_smem_descriptor(0x40010, 0, 0, Swizzle::kNone) == 0x1ull);
  CHECK(sm90::make_smem_descriptor(0x41F, 0x1F, 0x40F, Swizzle::kNone) == 0x0000004000010041ull);

  // Advancing by 32 bytes adds 2 to the start field and nothing else.
  CHECK(sm90::advance_smem_descriptor(0x4000004000010040ull, 32) == 0x4000004000010042ull);

  const sm90::SmemDescriptorFields fields = sm90::decode_smem_descriptor(0x8006008000200123ull);
  CHECK(fields.start_address == 0x1230);
  CHECK(fields.leading_byte_offset == 0x200);
  CHECK(fields.stride_byte_offset == 0x800);
  CHECK(fields.base_offset == 3);
  CHECK(fields.swizzle == Swizzle::k64B);
}

TEST_CASE("sm90 K-major 128B operand tile: offsets and k16 descriptors", "[sm90][operand_tile]") {
  using Tile = sm90::OperandTile<Major::kK, Swizzle::k128B, 64, 128>;
  // Two sub-tiles of 64 K-columns, 64 rows of 128 bytes each.
  STATIC_REQUIRE(Tile::kBytes == 16384);
  STATIC_REQUIRE(Tile::kStrideByteOffset == 1024);
  STATIC_REQUIRE(Tile::kLeadingByteOffset == 16);
  CHECK(Tile::byte_offset(0, 0) == 0);
  CHECK(Tile::byte_offset(0, 9) == 18);          // row 0 is not permuted
  CHECK(Tile::byte_offset(1, 0) == 128 + 16);    // row 1: chunk 0 -> 1
  CHECK(Tile::byte_offset(7, 63) == 7 * 128 + 0 * 16 + 14);  // chunk 7 -> 0, element 7 of it
  CHECK(Tile::byte_offset(0, 64) == 8192);       // the second sub-tile
  CHECK(Tile::byte_offset(9, 70) == 8192 + 9 * 128 + 16 + 12);
  // Slices: +32 bytes per k16, the next sub-tile after 4.
  CHECK(Tile::k_step_offset(0) == 0);
  CHECK(Tile::k_step_offset(3) == 96);
  CHECK(Tile::k_step_offset(5) == 8192 + 32);
  // At 0x400: start (0x400 + 8192 + 32) >> 4 = 0x242, LBO 1, SBO 0x40, swizzle 1.
  CHECK(Tile::descriptor(0x400, 5) == 0x4000004000010242ull);
}

TEST_CASE("sm90 MN-major 128B operand tile: offsets and k16 descriptors", "[sm90][operand_tile]") {
  using Tile = sm90::OperandTile<Major::kMN, Swizzle::k128B, 128, 64>;
  // Two chunks of 64 N-columns, each 64 k-rows of 128 bytes.
  STATIC_REQUIRE(Tile::kBytes == 16384);
  STATIC_REQUIRE(Tile::kLeadingByteOffset == 8192);
  STATIC_REQUIRE(Tile::kStrideByteOffset == 1024);
  CHECK(Tile::byte_offset(5, 0) == 10);
  CHECK(Tile::byte_offset(0, 1) == 128 + 16);
  CHECK(Tile::byte_offset(70, 3) == 8192 + 3 * 128 + 3 * 16 + 12);
  CHECK(Tile::k_step_offset(2) == 4096);  // 16 k-rows of 128 bytes per slice
  // start 4096 >> 4 = 0x100, LBO 8192 >> 4 = 0x200, SBO 0x40, swizzle 1.
  CHECK(Tile::descriptor(0, 2) == 0x4000004002000100ull);
  // An N of 96 uses a second chunk half.
  using Narrow = sm90::OperandTile<Major::kMN, Swizzle::k128B, 96, 32>;
  STATIC_REQUIRE(Narrow::kBytes == 2 * 32 * 128);
}

TEST_CASE("sm90 K-major 64B and 32B operand tiles", "[sm90][operand_tile]") {
  using Tile64 = sm90::OperandTile<Major::kK, Swizzle::k64B, 16, 64>;
  // Sub-tiles of 32 K-columns: 16 rows of 64 bytes = 1024 bytes each.
  STATIC_REQUIRE(Tile64::kBytes == 2048);
  STATIC_REQUIRE(Tile64::kStrideByteOffset == 512);
  CHECK(Tile64::byte_offset(2, 0) == 128 + 16);      // row 2: chunk 0 -> 1
  CHECK(Tile64::byte_offset(4, 9) == 256 + 48 + 2);  // row 4: chunk 1 -> 3
  CHECK(Tile64::byte_offset(0, 40) == 1024 + 16);    // sub-tile 1, chunk 1
  CHECK(Tile64::k_step_offset(1) == 32);
  CHECK(Tile64::k_step_offset(2) == 1024);
  // 0x800 + 1024 = 0xC00 -> 0xC0; LBO 1; SBO 512 -> 0x20; swizzle 2.
  CHECK(Tile64::descriptor(0x800, 2) == 0x80000020000100C0ull);

  using Tile32 = sm90::OperandTile<Major::kK, Swizzle::k32B, 8, 32>;
  STATIC_REQUIRE(Tile32::kBytes == 512);
  STATIC_REQUIRE(Tile32::kStrideByteOffset == 256);
  CHECK(Tile32::byte_offset(4, 1) == 128 + 16 + 2);  // row 4: chunk 0 -> 1
  CHECK(Tile32::byte_offset(3, 20) == 256 + 96 + 8);  // sub-tile 1, row 3, chunk 0
  CHECK(Tile32::k_step_offset(1) == 256);
}

TEST_CASE("sm90 K-major unswizzled operand tile: core matrices", "[sm90][operand_tile]") {
  using Tile = sm90::OperandTile<Major::kK, Swizzle::kNone, 64, 32>;
  STATIC_REQUIRE(Tile::kBytes == 4096);
  STATIC_REQUIRE(Tile::kLeadingByteOffset == 128);
  STATIC_REQUIRE(Tile::kStrideByteOffset == 512);
  // (9, 10): 8-row group 1 (512), core matrix 1 along K (128), row 1 (16), element 2 (4).
  CHECK(Tile::byte_offset(9, 10) == 660);
  CHECK(Tile::byte_offset(7, 7) == 7 * 16 + 14);
  CHECK(Tile::k_step_offset(1) == 256);
  // 0x800 + 256 = 0x900 -> 0x90; LBO 128 -> 8; SBO 512 -> 0x20; no swizzle.
  CHECK(Tile::descriptor(0x800, 1) == 0x0000002000080090ull);
}

TEMPLATE_TEST_CASE("sm90 operand tiles place every element once, inside the tile",
                   "[sm90][operand_tile]",
                   (sm90::OperandTile<Major::kK, Swizzle::k128B, 64, 128>),
                   (sm90::OperandTile<Major::kK, Swizzle::k64B, 96, 64>),
                   (sm90::OperandTile<Major::kK, Swizzle::k32B, 40, 48>),
                   (sm90::OperandTile<Major::kK, Swizzle::kNone, 24, 64>),
                   (sm90::OperandTile<Major::kMN, Swizzle::k128B, 96, 64>),
                   (sm90::OperandTile<Major::kMN, Swizzle::k64B, 256, 32>),
                   (sm90::OperandTile<Major::kMN, Swizzle::k32B, 48, 16>)) {
  using Tile = TestType;
  std::set<uint32_t> offsets;
  for (int mn = 0; mn < Tile::kMnSize; ++mn) {
    for (int k = 0; k < Tile::kKSize; ++k) {
      const uint32_t offset = Tile::byte_offset(mn, k);
      INFO("(" << mn << ", " << k << ") -> " << offset);
      REQUIRE(offset % 2 == 0);
      REQUIRE(offset + 2 <= Tile::kBytes);
      offsets.insert(offset);
    }
  }
  CHECK(offsets.size() == static_cast<std::size_t>(Tile::kMnSize * Tile::kKSize));
  // Slice s starts at element (0, 16 s), which lies in row 0 of a swizzle atom, where the
  // swizzle moves nothing.
  for (int step = 0; step < Tile::kKSteps; ++step) {
    CHECK(Tile::k_step_offset(step) == Tile::byte_offset(0, 16 * step));
  }
}
