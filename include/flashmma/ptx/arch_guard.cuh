// SPDX-License-Identifier: Apache-2.0
// What a wrapper runs when it is compiled for an architecture that lacks its instruction.
//
// nvcc compiles device code once per target in the build. A target older than the instruction
// (for example compute_75, CUDA 13's default when no -arch is given) still needs some body, and
// an empty one would make a kernel return without writing its output. The driver can JIT such
// PTX for a newer GPU, so the kernel would even launch there. A trap turns that build mistake
// into a launch error (cudaErrorLaunchFailure / cudaErrorIllegalInstruction) instead of wrong
// numbers. The host side refuses such kernels before launching them (kernel_image.hpp); this is
// the second line of defence, for kernels launched by hand.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// trap;  (aborts the kernel; the launch reports an error)
FLASHMMA_DEVICE void trap_missing_instruction() {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

}  // namespace ptx
}  // namespace flashmma
