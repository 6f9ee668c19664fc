// SPDX-License-Identifier: Apache-2.0
// cp.async: asynchronous global -> shared copies (sm_80+).
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {

inline constexpr int kCpAsyncBytes = 16;

// cp.async.cg.shared.global [dst], [src], 16, src_size;
// Copies 16 bytes, bypassing L1 (.cg), when `in_bounds`; otherwise reads nothing and writes 16
// zero bytes (src_size = 0), which is how out-of-range rows and head-dim padding are filled.
// `src` must still be a valid address when !in_bounds: pass any in-range pointer.
FLASHMMA_DEVICE void cp_async_cg_16(uint32_t smem_dst, const void* src, bool in_bounds) {
#if defined(FLASHMMA_SM80_ENABLED)
  const int src_size = in_bounds ? kCpAsyncBytes : 0;
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(smem_dst), "l"(src),
               "r"(src_size));
#else
  trap_missing_instruction();
#endif
}

// cp.async.commit_group; closes the group of cp.async issued since the last commit.
FLASHMMA_DEVICE void cp_async_commit() {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("cp.async.commit_group;\n" ::);
#else
  trap_missing_instruction();
#endif
}

// cp.async.wait_group N; waits until at most N committed groups are still in flight. The data of
// finished groups is visible to the issuing thread; a barrier makes it visible to the block.
template <int N>
FLASHMMA_DEVICE void cp_async_wait() {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N) : "memory");
#else
  trap_missing_instruction();
#endif
}

}  // namespace ptx
}  // namespace flashmma
