// SPDX-License-Identifier: Apache-2.0
// stmatrix (sm_90): the warp-wide store of 8x8 matrices of 16-bit elements, ldmatrix's inverse.
// Lane L supplies the shared-memory row address of row L % 8 of matrix L / 8 (lanes beyond the
// matrix count are ignored) and holds, in register m, the elements of matrix m at row L / 4,
// columns 2 * (L % 4) and 2 * (L % 4) + 1 (low half first); with .trans, those of column L / 4
// at rows 2 * (L % 4) + {0, 1} (traits/fragment_map.hpp, ldmatrix_element).
//
// Used by the epilogue to write accumulators, converted to 16 bits, into a swizzled tile for a
// TMA store: wgmma_layout.hpp's wgmma_stmatrix_x4_destination says where each lane points.
// With 128B-swizzled 128-byte rows, the 8 rows of a matrix land in 8 different bank slots.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

// stmatrix.sync.aligned.m8n8.x4.shared.b16 [smem_row], {r0, r1, r2, r3};
FLASHMMA_DEVICE void stmatrix_x4(uint32_t smem_row, const uint32_t (&r)[4]) {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("stmatrix.sync.aligned.m8n8.x4.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(smem_row), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  trap_missing_instruction();
#endif
}

// stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [smem_row], {r0, r1, r2, r3};
FLASHMMA_DEVICE void stmatrix_x4_trans(uint32_t smem_row, const uint32_t (&r)[4]) {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("stmatrix.sync.aligned.m8n8.x4.trans.shared.b16 [%0], {%1, %2, %3, %4};\n"
               :
               : "r"(smem_row), "r"(r[0]), "r"(r[1]), "r"(r[2]), "r"(r[3])
               : "memory");
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
