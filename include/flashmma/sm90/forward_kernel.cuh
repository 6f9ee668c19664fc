// SPDX-License-Identifier: Apache-2.0
// The Hopper (sm_90a) forward kernel: TMA loads, wgmma, warp specialization. A composition of the
// shared layer (scheduler, sequence facts, key range, score policy, ScoreSoftmax) and the sm90
// PTX layer (ptx/sm90/).
//
// One block per work tile (query tile of BlockM = 64 x consumers rows, head, batch):
//
//   producer warpgroup (registers lowered to ProducerRegisters; one elected thread works)
//     Q tile -> smem (TMA, q_full)
//     for each K/V tile j of the key range, slot j % Stages:
//       wait k_empty[slot]; K_j -> smem (TMA, k_full[slot])
//       wait v_empty[slot]; V_j -> smem (TMA, v_full[slot])
//   consumer warpgroup c (registers raised to ConsumerRegisters), query rows [64 c, 64 c + 64):
//     wait q_full
//     for each K/V tile j:
//       wait k_full; S = Q_c K_j^T (wgmma SS); release K_j (k_empty)
//       transform and mask S as the policy says, online softmax (attention/score_softmax.cuh)
//       P to 16-bit registers (the RS operand: no data movement, wgmma_layout.hpp)
//       wait v_full; O += P V_j (wgmma RS); release V_j (v_empty)
//     O /= l, LSE; O through its own rows of the Q tile (swizzled) and a TMA store
//
// A slot's barriers: *_full completes when the producer's expected bytes have landed (one
// arrival, the producer's, plus the transaction count); *_empty when every consumer warpgroup
// has released the slot (one arrival each, from one thread, after the wgmma that read it has
// completed). Round r of a slot waits for parity r % 2 of *_full; the producer waits for parity
// (r + 1) % 2 of *_empty, which a fresh barrier passes, so round 0 does not wait.
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/attention/score_softmax.cuh"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/ptx/sm90.cuh"
#include "flashmma/traits/sm90_tile_config.hpp"

namespace flashmma {
namespace sm90 {

// The tensor maps of one call (host: sm90/tensor_maps.hpp). Q, K and V load boxes of 64 head-dim
// columns by BlockM (Q) or BlockN (K, V) rows; O stores boxes of 64 columns by 64 rows (one
// consumer warpgroup's rows). Dimensions {head dim, rows, heads, batch}, innermost first.
struct ForwardTensorMaps {
  CUtensorMap q;
  CUtensorMap k;
  CUtensorMap v;
  CUtensorMap o;
};

template <class Config, class Policy, class Scheduler>
struct ForwardKernel {
  static_assert(IsSm90TileConfig<Config>::value, "Config must be a flashmma::Sm90TileConfig<...>");
  static_assert(check_score_policy<Policy>(), "");

  using Element = typename Config::element_type;
  using arch_tag = typename Config::arch_tag;

  struct Params {
    ForwardTensorMaps maps;  // first: CUtensorMap is 64-byte aligned
    ForwardArgs<Element> args;
    Policy policy;
    typename Scheduler::Params scheduler;
  };

  static constexpr int kThreads = Config::kThreads;
  static constexpr int kMinBlocksPerSm = Config::kMinBlocksPerSm;
  static constexpr std::size_t kSmemBytes = Config::kSmemBytes;
  static constexpr const char* kName = "sm90_forward_kernel";  // in messages

  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kHeadDim = Config::kHeadDimPadded;
  static constexpr int kSubTile = kSm90SubTileElements;
  static constexpr uint32_t kSubTileRowBytes = kSubTile * sizeof(Element);  // 128
  static constexpr int kScoreTiles = kBlockN / kMmaN;   // m16n8 fragments of one S row tile
  static constexpr int kOutputTiles = kHeadDim / kMmaN;
  static constexpr int kKeySlices = kBlockN / kMmaK;    // k16 slices of P V
  static constexpr int kHeadDimSlices = kHeadDim / kMmaK;
  using ScoreSoftmaxType = ScoreSoftmax<Policy, kBlockN, /*kRescaleBeforeExp=*/true>;

  // The block's shared memory, carved from the dynamic allocation rounded up to 1024 bytes.
  struct Smem {
    unsigned char* base;

    FLASHMMA_DEVICE unsigned char* q() const { return base + Config::kQOffset; }
    FLASHMMA_DEVICE unsigned char* k(int slot) const {
      return base + Config::kKOffset + static_cast<std::size_t>(slot) * Config::kKVTileBytes;
    }
    FLASHMMA_DEVICE unsigned char* v(int slot) const {
      return base + Config::kVOffset + static_cast<std::size_t>(slot) * Config::kKVTileBytes;
    }
    FLASHMMA_DEVICE uint64_t* barrier(int index) const {
      return reinterpret_cast<uint64_t*>(base + Config::kBarrierOffset) + index;
    }
    FLASHMMA_DEVICE uint64_t* q_full() const { return barrier(0); }
    FLASHMMA_DEVICE uint64_t* k_full(int slot) const { return barrier(1 + slot); }
    FLASHMMA_DEVICE uint64_t* v_full(int slot) const { return barrier(1 + Config::kStages + slot); }
    FLASHMMA_DEVICE uint64_t* k_empty(int slot) const {
      return barrier(1 + 2 * Config::kStages + slot);
    }
    FLASHMMA_DEVICE uint64_t* v_empty(int slot) const {
      return barrier(1 + 3 * Config::kStages + slot);
    }
  };

  // The slot and round of the j-th visited K/V tile.
  static FLASHMMA_DEVICE int slot_of(int j) { return j % Config::kStages; }
  static FLASHMMA_DEVICE uint32_t parity_of(int j) {
    return static_cast<uint32_t>(j / Config::kStages) & 1u;
  }

  static FLASHMMA_DEVICE void run(const Params& params) {
#if defined(FLASHMMA_SM90A_ENABLED)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const uint32_t raw_address = ptx::smem_address(smem_raw);
    const uint32_t aligned_address =
        (raw_address + ptx::sm90::kSwizzleAlignment - 1) & ~(ptx::sm90::kSwizzleAlignment - 1);
    const Smem smem{smem_raw + (aligned_address - raw_address)};

    if (threadIdx.x == 0) {
      ptx::sm90::mbarrier_init(smem.q_full(), 1);
#pragma unroll
      for (int slot = 0; slot < Config::kStages; ++slot) {
        ptx::sm90::mbarrier_init(smem.k_full(slot), 1);
        ptx::sm90::mbarrier_init(smem.v_full(slot), 1);
        ptx::sm90::mbarrier_init(smem.k_empty(slot), Config::kConsumerWarpgroups);
        ptx::sm90::mbarrier_init(smem.v_empty(slot), Config::kConsumerWarpgroups);
      }
      ptx::sm90::fence_mbarrier_init();
    }
    __syncthreads();  // the last block-wide barrier: the producer's idle warps exit below

    const WorkTile work = Scheduler::work_tile(params.scheduler);
    const SequenceInfo<Element> seq(params.args, work);
    const IndexRange queries = seq.query_tile(work.m_block, Config::kBlockM);
    const TileRange key_tiles = flashmma::key_tiles(params.policy, seq.lengths, queries, kBlockN);

    const int warpgroup = static_cast<int>(threadIdx.x) / Config::kWarpgroupThreads;
    if (warpgroup == 0) {
      ptx::sm90::setmaxnreg_dec<Config::kProducerRegisters>();
      if (threadIdx.x / 32 == 0 && ptx::sm90::elect_one_sync()) {
        produce(params, smem, seq, queries, key_tiles);
      }
    } else {
      ptx::sm90::setmaxnreg_inc<Config::kConsumerRegisters>();
      consume(params, smem, seq, queries, key_tiles, warpgroup - 1);
    }
#else
    // Compiled for a target without wgmma (anything but sm_90a): never return as if O were
    // written. The launch path refuses such an image before it gets here.
    (void)params;
    ptx::trap_missing_instruction();
#endif
  }

 private:
  // TMA coordinates {column, row, head, batch} of a box (positions are at most 2^30).
  static FLASHMMA_DEVICE void load_box(void* destination, const CUtensorMap* map, int column,
                                       int64_t row, int64_t head, int64_t batch,
                                       uint64_t* barrier) {
    const int32_t coords[4] = {column, static_cast<int32_t>(row), static_cast<int32_t>(head),
                               static_cast<int32_t>(batch)};
    ptx::sm90::tma_load_tile<4>(destination, map, coords, barrier);
  }

  // The producer: one thread issues every load.
  static FLASHMMA_DEVICE void produce(const Params& params, const Smem& smem,
                                      const SequenceInfo<Element>& seq, const IndexRange& queries,
                                      const TileRange& key_tiles) {
    ptx::sm90::mbarrier_arrive_expect_tx(smem.q_full(), Config::kQBytes);
#pragma unroll
    for (int d = 0; d < Config::kHeadDimSubTiles; ++d) {
      load_box(smem.q() + d * Config::kBlockM * kSubTileRowBytes, &params.maps.q, d * kSubTile,
               queries.begin, seq.head, seq.batch, smem.q_full());
    }
    for (int j = 0; j < key_tiles.count; ++j) {
      const int slot = slot_of(j);
      const uint32_t free_parity = parity_of(j) ^ 1u;
      const int64_t first_key = (key_tiles.first + j) * kBlockN;
      ptx::sm90::mbarrier_wait_parity(smem.k_empty(slot), free_parity);
      ptx::sm90::mbarrier_arrive_expect_tx(smem.k_full(slot), Config::kKVTileBytes);
#pragma unroll
      for (int d = 0; d < Config::kHeadDimSubTiles; ++d) {
        load_box(smem.k(slot) + d * kBlockN * kSubTileRowBytes, &params.maps.k, d * kSubTile,
                 first_key, seq.kv_head, seq.batch, smem.k_full(slot));
      }
      ptx::sm90::mbarrier_wait_parity(smem.v_empty(slot), free_parity);
      ptx::sm90::mbarrier_arrive_expect_tx(smem.v_full(slot), Config::kKVTileBytes);
#pragma unroll
      for (int d = 0; d < Config::kHeadDimSubTiles; ++d) {
        load_box(smem.v(slot) + d * kBlockN * kSubTileRowBytes, &params.maps.v, d * kSubTile,
                 first_key, seq.kv_head, seq.batch, smem.v_full(slot));
      }
    }
  }

  template <int kRows, int kColumns>
  static FLASHMMA_DEVICE float (&flat(float (&fragments)[kRows][kColumns][4]))[kRows * kColumns * 4] {
    return reinterpret_cast<float(&)[kRows * kColumns * 4]>(fragments);
  }

  // A consumer warpgroup: 64 query rows, from S = Q K^T to O and the LSE.
  static FLASHMMA_DEVICE void consume(const Params& params, const Smem& smem,
                                      const SequenceInfo<Element>& seq, const IndexRange& queries,
                                      const TileRange& key_tiles, int consumer) {
    const int thread = static_cast<int>(threadIdx.x) % Config::kWarpgroupThreads;
    const int warp = thread / 32;
    const int lane = thread % 32;
    const int first_row = consumer * Config::kRowsPerWarpgroup;  // within the block's Q tile

    ScoreSoftmaxType score_softmax;
    score_softmax.policy = params.policy;
    score_softmax.origin =
        seq.coord(queries.begin + first_row + warp * ptx::sm90::kWgmmaRowsPerWarp, 0);
    score_softmax.lengths = seq.lengths;
    score_softmax.queries = queries;
    score_softmax.set_scales(params.args.softmax_scale, params.args.softmax_scale_log2);
    score_softmax.lane = lane;

    float output[1][kOutputTiles][4];
    OnlineSoftmax row_stats[1];
#pragma unroll
    for (int t = 0; t < kOutputTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) output[0][t][i] = 0.f;
    }
    row_stats[0].init();

    // This warpgroup's rows of Q: 64 rows into every sub-tile of BlockM rows (1024-aligned).
    const uint32_t q_address =
        ptx::smem_address(smem.q()) + first_row * kSubTileRowBytes;
    ptx::sm90::mbarrier_wait_parity(smem.q_full(), 0);

    for (int j = 0; j < key_tiles.count; ++j) {
      const int slot = slot_of(j);
      const uint32_t parity = parity_of(j);
      const int64_t first_key = (key_tiles.first + j) * kBlockN;

      float scores[1][kScoreTiles][4];
      const uint32_t k_address = ptx::smem_address(smem.k(slot));
      ptx::sm90::mbarrier_wait_parity(smem.k_full(slot), parity);
      ptx::sm90::wgmma_fence_operand(flat(scores));
      ptx::sm90::wgmma_fence();
#pragma unroll
      for (int s = 0; s < kHeadDimSlices; ++s) {
        ptx::sm90::wgmma_ss<Element, kBlockN, ptx::sm90::Major::kK>(
            flat(scores), Config::QTile::descriptor(q_address, s),
            Config::KTile::descriptor(k_address, s), /*accumulate=*/s > 0);
      }
      ptx::sm90::wgmma_commit_group();
      ptx::sm90::wgmma_wait_group<0>();
      ptx::sm90::wgmma_fence_operand(flat(scores));
      if (thread == 0) ptx::sm90::mbarrier_arrive(smem.k_empty(slot));

      score_softmax(scores, output, row_stats, first_key);

      // P as the A operand of P V: k16 slice s is score fragments 2 s and 2 s + 1
      // (ptx::sm90::accumulator_for_a).
      uint32_t probabilities[kKeySlices][ptx::sm90::kWgmmaARegisters];
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s) {
#pragma unroll
        for (int r = 0; r < ptx::sm90::kWgmmaARegisters; ++r) {
          const float(&fragment)[4] = scores[0][2 * s + r / 2];
          probabilities[s][r] =
              pack_pair<Element>(fragment[2 * (r % 2)], fragment[2 * (r % 2) + 1]);
        }
      }

      const uint32_t v_address = ptx::smem_address(smem.v(slot));
      ptx::sm90::mbarrier_wait_parity(smem.v_full(slot), parity);
      ptx::sm90::wgmma_fence_operand(flat(output));
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s) ptx::sm90::wgmma_fence_operand(probabilities[s]);
      ptx::sm90::wgmma_fence();
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s) {
        ptx::sm90::wgmma_rs<Element, kHeadDim, ptx::sm90::Major::kMN>(
            flat(output), probabilities[s], Config::VTile::descriptor(v_address, s),
            /*accumulate=*/true);
      }
      ptx::sm90::wgmma_commit_group();
      ptx::sm90::wgmma_wait_group<0>();
      ptx::sm90::wgmma_fence_operand(flat(output));
#pragma unroll
      for (int s = 0; s < kKeySlices; ++s) ptx::sm90::wgmma_fence_operand(probabilities[s]);
      if (thread == 0) ptx::sm90::mbarrier_arrive(smem.v_empty(slot));
    }

    float lse[1][kRowsPerThread];
    row_stats[0].finalize(output[0], score_softmax.lse_scale(), lse[0]);
    write_output(params, smem, seq, queries, consumer, thread, output, lse);
  }

  // O through this warpgroup's rows of the Q tile (every wgmma that read them has completed)
  // in the swizzled layout of the O map, then one TMA store per 64 columns; the LSE from
  // registers. Rows past seqlen_q and columns past the head dim are clipped by the store.
  static FLASHMMA_DEVICE void write_output(const Params& params, const Smem& smem,
                                           const SequenceInfo<Element>& seq,
                                           const IndexRange& queries, int consumer, int thread,
                                           const float (&output)[1][kOutputTiles][4],
                                           const float (&lse)[1][kRowsPerThread]) {
    const int first_row = consumer * Config::kRowsPerWarpgroup;
#pragma unroll
    for (int t = 0; t < kOutputTiles; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const fragment::Coord c = ptx::sm90::wgmma_accumulator_coord(thread, 4 * t + 2 * half);
        *reinterpret_cast<uint32_t*>(smem.q() +
                                     Config::QTile::byte_offset(first_row + c.row, c.col)) =
            pack_pair<Element>(output[0][t][2 * half], output[0][t][2 * half + 1]);
      }
    }
    ptx::sm90::fence_proxy_async_shared();
    ptx::sm90::named_barrier_sync(1 + consumer, Config::kWarpgroupThreads);
    const int64_t store_row = queries.begin + first_row;
    if (thread == 0 && store_row < seq.lengths.seqlen_q) {
#pragma unroll
      for (int d = 0; d < Config::kHeadDimSubTiles; ++d) {
        const int32_t coords[4] = {d * kSubTile, static_cast<int32_t>(store_row),
                                   static_cast<int32_t>(seq.head),
                                   static_cast<int32_t>(seq.batch)};
        ptx::sm90::tma_store_tile<4>(
            &params.maps.o, coords,
            smem.q() + d * Config::kBlockM * kSubTileRowBytes + first_row * kSubTileRowBytes);
      }
      ptx::sm90::tma_store_commit_group();
      ptx::sm90::tma_store_wait_read<0>();
    }
    const int lane = thread % 32;
    if (seq.lse != nullptr && fragment::lane_in_quad(lane) == 0) {
#pragma unroll
      for (int r = 0; r < kRowsPerThread; ++r) {
        const int64_t row =
            store_row + ptx::sm90::wgmma_accumulator_coord(thread, 2 * r).row;
        if (row < seq.lengths.seqlen_q) seq.lse[row] = lse[0][r];
      }
    }
  }
};

}  // namespace sm90
}  // namespace flashmma
