// SPDX-License-Identifier: Apache-2.0
// ldmatrix: warp-wide loads of 8x8 matrices of 16-bit elements from shared memory (sm_75+).
// Lane L supplies the row address of row L % 8 of matrix L / 8 (lanes beyond the matrix count
// are ignored). Lane L receives, for each matrix, the two elements of row L / 4 at columns
// 2 * (L % 4) and 2 * (L % 4) + 1 (with .trans: of column L / 4 at rows 2 * (L % 4) + {0, 1}).
// See traits/fragment_map.hpp for how the kernels map these onto mma fragments.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {

// ldmatrix.sync.aligned.m8n8.x1.shared.b16
FLASHMMA_DEVICE void ldmatrix_x1(uint32_t (&r)[1], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

// ldmatrix.sync.aligned.m8n8.x2.shared.b16
FLASHMMA_DEVICE void ldmatrix_x2(uint32_t (&r)[2], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

// ldmatrix.sync.aligned.m8n8.x4.shared.b16
FLASHMMA_DEVICE void ldmatrix_x4(uint32_t (&r)[4], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

// ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16
FLASHMMA_DEVICE void ldmatrix_x1_trans(uint32_t (&r)[1], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x1.trans.shared.b16 {%0}, [%1];\n"
               : "=r"(r[0])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

// ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16
FLASHMMA_DEVICE void ldmatrix_x2_trans(uint32_t (&r)[2], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.trans.shared.b16 {%0, %1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

// ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16
FLASHMMA_DEVICE void ldmatrix_x4_trans(uint32_t (&r)[4], uint32_t smem_row) {
#if defined(FLASHMMA_SM80_ENABLED)
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(smem_row));
#else
  trap_missing_instruction();
#endif
}

}  // namespace ptx
}  // namespace flashmma
