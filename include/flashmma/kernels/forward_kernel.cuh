// SPDX-License-Identifier: Apache-2.0
// FlashAttention-2 forward kernel on mma.sync (sm_80+), generic over a TileConfig.
//
// One block per (query tile of BlockM rows, head, batch). Each warp owns 16 query rows and walks
// every visible K/V tile of BlockN keys:
//
//   load Q tile ─┐
//   for each visible K/V tile j:            (K_j+P, V_j+P already in flight, P = Stages - 1)
//     wait K_j  → S = Q K_j^T               (warp_mma.cuh)
//     mask S where needed                   (mask.cuh; interior tiles skip it)
//     online softmax: P = exp(S - m), rescale O (online_softmax.cuh)
//     wait V_j  → O += P V_j                (P straight from registers)
//   O /= l, LSE = m + log(l); stage O through smem, 16-byte stores (tile_io.cuh)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashmma/kernels/mask.cuh"
#include "flashmma/kernels/online_softmax.cuh"
#include "flashmma/kernels/tile_io.cuh"
#include "flashmma/kernels/warp_mma.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/traits/fragment_map.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// What the kernel reads: params with typed pointers and the scale folded (see forward.cuh).
template <class Element>
struct ForwardKernelArgs {
  const Element* q;
  const Element* k;
  const Element* v;
  Element* o;
  float* lse;  // nullptr: not written
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t heads_q;
  int64_t group_size;  // heads_q / heads_kv
  int head_dim;        // runtime head dim, <= Config::kHeadDim
  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  TensorStrides o_strides;
  float softmax_scale;
  float softmax_scale_log2;  // softmax_scale * log2(e)
  bool causal;
};

// Pipeline bookkeeping: K and V of every tile are separate commit groups, issued in the order
// K0 V0 K1 V1 ..., kPrefetch tiles ahead of the one being computed. When fewer tiles remain,
// empty groups keep the count (and so the wait depths below) uniform.
template <class Config>
struct KVPipeline {
  static constexpr int kPrefetch = Config::kStages - 1;
  // Groups allowed in flight once K of the current tile has landed: V of the current tile and
  // K, V of the prefetched ones.
  static constexpr int kPendingAfterK = 2 * kPrefetch + 1;
  static constexpr int kPendingAfterV = 2 * kPrefetch;
};

template <class Config, class Element>
FLASHMMA_DEVICE void issue_kv_tile(Element* k_stage, Element* v_stage,
                                   const ForwardKernelArgs<Element>& args, const Element* k_head,
                                   const Element* v_head, int tile, int num_tiles) {
  if (tile < num_tiles) {
    const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;
    load_tile_async<Config, Config::kBlockN>(k_stage, k_head, args.k_strides.row, first_key,
                                             args.seqlen_k, args.head_dim);
    ptx::cp_async_commit();
    load_tile_async<Config, Config::kBlockN>(v_stage, v_head, args.v_strides.row, first_key,
                                             args.seqlen_k, args.head_dim);
    ptx::cp_async_commit();
  } else {
    ptx::cp_async_commit();
    ptx::cp_async_commit();
  }
}

// Sets the scores of hidden (query, key) pairs to -inf. `first_query` is the absolute row of the
// warp's first row, `first_key` the absolute key of the tile's first column.
template <class Config>
FLASHMMA_DEVICE void apply_mask(float (&scores)[Config::kScoreTiles][4], const AttentionMask& mask,
                                int64_t first_query, int64_t first_key, int lane) {
#pragma unroll
  for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const fragment::Coord c = fragment::c_coord(lane, reg);
      if (!mask.visible(first_query + c.row, first_key + t * kMmaN + c.col)) {
        scores[t][reg] = -INFINITY;
      }
    }
  }
}

// O (normalized, fp32 fragments) to global memory through the warp's own rows of the Q tile,
// which no other warp reads; LSE straight from registers.
template <class Config, class Element>
FLASHMMA_DEVICE void write_output(const float (&output)[Config::kOutputTiles][4],
                                  const float (&lse)[kRowsPerThread], Element* staging,
                                  int warp_first_row, int64_t first_query,
                                  const ForwardKernelArgs<Element>& args, Element* o_head,
                                  float* lse_head, int lane) {
  __syncwarp();  // the warp's last reads of its Q rows are done before they are overwritten
#pragma unroll
  for (int t = 0; t < Config::kOutputTiles; ++t) {
#pragma unroll
    for (int half = 0; half < 2; ++half) {
      const fragment::Coord c = fragment::c_coord(lane, 2 * half);
      *reinterpret_cast<uint32_t*>(
          staging + Config::layout::offset(warp_first_row + c.row, t * kMmaN + c.col)) =
          pack_pair<Element>(output[t][2 * half], output[t][2 * half + 1]);
    }
  }
  __syncwarp();
  store_warp_rows<Config>(staging, warp_first_row, o_head, args.o_strides.row, first_query,
                          args.seqlen_q, args.head_dim);
  if (lse_head != nullptr && fragment::lane_in_quad(lane) == 0) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const int64_t row = first_query + fragment::lane_group(lane) + 8 * r;
      if (row < args.seqlen_q) lse_head[row] = lse[r];
    }
  }
}

template <class Config>
__global__ void __launch_bounds__(Config::kThreads)
    forward_kernel(const __grid_constant__ ForwardKernelArgs<typename Config::element_type> args) {
#if defined(FLASHMMA_SM80_ENABLED)
  using Element = typename Config::element_type;
  using Pipeline = KVPipeline<Config>;
  constexpr int kWarpSize = 32;

  extern __shared__ __align__(16) unsigned char smem[];
  Element* const q_tile = reinterpret_cast<Element*>(smem);
  Element* const k_stages = q_tile + Config::kQTileElements;
  Element* const v_stages = k_stages + Config::kStages * Config::kKVTileElements;

  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  const AttentionMask mask{args.seqlen_q, args.seqlen_k, args.causal};

  // Under the causal mask the last query tiles see the most keys: start them first.
  const int m_block = args.causal ? static_cast<int>(gridDim.x - 1 - blockIdx.x)
                                  : static_cast<int>(blockIdx.x);
  const int64_t head = blockIdx.y;
  const int64_t batch = blockIdx.z;
  const int64_t kv_head = head / args.group_size;
  const int64_t first_query = static_cast<int64_t>(m_block) * Config::kBlockM;
  const int warp_first_row = warp * kMmaM;

  const Element* const q_head =
      args.q + batch * args.q_strides.batch + head * args.q_strides.head;
  const Element* const k_head =
      args.k + batch * args.k_strides.batch + kv_head * args.k_strides.head;
  const Element* const v_head =
      args.v + batch * args.v_strides.batch + kv_head * args.v_strides.head;
  Element* const o_head = args.o + batch * args.o_strides.batch + head * args.o_strides.head;
  float* const lse_head =
      args.lse == nullptr ? nullptr : args.lse + (batch * args.heads_q + head) * args.seqlen_q;

  const int64_t key_end = mask.key_end_for_queries(first_query, Config::kBlockM);
  const int num_tiles =
      key_end > 0 ? static_cast<int>((key_end + Config::kBlockN - 1) / Config::kBlockN) : 0;

  // Prologue: Q joins the first group, so waiting for K_0 also waits for Q.
  load_tile_async<Config, Config::kBlockM>(q_tile, q_head, args.q_strides.row, first_query,
                                           args.seqlen_q, args.head_dim);
#pragma unroll
  for (int tile = 0; tile < Pipeline::kPrefetch; ++tile) {
    issue_kv_tile<Config>(k_stages + tile * Config::kKVTileElements,
                          v_stages + tile * Config::kKVTileElements, args, k_head, v_head, tile,
                          num_tiles);
  }

  float output[Config::kOutputTiles][4];
#pragma unroll
  for (int t = 0; t < Config::kOutputTiles; ++t) {
#pragma unroll
    for (int i = 0; i < 4; ++i) output[t][i] = 0.f;
  }
  uint32_t q_registers[Config::kHeadDimSlices][4];  // unused (and removed) unless kQInRegisters
  OnlineSoftmax softmax;
  softmax.init();

  for (int tile = 0; tile < num_tiles; ++tile) {
    const int ahead = tile + Pipeline::kPrefetch;
    const int ahead_stage = ahead % Config::kStages;
    issue_kv_tile<Config>(k_stages + ahead_stage * Config::kKVTileElements,
                          v_stages + ahead_stage * Config::kKVTileElements, args, k_head, v_head,
                          ahead, num_tiles);
    const int stage = tile % Config::kStages;
    const Element* const k_tile = k_stages + stage * Config::kKVTileElements;
    const Element* const v_tile = v_stages + stage * Config::kKVTileElements;
    const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;

    ptx::cp_async_wait<Pipeline::kPendingAfterK>();
    __syncthreads();
    if constexpr (Config::kQInRegisters) {
      if (tile == 0) load_q_fragments<Config>(q_registers, q_tile, warp_first_row, lane);
    }
    float scores[Config::kScoreTiles][4];
    compute_scores<Config>(scores, q_registers, q_tile, k_tile, warp_first_row, lane);
    if (mask.tile_needs_mask(first_query, first_key, Config::kBlockN)) {
      apply_mask<Config>(scores, mask, first_query + warp_first_row, first_key, lane);
    }
    softmax.update(scores, output, args.softmax_scale_log2);

    ptx::cp_async_wait<Pipeline::kPendingAfterV>();
    __syncthreads();
    accumulate_output<Config>(output, scores, v_tile, lane);
    __syncthreads();  // this stage is refilled by the next iteration's prefetch
  }

  ptx::cp_async_wait<0>();  // Q (and empty groups) when no tile was visible
  float lse[kRowsPerThread];
  softmax.finalize(output, args.softmax_scale, lse);
  write_output<Config>(output, lse, q_tile, warp_first_row, first_query + warp_first_row, args,
                       o_head, lse_head, lane);
#endif
}

}  // namespace flashmma
