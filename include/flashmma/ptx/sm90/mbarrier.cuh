// SPDX-License-Identifier: Apache-2.0
// mbarrier: the shared-memory barrier objects that TMA loads complete on and that pipeline
// stages are handed over with (sm_90). Built on CCCL's cuda::ptx wrappers.
//
// A barrier counts, per phase, the arrivals still pending (set by init) and a transaction count
// in bytes (raised by expect_tx, lowered by TMA as the bytes land). When both reach zero the
// phase completes, the phase parity flips, and the counts reset for the next phase. A waiter
// names the parity of the phase it waits for; on a freshly initialized barrier (phase 0 running)
// parity 1 counts as completed, which is why a producer that waits on "stage empty" barriers
// starts at parity 1 and a consumer that waits on "stage full" at parity 0, each flipping its
// parity whenever its stage index wraps. Waiting with the wrong start parity hangs at once.
//
// Setup: one thread calls mbarrier_init, then fence_mbarrier_init, then the block synchronizes
// (__syncthreads or a named barrier) before anyone else touches the barrier. An arrive releases
// only the arriving thread's own writes: when several threads wrote what a stage hands over and
// one of them arrives, synchronize them first (__syncwarp / a named barrier).
#pragma once

#include <cuda/ptx>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

// mbarrier.init.shared.b64 [barrier], arrivals;  `barrier` is a uint64_t in shared memory;
// `arrivals` arrive calls complete each phase (together with the expected bytes).
FLASHMMA_DEVICE void mbarrier_init(uint64_t* barrier, uint32_t arrivals) {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::mbarrier_init(barrier, arrivals);
#else
  trap_missing_instruction();
#endif
}

// fence.mbarrier_init.release.cluster;  makes the initializations of this thread visible to
// other threads and to the async proxy (TMA) before they use the barriers.
FLASHMMA_DEVICE void fence_mbarrier_init() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::fence_mbarrier_init(cuda::ptx::sem_release, cuda::ptx::scope_cluster);
#else
  trap_missing_instruction();
#endif
}

// mbarrier.arrive.shared.b64 state, [barrier];  (release, CTA scope) one arrival.
FLASHMMA_DEVICE void mbarrier_arrive(uint64_t* barrier) {
#if defined(FLASHMMA_SM90A_ENABLED)
  (void)cuda::ptx::mbarrier_arrive(barrier);
#else
  trap_missing_instruction();
#endif
}

// mbarrier.arrive.expect_tx.release.cta.shared::cta.b64 state, [barrier], bytes;  one arrival
// that also expects `bytes` more bytes of transactions in this phase: the full box size of every
// TMA load that completes on the barrier, zero-filled parts included (a mismatch hangs).
FLASHMMA_DEVICE void mbarrier_arrive_expect_tx(uint64_t* barrier, uint32_t bytes) {
#if defined(FLASHMMA_SM90A_ENABLED)
  (void)cuda::ptx::mbarrier_arrive_expect_tx(cuda::ptx::sem_release, cuda::ptx::scope_cta,
                                             cuda::ptx::space_shared, barrier, bytes);
#else
  trap_missing_instruction();
#endif
}

// mbarrier.try_wait.parity.shared::cta.b64 done, [barrier], parity;  (acquire, CTA scope) true
// once the phase of this parity has completed. The hardware may suspend the thread for a while
// before answering false; callers loop.
FLASHMMA_DEVICE bool mbarrier_try_wait_parity(uint64_t* barrier, uint32_t parity) {
#if defined(FLASHMMA_SM90A_ENABLED)
  return cuda::ptx::mbarrier_try_wait_parity(barrier, parity);
#else
  trap_missing_instruction();
  return false;
#endif
}

// Waits, without bound, until the phase of `parity` has completed: correct code needs no timeout,
// and a hang here means a wrong parity, arrival count or byte count. (The tests bound their own
// waits: tests/gpu/test_sm90_support.cuh's wait_or_trap, and CTest's timeout on the kernels.)
FLASHMMA_DEVICE void mbarrier_wait_parity(uint64_t* barrier, uint32_t parity) {
  while (!mbarrier_try_wait_parity(barrier, parity)) {
  }
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
