// SPDX-License-Identifier: Apache-2.0
// wgmma with both operands in shared memory (SS), one warpgroup, against a CPU matmul: every N the
// forward kernel may use, fp16 and bf16, B K-major and MN-major, A K-major and (the backward's
// dQ = dS K, dS kept as dS^T) MN-major, over a K of 128 (8 k16 slices,
// crossing from one 128-byte sub-tile to the next), with scale-d false (NaN accumulators must be
// ignored) and true (D = C + A B). Operands are placed with operand_tile.hpp's layouts and read
// through its descriptors, and every accumulator register is checked at the (row, column)
// wgmma_layout.hpp gives it. Values are small multiples of 1/8, so results compare exactly.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/smem.cuh"
#include "flashmma/ptx/sm90/async_proxy.cuh"
#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/wgmma.cuh"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
#include "test_sm90_support.cuh"

namespace {

namespace sm90 = flashmma::ptx::sm90;
using flashmma::test::DeviceBuffer;
using sm90::Major;
using sm90::Swizzle;
using namespace flashmma::test::sm90_support;

constexpr int kK = 128;

template <class ElementType, int N, Major kMajorB, Swizzle kSwizzle = Swizzle::k128B,
          Major kMajorA = Major::kK>
struct SsCase {
  using Element = ElementType;
  static constexpr int kN = N;
  using TileA = sm90::OperandTile<kMajorA, kSwizzle, sm90::kWgmmaM, kK>;
  using TileB = sm90::OperandTile<kMajorB, kSwizzle, N, kK>;
};

// D (N/2 registers per thread, d_initial) = [C +] A B over TileA::kKSteps slices.
template <class Case>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    wgmma_ss_kernel(const uint4* a_image, const uint4* b_image, const float* d_initial,
                    bool accumulate_first, float* d_out) {
  using TileA = typename Case::TileA;
  using TileB = typename Case::TileB;
  constexpr int kRegisters = Case::kN / 2;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile_a = align_up(smem_raw, sm90::kSwizzleAlignment);
  unsigned char* tile_b = tile_a + aligned_tile_bytes(TileA::kBytes);
  copy_to_smem(tile_a, a_image, TileA::kBytes / sizeof(uint4));
  copy_to_smem(tile_b, b_image, TileB::kBytes / sizeof(uint4));
  sm90::fence_proxy_async_shared();  // generic stores -> wgmma's async-proxy reads
  __syncthreads();

  const int thread = static_cast<int>(threadIdx.x);
  float d[kRegisters];
#pragma unroll
  for (int i = 0; i < kRegisters; ++i) d[i] = d_initial[thread * kRegisters + i];
  const uint32_t a_address = flashmma::ptx::smem_address(tile_a);
  const uint32_t b_address = flashmma::ptx::smem_address(tile_b);

  sm90::wgmma_fence_operand(d);
  sm90::wgmma_fence();
#pragma unroll
  for (int step = 0; step < TileA::kKSteps; ++step) {
    sm90::wgmma_ss<typename Case::Element, Case::kN, TileB::kMajorLayout, TileA::kMajorLayout>(
        d, TileA::descriptor(a_address, step), TileB::descriptor(b_address, step),
        step > 0 || accumulate_first);
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(d);

#pragma unroll
  for (int i = 0; i < kRegisters; ++i) d_out[thread * kRegisters + i] = d[i];
}

template <class Case>
void check_wgmma_ss(bool accumulate_first) {
  using Element = typename Case::Element;
  using TileA = typename Case::TileA;
  using TileB = typename Case::TileB;
  constexpr int kN = Case::kN;
  constexpr int kRegisters = kN / 2;
  const auto a = [](int m, int k) { return eighths(1, static_cast<uint64_t>(m * kK + k)); };
  const auto b = [](int n, int k) { return eighths(2, static_cast<uint64_t>(n * kK + k)); };
  const auto c = [](int m, int n) { return eighths(3, static_cast<uint64_t>(m * kN + n)); };

  const std::vector<float> d_initial = initial_accumulators(kRegisters, accumulate_first, c);
  DeviceBuffer<uint4> a_device = to_device(operand_image<TileA, Element>(a));
  DeviceBuffer<uint4> b_device = to_device(operand_image<TileB, Element>(b));
  DeviceBuffer<float> d_initial_device = to_device(d_initial);
  DeviceBuffer<float> d_device(static_cast<int64_t>(d_initial.size()));

  const uint32_t smem_bytes =
      aligned_tile_bytes(TileA::kBytes) + TileB::kBytes + flashmma::ptx::sm90::kSwizzleAlignment;
  FLASHMMA_CUDA_CHECK(cudaFuncSetAttribute(wgmma_ss_kernel<Case>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes)));
  wgmma_ss_kernel<Case><<<1, sm90::kWarpgroupThreads, smem_bytes>>>(
      a_device.get(), b_device.get(), d_initial_device.get(), accumulate_first, d_device.get());
  sync_and_check();
  const std::vector<float> d = d_device.to_host();

  require_exact_product(d, kRegisters, kK, accumulate_first, a, b, c);
}

// 128B swizzle, the layout of the forward kernel (measured on the H200 before these tests).
using SwizzledCases = std::tuple<
    SsCase<__half, 64, Major::kK>, SsCase<__half, 96, Major::kK>, SsCase<__half, 128, Major::kK>,
    SsCase<__half, 192, Major::kK>, SsCase<__half, 256, Major::kK>,
    SsCase<__nv_bfloat16, 64, Major::kK>, SsCase<__nv_bfloat16, 96, Major::kK>,
    SsCase<__nv_bfloat16, 128, Major::kK>, SsCase<__nv_bfloat16, 192, Major::kK>,
    SsCase<__nv_bfloat16, 256, Major::kK>, SsCase<__half, 64, Major::kMN>,
    SsCase<__half, 96, Major::kMN>, SsCase<__half, 128, Major::kMN>,
    SsCase<__half, 192, Major::kMN>, SsCase<__half, 256, Major::kMN>,
    SsCase<__nv_bfloat16, 64, Major::kMN>, SsCase<__nv_bfloat16, 96, Major::kMN>,
    SsCase<__nv_bfloat16, 128, Major::kMN>, SsCase<__nv_bfloat16, 192, Major::kMN>,
    SsCase<__nv_bfloat16, 256, Major::kMN>>;

// The other layouts operand_tile.hpp offers: unswizzled K-major (measured before), and the 32B
// and 64B swizzles, whose LBO/SBO follow the 128B rule but were not measured before these tests.
using OtherLayoutCases = std::tuple<SsCase<__nv_bfloat16, 64, Major::kK, Swizzle::kNone>,
                                    SsCase<__nv_bfloat16, 64, Major::kK, Swizzle::k64B>,
                                    SsCase<__nv_bfloat16, 64, Major::kK, Swizzle::k32B>,
                                    SsCase<__half, 64, Major::kMN, Swizzle::k64B>,
                                    SsCase<__half, 64, Major::kMN, Swizzle::k32B>>;

// A MN-major (imm-trans-a = 1), as the backward's dQ = dS K reads it: the N of its B (head-dim
// columns per warpgroup) with B MN-major (K as dQ's B), and K-major B for completeness.
using TransposedACases =
    std::tuple<SsCase<__half, 64, Major::kMN, Swizzle::k128B, Major::kMN>,
               SsCase<__nv_bfloat16, 64, Major::kMN, Swizzle::k128B, Major::kMN>,
               SsCase<__nv_bfloat16, 128, Major::kMN, Swizzle::k128B, Major::kMN>,
               SsCase<__half, 32, Major::kMN, Swizzle::k128B, Major::kMN>,
               SsCase<__nv_bfloat16, 64, Major::kK, Swizzle::k128B, Major::kMN>>;

}  // namespace

TEMPLATE_LIST_TEST_CASE("wgmma SS with A MN-major (transposed) computes A B",
                        "[gpu][sm90][wgmma]", TransposedACases) {
  SECTION("scale-d false ignores NaN accumulators") { check_wgmma_ss<TestType>(false); }
  SECTION("scale-d true accumulates onto C") { check_wgmma_ss<TestType>(true); }
}

TEMPLATE_LIST_TEST_CASE("wgmma SS computes A B and C + A B, 128B-swizzled operands",
                        "[gpu][sm90][wgmma]", SwizzledCases) {
  SECTION("scale-d false ignores NaN accumulators") { check_wgmma_ss<TestType>(false); }
  SECTION("scale-d true accumulates onto C") { check_wgmma_ss<TestType>(true); }
}

TEMPLATE_LIST_TEST_CASE("wgmma SS on unswizzled, 64B- and 32B-swizzled operands",
                        "[gpu][sm90][wgmma]", OtherLayoutCases) {
  check_wgmma_ss<TestType>(true);
}
