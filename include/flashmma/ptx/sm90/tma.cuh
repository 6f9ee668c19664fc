// SPDX-License-Identifier: Apache-2.0
// TMA (sm_90): one thread moves a whole box between global and shared memory, described by a
// CUtensorMap (tensor_map.hpp). Built on CCCL's cuda::ptx wrappers where it has them.
//
// `map` is the address of a `const __grid_constant__ CUtensorMap` kernel parameter (never a
// local copy). `coords` are the box's starting element indices, innermost dimension first, as
// signed 32-bit values.
//
// Loads complete on an mbarrier: the issuing thread (one elected lane: TMA is per thread, so 32
// issuing lanes would copy 32 times) first calls mbarrier_arrive_expect_tx with the full box
// bytes of every load of the phase, then issues the loads; consumers wait on the barrier's phase.
// Elements outside the tensor, including those at negative coordinates, arrive as zeros.
// The shared-memory destination follows the map's swizzle (swizzle.hpp) and must be aligned to
// kSwizzleAlignment (1024 bytes) when swizzled, 128 bytes otherwise.
//
// Stores read shared memory through the async proxy: generic writes to the source need
// fence_proxy_async_shared() by every writer and a barrier before the store is issued. Elements
// of the box outside the tensor are not written. A box starting at a negative coordinate faulted
// ("illegal instruction") on the H200, unlike a load: never give a store a negative start.
// The issuing thread groups its stores with tma_store_commit_group and itself waits
// (tma_store_wait_read) before the source may be overwritten.
#pragma once

#include <cuda.h>
#include <cuda/ptx>

#include <cstdint>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"

namespace flashmma {
namespace ptx {
namespace sm90 {

template <int Rank>
FLASHMMA_HOST_DEVICE constexpr void check_tma_rank() {
  static_assert(Rank >= 1 && Rank <= 5, "TMA boxes have 1 to 5 dimensions");
}

// prefetch.tensormap [map];  brings the map into the cache before its first use (one thread,
// once per kernel).
FLASHMMA_DEVICE void prefetch_tensor_map(const CUtensorMap* map) {
#if defined(FLASHMMA_SM90A_ENABLED)
  asm volatile("prefetch.tensormap [%0];\n" ::"l"(map));
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.tensor.{Rank}d.shared::cluster.global.tile.mbarrier::complete_tx::bytes
//     [smem_destination], [map, {coords}], [barrier];
// (In a launch without clusters the CTA is its own cluster of one.)
template <int Rank>
FLASHMMA_DEVICE void tma_load_tile(void* smem_destination, const CUtensorMap* map,
                                   const int32_t (&coords)[Rank], uint64_t* barrier) {
  check_tma_rank<Rank>();
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_cluster, cuda::ptx::space_global,
                                  smem_destination, map, coords, barrier);
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [smem_destination],
//     [source], bytes, [barrier];
// A contiguous run of `bytes` bytes (a multiple of 16; both addresses 16-byte aligned) with no
// tensor map: rows of per-row values, such as the backward's LSE and D of a query tile. It
// completes on `barrier` like a tile load (counted in the expect_tx bytes); nothing is zero-filled.
FLASHMMA_DEVICE void bulk_copy_load(void* smem_destination, const void* source, uint32_t bytes,
                                    uint64_t* barrier) {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk(cuda::ptx::space_cluster, cuda::ptx::space_global, smem_destination,
                           source, bytes, barrier);
#else
  trap_missing_instruction();
#endif
}

// cp.reduce.async.bulk.global.shared::cta.bulk_group.add.f32 [destination], [smem_source], bytes;
// Adds a contiguous run of `bytes` bytes of fp32 values (a multiple of 16; both addresses 16-byte
// aligned) in shared memory to global memory, each element atomically at L2, from one thread. It
// belongs to the issuing thread's bulk group like a TMA store: the same commit and waits below
// (wait_read before the source is overwritten; wait before its sums are relied on).
FLASHMMA_DEVICE void bulk_reduce_add(float* destination, const float* smem_source,
                                     uint32_t bytes) {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_reduce_async_bulk(cuda::ptx::space_global, cuda::ptx::space_shared,
                                  cuda::ptx::op_add, destination, smem_source, bytes);
#else
  (void)destination;
  (void)smem_source;
  (void)bytes;
  trap_missing_instruction();
#endif
}

// cp.async.bulk.tensor.{Rank}d.global.shared::cta.tile.bulk_group [map, {coords}],
//     [smem_source];
template <int Rank>
FLASHMMA_DEVICE void tma_store_tile(const CUtensorMap* map, const int32_t (&coords)[Rank],
                                    const void* smem_source) {
  check_tma_rank<Rank>();
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk_tensor(cuda::ptx::space_global, cuda::ptx::space_shared, map, coords,
                                  smem_source);
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.commit_group;  closes this thread's TMA stores (and bulk reductions) issued since
// the last commit.
FLASHMMA_DEVICE void tma_store_commit_group() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk_commit_group();
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.wait_group.read N;  waits until at most N of this thread's store groups are
// still reading their shared-memory source, which may then be overwritten.
template <int N>
FLASHMMA_DEVICE void tma_store_wait_read() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk_wait_group_read(cuda::ptx::n32_t<N>{});
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.wait_group N;  waits until at most N of this thread's store groups are
// incomplete, their writes to global memory done.
template <int N>
FLASHMMA_DEVICE void tma_store_wait() {
#if defined(FLASHMMA_SM90A_ENABLED)
  cuda::ptx::cp_async_bulk_wait_group(cuda::ptx::n32_t<N>{});
#else
  trap_missing_instruction();
#endif
}

// cp.async.bulk.prefetch.tensor.{Rank}d.L2.global.tile [map, {coords}];  starts bringing a box
// into L2, with no destination and no completion to wait for.
template <int Rank>
FLASHMMA_DEVICE void tma_prefetch_tile(const CUtensorMap* map, const int32_t (&coords)[Rank]) {
  check_tma_rank<Rank>();
#if defined(FLASHMMA_SM90A_ENABLED)
  if constexpr (Rank == 1) {
    asm volatile("cp.async.bulk.prefetch.tensor.1d.L2.global.tile [%0, {%1}];\n"
                 :
                 : "l"(map), "r"(coords[0]));
  } else if constexpr (Rank == 2) {
    asm volatile("cp.async.bulk.prefetch.tensor.2d.L2.global.tile [%0, {%1, %2}];\n"
                 :
                 : "l"(map), "r"(coords[0]), "r"(coords[1]));
  } else if constexpr (Rank == 3) {
    asm volatile("cp.async.bulk.prefetch.tensor.3d.L2.global.tile [%0, {%1, %2, %3}];\n"
                 :
                 : "l"(map), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]));
  } else if constexpr (Rank == 4) {
    asm volatile("cp.async.bulk.prefetch.tensor.4d.L2.global.tile [%0, {%1, %2, %3, %4}];\n"
                 :
                 : "l"(map), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]), "r"(coords[3]));
  } else {
    asm volatile("cp.async.bulk.prefetch.tensor.5d.L2.global.tile [%0, {%1, %2, %3, %4, %5}];\n"
                 :
                 : "l"(map), "r"(coords[0]), "r"(coords[1]), "r"(coords[2]), "r"(coords[3]),
                   "r"(coords[4]));
  }
#else
  trap_missing_instruction();
#endif
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
