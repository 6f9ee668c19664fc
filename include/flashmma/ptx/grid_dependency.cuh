// SPDX-License-Identifier: Apache-2.0
// Programmatic dependent launch (sm_90+): a kernel launched with the programmatic stream
// serialization attribute (launch.cuh) may start while the kernel before it in the stream still
// runs, so its launch, block scheduling and prologue hide behind that kernel's last blocks.
// Such a kernel must wait for its prerequisite grid (griddepcontrol.wait: the whole grid done and
// its writes visible) before it reads anything that grid wrote. A prerequisite lets its
// dependents be scheduled early with griddepcontrol.launch_dependents; without it they start
// when it ends, as without the attribute.
//
// Below sm_90 both are no-ops. launch.cuh launches a kernel with the attribute only when the
// code the GPU loaded for it was compiled for compute_90 or newer, where the wait is compiled in.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

// Lets the dependent grid launched after this one be scheduled once every block of this grid
// has run this (or exited). Safe anywhere: the dependent still waits for this grid's end before
// it reads its results.
FLASHMMA_DEVICE void allow_dependent_launch() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;\n" ::: "memory");
#endif
}

// Blocks until the grids this one depends on have completed and their memory operations are
// visible. Returns at once for a kernel launched without the attribute.
FLASHMMA_DEVICE void wait_for_prerequisite_grids() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;\n" ::: "memory");
#endif
}

}  // namespace ptx
}  // namespace flashmma
