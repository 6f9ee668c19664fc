// SPDX-License-Identifier: Apache-2.0
// wgmma with A in registers (RS), one warpgroup, against a CPU matmul:
//   - A built on the host in the layout wgmma_layout.hpp's wgmma_a_coord gives (the mma.sync
//     m16n8k16 A fragment per warp), B in shared memory K-major or MN-major, fp16 and bf16;
//   - the attention chain S = Q K^T (SS) -> P = S rounded to 16 bits, in registers -> O = P V (RS,
//     V MN-major), with P's registers taken straight from S's accumulators
//     (accumulator_for_a: the "RS fragment identity"). Values in {-1, 0, 1} keep S exact in bf16,
//     so O compares exactly too.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <limits>
#include <tuple>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/pack.cuh"
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

constexpr int kA = sm90::kWgmmaARegisters;

// ---- RS with A from the host ----------------------------------------------------------------

constexpr int kK = 64;
constexpr int kKSteps = kK / sm90::kWgmmaK;

template <class ElementType, int N, Major kMajorB>
struct RsCase {
  using Element = ElementType;
  static constexpr int kN = N;
  using TileB = sm90::OperandTile<kMajorB, Swizzle::k128B, N, kK>;
};

// a_fragments: per thread, per k16 slice, the 4 A registers. D = [C +] A B.
template <class Case>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    wgmma_rs_kernel(const uint32_t* a_fragments, const uint4* b_image, const float* d_initial,
                    bool accumulate_first, float* d_out) {
  using TileB = typename Case::TileB;
  constexpr int kRegisters = Case::kN / 2;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile_b = align_up(smem_raw, sm90::kSwizzleAlignment);
  copy_to_smem(tile_b, b_image, TileB::kBytes / sizeof(uint4));
  sm90::fence_proxy_async_shared();
  __syncthreads();

  const int thread = static_cast<int>(threadIdx.x);
  uint32_t a[kKSteps][kA];
#pragma unroll
  for (int step = 0; step < kKSteps; ++step) {
#pragma unroll
    for (int reg = 0; reg < kA; ++reg) {
      a[step][reg] = a_fragments[(thread * kKSteps + step) * kA + reg];
    }
  }
  float d[kRegisters];
#pragma unroll
  for (int i = 0; i < kRegisters; ++i) d[i] = d_initial[thread * kRegisters + i];
  const uint32_t b_address = flashmma::ptx::smem_address(tile_b);

  sm90::wgmma_fence_operand(d);
#pragma unroll
  for (int step = 0; step < kKSteps; ++step) sm90::wgmma_fence_operand(a[step]);
  sm90::wgmma_fence();
#pragma unroll
  for (int step = 0; step < kKSteps; ++step) {
    sm90::wgmma_rs<typename Case::Element, Case::kN, TileB::kMajorLayout>(
        d, a[step], TileB::descriptor(b_address, step), step > 0 || accumulate_first);
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(d);

#pragma unroll
  for (int i = 0; i < kRegisters; ++i) d_out[thread * kRegisters + i] = d[i];
}

template <class Case>
void check_wgmma_rs(bool accumulate_first) {
  using Element = typename Case::Element;
  using TileB = typename Case::TileB;
  constexpr int kN = Case::kN;
  constexpr int kRegisters = kN / 2;
  const auto a = [](int m, int k) { return eighths(4, static_cast<uint64_t>(m * kK + k)); };
  const auto b = [](int n, int k) { return eighths(5, static_cast<uint64_t>(n * kK + k)); };
  const auto c = [](int m, int n) { return eighths(6, static_cast<uint64_t>(m * kN + n)); };

  std::vector<uint32_t> a_fragments(sm90::kWarpgroupThreads * kKSteps * kA);
  const std::vector<float> d_initial = initial_accumulators(kRegisters, accumulate_first, c);
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    for (int step = 0; step < kKSteps; ++step) {
      for (int reg = 0; reg < kA; ++reg) {
        const sm90::Coord low = sm90::wgmma_a_coord(thread, reg, 0);
        const sm90::Coord high = sm90::wgmma_a_coord(thread, reg, 1);
        const int k0 = sm90::kWgmmaK * step;
        a_fragments[(thread * kKSteps + step) * kA + reg] =
            pack_bits(element_bits<Element>(a(low.row, k0 + low.col)),
                      element_bits<Element>(a(high.row, k0 + high.col)));
      }
    }
  }
  DeviceBuffer<uint32_t> a_device = to_device(a_fragments);
  DeviceBuffer<uint4> b_device = to_device(operand_image<TileB, Element>(b));
  DeviceBuffer<float> d_initial_device = to_device(d_initial);
  DeviceBuffer<float> d_device(static_cast<int64_t>(d_initial.size()));

  const uint32_t smem_bytes = TileB::kBytes + sm90::kSwizzleAlignment;
  FLASHMMA_CUDA_CHECK(cudaFuncSetAttribute(wgmma_rs_kernel<Case>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes)));
  wgmma_rs_kernel<Case><<<1, sm90::kWarpgroupThreads, smem_bytes>>>(
      a_device.get(), b_device.get(), d_initial_device.get(), accumulate_first, d_device.get());
  sync_and_check();
  const std::vector<float> d = d_device.to_host();

  require_exact_product(d, kRegisters, kK, accumulate_first, a, b, c);
}

using RsCases = std::tuple<
    RsCase<__half, 64, Major::kK>, RsCase<__half, 128, Major::kK>, RsCase<__half, 256, Major::kK>,
    RsCase<__nv_bfloat16, 64, Major::kK>, RsCase<__nv_bfloat16, 128, Major::kK>,
    RsCase<__nv_bfloat16, 256, Major::kK>, RsCase<__half, 64, Major::kMN>,
    RsCase<__half, 128, Major::kMN>, RsCase<__half, 256, Major::kMN>,
    RsCase<__nv_bfloat16, 64, Major::kMN>, RsCase<__nv_bfloat16, 128, Major::kMN>,
    RsCase<__nv_bfloat16, 256, Major::kMN>>;

// ---- The chain S = Q K^T -> P -> O = P V ------------------------------------------------------

constexpr int kQkDim = 64;  // K of Q K^T

template <class ElementType, int kKeys, int kHeadDim>
struct ChainCase {
  using Element = ElementType;
  static constexpr int kKeyCount = kKeys;
  static constexpr int kValueDim = kHeadDim;
  using TileQ = sm90::OperandTile<Major::kK, Swizzle::k128B, sm90::kWgmmaM, kQkDim>;
  using TileK = sm90::OperandTile<Major::kK, Swizzle::k128B, kKeys, kQkDim>;
  using TileV = sm90::OperandTile<Major::kMN, Swizzle::k128B, kHeadDim, kKeys>;
};

template <class Case>
__global__ void __launch_bounds__(kWarpgroupThreads, 1)
    wgmma_chain_kernel(const uint4* q_image, const uint4* k_image, const uint4* v_image,
                       float* s_out, float* o_out) {
  using TileQ = typename Case::TileQ;
  using TileK = typename Case::TileK;
  using TileV = typename Case::TileV;
  using Element = typename Case::Element;
  constexpr int kScores = Case::kKeyCount / 2;
  constexpr int kOutputs = Case::kValueDim / 2;
  constexpr int kPSlices = Case::kKeyCount / sm90::kWgmmaK;
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile_q = align_up(smem_raw, sm90::kSwizzleAlignment);
  unsigned char* tile_k = tile_q + aligned_tile_bytes(TileQ::kBytes);
  unsigned char* tile_v = tile_k + aligned_tile_bytes(TileK::kBytes);
  copy_to_smem(tile_q, q_image, TileQ::kBytes / sizeof(uint4));
  copy_to_smem(tile_k, k_image, TileK::kBytes / sizeof(uint4));
  copy_to_smem(tile_v, v_image, TileV::kBytes / sizeof(uint4));
  sm90::fence_proxy_async_shared();
  __syncthreads();
  const uint32_t q_address = flashmma::ptx::smem_address(tile_q);
  const uint32_t k_address = flashmma::ptx::smem_address(tile_k);
  const uint32_t v_address = flashmma::ptx::smem_address(tile_v);

  float s[kScores];
#pragma unroll
  for (int i = 0; i < kScores; ++i) s[i] = 0.f;
  sm90::wgmma_fence_operand(s);
  sm90::wgmma_fence();
#pragma unroll
  for (int step = 0; step < TileQ::kKSteps; ++step) {
    sm90::wgmma_ss<Element, Case::kKeyCount, Major::kK>(
        s, TileQ::descriptor(q_address, step), TileK::descriptor(k_address, step), step > 0);
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(s);

  // P's A registers of slice j come straight from S's accumulators, no shuffle.
  uint32_t p[kPSlices][kA];
#pragma unroll
  for (int slice = 0; slice < kPSlices; ++slice) {
#pragma unroll
    for (int reg = 0; reg < kA; ++reg) {
      p[slice][reg] = flashmma::pack_pair<Element>(s[sm90::accumulator_for_a(slice, reg, 0)],
                                                   s[sm90::accumulator_for_a(slice, reg, 1)]);
    }
  }
  float o[kOutputs];
#pragma unroll
  for (int i = 0; i < kOutputs; ++i) o[i] = 0.f;
  sm90::wgmma_fence_operand(o);
#pragma unroll
  for (int slice = 0; slice < kPSlices; ++slice) sm90::wgmma_fence_operand(p[slice]);
  sm90::wgmma_fence();  // P's registers were written since the last fence
#pragma unroll
  for (int slice = 0; slice < kPSlices; ++slice) {
    sm90::wgmma_rs<Element, Case::kValueDim, Major::kMN>(
        o, p[slice], TileV::descriptor(v_address, slice), slice > 0);
  }
  sm90::wgmma_commit_group();
  sm90::wgmma_wait_group<0>();
  sm90::wgmma_fence_operand(o);

  const int thread = static_cast<int>(threadIdx.x);
#pragma unroll
  for (int i = 0; i < kScores; ++i) s_out[thread * kScores + i] = s[i];
#pragma unroll
  for (int i = 0; i < kOutputs; ++i) o_out[thread * kOutputs + i] = o[i];
}

template <class Case>
void check_chain() {
  using Element = typename Case::Element;
  using TileQ = typename Case::TileQ;
  using TileK = typename Case::TileK;
  using TileV = typename Case::TileV;
  constexpr int kKeys = Case::kKeyCount;
  constexpr int kDim = Case::kValueDim;
  constexpr int kScores = kKeys / 2;
  constexpr int kOutputs = kDim / 2;
  const auto q = [](int m, int d) {
    return small_integer(7, static_cast<uint64_t>(m * kQkDim + d));
  };
  const auto k = [](int key, int d) {
    return small_integer(8, static_cast<uint64_t>(key * kQkDim + d));
  };
  // V is [key, d]: as the MN-major B of P V, element (mn = d, k = key).
  const auto v = [](int d, int key) {
    return small_integer(9, static_cast<uint64_t>(key * kDim + d));
  };

  DeviceBuffer<uint4> q_device = to_device(operand_image<TileQ, Element>(q));
  DeviceBuffer<uint4> k_device = to_device(operand_image<TileK, Element>(k));
  DeviceBuffer<uint4> v_device = to_device(operand_image<TileV, Element>(v));
  DeviceBuffer<float> s_device(sm90::kWarpgroupThreads * kScores);
  DeviceBuffer<float> o_device(sm90::kWarpgroupThreads * kOutputs);
  const uint32_t smem_bytes = aligned_tile_bytes(TileQ::kBytes) +
                              aligned_tile_bytes(TileK::kBytes) + TileV::kBytes +
                              sm90::kSwizzleAlignment;
  FLASHMMA_CUDA_CHECK(cudaFuncSetAttribute(wgmma_chain_kernel<Case>,
                                           cudaFuncAttributeMaxDynamicSharedMemorySize,
                                           static_cast<int>(smem_bytes)));
  wgmma_chain_kernel<Case><<<1, sm90::kWarpgroupThreads, smem_bytes>>>(
      q_device.get(), k_device.get(), v_device.get(), s_device.get(), o_device.get());
  sync_and_check();
  const std::vector<float> s_got = s_device.to_host();
  const std::vector<float> o_got = o_device.to_host();

  std::vector<double> scores(sm90::kWgmmaM * kKeys, 0.0);
  for (int m = 0; m < sm90::kWgmmaM; ++m) {
    for (int key = 0; key < kKeys; ++key) {
      for (int d = 0; d < kQkDim; ++d) scores[m * kKeys + key] += q(m, d) * k(key, d);
    }
  }
  int mismatches = 0;
  for (int thread = 0; thread < sm90::kWarpgroupThreads; ++thread) {
    for (int reg = 0; reg < kScores; ++reg) {
      const sm90::Coord at = sm90::wgmma_accumulator_coord(thread, reg);
      const double expected = scores[at.row * kKeys + at.col];
      const double got = s_got[thread * kScores + reg];
      if (got != expected && ++mismatches <= 8) {
        UNSCOPED_INFO("S: thread " << thread << " register " << reg << ": got " << got
                                   << ", expected " << expected);
      }
    }
    for (int reg = 0; reg < kOutputs; ++reg) {
      const sm90::Coord at = sm90::wgmma_accumulator_coord(thread, reg);
      double expected = 0.0;
      for (int key = 0; key < kKeys; ++key) {
        const double p = flashmma::test::to_double(
            flashmma::test::from_double<Element>(scores[at.row * kKeys + key]));
        expected += p * v(at.col, key);
      }
      const double got = o_got[thread * kOutputs + reg];
      if (got != expected && ++mismatches <= 8) {
        UNSCOPED_INFO("O: thread " << thread << " register " << reg << " (" << at.row << ", "
                                   << at.col << "): got " << got << ", expected " << expected);
      }
    }
  }
  REQUIRE(mismatches == 0);
}

using ChainCases = std::tuple<ChainCase<__half, 128, 64>, ChainCase<__nv_bfloat16, 128, 64>,
                              ChainCase<__half, 64, 128>, ChainCase<__nv_bfloat16, 64, 128>>;

}  // namespace

TEMPLATE_LIST_TEST_CASE("wgmma RS computes A B and C + A B, A in the mma.sync fragment layout",
                        "[gpu][sm90][wgmma]", RsCases) {
  SECTION("scale-d false ignores NaN accumulators") { check_wgmma_rs<TestType>(false); }
  SECTION("scale-d true accumulates onto C") { check_wgmma_rs<TestType>(true); }
}

TEMPLATE_LIST_TEST_CASE("wgmma SS -> registers -> RS: S's accumulators are P's A operand",
                        "[gpu][sm90][wgmma]", ChainCases) {
  check_chain<TestType>();
}
