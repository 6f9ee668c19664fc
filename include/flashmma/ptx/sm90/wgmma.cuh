// SPDX-License-Identifier: Apache-2.0
// wgmma (sm_90a): warpgroup-wide asynchronous matrix multiply-accumulate, D = A B (+ D), with
// A 64 x 16 and B 16 x N of fp16 or bf16 and D 64 x N in fp32, N a multiple of 16 up to 256.
// All 128 threads of a warpgroup (4 consecutive warps) issue each instruction together.
//
// A and B come from shared memory through descriptors (operand_tile.hpp) or, in the RS form, A
// from 4 registers per thread; the accumulators stay in registers (layouts: wgmma_layout.hpp).
// The instructions run asynchronously, and the PTX rules that keep them correct are:
//   - wgmma_fence() by all 4 warps before the first wgmma and between any register access and
//     a wgmma that uses those accumulator or A registers (back-to-back wgmmas of the same shape
//     into the same accumulators need none in between);
//   - wgmma_commit_group() closes the wgmmas issued so far into a group, and
//     wgmma_wait_group<N>() waits until at most N groups are pending; accumulators and A
//     registers must not be touched, nor the shared-memory operands overwritten, before the wait
//     that covers them;
//   - shared memory written by generic stores must be made visible to the async proxy first:
//     fence_proxy_async_shared() (async_proxy.cuh) by every writer, then a barrier. Data TMA wrote
//     needs no fence.
//
// ptxas enforces the second rule by itself when it sees an accumulator access it cannot prove
// safe: it inserts waits and serializes the wgmmas, which stays correct but slow, and reports it
// only as a `ptxas info` line under -Xptxas -v ("Potential Performance Loss: wgmma.mma_async
// instructions are serialized ..." with C7510, C7511, C7514, C7515 or C7520, and C7517 / C7519
// when it injects a wait or a fence). Keeping nvcc from moving accumulator accesses into the
// async window is what wgmma_fence_operand is for: call it on the accumulators (and the A
// registers of RS) right before wgmma_fence() and right after the wgmma_wait_group() that covers
// them. tests/CMakeLists.txt fails a test when any of those lines appears for the test kernels.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <type_traits>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/wgmma_instructions.cuh"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

// The N of the m64nNk16 shapes wgmma_instructions.cuh spells out.
FLASHMMA_HOST_DEVICE constexpr bool is_supported_wgmma_n(int n) {
  return n >= 16 && n <= 256 && n % 16 == 0;
}

// wgmma.fence.sync.aligned;  orders this warpgroup's register and shared-memory accesses before
// the wgmmas that follow.
FLASHMMA_DEVICE void wgmma_fence() {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#else
  trap_missing_instruction();
#endif
}

// wgmma.commit_group.sync.aligned;  closes the wgmmas issued since the last commit into a group.
FLASHMMA_DEVICE void wgmma_commit_group() {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
#else
  trap_missing_instruction();
#endif
}

// wgmma.wait_group.sync.aligned N;  waits until at most N committed groups are still running;
// the accumulators and operands of the finished groups may then be used.
template <int N>
FLASHMMA_DEVICE void wgmma_wait_group() {
  static_assert(N >= 0 && N <= 7, "wgmma_wait_group: N is the number of groups left pending");
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory");
#else
  trap_missing_instruction();
#endif
}

// wgmma_wait_group<N>(), kept after the instructions that compute `value`. Within a basic block
// ptxas places a wait as early as its wgmmas allow, ahead of independent work written before
// it: the forward kernel's softmax of S_j, meant to run while P_(j-1) V_(j-1) computes, ran after
// the wait instead (every Hopper forward kernel at d = 64, 128 and 256). A warp-uniform branch on
// `value` ends the block once `value` is known, and the wait follows it. The branch is taken only
// where `value` is NaN, and then sleeps for no time.
template <int N>
FLASHMMA_DEVICE void wgmma_wait_group_after(float value) {
#if defined(FLASHMMA_SM90A_ENABLED)
  if (__any_sync(0xffffffffu, value != value)) asm volatile("nanosleep.u32 0;\n" ::: "memory");
#endif
  wgmma_wait_group<N>();
}

// No instruction: an empty asm that claims to read and write each register of `registers`, so
// nvcc keeps every access to them on its side of this point (CUTLASS's warpgroup_fence_operand).
// Without it nvcc may schedule an accumulator read or write into the async window, where ptxas
// then serializes the wgmmas (C7514, C7515). Valid on every architecture.
template <int kCount>
FLASHMMA_DEVICE void wgmma_fence_operand(float (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+f"(registers[i])::"memory");
}

template <int kCount>
FLASHMMA_DEVICE void wgmma_fence_operand(uint32_t (&registers)[kCount]) {
#pragma unroll
  for (int i = 0; i < kCount; ++i) asm volatile("" : "+r"(registers[i])::"memory");
}

template <class Element, int N>
FLASHMMA_HOST_DEVICE constexpr void check_wgmma_shape() {
  static_assert(std::is_same_v<Element, __half> || std::is_same_v<Element, __nv_bfloat16>,
                "wgmma: Element must be __half or __nv_bfloat16 (fp32 accumulators)");
  static_assert(is_supported_wgmma_n(N),
                "wgmma: N must be a multiple of 16 from 16 to 256 (wgmma_instructions.cuh)");
}

// wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{f16,bf16}.{f16,bf16}  d, desc_a, desc_b, p, 1, 1,
// trans_a, trans_b;  (SS: A and B in shared memory)
// d: the N/2 accumulators of this thread. accumulate false: d = A B, the old values ignored (even
// NaN); true: d += A B. kMajorB and kMajorA say which extent of each operand is contiguous (an
// MN-major A is the transpose of a tile stored K by M: dS of dQ = dS K, kept as dS^T).
template <class Element, int N, Major kMajorB = Major::kK, Major kMajorA = Major::kK>
FLASHMMA_DEVICE void wgmma_ss(float (&d)[N / 2], uint64_t desc_a, uint64_t desc_b,
                              bool accumulate) {
  check_wgmma_shape<Element, N>();
#if defined(FLASHMMA_SM90A_ENABLED)
  detail::Wgmma<N, Element>::template ss<static_cast<int>(kMajorA), static_cast<int>(kMajorB)>(
      d, desc_a, desc_b, static_cast<uint32_t>(accumulate));
#else
  trap_missing_instruction();
#endif
}

// wgmma.mma_async.sync.aligned.m64n{N}k16.f32.{f16,bf16}.{f16,bf16}  d, {a0, a1, a2, a3},
// desc_b, p, 1, 1, trans_b;  (RS: A in registers, K-major, laid out as wgmma_a_coord says)
template <class Element, int N, Major kMajorB = Major::kK>
FLASHMMA_DEVICE void wgmma_rs(float (&d)[N / 2], const uint32_t (&a)[kWgmmaARegisters],
                              uint64_t desc_b, bool accumulate) {
  check_wgmma_shape<Element, N>();
#if defined(FLASHMMA_SM90A_ENABLED)
  detail::Wgmma<N, Element>::template rs<static_cast<int>(kMajorB)>(
      d, a, desc_b, static_cast<uint32_t>(accumulate));
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
