// SPDX-License-Identifier: Apache-2.0
// FlashAttention-2 forward kernel on mma.sync (sm_80+), generic over a TileConfig.
//
// One block per (query tile of BlockM rows, head, batch). Each warp owns BlockM / Warps query
// rows (in m16 tiles) and walks every visible K/V tile of BlockN keys:
//
//   load Q tile
//   for each visible K/V tile j:            (schedule: mainloop.cuh)
//     S = Q K_j^T                           (warp_mma.cuh)
//     mask S where needed                   (mask.cuh; interior tiles skip it)
//     online softmax: P = exp(S - m), rescale O (online_softmax.cuh)
//     O += P V_j                            (P straight from registers)
//   O /= l, LSE = m + log(l); O staged through smem, 16-byte stores (epilogue.cuh)
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "flashmma/kernels/block_order.cuh"
#include "flashmma/kernels/epilogue.cuh"
#include "flashmma/kernels/kernel_args.cuh"
#include "flashmma/kernels/kv_stream.cuh"
#include "flashmma/kernels/mainloop.cuh"
#include "flashmma/kernels/mask.cuh"
#include "flashmma/kernels/tile_io.cuh"
#include "flashmma/kernels/warp_attention.cuh"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// kCausal is a template parameter, not read from args: the block order (block_order.cuh) of the
// causal grid keeps its decoded coordinates in registers, which the unmasked kernel, whose
// coordinates are blockIdx itself, should not pay for; and each kernel drops at compile time the
// mask tests that only the other needs.
template <class Config, bool kCausal>
__global__ void __launch_bounds__(Config::kThreads, Config::kMinBlocksPerSm)
    forward_kernel(const __grid_constant__ ForwardKernelArgs<typename Config::element_type> args) {
#if defined(FLASHMMA_SM80_ENABLED)
  using Element = typename Config::element_type;
  constexpr int kWarpSize = 32;

  extern __shared__ __align__(16) unsigned char smem[];
  Element* const q_tile = reinterpret_cast<Element*>(smem);
  Element* const k_stages = q_tile + Config::kQTileElements;
  Element* const v_stages = k_stages + Config::kStages * Config::kKVTileElements;

  detail::BlockCoord coord{blockIdx.x, blockIdx.y, blockIdx.z};
  if constexpr (kCausal) {
    const int64_t linear_block =
        blockIdx.x + static_cast<int64_t>(gridDim.x) *
                         (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
    coord = detail::causal_block_coord(linear_block, gridDim.x, gridDim.y, gridDim.z, args.causal_groups);
  }
  const int64_t head = coord.head;
  const int64_t batch = coord.batch;
  const int64_t kv_head = head / args.group_size;
  const int64_t first_query = static_cast<int64_t>(coord.m_block) * Config::kBlockM;

  const Element* const q_head =
      args.q + batch * args.q_strides.batch + head * args.q_strides.head;
  const Element* const k_head =
      args.k + batch * args.k_strides.batch + kv_head * args.k_strides.head;
  const Element* const v_head =
      args.v + batch * args.v_strides.batch + kv_head * args.v_strides.head;
  Element* const o_head = args.o + batch * args.o_strides.batch + head * args.o_strides.head;
  float* const lse_head =
      args.lse == nullptr ? nullptr : args.lse + (batch * args.heads_q + head) * args.seqlen_q;

  const detail::AttentionMask mask{args.seqlen_q, args.seqlen_k, kCausal};
  const int64_t key_end = mask.key_end_for_queries(first_query, Config::kBlockM);
  const int num_tiles =
      key_end > 0 ? static_cast<int>((key_end + Config::kBlockN - 1) / Config::kBlockN) : 0;

  // Q is the oldest cp.async group: the schedule's first wait for K also waits for it.
  const detail::TileCopy<Config, Config::kBlockM> q_copy(args.q_strides.row, args.head_dim);
  q_copy.issue(q_tile, q_head, first_query, args.seqlen_q - first_query);
  ptx::cp_async_commit();

  const detail::KVStream<Config> kv(k_stages, v_stages, k_head, v_head, args.k_strides.row,
                            args.v_strides.row, args.head_dim, args.seqlen_k, num_tiles);
  detail::WarpAttention<Config> warp;
  warp.q_tile = q_tile;
  warp.warp_first_row = static_cast<int>(threadIdx.x) / kWarpSize * Config::kRowsPerWarp;
  warp.lane = static_cast<int>(threadIdx.x) % kWarpSize;
  warp.mask = mask;
  warp.first_query = first_query;
  warp.scale_log2 = args.softmax_scale_log2;
  warp.init();

  detail::mainloop(kv, warp);

  // With no visible tile, Q's copies (issued by every thread into every warp's rows) may still
  // be landing where the epilogue stages O: drain them block-wide first.
  ptx::cp_async_wait<0>();
  __syncthreads();
  detail::write_output(warp, q_tile, args, o_head, lse_head);
#else
  // Compiled for a target without mma.sync (below sm_80): never return as if O were written.
  ptx::trap_missing_instruction();
#endif
}

}  // namespace flashmma
