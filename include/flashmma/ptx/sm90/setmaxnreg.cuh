// SPDX-License-Identifier: Apache-2.0
// setmaxnreg (sm_90a): moves registers between the warpgroups of a block, so that the producer
// warpgroup of a warp-specialized kernel (which only issues TMA) gives its registers to the
// consumer warpgroups (which hold the accumulators).
//
// Every warp of a warpgroup must execute the same instruction. `.inc` blocks until enough
// registers are free, so the increases must not exceed what the decreases released, or the block
// deadlocks. FlashAttention-3 with 2 consumer warpgroups at 384 threads: the producer goes from
// 168 to 24, the consumers from 168 to 240 (128 * 24 + 256 * 240 = 64512 of 65536).
//
// ptxas honours setmaxnreg only when it knows the register count at kernel entry: the kernel
// needs __launch_bounds__(threads, 1) with both arguments (or -maxrregcount). Otherwise it drops
// the instruction and says so only as a `ptxas info` line under -Xptxas -v: C7508 "'setmaxnreg'
// ignored; unable to determine register count at entry".
#pragma once

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

template <int kRegisters>
FLASHMMA_HOST_DEVICE constexpr void check_register_count() {
  static_assert(kRegisters >= 24 && kRegisters <= 256 && kRegisters % 8 == 0,
                "setmaxnreg: the register count must be a multiple of 8 from 24 to 256");
}

// setmaxnreg.inc.sync.aligned.u32 kRegisters;  raises this warp's register limit.
template <int kRegisters>
FLASHMMA_DEVICE void setmaxnreg_inc() {
  check_register_count<kRegisters>();
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#else
  trap_missing_instruction();
#endif
}

// setmaxnreg.dec.sync.aligned.u32 kRegisters;  lowers this warp's register limit, releasing the
// rest to the block's pool.
template <int kRegisters>
FLASHMMA_DEVICE void setmaxnreg_dec() {
  check_register_count<kRegisters>();
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(kRegisters));
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
