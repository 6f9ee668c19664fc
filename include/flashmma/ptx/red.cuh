// SPDX-License-Identifier: Apache-2.0
// Reductions into global memory whose result is not needed (red): the backward pass adds its dQ
// partials into an fp32 accumulator with them.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// *address += first, *(address + 1) += second, each atomically (address 8-byte aligned). On
// sm_90 and later one vector reduction (red.global.add.v2.f32) carries both, which halves the
// requests the load/store unit issues; before sm_90 the vector form does not exist and two
// scalar reductions do the same.
FLASHMMA_DEVICE void red_add_pair(float* address, float first, float second) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("red.global.add.v2.f32 [%0], {%1, %2};\n" ::"l"(address), "f"(first),
               "f"(second)
               : "memory");
#else
  atomicAdd(address, first);
  atomicAdd(address + 1, second);
#endif
}

}  // namespace ptx
}  // namespace flashmma
