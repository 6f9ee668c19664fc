// SPDX-License-Identifier: Apache-2.0
// elect.sync (sm_90): picks one lane of a warp, for work that exactly one thread must do (issuing
// TMA: each issuing lane would copy the box again and the barrier would expect its bytes again).
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

inline constexpr uint32_t kFullWarpMask = 0xFFFFFFFFu;

// elect.sync lane|elected, member_mask;  true in exactly one lane of `member_mask`, the same lane
// for the same mask every time (the PTX ISA promises determinism; the H200 picked the lowest).
// Every lane of `member_mask` must execute it, and only those.
FLASHMMA_DEVICE bool elect_one_sync(uint32_t member_mask = kFullWarpMask) {
#if defined(FLASHMMA_SM90A_ENABLED)
  uint32_t elected = 0;
  asm volatile(
      "{\n"
      ".reg .pred elected_lane;\n"
      ".reg .b32 leader;\n"
      "elect.sync leader|elected_lane, %1;\n"
      "selp.u32 %0, 1, 0, elected_lane;\n"
      "}\n"
      : "=r"(elected)
      : "r"(member_mask));
  return elected != 0;
#else
  trap_missing_instruction();
  return false;
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
