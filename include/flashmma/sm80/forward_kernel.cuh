// SPDX-License-Identifier: Apache-2.0
// The FlashAttention-2 forward kernel on mma.sync (sm_80+), a composition of the shared layer
// (scheduler, sequence facts, key range, score policy, online softmax) and the sm80 pieces.
//
// One block per work tile (query tile of BlockM rows, head, batch). Each warp owns BlockM /
// Warps query rows (in m16 tiles) and walks the K/V tiles of the tile's key range:
//
//   load Q tile
//   for each K/V tile j of the key range:   (schedule: mainloop.cuh)
//     S = Q K_j^T                           (warp_mma.cuh)
//     transform and mask S as the policy says; interior tiles skip the mask
//     online softmax: P = exp(S - m), rescale O (attention/online_softmax.cuh)
//     O += P V_j                            (P straight from registers)
//   O /= l, LSE = m + log(l); O staged through smem, 16-byte stores (epilogue.cuh)
//
// The kernel is a type: Params, the grid, the block size and the shared memory it needs are
// members, and launch.cuh runs any such type.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashmma/attention/dropout.cuh"
#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/kv_pages.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/ptx/grid_dependency.cuh"
#include "flashmma/sm80/epilogue.cuh"
#include "flashmma/sm80/kv_stream.cuh"
#include "flashmma/sm80/mainloop.cuh"
#include "flashmma/sm80/tile_io.cuh"
#include "flashmma/sm80/warp_attention.cuh"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {
namespace sm80 {

// Pages: NoKVPages for contiguous K and V; KVPages (attention/kv_pages.hpp) for the split kernel
// of calls on a paged KV cache, which reads K and V through the block table.
// Dropout: NoDropout, or PhiloxDropout (attention/dropout.hpp), which the launches compile for
// the split kernel only (launch_plan.hpp runs every dropout call there).
template <class Config, class Policy, class Scheduler, class Pages = NoKVPages,
          class Dropout = NoDropout>
struct ForwardKernel {
  static_assert(IsTileConfig<Config>::value, "Config must be a flashmma::TileConfig<...>");
  static_assert(check_score_policy<Policy>(), "");

  using Element = typename Config::element_type;
  using arch_tag = typename Config::arch_tag;
  // The split-KV kernel is also the kernel of variable lengths and paged KV caches
  // (split_launch.cuh runs every such call on it, with one split or more). The others take
  // dense batches only, and their code stays that of a kernel written for them: reading the
  // lengths per sequence moves them from constants into registers, which cost the
  // register-bound tiles 40-150 instructions and a spill. Reading pages is a kernel of its own
  // (Pages): as a branch of the split kernel it doubled its code and spilled 32-52 bytes.
  static constexpr bool kFlexibleSequences = Scheduler::kSplitsKeys;
  static constexpr bool kPaged = std::is_same<Pages, KVPages>::value;
  static_assert(!kPaged || kFlexibleSequences,
                "a paged KV cache is read by the split kernel (SplitScheduler) only");
  static_assert(!(kPaged && Dropout::kEnabled), "dropout is for training calls, not paged caches");
  using Sequence = SequenceInfo<Element, /*kVariableLengths=*/kFlexibleSequences, kPaged>;

  struct Params {
    ForwardArgs<Element> args;
    Policy policy;
    typename Scheduler::Params scheduler;
    SplitOutputFor<Scheduler> split_output;  // split-KV only: where the partials go
  };

  static constexpr int kThreads = Config::kThreads;
  static constexpr int kMinBlocksPerSm = Config::kMinBlocksPerSm;
  // A paged cache's stream keeps its row addresses after the K/V stages.
  static constexpr std::size_t kSmemBytes =
      Config::kSmemBytes + KVStream<Config, Pages>::kPageSmemBytes;
  static constexpr const char* kName = "forward_kernel";  // in messages
  // Launched to overlap the end of the kernel before it in the stream (ptx/grid_dependency.cuh):
  // run() waits for that kernel before its first read. A decoding call is short (1 x 32k keys:
  // about 40 us on an H200), and the overlap made it 4% faster (docs/tuning-log.md, step 45).
  static constexpr bool kWaitsForPrerequisiteGrids = true;

  static FLASHMMA_DEVICE void run(const Params& params) {
#if defined(FLASHMMA_SM80_ENABLED)
    constexpr int kWarpSize = 32;
    const ForwardArgs<Element>& args = params.args;
    // Nothing the kernels before this one write (Q, K, V, a KV append's rows, the lengths) is
    // read before they are done. Then the kernel after it (a split call's combine step) may be
    // scheduled as soon as every block of this one runs; it waits for this grid's end in turn.
    ptx::wait_for_prerequisite_grids();
    ptx::allow_dependent_launch();

    extern __shared__ __align__(16) unsigned char smem[];
    Element* const q_tile = reinterpret_cast<Element*>(smem);
    Element* const k_stages = q_tile + Config::kQTileElements;
    Element* const v_stages = k_stages + Config::kStages * Config::kKVTileElements;

    const WorkTile work = Scheduler::work_tile(params.scheduler);
    const Sequence seq(args, work);
    // The tile's rows: queries of one head, or the heads of a GQA group (packed GQA).
    const IndexRange rows = seq.row_tile(work.m_block, Config::kBlockM);
    if constexpr (kFlexibleSequences) {
      // The grid covers the longest sequence: the query tiles past a shorter one's end have
      // nothing to do (and no partial to write: the combine step reads real rows only).
      if (rows.empty()) return;
    }
    const IndexRange queries = seq.queries_of(rows);
    TileRange key_tiles =
        flashmma::key_tiles(params.policy, seq.lengths, queries, Config::kBlockN);
    if constexpr (Scheduler::kSplitsKeys) {
      key_tiles = split_key_tiles(key_tiles, work.split, params.scheduler.splits);
    }

    // Q is the oldest cp.async group: the schedule's first wait for K also waits for it.
    const TileCopy<Config, Config::kBlockM> q_copy(seq.q_row_stride, args.head_dim);
    q_copy.issue(q_tile, seq.q, rows.begin, seq.rows - rows.begin);
    ptx::cp_async_commit();

    KVStream<Config, Pages> kv(k_stages, v_stages, seq, args.head_dim, key_tiles,
                                     v_stages + Config::kStages * Config::kKVTileElements);
    kv.prepare();
    WarpAttention<Config, Policy, typename Sequence::Rows, Dropout> warp;
    warp.q_tile = q_tile;
    warp.warp_first_row = static_cast<int>(threadIdx.x) / kWarpSize * Config::kRowsPerWarp;
    warp.lane = static_cast<int>(threadIdx.x) % kWarpSize;
    warp.score_softmax.policy = params.policy;
    warp.score_softmax.origin = seq.row_coord(rows.begin + warp.warp_first_row);
    warp.score_softmax.rows = seq.row_map;
    warp.score_softmax.lengths = seq.lengths;
    warp.score_softmax.queries = queries;
    warp.score_softmax.set_scales(args.softmax_scale, args.softmax_scale_log2);
    warp.score_softmax.lane = warp.lane;
    if constexpr (Dropout::kEnabled) {
      const ScoreCoord& origin = warp.score_softmax.origin;
      warp.score_softmax.dropout = WarpDropout{
          args.dropout, static_cast<uint32_t>(origin.batch * args.heads_q + origin.head),
          warp.lane};
    }
    warp.init();

    mainloop(kv, warp);

    // With no visible tile, Q's copies (issued by every thread into every warp's rows) may
    // still be landing where the epilogue stages O: drain them block-wide first.
    ptx::cp_async_wait<0>();
    __syncthreads();
    if constexpr (Scheduler::kSplitsKeys) {
      if (params.scheduler.splits > 1) {
        write_partial_output(warp, params.split_output, seq, work.split, args.head_dim);
        return;
      }
    }
    write_output(warp, q_tile, seq, args.head_dim);
#else
    // Compiled for a target without mma.sync (below sm_80): never return as if O were written.
    (void)params;
    ptx::trap_missing_instruction();
#endif
  }
};

}  // namespace sm80
}  // namespace flashmma
