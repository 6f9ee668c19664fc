// SPDX-License-Identifier: Apache-2.0
// One test per PTX primitive: a single warp runs the instruction and the CPU checks every lane's
// registers against the element mapping of traits/fragment_map.hpp. Operand values are small
// multiples of 1/8, so every product and sum is exact in fp32 and results compare with ==.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/traits/fragment_map.hpp"
#include "support/gpu_helpers.cuh"
#include "support/primitive_test.cuh"
#include "support/reference.hpp"

namespace {

namespace fragment = flashmma::fragment;
namespace ptx = flashmma::ptx;
using flashmma::test::DeviceBuffer;

constexpr int kWarpSize = fragment::kWarpSize;

using flashmma::test::eighths;
using flashmma::test::element_bits;
using flashmma::test::element_value;
using flashmma::test::pack_bits;
using flashmma::test::sync_and_check;
using flashmma::test::to_device;

// ---- cp.async ------------------------------------------------------------------------------

constexpr int kCpAsyncChunks = 2 * kWarpSize;  // two 16-byte copies per lane, in two groups

__host__ __device__ bool group0_in_bounds(int lane) { return lane % 3 != 0; }
__host__ __device__ bool group1_in_bounds(int lane) { return lane % 5 != 0; }

// after_first_wait: each lane's group-0 chunk right after cp.async.wait_group 1.
// final: every chunk after wait_group 0. neighbor: chunk (lane + 1) % 32, written by another
// lane, read after wait_group 0 and a barrier.
__global__ void cp_async_kernel(const uint4* src, uint4* after_first_wait, uint4* final_chunks,
                                uint4* neighbor) {
  __shared__ uint4 smem[kCpAsyncChunks];
  const int lane = static_cast<int>(threadIdx.x);
  const uint4 garbage = make_uint4(0xABABABABu, 0xABABABABu, 0xABABABABu, 0xABABABABu);
  smem[lane] = garbage;
  smem[kWarpSize + lane] = garbage;
  __syncthreads();

  ptx::cp_async_cg_16(ptx::smem_address(&smem[lane]), &src[lane], group0_in_bounds(lane));
  ptx::cp_async_commit();
  ptx::cp_async_cg_16(ptx::smem_address(&smem[kWarpSize + lane]), &src[kWarpSize + lane],
                      group1_in_bounds(lane));
  ptx::cp_async_commit();

  ptx::cp_async_wait<1>();  // group 0 has landed, group 1 may still be in flight
  after_first_wait[lane] = smem[lane];
  ptx::cp_async_wait<0>();
  final_chunks[lane] = smem[lane];
  final_chunks[kWarpSize + lane] = smem[kWarpSize + lane];
  __syncthreads();
  neighbor[lane] = smem[(lane + 1) % kWarpSize];
}

bool same_chunk(const uint4& a, const uint4& b) {
  return a.x == b.x && a.y == b.y && a.z == b.z && a.w == b.w;
}

// ---- ldmatrix ------------------------------------------------------------------------------
// Four 8x8 matrices of 16-bit values, matrix m at rows 8m..8m+7 of a [32, kLdmatrixStride] tile;
// element (m, r, c) holds ldmatrix_value(m, r, c), so every register half identifies its source.

constexpr int kLdmatrixStride = 16;  // elements per row: 8 used, 8 of padding, 32 bytes
constexpr int kLdmatrixRows = 4 * 8;

uint16_t ldmatrix_value(int matrix, int row, int col) {
  return static_cast<uint16_t>(0x100 * (matrix + 1) + 8 * row + col);
}

template <int kMatrices, bool kTransposed>
__global__ void ldmatrix_kernel(const uint16_t* tile, uint32_t* out) {
  __shared__ alignas(16) uint16_t smem[kLdmatrixRows * kLdmatrixStride];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < kLdmatrixRows * kLdmatrixStride; i += kWarpSize) smem[i] = tile[i];
  __syncthreads();

  // Lane L points at row L % 8 of matrix L / 8; lanes past the matrix count repeat (ignored).
  const int matrix = (lane / 8) % kMatrices;
  const uint32_t row_address = ptx::smem_address(&smem[(8 * matrix + lane % 8) * kLdmatrixStride]);
  uint32_t r[kMatrices];
  if constexpr (kMatrices == 1 && !kTransposed) ptx::ldmatrix_x1(r, row_address);
  if constexpr (kMatrices == 2 && !kTransposed) ptx::ldmatrix_x2(r, row_address);
  if constexpr (kMatrices == 4 && !kTransposed) ptx::ldmatrix_x4(r, row_address);
  if constexpr (kMatrices == 1 && kTransposed) ptx::ldmatrix_x1_trans(r, row_address);
  if constexpr (kMatrices == 2 && kTransposed) ptx::ldmatrix_x2_trans(r, row_address);
  if constexpr (kMatrices == 4 && kTransposed) ptx::ldmatrix_x4_trans(r, row_address);
  for (int m = 0; m < kMatrices; ++m) out[lane * kMatrices + m] = r[m];
}

template <int kMatrices, bool kTransposed>
void check_ldmatrix() {
  std::vector<uint16_t> tile(kLdmatrixRows * kLdmatrixStride, 0xDEAD);
  for (int m = 0; m < 4; ++m) {
    for (int r = 0; r < 8; ++r) {
      for (int c = 0; c < 8; ++c) tile[(8 * m + r) * kLdmatrixStride + c] = ldmatrix_value(m, r, c);
    }
  }
  DeviceBuffer<uint16_t> tile_device = to_device(tile);
  DeviceBuffer<uint32_t> out_device(kWarpSize * kMatrices);
  ldmatrix_kernel<kMatrices, kTransposed><<<1, kWarpSize>>>(tile_device.get(), out_device.get());
  sync_and_check();
  const std::vector<uint32_t> out = out_device.to_host();

  int mismatches = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int m = 0; m < kMatrices; ++m) {
      const fragment::Coord first = fragment::ldmatrix_element(lane, 0, kTransposed);
      const fragment::Coord second = fragment::ldmatrix_element(lane, 1, kTransposed);
      const uint32_t expected = pack_bits(ldmatrix_value(m, first.row, first.col),
                                          ldmatrix_value(m, second.row, second.col));
      const uint32_t got = out[lane * kMatrices + m];
      if (got != expected) {
        ++mismatches;
        UNSCOPED_INFO("lane " << lane << " matrix " << m << ": got 0x" << std::hex << got
                              << ", expected 0x" << expected << std::dec);
      }
    }
  }
  REQUIRE(mismatches == 0);
}

// ---- mma -----------------------------------------------------------------------------------

template <class Element>
__global__ void mma_kernel(const uint32_t* a, const uint32_t* b, const float* c, float* d) {
  const int lane = static_cast<int>(threadIdx.x);
  uint32_t a_frag[4];
  uint32_t b_frag[2];
  float c_frag[4];
  float d_frag[4];
  for (int i = 0; i < 4; ++i) a_frag[i] = a[4 * lane + i];
  for (int i = 0; i < 2; ++i) b_frag[i] = b[2 * lane + i];
  for (int i = 0; i < 4; ++i) c_frag[i] = c[4 * lane + i];
  ptx::mma_m16n8k16<Element>(d_frag, a_frag, b_frag, c_frag);
  for (int i = 0; i < 4; ++i) d[4 * lane + i] = d_frag[i];
}

// ---- ldmatrix feeding mma --------------------------------------------------------------------
// The kernel's own composition: A (16 x 16, row-major) through ldmatrix_a_x4_source, K
// ([n = 16, k = 16], row-major) through ldmatrix_b_x4_source, V ([k = 16, n = 16], row-major)
// through ldmatrix_b_trans_x4_source with .trans. Computes S = A K^T and O = A V for two n8 tiles
// each, then reuses S's two C fragments as one A fragment (P) for P V.

constexpr int kTileStride = 24;  // 16 elements + 8 of padding: rows stay 16-byte aligned
constexpr int kTileElements = 16 * kTileStride;


// out: per lane, S tiles 0 and 1, O tiles 0 and 1, PV tiles 0 and 1 (4 floats each).
constexpr int kComposedOutputs = 6 * 4;

template <class Element>
__global__ void ldmatrix_mma_kernel(const uint16_t* a, const uint16_t* k, const uint16_t* v,
                                    float* out) {
  __shared__ alignas(16) uint16_t a_smem[kTileElements];
  __shared__ alignas(16) uint16_t k_smem[kTileElements];
  __shared__ alignas(16) uint16_t v_smem[kTileElements];
  const int lane = static_cast<int>(threadIdx.x);
  for (int i = lane; i < kTileElements; i += kWarpSize) {
    a_smem[i] = a[i];
    k_smem[i] = k[i];
    v_smem[i] = v[i];
  }
  __syncthreads();

  const fragment::Coord a_src = fragment::ldmatrix_a_x4_source(lane);
  const fragment::Coord k_src = fragment::ldmatrix_b_x4_source(lane);
  const fragment::Coord v_src = fragment::ldmatrix_b_trans_x4_source(lane);
  uint32_t a_frag[4];
  uint32_t k_frag[4];
  uint32_t v_frag[4];
  ptx::ldmatrix_x4(a_frag, ptx::smem_address(&a_smem[a_src.row * kTileStride + a_src.col]));
  ptx::ldmatrix_x4(k_frag, ptx::smem_address(&k_smem[k_src.row * kTileStride + k_src.col]));
  ptx::ldmatrix_x4_trans(v_frag, ptx::smem_address(&v_smem[v_src.row * kTileStride + v_src.col]));

  const float zero[4] = {0.f, 0.f, 0.f, 0.f};
  float s[2][4];
  float o[2][4];
  for (int t = 0; t < 2; ++t) {
    const uint32_t k_tile[2] = {k_frag[2 * t], k_frag[2 * t + 1]};
    const uint32_t v_tile[2] = {v_frag[2 * t], v_frag[2 * t + 1]};
    ptx::mma_m16n8k16<Element>(s[t], a_frag, k_tile, zero);
    ptx::mma_m16n8k16<Element>(o[t], a_frag, v_tile, zero);
  }
  // The C fragments of keys 0-7 and 8-15 are the A fragment of one k16 slice of keys.
  const uint32_t p_frag[4] = {flashmma::pack_pair<Element>(s[0][0], s[0][1]),
                              flashmma::pack_pair<Element>(s[0][2], s[0][3]),
                              flashmma::pack_pair<Element>(s[1][0], s[1][1]),
                              flashmma::pack_pair<Element>(s[1][2], s[1][3])};
  float pv[2][4];
  for (int t = 0; t < 2; ++t) {
    const uint32_t v_tile[2] = {v_frag[2 * t], v_frag[2 * t + 1]};
    ptx::mma_m16n8k16<Element>(pv[t], p_frag, v_tile, zero);
  }
  for (int t = 0; t < 2; ++t) {
    for (int i = 0; i < 4; ++i) {
      out[lane * kComposedOutputs + 0 + 4 * t + i] = s[t][i];
      out[lane * kComposedOutputs + 8 + 4 * t + i] = o[t][i];
      out[lane * kComposedOutputs + 16 + 4 * t + i] = pv[t][i];
    }
  }
}

// ---- shuffles and ex2 ----------------------------------------------------------------------

constexpr int kXorMaskCount = 5;  // lane masks 1, 2, 4, 8, 16

float shuffle_input(int lane) { return static_cast<float>((lane * 7) % kWarpSize - 10); }

// out: per mask, shfl_xor of every lane; then quad_max; then quad_sum.
__global__ void shuffle_kernel(const float* in, float* out) {
  const int lane = static_cast<int>(threadIdx.x);
  const float value = in[lane];
  for (int m = 0; m < kXorMaskCount; ++m) {
    out[m * kWarpSize + lane] = ptx::shfl_xor(value, 1 << m);
  }
  out[kXorMaskCount * kWarpSize + lane] = ptx::quad_max(value);
  out[(kXorMaskCount + 1) * kWarpSize + lane] = ptx::quad_sum(value);
}

__global__ void ex2_kernel(const float* in, float* out, int count) {
  for (int i = static_cast<int>(threadIdx.x); i < count; i += kWarpSize) {
    out[i] = ptx::ex2_approx(in[i]);
  }
}

__global__ void smem_address_kernel(uint32_t* out) {
  __shared__ alignas(16) float first[64];
  __shared__ alignas(16) float second[64];
  if (threadIdx.x == 0) {
    out[0] = ptx::smem_address(&first[0]);
    out[1] = ptx::smem_address(&first[37]);
    out[2] = ptx::smem_address(&second[0]);
  }
}

}  // namespace

TEST_CASE("cp_async_cg_16 copies or zero-fills 16 bytes; wait<N> waits for groups",
          "[gpu][ptx][cp_async]") {
  std::vector<uint32_t> words(4 * kCpAsyncChunks);
  for (std::size_t i = 0; i < words.size(); ++i) words[i] = 0x01000000u + static_cast<uint32_t>(i);
  std::vector<uint4> src(kCpAsyncChunks);
  std::memcpy(src.data(), words.data(), words.size() * sizeof(uint32_t));
  DeviceBuffer<uint4> src_device = to_device(src);
  DeviceBuffer<uint4> after_first_wait(kWarpSize);
  DeviceBuffer<uint4> final_chunks(kCpAsyncChunks);
  DeviceBuffer<uint4> neighbor(kWarpSize);
  cp_async_kernel<<<1, kWarpSize>>>(src_device.get(), after_first_wait.get(), final_chunks.get(),
                                    neighbor.get());
  sync_and_check();
  const std::vector<uint4> early = after_first_wait.to_host();
  const std::vector<uint4> final_host = final_chunks.to_host();
  const std::vector<uint4> neighbor_host = neighbor.to_host();

  const uint4 zero = make_uint4(0, 0, 0, 0);
  auto expected = [&](int chunk) {
    const int lane = chunk % kWarpSize;
    const bool in_bounds = chunk < kWarpSize ? group0_in_bounds(lane) : group1_in_bounds(lane);
    return in_bounds ? src[static_cast<std::size_t>(chunk)] : zero;
  };
  int early_mismatches = 0;
  int final_mismatches = 0;
  int neighbor_mismatches = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    if (!same_chunk(early[lane], expected(lane))) ++early_mismatches;
    if (!same_chunk(neighbor_host[lane], expected((lane + 1) % kWarpSize))) ++neighbor_mismatches;
  }
  for (int chunk = 0; chunk < kCpAsyncChunks; ++chunk) {
    if (!same_chunk(final_host[chunk], expected(chunk))) ++final_mismatches;
  }
  REQUIRE(early_mismatches == 0);
  REQUIRE(final_mismatches == 0);
  REQUIRE(neighbor_mismatches == 0);
}

TEST_CASE("ldmatrix delivers the documented element of every matrix", "[gpu][ptx][ldmatrix]") {
  SECTION("x1") { check_ldmatrix<1, false>(); }
  SECTION("x2") { check_ldmatrix<2, false>(); }
  SECTION("x4") { check_ldmatrix<4, false>(); }
  SECTION("x1.trans") { check_ldmatrix<1, true>(); }
  SECTION("x2.trans") { check_ldmatrix<2, true>(); }
  SECTION("x4.trans") { check_ldmatrix<4, true>(); }
}

TEMPLATE_TEST_CASE("mma_m16n8k16 computes A B + C on the documented fragments",
                   "[gpu][ptx][mma]", __half, __nv_bfloat16) {
  using Element = TestType;
  double a[16][16];
  double b[16][8];
  double c[16][8];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) a[i][j] = eighths(1, 16 * i + j);
    for (int j = 0; j < 8; ++j) b[i][j] = eighths(2, 8 * i + j);
    for (int j = 0; j < 8; ++j) c[i][j] = eighths(3, 8 * i + j);
  }
  std::vector<uint32_t> a_frags(4 * kWarpSize);
  std::vector<uint32_t> b_frags(2 * kWarpSize);
  std::vector<float> c_frags(4 * kWarpSize);
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      const fragment::Coord lo = fragment::a_coord(lane, reg, 0);
      const fragment::Coord hi = fragment::a_coord(lane, reg, 1);
      a_frags[4 * lane + reg] = pack_bits(element_bits<Element>(a[lo.row][lo.col]),
                                          element_bits<Element>(a[hi.row][hi.col]));
      const fragment::Coord cc = fragment::c_coord(lane, reg);
      c_frags[4 * lane + reg] = static_cast<float>(c[cc.row][cc.col]);
    }
    for (int reg = 0; reg < 2; ++reg) {
      const fragment::Coord lo = fragment::b_coord(lane, reg, 0);
      const fragment::Coord hi = fragment::b_coord(lane, reg, 1);
      b_frags[2 * lane + reg] = pack_bits(element_bits<Element>(b[lo.row][lo.col]),
                                          element_bits<Element>(b[hi.row][hi.col]));
    }
  }
  DeviceBuffer<uint32_t> a_device = to_device(a_frags);
  DeviceBuffer<uint32_t> b_device = to_device(b_frags);
  DeviceBuffer<float> c_device = to_device(c_frags);
  DeviceBuffer<float> d_device(4 * kWarpSize);
  mma_kernel<Element><<<1, kWarpSize>>>(a_device.get(), b_device.get(), c_device.get(),
                                        d_device.get());
  sync_and_check();
  const std::vector<float> d = d_device.to_host();

  int mismatches = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int reg = 0; reg < 4; ++reg) {
      const fragment::Coord at = fragment::c_coord(lane, reg);
      double expected = c[at.row][at.col];
      for (int k = 0; k < 16; ++k) expected += a[at.row][k] * b[k][at.col];
      const double got = d[static_cast<std::size_t>(4 * lane + reg)];
      if (got != expected) {
        ++mismatches;
        UNSCOPED_INFO("lane " << lane << " reg " << reg << " (" << at.row << ", " << at.col
                              << "): got " << got << ", expected " << expected);
      }
    }
  }
  REQUIRE(mismatches == 0);
}

TEMPLATE_TEST_CASE("ldmatrix sources of fragment_map feed mma as the kernel does",
                   "[gpu][ptx][ldmatrix][mma]", __half, __nv_bfloat16) {
  using Element = TestType;
  double a[16][16];
  double k[16][16];  // [key n, k]
  double v[16][16];  // [key k, n]
  std::vector<uint16_t> a_tile(kTileElements, 0);
  std::vector<uint16_t> k_tile(kTileElements, 0);
  std::vector<uint16_t> v_tile(kTileElements, 0);
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      a[i][j] = eighths(4, 16 * i + j);
      k[i][j] = eighths(5, 16 * i + j);
      v[i][j] = eighths(6, 16 * i + j);
      a_tile[i * kTileStride + j] = element_bits<Element>(a[i][j]);
      k_tile[i * kTileStride + j] = element_bits<Element>(k[i][j]);
      v_tile[i * kTileStride + j] = element_bits<Element>(v[i][j]);
    }
  }
  // Expected results, all exact: S = A K^T, O = A V, PV = round(S) V.
  double s[16][16];
  double o[16][16];
  double pv[16][16];
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      s[i][j] = 0.0;
      o[i][j] = 0.0;
      for (int x = 0; x < 16; ++x) {
        s[i][j] += a[i][x] * k[j][x];
        o[i][j] += a[i][x] * v[x][j];
      }
    }
  }
  for (int i = 0; i < 16; ++i) {
    for (int j = 0; j < 16; ++j) {
      pv[i][j] = 0.0;
      for (int x = 0; x < 16; ++x) {
        pv[i][j] += flashmma::test::round_to<Element>(s[i][x]) * v[x][j];
      }
    }
  }

  DeviceBuffer<uint16_t> a_device = to_device(a_tile);
  DeviceBuffer<uint16_t> k_device = to_device(k_tile);
  DeviceBuffer<uint16_t> v_device = to_device(v_tile);
  DeviceBuffer<float> out_device(kComposedOutputs * kWarpSize);
  ldmatrix_mma_kernel<Element><<<1, kWarpSize>>>(a_device.get(), k_device.get(), v_device.get(),
                                                 out_device.get());
  sync_and_check();
  const std::vector<float> out = out_device.to_host();

  int s_mismatches = 0;
  int o_mismatches = 0;
  int pv_mismatches = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int t = 0; t < 2; ++t) {
      for (int reg = 0; reg < 4; ++reg) {
        const fragment::Coord at = fragment::c_coord(lane, reg);
        const int col = 8 * t + at.col;
        const std::size_t base = static_cast<std::size_t>(lane * kComposedOutputs + 4 * t + reg);
        if (out[base] != s[at.row][col]) ++s_mismatches;
        if (out[base + 8] != o[at.row][col]) ++o_mismatches;
        if (out[base + 16] != pv[at.row][col]) ++pv_mismatches;
      }
    }
  }
  REQUIRE(s_mismatches == 0);
  REQUIRE(o_mismatches == 0);
  REQUIRE(pv_mismatches == 0);
}

TEST_CASE("shfl_xor, quad_max and quad_sum exchange the documented lanes",
          "[gpu][ptx][shuffle]") {
  std::vector<float> in(kWarpSize);
  for (int lane = 0; lane < kWarpSize; ++lane) in[lane] = shuffle_input(lane);
  DeviceBuffer<float> in_device = to_device(in);
  DeviceBuffer<float> out_device((kXorMaskCount + 2) * kWarpSize);
  shuffle_kernel<<<1, kWarpSize>>>(in_device.get(), out_device.get());
  sync_and_check();
  const std::vector<float> out = out_device.to_host();

  int xor_mismatches = 0;
  int max_mismatches = 0;
  int sum_mismatches = 0;
  for (int lane = 0; lane < kWarpSize; ++lane) {
    for (int m = 0; m < kXorMaskCount; ++m) {
      if (out[m * kWarpSize + lane] != in[lane ^ (1 << m)]) ++xor_mismatches;
    }
    const int quad = lane & ~(fragment::kLanesPerRow - 1);
    float quad_max = in[quad];
    float quad_sum = 0.f;
    for (int q = 0; q < fragment::kLanesPerRow; ++q) {
      quad_max = std::max(quad_max, in[quad + q]);
      quad_sum += in[quad + q];
    }
    if (out[kXorMaskCount * kWarpSize + lane] != quad_max) ++max_mismatches;
    if (out[(kXorMaskCount + 1) * kWarpSize + lane] != quad_sum) ++sum_mismatches;
  }
  REQUIRE(xor_mismatches == 0);
  REQUIRE(max_mismatches == 0);
  REQUIRE(sum_mismatches == 0);
}

TEST_CASE("ex2_approx is 2^x within 2^-21 relative, and 0 at -inf", "[gpu][ptx][math]") {
  std::vector<float> in;
  for (int i = -80; i <= 80; ++i) in.push_back(static_cast<float>(i) * 0.25f + 0.013f * (i % 7));
  in.push_back(0.f);
  in.push_back(-std::numeric_limits<float>::infinity());
  in.push_back(-200.f);
  const int count = static_cast<int>(in.size());
  DeviceBuffer<float> in_device = to_device(in);
  DeviceBuffer<float> out_device(count);
  ex2_kernel<<<1, kWarpSize>>>(in_device.get(), out_device.get(), count);
  sync_and_check();
  const std::vector<float> out = out_device.to_host();

  const double relative_bound = std::ldexp(1.0, -21);
  double max_relative_error = 0.0;
  for (int i = 0; i < count - 2; ++i) {
    const double exact = std::exp2(static_cast<double>(in[i]));
    max_relative_error = std::max(max_relative_error, std::fabs(out[i] - exact) / exact);
  }
  const float at_minus_infinity = out[count - 2];
  const float at_minus_200 = out[count - 1];
  CAPTURE(max_relative_error);
  REQUIRE(max_relative_error <= relative_bound);
  REQUIRE(at_minus_infinity == 0.f);
  REQUIRE(at_minus_200 == 0.f);
}

TEST_CASE("smem_address gives byte offsets within the shared window", "[gpu][ptx][smem]") {
  DeviceBuffer<uint32_t> out_device(3);
  smem_address_kernel<<<1, kWarpSize>>>(out_device.get());
  sync_and_check();
  const std::vector<uint32_t> out = out_device.to_host();
  const uint32_t within_array = out[1] - out[0];
  const bool distinct_arrays = out[2] != out[0];
  const bool aligned = out[0] % 16 == 0 && out[2] % 16 == 0;
  REQUIRE(within_array == 37 * sizeof(float));
  REQUIRE(distinct_arrays);
  REQUIRE(aligned);
}
