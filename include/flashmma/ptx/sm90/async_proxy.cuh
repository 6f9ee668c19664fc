// SPDX-License-Identifier: Apache-2.0
// The fence between the generic proxy (ordinary loads and stores) and the async proxy (TMA,
// wgmma's shared-memory reads), sm_90.
//
// wgmma and TMA stores read shared memory through the async proxy, which does not see generic
// stores in program order. Shared memory written by generic stores (st.shared, stmatrix) before
// a wgmma or a TMA store reads it needs, in this order: fence_proxy_async_shared() by every thread
// that wrote, a barrier among the writers and the issuer, then the wgmma or TMA. Data written by
// TMA itself needs no fence (its mbarrier completion orders it). In global memory the same holds
// between a bulk reduction and the generic accesses ordered around it (fence_proxy_async_global).
#pragma once

#include <cuda/ptx>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

// fence.proxy.async.shared::cta;  makes this thread's earlier generic shared-memory writes
// visible to the async proxy.
FLASHMMA_DEVICE void fence_proxy_async_shared() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::fence_proxy_async(cuda::ptx::space_shared);
#else
  trap_missing_instruction();
#endif
}

// fence.proxy.async.global;  orders this thread's global-memory accesses between the generic
// and the async proxy, both ways: a bulk reduction's completed sums (waited for with
// tma_store_wait) before a generic release that publishes them, and a generic acquire before a
// bulk reduction that must follow it.
FLASHMMA_DEVICE void fence_proxy_async_global() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::fence_proxy_async(cuda::ptx::space_global);
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
