// SPDX-License-Identifier: Apache-2.0
// What the sm_90a primitive tests share: the skip on GPUs other than compute capability 9.0,
// error checks, 16-bit element bits, exactly representable operand values, and a bounded mbarrier
// wait that turns a hang into a test failure.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/sm90/mbarrier.cuh"
#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
#include "support/gpu_helpers.cuh"
#include "support/primitive_test.cuh"
#include "support/reference.hpp"

#ifndef FLASHMMA_SKIP_RETURN_CODE
#error "tests/CMakeLists.txt defines FLASHMMA_SKIP_RETURN_CODE for the sm_90a tests"
#endif

namespace flashmma {
namespace test {
namespace sm90_support {

// These executables hold sm_90a code only (tests/CMakeLists.txt builds them for 90a-real), which
// runs on compute capability 9.0 alone. On any other GPU the program reports "skipped" before
// main() starts the tests; without a device it leaves that to gpu_main.cu, which skips too.
struct SkipUnlessComputeCapability90 {
  SkipUnlessComputeCapability90() {
    int devices = 0;
    if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) return;
    int major = 0;
    int minor = 0;
    if (cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, 0) != cudaSuccess ||
        cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, 0) != cudaSuccess) {
      return;  // let the tests report the error
    }
    if (major != 9 || minor != 0) {
      std::printf("compute capability %d.%d, not 9.0 (these tests are sm_90a code): skipping\n",
                  major, minor);
      std::exit(FLASHMMA_SKIP_RETURN_CODE);
    }
  }
};
static const SkipUnlessComputeCapability90 skip_unless_compute_capability_90;

using ptx::sm90::kWarpgroupThreads;
using test::eighths;
using test::element_bits;
using test::element_value;
using test::pack_bits;
using test::sync_and_check;
using test::to_device;

// A value in {-1, 0, 1}: sums of up to 256 products are integers of at most 256 in size, exact in
// bf16, so a product of two wgmmas with a conversion in between stays exact.
inline double small_integer(uint64_t seed, uint64_t index) {
  return static_cast<double>(static_cast<int64_t>(mix64(seed ^ mix64(index)) % 3) - 1);
}

// Every warpgroup thread's `registers` accumulators, thread after thread: c(row, col) at each
// register's place in the m64nN tile, or NaN where the first wgmma must ignore them
// (accumulate false: scale-d 0).
template <class C>
std::vector<float> initial_accumulators(int registers, bool accumulate, C&& c) {
  std::vector<float> d(static_cast<std::size_t>(kWarpgroupThreads * registers));
  for (int thread = 0; thread < kWarpgroupThreads; ++thread) {
    for (int reg = 0; reg < registers; ++reg) {
      const ptx::sm90::Coord at = ptx::sm90::wgmma_accumulator_coord(thread, reg);
      d[thread * registers + reg] = accumulate ? static_cast<float>(c(at.row, at.col))
                                               : std::numeric_limits<float>::quiet_NaN();
    }
  }
  return d;
}

// Requires every accumulator of `d` (laid out as initial_accumulators lays it out) to hold
// exactly the sum over k < k_extent of a(row, k) b(col, k), plus c(row, col) when `accumulate`.
template <class A, class B, class C>
void require_exact_product(const std::vector<float>& d, int registers, int k_extent,
                           bool accumulate, A&& a, B&& b, C&& c) {
  int mismatches = 0;
  for (int thread = 0; thread < kWarpgroupThreads; ++thread) {
    for (int reg = 0; reg < registers; ++reg) {
      const ptx::sm90::Coord at = ptx::sm90::wgmma_accumulator_coord(thread, reg);
      double expected = accumulate ? c(at.row, at.col) : 0.0;
      for (int k = 0; k < k_extent; ++k) expected += a(at.row, k) * b(at.col, k);
      const double got = d[thread * registers + reg];
      if (got != expected && ++mismatches <= 8) {
        UNSCOPED_INFO("thread " << thread << " register " << reg << " (" << at.row << ", "
                                << at.col << "): got " << got << ", expected " << expected);
      }
    }
  }
  REQUIRE(mismatches == 0);
}

// A wgmma operand tile's shared-memory image, as 16-byte words: element (mn, k) = value(mn, k)
// rounded to Element, at Tile::byte_offset(mn, k); bytes the layout leaves unused hold 0xFF (NaN
// in fp16 and bf16, so a read of one shows).
template <class Tile, class Element, class Value>
std::vector<uint4> operand_image(Value value) {
  std::vector<uint16_t> elements(Tile::kBytes / sizeof(uint16_t), 0xFFFF);
  for (int mn = 0; mn < Tile::kMnSize; ++mn) {
    for (int k = 0; k < Tile::kKSize; ++k) {
      elements[Tile::byte_offset(mn, k) / sizeof(uint16_t)] = element_bits<Element>(value(mn, k));
    }
  }
  std::vector<uint4> words(Tile::kBytes / sizeof(uint4));
  std::memcpy(words.data(), elements.data(), Tile::kBytes);
  return words;
}

// Bytes a tile takes when the next one must start kSwizzleAlignment-aligned.
constexpr uint32_t aligned_tile_bytes(uint32_t bytes) {
  return (bytes + ptx::sm90::kSwizzleAlignment - 1) / ptx::sm90::kSwizzleAlignment *
         ptx::sm90::kSwizzleAlignment;
}

// Copies `words` 16-byte words from global to shared memory, all threads of the block.
__device__ inline void copy_to_smem(unsigned char* destination, const uint4* source,
                                    uint32_t words) {
  uint4* to = reinterpret_cast<uint4*>(destination);
  for (uint32_t i = threadIdx.x; i < words; i += blockDim.x) to[i] = source[i];
}

// The first `alignment`-aligned address at or after `pointer` (dynamic shared memory is only
// 16-byte aligned; swizzled tiles need 1024).
__device__ inline unsigned char* align_up(unsigned char* pointer, uint32_t alignment) {
  const uintptr_t address = reinterpret_cast<uintptr_t>(pointer);
  return pointer + ((alignment - address % alignment) % alignment);
}

__device__ inline uint64_t global_timer_ns() {
  uint64_t now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  return now;
}

// mbarrier_wait_parity with a time limit, for tests only: a wrong parity, arrival count or byte
// count would hang the kernel forever. After kWaitLimitNs the thread reports the barrier and
// traps, so the launch fails (cudaErrorLaunchFailure) and the test with it.
inline constexpr uint64_t kWaitLimitNs = 5'000'000'000ull;

__device__ inline void wait_or_trap(uint64_t* barrier, uint32_t parity, const char* what) {
  const uint64_t start = global_timer_ns();
  while (!ptx::sm90::mbarrier_try_wait_parity(barrier, parity)) {
    if (global_timer_ns() - start > kWaitLimitNs) {
      printf("block %d thread %d: %s (parity %u) did not complete in %llu ns\n",
             static_cast<int>(blockIdx.x), static_cast<int>(threadIdx.x), what, parity,
             static_cast<unsigned long long>(kWaitLimitNs));
      __trap();
    }
  }
}

}  // namespace sm90_support
}  // namespace test
}  // namespace flashmma
