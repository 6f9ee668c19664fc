// SPDX-License-Identifier: Apache-2.0
// The main loop over the K/V tiles of a query tile's key range (attention/key_range.hpp): when
// copies are issued, when the block waits and synchronizes, and in which order a warp's steps
// (warp_attention.cuh) run. Three schedules, chosen by Stages:
//
//  Stages == 1, "split" (one K and one V buffer, two barriers per tile):
//      wait K_j, barrier  -> issue V_j; S = Q K_j^T
//      wait V_j, barrier  -> issue K_{j+1}; softmax; O += P V_j
//    V_j lands while Q K_j^T runs, K_{j+1} while the softmax and P V_j run. The first barrier
//    also tells that every warp is done with V_{j-1}, the second that every warp is done with
//    K_j, so each buffer is refilled as soon as it is free. Smallest footprint.
//
//  Stages == 2, "ring" (two K/V buffer pairs, one barrier per tile): tile j + 1 is issued right
//    after the barrier of tile j, which tells that tile j is visible AND that every warp has
//    finished tile j - 1, whose buffers tile j + 1 reuses.
//
//  Stages >= 3, "overlapped" (a ring of Stages pairs): as the ring, issued Stages - 1 tiles
//    ahead, and Q K_{j+1}^T is issued before the softmax of tile j, so the tensor cores work on
//    the next scores while the FP32 and MUFU units exponentiate the current ones. Costs a second
//    set of score registers.
//
// Every thread issues its share of every copy and commits a group even past the last tile, so
// the wait depths stay compile-time constants. The caller has issued and committed Q (the
// oldest group): the first wait for K/V also waits for Q.
#pragma once

#include "flashmma/sm80/kv_stream.cuh"
#include "flashmma/sm80/warp_attention.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/cp_async.cuh"

namespace flashmma {
namespace sm80 {

template <class KV, class Warp>
FLASHMMA_DEVICE void mainloop_split(KV& kv, Warp& warp) {
  using Config = typename KV::config;
  kv.issue_k(0);
  ptx::cp_async_commit();
  for (int tile = 0; tile < kv.num_tiles(); ++tile) {
    ptx::cp_async_wait<0>();
    __syncthreads();  // K_j visible; every warp is done with V_{j-1}
    kv.issue_v(tile);
    ptx::cp_async_commit();
    if (tile == 0) warp.load_q();
    ScoreFragments<Config> s;
    warp.scores(s, kv.k_tile(tile));
    ptx::cp_async_wait<0>();
    __syncthreads();  // V_j visible; every warp is done with K_j
    kv.issue_k(tile + 1);
    ptx::cp_async_commit();
    warp.softmax(s, kv.first_key(tile));
    warp.accumulate(s, kv.v_tile(tile));
  }
}

// Stages >= 2: tile j's K and V close one group.
template <class KV>
FLASHMMA_DEVICE void issue_kv(KV& kv, int tile) {
  kv.issue_k(tile);
  kv.issue_v(tile);
  ptx::cp_async_commit();
}

template <class KV, class Warp>
FLASHMMA_DEVICE void mainloop_ring(KV& kv, Warp& warp) {
  using Config = typename KV::config;
  static_assert(Config::kStages == 2, "the ring schedule keeps exactly one tile in flight");
  issue_kv(kv, 0);
  for (int tile = 0; tile < kv.num_tiles(); ++tile) {
    ptx::cp_async_wait<0>();
    __syncthreads();  // tile j visible; every warp is done with tile j - 1
    issue_kv(kv, tile + 1);
    if (tile == 0) warp.load_q();
    ScoreFragments<Config> s;
    warp.scores(s, kv.k_tile(tile));
    warp.softmax(s, kv.first_key(tile));
    warp.accumulate(s, kv.v_tile(tile));
  }
}

template <class KV, class Warp>
FLASHMMA_DEVICE void mainloop_overlapped(KV& kv, Warp& warp) {
  using Config = typename KV::config;
  constexpr int kAhead = Config::kStages - 1;  // tiles in flight beyond the current one
#pragma unroll
  for (int tile = 0; tile < kAhead; ++tile) issue_kv(kv, tile);
  if (kv.num_tiles() == 0) return;

  ScoreFragments<Config> s;
  ptx::cp_async_wait<kAhead - 1>();  // tile 0 (and Q) landed
  __syncthreads();
  warp.load_q();
  warp.scores(s, kv.k_tile(0));
  for (int tile = 0; tile < kv.num_tiles(); ++tile) {
    ptx::cp_async_wait<kAhead - 2>();  // tile j + 1 landed
    __syncthreads();  // tile j + 1 visible; every warp is done with tile j - 1's buffers
    issue_kv(kv, tile + kAhead);
    ScoreFragments<Config> next;
    if (tile + 1 < kv.num_tiles()) warp.scores(next, kv.k_tile(tile + 1));
    warp.softmax(s, kv.first_key(tile));
    warp.accumulate(s, kv.v_tile(tile));
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
      for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) s[rt][t][i] = next[rt][t][i];
      }
    }
  }
}

// `kv` is a KVStream (kv_stream.cuh).
template <class KV, class Warp>
FLASHMMA_DEVICE void mainloop(KV& kv, Warp& warp) {
  using Config = typename KV::config;
  if constexpr (Config::kStages == 1) {
    mainloop_split(kv, warp);
  } else if constexpr (Config::kStages == 2) {
    mainloop_ring(kv, warp);
  } else {
    mainloop_overlapped(kv, warp);
  }
}

}  // namespace sm80
}  // namespace flashmma
