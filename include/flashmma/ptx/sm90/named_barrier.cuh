// SPDX-License-Identifier: Apache-2.0
// Named barriers (bar.sync / bar.arrive with an id and a thread count): synchronization among a
// subset of a block's warps, as warp-specialized kernels need once the producer warps have
// exited (after which __syncthreads, barrier 0 over the whole block, would hang).
//
// A block has 16 barriers; id 0 is __syncthreads'. `threads` counts every participant, those
// that sync and those that only arrive, and is a multiple of 32 (whole warps). bar.arrive does
// not wait: a warpgroup that arrives on another's barrier lets it proceed without waiting itself,
// which is how two consumer warpgroups take turns (ping-pong). Kernels name their ids with an
// enum class.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

inline constexpr uint32_t kNamedBarrierCount = 16;

// bar.sync id, threads;  waits until `threads` threads have arrived at barrier `id` (this one
// included), and orders memory among them like __syncthreads.
FLASHMMA_DEVICE void named_barrier_sync(uint32_t id, uint32_t threads) {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("bar.sync %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  trap_missing_instruction();
#endif
}

// bar.arrive id, threads;  counts this thread's arrival at barrier `id` and goes on.
FLASHMMA_DEVICE void named_barrier_arrive(uint32_t id, uint32_t threads) {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("bar.arrive %0, %1;\n" ::"r"(id), "r"(threads) : "memory");
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
