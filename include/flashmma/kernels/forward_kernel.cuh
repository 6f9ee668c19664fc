// SPDX-License-Identifier: Apache-2.0
// FlashAttention-2 forward kernel on mma.sync (sm_80+), generic over a TileConfig.
//
// One block per (query tile of BlockM rows, head, batch). Each warp owns BlockM / Warps query
// rows (in m16 tiles) and walks every visible K/V tile of BlockN keys:
//
//   load Q tile ─┐
//   for each visible K/V tile j:            (Stages - 1 tiles ahead already in flight)
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

// The K/V pipeline. Three schedules, chosen by Stages:
//
//  Stages == 1 ("split", one K and one V buffer): K_j and V_j are separate cp.async groups
//    issued at the top of iteration j; Q K_j^T runs while V_j is still landing. Three barriers
//    per tile: K visible, V visible, and the buffers free again before the next refill.
//
//  Stages == 2 ("ring", two K/V buffer pairs): one group per tile, issued one tile ahead. One
//    barrier per tile: after it, tile j is visible to every warp AND every warp has finished
//    tile j - 1, whose buffers are refilled right away with tile j + 1.
//
//  Stages >= 3 ("overlapped", a ring of Stages pairs): as the ring, issued Stages - 1 tiles
//    ahead, and Q K_{j+1}^T is issued before the softmax of tile j, so the tensor cores work
//    on the next scores while the FP32 and MUFU units exponentiate the current ones. Costs a
//    second set of score registers.
//
// Past the last tile empty groups are committed, so the wait depths stay compile-time constants.
template <class Config>
struct KVPipeline {
  static constexpr bool kSplitKV = Config::kStages == 1;
  static constexpr bool kOverlapped = Config::kStages >= 3;
  static constexpr int kPrefetch = Config::kStages - 1;
  // Groups still allowed in flight when the current tile's data must have landed.
  static constexpr int kPendingAfterK = kSplitKV ? 1 : kPrefetch - 1;
  static constexpr int kPendingAfterV = kSplitKV ? 0 : kPrefetch - 1;
  // Overlapped schedule: in iteration j, tile j + 1 must have landed.
  static constexpr int kPendingForNext = kOverlapped ? kPrefetch - 2 : 0;
};

// Issues the copies of K/V tile `tile` (nothing past the last one) into one pipeline stage.
// With the split schedule K and V each close a group; otherwise they share one.
template <class Config, class Element>
FLASHMMA_DEVICE void issue_kv_tile(int stage, Element* k_stages, Element* v_stages,
                                   const TileCopy<Config, Config::kBlockN>& k_copy,
                                   const TileCopy<Config, Config::kBlockN>& v_copy,
                                   const Element* k_head, const Element* v_head, int64_t seqlen_k,
                                   int tile, int num_tiles) {
  const bool valid = tile < num_tiles;
  const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;
  if (valid) {
    k_copy.issue(k_stages + stage * Config::kKVTileElements, k_head, first_key,
                 seqlen_k - first_key);
  }
  if constexpr (KVPipeline<Config>::kSplitKV) ptx::cp_async_commit();
  if (valid) {
    v_copy.issue(v_stages + stage * Config::kKVTileElements, v_head, first_key,
                 seqlen_k - first_key);
  }
  ptx::cp_async_commit();
}

// Sets the scores of hidden (query, key) pairs to -inf. `first_query` is the absolute row of the
// warp's first row, `first_key` the absolute key of the tile's first column.
template <class Config>
FLASHMMA_DEVICE void apply_mask(ScoreFragments<Config>& scores, const AttentionMask& mask,
                                int64_t first_query, int64_t first_key, int lane) {
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
    for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) {
        const fragment::Coord c = fragment::c_coord(lane, reg);
        if (!mask.visible(first_query + rt * kMmaM + c.row, first_key + t * kMmaN + c.col)) {
          scores[rt][t][reg] = -INFINITY;
        }
      }
    }
  }
}

// Scores of one tile to unnormalized probabilities: the mask where the tile needs it, then the
// online softmax of every row tile (which also rescales O).
template <class Config>
FLASHMMA_DEVICE void mask_and_softmax(ScoreFragments<Config>& scores,
                                      OutputFragments<Config>& output,
                                      OnlineSoftmax (&softmax)[Config::kRowTiles],
                                      const AttentionMask& mask, int64_t first_query,
                                      int warp_first_row, int tile, float scale_log2, int lane) {
  const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;
  if (mask.tile_needs_mask(first_query, first_key, Config::kBlockN)) {
    apply_mask<Config>(scores, mask, first_query + warp_first_row, first_key, lane);
  }
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
    softmax[rt].update(scores[rt], output[rt], scale_log2);
  }
}

// O (normalized, fp32 fragments) to global memory through the warp's own rows of the Q tile,
// which no other warp reads; LSE straight from registers.
template <class Config, class Element>
FLASHMMA_DEVICE void write_output(const OutputFragments<Config>& output,
                                  const float (&lse)[Config::kRowTiles][kRowsPerThread],
                                  Element* staging, int warp_first_row, int64_t first_query,
                                  const ForwardKernelArgs<Element>& args, Element* o_head,
                                  float* lse_head, int lane) {
  __syncwarp();  // the warp's last reads of its Q rows are done before they are overwritten
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
    for (int t = 0; t < Config::kOutputTiles; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const fragment::Coord c = fragment::c_coord(lane, 2 * half);
        *reinterpret_cast<uint32_t*>(
            staging + Config::layout::offset(warp_first_row + rt * kMmaM + c.row,
                                             t * kMmaN + c.col)) =
            pack_pair<Element>(output[rt][t][2 * half], output[rt][t][2 * half + 1]);
      }
    }
  }
  __syncwarp();
  store_warp_rows<Config>(staging, warp_first_row, o_head, args.o_strides.row, first_query,
                          args.seqlen_q, args.head_dim);
  if (lse_head != nullptr && fragment::lane_in_quad(lane) == 0) {
#pragma unroll
    for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row = first_query + rt * kMmaM + fragment::lane_group(lane) + 8 * r;
        if (row < args.seqlen_q) lse_head[row] = lse[rt][r];
      }
    }
  }
}

template <class Config>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm)
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
  const int warp_first_row = warp * Config::kRowsPerWarp;

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

  // Prologue: Q is the oldest group, so waiting for tile 0 also waits for Q.
  const TileCopy<Config, Config::kBlockM> q_copy(args.q_strides.row, args.head_dim);
  const TileCopy<Config, Config::kBlockN> k_copy(args.k_strides.row, args.head_dim);
  const TileCopy<Config, Config::kBlockN> v_copy(args.v_strides.row, args.head_dim);
  q_copy.issue(q_tile, q_head, first_query, args.seqlen_q - first_query);
  ptx::cp_async_commit();
#pragma unroll
  for (int tile = 0; tile < Pipeline::kPrefetch; ++tile) {
    issue_kv_tile<Config>(tile, k_stages, v_stages, k_copy, v_copy, k_head, v_head,
                          args.seqlen_k, tile, num_tiles);
  }

  OutputFragments<Config> output;
  fill_zero(output);
  QFragments<Config> q_registers;  // unused (and removed) unless kQInRegisters
  OnlineSoftmax softmax[Config::kRowTiles];
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) softmax[rt].init();

  const auto k_tile_of = [&](int tile) {
    return k_stages + (tile % Config::kStages) * Config::kKVTileElements;
  };
  const auto v_tile_of = [&](int tile) {
    return v_stages + (tile % Config::kStages) * Config::kKVTileElements;
  };
  const float scale_log2 = args.softmax_scale_log2;

  if constexpr (Pipeline::kOverlapped) {
    ScoreFragments<Config> scores;
    if (num_tiles > 0) {
      ptx::cp_async_wait<Pipeline::kPendingAfterK>();
      __syncthreads();
      if constexpr (Config::kQInRegisters) {
        load_q_fragments<Config>(q_registers, q_tile, warp_first_row, lane);
      }
      compute_scores<Config>(scores, q_registers, q_tile, k_tile_of(0), warp_first_row, lane);
    }
    for (int tile = 0; tile < num_tiles; ++tile) {
      ptx::cp_async_wait<Pipeline::kPendingForNext>();
      __syncthreads();  // tile + 1 visible; every warp is done with tile - 1's buffers
      const int ahead = tile + Pipeline::kPrefetch;
      issue_kv_tile<Config>(ahead % Config::kStages, k_stages, v_stages, k_copy, v_copy, k_head,
                            v_head, args.seqlen_k, ahead, num_tiles);
      ScoreFragments<Config> next_scores;
      if (tile + 1 < num_tiles) {
        compute_scores<Config>(next_scores, q_registers, q_tile, k_tile_of(tile + 1),
                               warp_first_row, lane);
      }
      mask_and_softmax<Config>(scores, output, softmax, mask, first_query, warp_first_row, tile,
                               scale_log2, lane);
      accumulate_output<Config>(output, scores, v_tile_of(tile), lane);
#pragma unroll
      for (int rt = 0; rt < Config::kRowTiles; ++rt) {
#pragma unroll
        for (int t = 0; t < Config::kScoreTiles; ++t) {
#pragma unroll
          for (int i = 0; i < 4; ++i) scores[rt][t][i] = next_scores[rt][t][i];
        }
      }
    }
  } else {
    for (int tile = 0; tile < num_tiles; ++tile) {
      if constexpr (Pipeline::kSplitKV) {
        issue_kv_tile<Config>(0, k_stages, v_stages, k_copy, v_copy, k_head, v_head,
                              args.seqlen_k, tile, num_tiles);
      }
      ptx::cp_async_wait<Pipeline::kPendingAfterK>();
      __syncthreads();
      if constexpr (!Pipeline::kSplitKV) {
        const int ahead = tile + Pipeline::kPrefetch;
        issue_kv_tile<Config>(ahead % Config::kStages, k_stages, v_stages, k_copy, v_copy,
                              k_head, v_head, args.seqlen_k, ahead, num_tiles);
      }
      if constexpr (Config::kQInRegisters) {
        if (tile == 0) load_q_fragments<Config>(q_registers, q_tile, warp_first_row, lane);
      }
      ScoreFragments<Config> scores;
      compute_scores<Config>(scores, q_registers, q_tile, k_tile_of(tile), warp_first_row, lane);
      mask_and_softmax<Config>(scores, output, softmax, mask, first_query, warp_first_row, tile,
                               scale_log2, lane);
      if constexpr (Pipeline::kSplitKV) {
        ptx::cp_async_wait<Pipeline::kPendingAfterV>();
        __syncthreads();
      }
      accumulate_output<Config>(output, scores, v_tile_of(tile), lane);
      if constexpr (Pipeline::kSplitKV) {
        __syncthreads();  // the single K/V buffer is refilled at the top of the next iteration
      }
    }
  }

  // With no visible tile, Q's copies (issued by every thread into every warp's rows) may still
  // be landing where the epilogue stages O: drain them block-wide first.
  ptx::cp_async_wait<0>();
  __syncthreads();
  float lse[Config::kRowTiles][kRowsPerThread];
#pragma unroll
  for (int rt = 0; rt < Config::kRowTiles; ++rt) {
    softmax[rt].finalize(output[rt], args.softmax_scale, lse[rt]);
  }
  write_output<Config>(output, lse, q_tile, warp_first_row, first_query + warp_first_row, args,
                       o_head, lse_head, lane);
#endif
}

}  // namespace flashmma
