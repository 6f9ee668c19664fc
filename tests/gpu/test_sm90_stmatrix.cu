// SPDX-License-Identifier: Apache-2.0
// stmatrix on the device:
//   - x4 and x4.trans store every lane's register halves at the element ldmatrix would have
//     loaded them from (fragment::ldmatrix_element), into four plain 8x8 matrices;
//   - the epilogue's use: a warpgroup stores a 64 x 64 accumulator tile, converted to 16 bits and
//     taken as A-register pairs (accumulator_for_a), through wgmma_stmatrix_x4_destination into a
//     128B-swizzled tile, which must come out exactly as OperandTile lays the tile out (the
//     layout a TMA store of O then writes to global memory).
// Elements are 16-bit ids, compared bit for bit.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/smem.cuh"
#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/stmatrix.cuh"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
#include "flashmma/traits/fragment_map.hpp"
#include "test_sm90_support.cuh"

namespace {

namespace fragment = flashmma::fragment;
namespace sm90 = flashmma::ptx::sm90;
using flashmma::test::DeviceBuffer;
using namespace flashmma::test::sm90_support;

constexpr int kWarpSize = fragment::kWarpSize;

// ---- plain x4 and x4.trans --------------------------------------------------------------------

constexpr int kMatrixStride = 16;  // elements per row: 8 used, 8 of padding (rows 32 B apart)
constexpr int kMatrixRows = 4 * 8;
constexpr uint16_t kUnwritten = 0xDEAD;

uint16_t matrix_value(int matrix, int row, int col) {
  return static_cast<uint16_t>(0x100 * (matrix + 1) + 8 * row + col);
}

// registers: per lane, the 4 registers to store. out: the [32, kMatrixStride] tile afterwards.
template <bool kTransposed>
__global__ void stmatrix_kernel(const uint32_t* registers, uint16_t* out) {
  __shared__ alignas(16) uint16_t tile[kMatrixRows * kMatrixStride];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < kMatrixRows * kMatrixStride; i += kWarpSize) tile[i] = kUnwritten;
  __syncwarp();
  const uint32_t r[4] = {registers[4 * lane], registers[4 * lane + 1], registers[4 * lane + 2],
                         registers[4 * lane + 3]};
  // Lane L points at row L % 8 of matrix L / 8.
  const uint32_t row_address =
      flashmma::ptx::smem_address(&tile[(8 * (lane / 8) + lane % 8) * kMatrixStride]);
  if constexpr (kTransposed) {
    sm90::stmatrix_x4_trans(row_address, r);
  } else {
    sm90::stmatrix_x4(row_address, r);
  }
  __syncwarp();
  for (int i = lane; i < kMatrixRows * kMatrixStride; i += kWarpSize) out[i] = tile[i];
}

template <bool kTransposed>
void check_stmatrix() {
  std::vector<uint32_t> registers(4 * kWarpSize);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int m = 0; m < 4; ++m) {
      const fragment::Coord low = fragment::ldmatrix_element(lane, 0, kTransposed);
      const fragment::Coord high = fragment::ldmatrix_element(lane, 1, kTransposed);
      registers[4 * lane + m] =
          pack_bits(matrix_value(m, low.row, low.col), matrix_value(m, high.row, high.col));
    }
  }
  DeviceBuffer<uint32_t> registers_device = to_device(registers);
  DeviceBuffer<uint16_t> out(kMatrixRows * kMatrixStride);
  stmatrix_kernel<kTransposed><<<1, kWarpSize>>>(registers_device.get(), out.get());
  sync_and_check();
  const std::vector<uint16_t> tile = out.to_host();

  int mismatches = 0;
  for (int m = 0; m < 4; ++m) {
    for (int row = 0; row < 8; ++row) {
      for (int col = 0; col < kMatrixStride; ++col) {
        const uint16_t expected = col < 8 ? matrix_value(m, row, col) : kUnwritten;
        const uint16_t got = tile[(8 * m + row) * kMatrixStride + col];
        if (got != expected && ++mismatches <= 8) {
          UNSCOPED_INFO("matrix " << m << " (" << row << ", " << col << "): got 0x" << std::hex
                                  << got << ", expected 0x" << expected << std::dec);
        }
      }
    }
  }
  REQUIRE(mismatches == 0);
}

// ---- a warpgroup's accumulators into a 128B-swizzled tile --------------------------------------

constexpr int kTileColumns = 64;
using OutputTile = sm90::OperandTile<sm90::Major::kK, sm90::Swizzle::k128B, sm90::kWgmmaM,
                                     kTileColumns>;

__host__ __device__ uint16_t tile_id(int row, int col) {
  return static_cast<uint16_t>(1 + row * kTileColumns + col);
}

// Each thread makes the ids of its accumulator elements (as an epilogue makes its converted
// outputs), pairs them as A registers and stores 16 columns per stmatrix.
__global__ void __launch_bounds__(kWarpgroupThreads) stmatrix_accumulator_kernel(uint4* out) {
  __shared__ alignas(1024) unsigned char tile[OutputTile::kBytes];
  const int thread = static_cast<int>(threadIdx.x);
  uint4* words = reinterpret_cast<uint4*>(tile);
  for (uint32_t i = threadIdx.x; i < OutputTile::kBytes / sizeof(uint4); i += kWarpgroupThreads) {
    words[i] = make_uint4(0xDEADDEADu, 0xDEADDEADu, 0xDEADDEADu, 0xDEADDEADu);
  }
  __syncthreads();
  const uint32_t tile_address = flashmma::ptx::smem_address(tile);
  constexpr int kBlocks = kTileColumns / 16;
#pragma unroll
  for (int block = 0; block < kBlocks; ++block) {
    uint32_t r[sm90::kWgmmaARegisters];
#pragma unroll
    for (int reg = 0; reg < sm90::kWgmmaARegisters; ++reg) {
      const sm90::Coord low =
          sm90::wgmma_accumulator_coord(thread, sm90::accumulator_for_a(block, reg, 0));
      const sm90::Coord high =
          sm90::wgmma_accumulator_coord(thread, sm90::accumulator_for_a(block, reg, 1));
      r[reg] = static_cast<uint32_t>(tile_id(low.row, low.col)) |
               (static_cast<uint32_t>(tile_id(high.row, high.col)) << 16);
    }
    const sm90::Coord row_start = sm90::wgmma_stmatrix_x4_destination(thread, block);
    sm90::stmatrix_x4(tile_address + OutputTile::byte_offset(row_start.row, row_start.col), r);
  }
  __syncthreads();
  for (uint32_t i = threadIdx.x; i < OutputTile::kBytes / sizeof(uint4); i += kWarpgroupThreads) {
    out[i] = words[i];
  }
}

}  // namespace

TEST_CASE("stmatrix x4 stores each register half where ldmatrix would load it",
          "[gpu][sm90][stmatrix]") {
  SECTION("x4") { check_stmatrix<false>(); }
  SECTION("x4.trans") { check_stmatrix<true>(); }
}

TEST_CASE("stmatrix x4 writes a warpgroup's accumulators into the 128B-swizzled tile layout",
          "[gpu][sm90][stmatrix]") {
  DeviceBuffer<uint4> out(OutputTile::kBytes / sizeof(uint4));
  stmatrix_accumulator_kernel<<<1, kWarpgroupThreads>>>(out.get());
  sync_and_check();
  const std::vector<uint4> words = out.to_host();
  std::vector<uint16_t> got(OutputTile::kBytes / sizeof(uint16_t));
  std::memcpy(got.data(), words.data(), OutputTile::kBytes);

  std::vector<uint16_t> expected(got.size(), 0xDEAD);
  for (int row = 0; row < sm90::kWgmmaM; ++row) {
    for (int col = 0; col < kTileColumns; ++col) {
      expected[OutputTile::byte_offset(row, col) / sizeof(uint16_t)] = tile_id(row, col);
    }
  }
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i] && ++mismatches <= 8) {
      UNSCOPED_INFO("shared element " << i << ": got " << got[i] << ", expected "
                                      << expected[i]);
    }
  }
  REQUIRE(mismatches == 0);
}
