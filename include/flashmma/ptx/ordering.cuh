// SPDX-License-Identifier: Apache-2.0
// Ordering between blocks through a flag in global memory: the backward pass's deterministic
// mode makes blocks add their dQ in a fixed order with them.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// ld.acquire.gpu: the value at `flag`, and every write the writer made before its release store
// of it is visible after this load.
FLASHMMA_DEVICE int32_t load_acquire(const int32_t* flag) {
  int32_t value;
  asm volatile("ld.acquire.gpu.global.b32 %0, [%1];\n" : "=r"(value) : "l"(flag) : "memory");
  return value;
}

// st.release.gpu: stores `value` after every earlier write of this thread (and, after a
// __threadfence and a barrier, of its block) is visible at gpu scope.
FLASHMMA_DEVICE void store_release(int32_t* flag, int32_t value) {
  asm volatile("st.release.gpu.global.b32 [%0], %1;\n" ::"l"(flag), "r"(value) : "memory");
}

}  // namespace ptx
}  // namespace flashmma
