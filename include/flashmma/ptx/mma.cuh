// SPDX-License-Identifier: Apache-2.0
// mma.sync.aligned.m16n8k16 with fp32 accumulation (sm_80+), D = A * B + C.
// A is 16x16 row-major (4 x b32 registers, 2 elements each), B is 16x8 column-major
// (2 x b32), C and D are 16x8 fp32 (4 registers). Layouts: traits/fragment_map.hpp.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {

template <class Element>
FLASHMMA_DEVICE void mma_m16n8k16(float (&d)[4], const uint32_t (&a)[4], const uint32_t (&b)[2],
                                  const float (&c)[4]);

// mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32
template <>
FLASHMMA_DEVICE void mma_m16n8k16<__half>(float (&d)[4], const uint32_t (&a)[4],
                                          const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  trap_missing_instruction();
#endif
}

// mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32
template <>
FLASHMMA_DEVICE void mma_m16n8k16<__nv_bfloat16>(float (&d)[4], const uint32_t (&a)[4],
                                                 const uint32_t (&b)[2], const float (&c)[4]) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
      "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%10, %11, %12, %13};\n"
      : "=f"(d[0]), "=f"(d[1]), "=f"(d[2]), "=f"(d[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]), "f"(c[0]), "f"(c[1]),
        "f"(c[2]), "f"(c[3]));
#else
  trap_missing_instruction();
#endif
}

// Accumulating form used by the kernels: acc += A * B.
template <class Element>
FLASHMMA_DEVICE void mma_m16n8k16_acc(float (&acc)[4], const uint32_t (&a)[4],
                                      const uint32_t (&b)[2]) {
  mma_m16n8k16<Element>(acc, a, b, acc);
}

}  // namespace ptx
}  // namespace flashmma
