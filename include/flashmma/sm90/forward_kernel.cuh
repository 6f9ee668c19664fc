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
//     for each K/V tile j its own rows see (key_tiles_within; without ping-pong, the others are
//     waited for and released at once: a window's edge and the causal diagonal):
//       wait k_full; S = Q_c K_j^T (wgmma SS); release K_j (k_empty)
//       transform and mask S as the policy says, online softmax (attention/score_softmax.cuh)
//       P to 16-bit registers (the RS operand: no data movement, wgmma_layout.hpp)
//       wait v_full; O += P V_j (wgmma RS); release V_j (v_empty)
//     (Sm90Schedule::kOverlapSoftmax issues S_j and P_(j-1) V_(j-1) together and runs the
//     softmax of S_j while the second computes: Consumer::run_overlapped; kOverlapProducts
//     issues them together and waits for both before the softmax.)
//     O /= l, LSE; O through its own rows of the Q tile (swizzled) and a TMA store (or, for the
//     rows of a packed sequence's last tile, stores that stop at its end)
//
// kVariableLengths: packed and ragged sequences (cu_seqlens_q, cu_seqlens_k, seqused_k).
// SequenceInfo reads a block's lengths and first rows once, the tensor maps see a packed tensor
// as one batch entry of all its rows (sm90/tensor_maps.hpp), and a block past its sequence's
// queries exits. A box that runs into the next sequence's rows loads them: its keys are past
// the sequence's end, hence masked, and its query rows are computed and not stored. A kernel of
// its own: lengths read from memory stay in registers through the main loop where the dense
// kernel reloads them from its parameters, and that made the dense window, softcap and ALiBi
// kernels spill 50-124 bytes.
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
#include "flashmma/sm90/tile_loads.cuh"
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

// Dropout: NoDropout, or PhiloxDropout (attention/dropout.hpp): ScoreSoftmax drops the
// probabilities of each warp's 16 rows as on sm80 (the same fragments, the same mask).
template <class Config, class Policy, class Scheduler, class Dropout = NoDropout,
          bool kVariableLengths = false>
struct ForwardKernel {
  static_assert(IsSm90TileConfig<Config>::value, "Config must be a flashmma::Sm90TileConfig<...>");
  static_assert(check_score_policy<Policy>(), "");

  using Element = typename Config::element_type;
  using arch_tag = typename Config::arch_tag;
  // No cache indirection (kv_batch_index, pages): launch_plan.hpp's variable_length_prefill
  // routes those calls elsewhere.
  using Sequence = SequenceInfo<Element, kVariableLengths>;

  // Where a sequence's rows start in the tensor maps: {row, batch} of its first query and key.
  struct MapOrigin {
    int64_t query_row;
    int64_t query_batch;
    int64_t key_row;
    int64_t key_batch;
  };
  static FLASHMMA_DEVICE MapOrigin map_origin(const ForwardArgs<Element>& args,
                                              const Sequence& seq) {
    if constexpr (kVariableLengths) {
      const bool packed_q = args.cu_seqlens_q != nullptr;
      const bool packed_k = args.cu_seqlens_k != nullptr;
      return {seq.first_query, packed_q ? 0 : seq.batch, seq.first_key,
              packed_k ? 0 : seq.batch};
    } else {
      (void)args;
      return {0, seq.batch, 0, seq.batch};
    }
  }

  // The blocks' tiles: one per block in Scheduler's order, or (Config::kPersistent) a block per
  // SM walking that order (PersistentScheduler).
  using TileScheduler =
      std::conditional_t<Config::kPersistent, PersistentScheduler<Scheduler>, Scheduler>;

  struct Params {
    ForwardTensorMaps maps;  // first: CUtensorMap is 64-byte aligned
    ForwardArgs<Element> args;
    Policy policy;
    typename TileScheduler::Params scheduler;
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
  using ScoreSoftmaxType =
      ScoreSoftmax<Policy, kBlockN, /*kRescaleBeforeExp=*/true, QueryRows, Dropout>;

  // The block's shared memory, carved from the dynamic allocation rounded up to 1024 bytes.
  struct Smem {
    unsigned char* base;

    FLASHMMA_DEVICE unsigned char* q(int q_slot) const {
      return base + Config::kQOffset + static_cast<std::size_t>(q_slot) * Config::kQBytes;
    }
    FLASHMMA_DEVICE unsigned char* k(int slot) const {
      return base + Config::kKOffset + static_cast<std::size_t>(slot) * Config::kKVTileBytes;
    }
    FLASHMMA_DEVICE unsigned char* v(int slot) const {
      return base + Config::kVOffset + static_cast<std::size_t>(slot) * Config::kKVTileBytes;
    }
    FLASHMMA_DEVICE uint64_t* barrier(int index) const {
      return reinterpret_cast<uint64_t*>(base + Config::kBarrierOffset) + index;
    }
    FLASHMMA_DEVICE uint64_t* q_full(int q_slot) const { return barrier(q_slot); }
    FLASHMMA_DEVICE uint64_t* k_full(int slot) const { return barrier(kQSlots + slot); }
    FLASHMMA_DEVICE uint64_t* v_full(int slot) const {
      return barrier(kQSlots + Config::kStages + slot);
    }
    FLASHMMA_DEVICE uint64_t* k_empty(int slot) const {
      return barrier(kQSlots + 2 * Config::kStages + slot);
    }
    FLASHMMA_DEVICE uint64_t* v_empty(int slot) const {
      return barrier(kQSlots + 3 * Config::kStages + slot);
    }
    // Persistent: a Q slot free again (every consumer warp is done with its tile's Q K^T and
    // has read its tile index), and the staging tile of O (Q's rows otherwise).
    FLASHMMA_DEVICE uint64_t* q_empty(int q_slot) const {
      return barrier(kQSlots + 4 * Config::kStages + q_slot);
    }
    // Persistent, per Q slot: the linear index of the tile whose Q the producer loads there
    // (-1: no more), written before its q_full arrival, read after their wait by lane 0 of each
    // consumer warp.
    FLASHMMA_DEVICE int64_t* tile_slot(int q_slot) const {
      return reinterpret_cast<int64_t*>(barrier(2 * kQSlots + 4 * Config::kStages + q_slot));
    }
    FLASHMMA_DEVICE unsigned char* o() const {
      return Config::kPersistent ? base + Config::kOOffset : q(0);
    }
  };

  // Named barriers (ptx/sm90/named_barrier.cuh; 0 is __syncthreads'): consumer c stages its O
  // behind kEpilogue + c, and with ping-pong waits for its turn at kTurn + c.
  enum class Barrier : uint32_t { kEpilogue = 1, kTurn = 1 + 3 };
  static constexpr uint32_t kTwoWarpgroups = 2 * ptx::sm90::kWarpgroupThreads;
  static constexpr int kConsumerWarps =
      Config::kConsumerWarpgroups * ptx::sm90::kWarpgroupThreads / 32;

  // The slot and round of the j-th visited K/V tile (counted across a persistent block's tiles).
  static FLASHMMA_DEVICE int slot_of(int j) { return j % Config::kStages; }
  static FLASHMMA_DEVICE uint32_t parity_of(int j) {
    return static_cast<uint32_t>(j / Config::kStages) & 1u;
  }
  // The same for the Q slots and the block's tiles (q_round: tiles whose Q came before).
  static constexpr int kQSlots = Config::kQSlots;
  static FLASHMMA_DEVICE int q_slot_of(int q_round) { return q_round % kQSlots; }
  static FLASHMMA_DEVICE uint32_t q_parity_of(int q_round) {
    return static_cast<uint32_t>(q_round / kQSlots) & 1u;
  }

  // What producer and consumers both derive from a work tile.
  struct TileView {
    Sequence seq;
    IndexRange queries;
    TileRange key_tiles;
  };

  // The view of a work tile. A tile past a shorter sequence's queries (variable lengths) has
  // none, and is skipped by producer and consumers alike.
  static FLASHMMA_DEVICE TileView view_of(const Params& params, const WorkTile& work) {
    const Sequence seq(params.args, work);
    const IndexRange queries = seq.query_tile(work.m_block, Config::kBlockM);
    if (kVariableLengths && queries.empty()) return TileView{seq, queries, TileRange{0, 0}};
    return TileView{seq, queries,
                    flashmma::key_tiles(params.policy, seq.lengths, queries, kBlockN)};
  }
  static FLASHMMA_DEVICE bool skipped(const TileView& view) {
    return kVariableLengths && view.queries.empty();
  }

  static FLASHMMA_DEVICE void run(const Params& params) {
#if defined(FLASHMMA_SM90A_ENABLED)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const Smem smem{swizzle_aligned(smem_raw)};

    if (threadIdx.x == 0) {
#pragma unroll
      for (int q_slot = 0; q_slot < kQSlots; ++q_slot) {
        ptx::sm90::mbarrier_init(smem.q_full(q_slot), 1);
        if constexpr (Config::kPersistent) {
          ptx::sm90::mbarrier_init(smem.q_empty(q_slot), kConsumerWarps);
        }
      }
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

    // Without ping-pong, broadcast from lane 0, so that ptxas knows it is the same in every lane:
    // what follows from it (a warpgroup's rows, key tiles and mask decisions) then stays in
    // uniform registers (without it the d = 256 ALiBi kernel spilled 176 bytes; with it the
    // ping-pong d = 128 softcap kernel, which has no ranges of its own, spilled 16).
    int warpgroup = static_cast<int>(threadIdx.x) / Config::kWarpgroupThreads;
    if constexpr (!Config::kPingPong) warpgroup = __shfl_sync(0xffffffffu, warpgroup, 0);
    if (warpgroup == 0) {
      ptx::sm90::setmaxnreg_dec<Config::kProducerRegisters>();
      if (threadIdx.x / 32 == 0 && ptx::sm90::elect_one_sync()) produce(params, smem);
    } else {
      ptx::sm90::setmaxnreg_inc<Config::kConsumerRegisters>();
      consume(params, smem, warpgroup - 1);
    }
#else
    // Compiled for a target without wgmma (anything but sm_90a): never return as if O were
    // written. The launch path refuses such an image before it gets here.
    (void)params;
    ptx::trap_missing_instruction();
#endif
  }

 private:
  // The producer: one thread issues every load. Persistent, it also picks the block's tiles
  // and tells the consumers which (the tile slot of Q's slot, before its q_full arrival). With
  // two Q slots the next tile's Q is loaded as soon as this tile's last K/V loads are issued
  // (its slot was freed when the tile before this one was done with its Q K^T), and its first
  // K and V as soon as the ring frees a slot: both land during this tile's last products.
  static FLASHMMA_DEVICE void produce(const Params& params, const Smem& smem) {
    if constexpr (Config::kPersistent) {
      const int64_t tiles = params.scheduler.counts.tiles();
      int q_round = 0;  // tiles whose Q was loaded
      int visits = 0;   // K/V tiles loaded
      int64_t round = 0;
      for (int64_t linear = blockIdx.x; linear < tiles;) {
        const TileView tile = view_of(params, TileScheduler::tile_of(params.scheduler, linear));
        if (!skipped(tile)) {
          produce_tile(params, smem, tile, linear, q_round, visits);
          visits += tile.key_tiles.count;
          ++q_round;
        }
        // Taken once this tile's loads are issued, a few K/V tiles before its consumers are
        // done: taking it when the tile starts would hold a tile for a block that is still
        // busy, which on causal rows leaves other blocks idle at the end.
        linear = TileScheduler::next_tile(params.scheduler, ++round);
      }
      // No more tiles: the consumers read -1 from the next Q slot.
      const int q_slot = q_slot_of(q_round);
      ptx::sm90::mbarrier_wait_parity(smem.q_empty(q_slot), q_parity_of(q_round) ^ 1u);
      *smem.tile_slot(q_slot) = -1;
      ptx::sm90::mbarrier_arrive(smem.q_full(q_slot));
    } else {
      const TileView tile = view_of(params, Scheduler::work_tile(params.scheduler));
      if (!skipped(tile)) produce_tile(params, smem, tile, 0, 0, 0);
    }
  }

  static FLASHMMA_DEVICE void produce_tile(const Params& params, const Smem& smem,
                                           const TileView& tile, int64_t linear, int q_round,
                                           int visits) {
    const MapOrigin origin = map_origin(params.args, tile.seq);
    const auto load_kv = [&](int j) {
      const int visit = visits + j;
      const int slot = slot_of(visit);
      const uint32_t free_parity = parity_of(visit) ^ 1u;
      const int64_t first_key = origin.key_row + (tile.key_tiles.first + j) * kBlockN;
      ptx::sm90::mbarrier_wait_parity(smem.k_empty(slot), free_parity);
      ptx::sm90::mbarrier_arrive_expect_tx(smem.k_full(slot), Config::kKVTileBytes);
      load_rows<kBlockN, Config::kHeadDimSubTiles>(smem.k(slot), &params.maps.k, first_key,
                                                   tile.seq.kv_head, origin.key_batch,
                                                   smem.k_full(slot));
      ptx::sm90::mbarrier_wait_parity(smem.v_empty(slot), free_parity);
      ptx::sm90::mbarrier_arrive_expect_tx(smem.v_full(slot), Config::kKVTileBytes);
      load_rows<kBlockN, Config::kHeadDimSubTiles>(smem.v(slot), &params.maps.v, first_key,
                                                   tile.seq.kv_head, origin.key_batch,
                                                   smem.v_full(slot));
    };
    const int q_slot = q_slot_of(q_round);
    if constexpr (Config::kPersistent) {
      ptx::sm90::mbarrier_wait_parity(smem.q_empty(q_slot), q_parity_of(q_round) ^ 1u);
      *smem.tile_slot(q_slot) = linear;  // released to the consumers by the arrival below
    } else {
      (void)linear;
    }
    ptx::sm90::mbarrier_arrive_expect_tx(smem.q_full(q_slot), Config::kQBytes);
    load_rows<Config::kBlockM, Config::kHeadDimSubTiles>(
        smem.q(q_slot), &params.maps.q, origin.query_row + tile.queries.begin, tile.seq.head,
        origin.query_batch, smem.q_full(q_slot));
    for (int j = 0; j < tile.key_tiles.count; ++j) load_kv(j);
  }

  // Fragments [rows][columns][4] as the flat register list wgmma takes (the same registers).
  template <int kRows, int kColumns>
  using FlatFragments = float[kRows * kColumns * 4];
  template <int kRows, int kColumns>
  static FLASHMMA_DEVICE FlatFragments<kRows, kColumns>& flat(
      float (&fragments)[kRows][kColumns][4]) {
    return reinterpret_cast<FlatFragments<kRows, kColumns>&>(fragments);
  }

  using Scores = float[1][kScoreTiles][4];
  using Output = float[1][kOutputTiles][4];
  using Probabilities = uint32_t[kKeySlices][ptx::sm90::kWgmmaARegisters];

  // Keeps nvcc from moving accesses to these registers into (or out of) an asynchronous window.
  static FLASHMMA_DEVICE void fence_registers(Scores& scores) {
    ptx::sm90::wgmma_fence_operand(flat(scores));
  }
  static FLASHMMA_DEVICE void fence_registers(Output& output, Probabilities& probabilities) {
    ptx::sm90::wgmma_fence_operand(flat(output));
#pragma unroll
    for (int s = 0; s < kKeySlices; ++s) ptx::sm90::wgmma_fence_operand(probabilities[s]);
  }

  // S = Q_c K^T over the head dim, issued as one group (the caller waits for it).
  static FLASHMMA_DEVICE void issue_scores(Scores& scores, uint32_t q_address,
                                           uint32_t k_address) {
#pragma unroll
    for (int s = 0; s < kHeadDimSlices; ++s) {
      ptx::sm90::wgmma_ss<Element, kBlockN, ptx::sm90::Major::kK>(
          flat(scores), Config::QTile::descriptor(q_address, s),
          Config::KTile::descriptor(k_address, s), /*accumulate=*/s > 0);
    }
    ptx::sm90::wgmma_commit_group();
  }

  // O += P V over the keys, issued as one group.
  static FLASHMMA_DEVICE void issue_output(Output& output, const Probabilities& probabilities,
                                           uint32_t v_address) {
#pragma unroll
    for (int s = 0; s < kKeySlices; ++s) {
      ptx::sm90::wgmma_rs<Element, kHeadDim, ptx::sm90::Major::kMN>(
          flat(output), probabilities[s], Config::VTile::descriptor(v_address, s),
          /*accumulate=*/true);
    }
    ptx::sm90::wgmma_commit_group();
  }

  // P as the A operand of P V: k16 slice s is score fragments 2 s and 2 s + 1
  // (ptx::sm90::accumulator_for_a), no data movement between threads.
  static FLASHMMA_DEVICE void pack_probabilities(const Scores& scores,
                                                 Probabilities& probabilities) {
#pragma unroll
    for (int s = 0; s < kKeySlices; ++s) {
#pragma unroll
      for (int r = 0; r < ptx::sm90::kWgmmaARegisters; ++r) {
        const float(&fragment)[4] = scores[0][2 * s + r / 2];
        probabilities[s][r] = pack_pair<Element>(fragment[2 * (r % 2)], fragment[2 * (r % 2) + 1]);
      }
    }
  }

  // What a consumer warpgroup works with: its Q rows, its O and softmax state, the shared memory
  // and the key range.
  struct Consumer {
    const Smem& smem;
    const TileRange& key_tiles;  // the block's: the producer's order, slots and rounds
    int visit_base;              // K/V tiles of the block's earlier tiles (persistent)
    int begin;                   // [begin, end): the visits of key_tiles this warpgroup computes
    int end;
    ScoreSoftmaxType score_softmax;
    uint32_t q_address;  // this warpgroup's rows of Q: 64 rows into every sub-tile
    int thread;          // within the warpgroup
    int consumer;        // which consumer warpgroup
    Output output;
    OnlineSoftmax row_stats[1];

    FLASHMMA_DEVICE int64_t first_key(int j) const { return (key_tiles.first + j) * kBlockN; }
    FLASHMMA_DEVICE int slot(int j) const { return slot_of(visit_base + j); }
    FLASHMMA_DEVICE uint32_t parity(int j) const { return parity_of(visit_base + j); }
    FLASHMMA_DEVICE uint32_t k_address(int j) const { return ptx::smem_address(smem.k(slot(j))); }
    FLASHMMA_DEVICE uint32_t v_address(int j) const { return ptx::smem_address(smem.v(slot(j))); }
    // One thread per warpgroup releases a slot, after the wgmma that read it has completed.
    FLASHMMA_DEVICE void release_k(int j) const {
      if (thread == 0) ptx::sm90::mbarrier_arrive(smem.k_empty(slot(j)));
    }
    FLASHMMA_DEVICE void release_v(int j) const {
      if (thread == 0) ptx::sm90::mbarrier_arrive(smem.v_empty(slot(j)));
    }
    FLASHMMA_DEVICE void wait_k(int j) const {
      ptx::sm90::mbarrier_wait_parity(smem.k_full(slot(j)), parity(j));
    }
    FLASHMMA_DEVICE void wait_v(int j) const {
      ptx::sm90::mbarrier_wait_parity(smem.v_full(slot(j)), parity(j));
    }
    // Visits [first, last) that this warpgroup's rows do not need: each slot is released once
    // loaded. The wait keeps the arrival in its round: an arrival before the slot's previous
    // round has completed would count towards that round. Persistent, only the releasing thread
    // waits: no other reads these tiles, and across tiles a warp that waited here could fall
    // rounds behind the slots (nothing else holds a warpgroup's warps together where it issues
    // no wgmma) and then wait for a phase that has passed. (One tile per block keeps every
    // thread waiting: without the early return ptxas allocates the d = 256 window kernels'
    // registers better, 0-92 bytes of spill against 28-136.)
    FLASHMMA_DEVICE void pass(int first, int last) const {
      if (Config::kPersistent && thread != 0) return;
      for (int j = first; j < last; ++j) {
        wait_k(j);
        release_k(j);
        wait_v(j);
        release_v(j);
      }
    }

    // With ping-pong, every issue of products is one turn: wait for ours, then hand the tensor
    // cores to the other warpgroup. Both warpgroups take the same number of turns (they share the
    // key range); consumer 1 grants consumer 0 the first.
    FLASHMMA_DEVICE void begin_turn() const {
      if constexpr (Config::kPingPong) {
        ptx::sm90::named_barrier_sync(static_cast<uint32_t>(Barrier::kTurn) + consumer,
                                      kTwoWarpgroups);
      }
    }
    FLASHMMA_DEVICE void end_turn() const {
      if constexpr (Config::kPingPong) {
        ptx::sm90::named_barrier_arrive(static_cast<uint32_t>(Barrier::kTurn) + (1 - consumer),
                                        kTwoWarpgroups);
      }
    }
    FLASHMMA_DEVICE void grant_first_turn() const {
      if constexpr (Config::kPingPong) {
        if (consumer == 1) {
          ptx::sm90::named_barrier_arrive(static_cast<uint32_t>(Barrier::kTurn),
                                          kTwoWarpgroups);
        }
      }
    }

    // S_j = Q K_j^T, waited for; K_j released.
    FLASHMMA_DEVICE void scores(Scores& s, int j) {
      wait_k(j);
      fence_registers(s);
      begin_turn();
      ptx::sm90::wgmma_fence();
      issue_scores(s, q_address, k_address(j));
      end_turn();
      ptx::sm90::wgmma_wait_group<0>();
      fence_registers(s);
      release_k(j);
    }

    // O += P_j V_j, waited for; V_j released.
    FLASHMMA_DEVICE void accumulate(Probabilities& p, int j) {
      wait_v(j);
      fence_registers(output, p);
      begin_turn();
      ptx::sm90::wgmma_fence();
      issue_output(output, p, v_address(j));
      end_turn();
      ptx::sm90::wgmma_wait_group<0>();
      fence_registers(output, p);
      release_v(j);
    }

    // kSequential: each tile's two products and its softmax one after the other.
    FLASHMMA_DEVICE void run_sequential() {
      for (int j = begin; j < end; ++j) {
        Scores s;
        scores(s, j);
        score_softmax(s, output, row_stats, first_key(j));
        Probabilities p;
        pack_probabilities(s, p);
        accumulate(p, j);
      }
    }

    // kOverlapSoftmax: S_j = Q K_j^T and O += P_(j-1) V_(j-1) go to the tensor cores together;
    // S_j's softmax runs while the second computes, and O is rescaled for S_j once it is done.
    // kOverlapProducts: the same issue, with the wait for the second before the softmax.
    FLASHMMA_DEVICE void run_overlapped() {
      if (begin >= end) return;
      Scores s;
      Probabilities p;
      scores(s, begin);
      score_softmax(s, output, row_stats, first_key(begin));
      pack_probabilities(s, p);
      for (int j = begin + 1; j < end; ++j) {
        // Both waits come first: between the fence and the wgmmas, a wait loop would make
        // ptxas add a fence of its own (C7519). The producer loads V_(j-1) before K_j anyway.
        wait_v(j - 1);
        wait_k(j);
        fence_registers(s);
        fence_registers(output, p);
        begin_turn();
        ptx::sm90::wgmma_fence();
        issue_scores(s, q_address, k_address(j));
        issue_output(output, p, v_address(j - 1));
        end_turn();
        ptx::sm90::wgmma_wait_group<1>();  // S_j has landed; P V may still be running
        fence_registers(s);
        release_k(j);
        float correction[1][kRowsPerThread];
        bool max_changed[1];
        score_softmax.probabilities(s, row_stats, first_key(j), correction, max_changed);
        if constexpr (Config::kOverlapSoftmax) {
          // Not before the exponentials: the row sums need every one of them.
          ptx::sm90::wgmma_wait_group_after<0>(row_stats[0].row_sum[0] +
                                               row_stats[0].row_sum[1]);
        } else {
          ptx::sm90::wgmma_wait_group<0>();  // ptxas places it ahead of the softmax
        }
        fence_registers(output, p);
        release_v(j - 1);
        OnlineSoftmax::rescale_output(output[0], correction[0], max_changed[0]);
        pack_probabilities(s, p);
      }
      accumulate(p, end - 1);
    }
  };

  // A consumer warpgroup: 64 query rows of each of the block's tiles, from S = Q K^T to O and
  // the LSE.
  static FLASHMMA_DEVICE void consume(const Params& params, const Smem& smem, int consumer) {
    const int thread = static_cast<int>(threadIdx.x) % Config::kWarpgroupThreads;
    if constexpr (Config::kPersistent) {
      int q_round = 0;  // tiles done, as the producer counts them
      int visits = 0;
      for (;;) {
        const int q_slot = q_slot_of(q_round);
        ptx::sm90::mbarrier_wait_parity(smem.q_full(q_slot), q_parity_of(q_round));
        // Lane 0 alone reads the slot and hands the index to its warp: the one thread that
        // reads it is the one that later releases it (q_empty), so the order of read and
        // overwrite rests on one thread's arrival, which compute-sanitizer's racecheck follows.
        const int64_t slot_value =
            thread % 32 == 0 ? *reinterpret_cast<volatile int64_t*>(smem.tile_slot(q_slot)) : 0;
        const int64_t linear = __shfl_sync(0xffffffffu, slot_value, 0);
        if (linear < 0) break;
        const TileView tile = view_of(params, TileScheduler::tile_of(params.scheduler, linear));
        consume_tile(params, smem, tile, consumer, thread, visits, q_round);
        visits += tile.key_tiles.count;
        ++q_round;
      }
      // The last tile's O store must have read the staging tile before the block's shared
      // memory goes to another block.
      if (thread == 0) ptx::sm90::tma_store_wait_read<0>();
    } else {
      const TileView tile = view_of(params, Scheduler::work_tile(params.scheduler));
      if (!skipped(tile)) consume_tile(params, smem, tile, consumer, thread, 0, 0);
    }
  }

  static FLASHMMA_DEVICE void consume_tile(const Params& params, const Smem& smem,
                                           const TileView& tile, int consumer, int thread,
                                           int visit_base, int q_round) {
    const Sequence& seq = tile.seq;
    const IndexRange& queries = tile.queries;
    const TileRange& key_tiles = tile.key_tiles;
    const int warp = thread / 32;
    const int first_row = consumer * Config::kRowsPerWarpgroup;  // within the block's Q tile

    // This warpgroup's queries, and the key tiles they see. With ping-pong both warpgroups take
    // one turn per product, so they keep the block's range (same count of turns).
    const IndexRange rows =
        IndexRange{queries.begin + first_row, queries.begin + first_row + Config::kRowsPerWarpgroup}
            .intersect(queries);
    const TileRange own = Config::kPingPong ? key_tiles
                                            : key_tiles_within(params.policy, seq.lengths, rows,
                                                               key_tiles, kBlockN);
    const int begin = static_cast<int>(own.first - key_tiles.first);
    Consumer c{smem, key_tiles, visit_base, begin, begin + own.count};
    c.score_softmax.policy = params.policy;
    c.score_softmax.origin =
        seq.coord(queries.begin + first_row + warp * ptx::sm90::kWgmmaRowsPerWarp, 0);
    c.score_softmax.lengths = seq.lengths;
    c.score_softmax.queries = Config::kPingPong ? queries : rows;  // as the ranges
    c.score_softmax.set_scales(params.args.softmax_scale, params.args.softmax_scale_log2);
    c.score_softmax.lane = thread % 32;
    if constexpr (Dropout::kEnabled) {
      const ScoreCoord& origin = c.score_softmax.origin;
      c.score_softmax.dropout = WarpDropout{
          params.args.dropout,
          static_cast<uint32_t>(origin.batch * params.args.heads_q + origin.head), thread % 32};
    }
    const int q_slot = q_slot_of(q_round);
    c.q_address = ptx::smem_address(smem.q(q_slot)) + first_row * kSubTileRowBytes;
    c.thread = thread;
#pragma unroll
    for (int t = 0; t < kOutputTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) c.output[0][t][i] = 0.f;
    }
    c.row_stats[0].init();

    c.consumer = consumer;
    ptx::sm90::mbarrier_wait_parity(smem.q_full(q_slot), q_parity_of(q_round));
    if (q_round == 0) c.grant_first_turn();
    c.pass(0, c.begin);
    if constexpr (Config::kIssuesProductsTogether) {
      c.run_overlapped();
    } else {
      c.run_sequential();
    }
    c.pass(c.end, key_tiles.count);
    if constexpr (Config::kPersistent) {
      // Every product that read this warp's Q rows has completed: the producer may load a
      // later tile's Q into this slot, and write its tile index, once every consumer warp says
      // so. One arrival per warp, not per warpgroup: a warpgroup whose rows are all past the
      // sequence's end issues no wgmma, so nothing holds its warps together, and its first
      // warp could report the tile done while another had not yet read the tile slot (which
      // the producer then overwrites: that warp would walk another tile's key range and the
      // ring would hang).
      __syncwarp();
      if (thread % 32 == 0) ptx::sm90::mbarrier_arrive(smem.q_empty(q_slot));
    }

    float lse[1][kRowsPerThread];
    c.row_stats[0].finalize(c.output[0], c.score_softmax.lse_scale(), lse[0],
                            c.score_softmax.output_scale());
    write_output(params, smem, seq, queries, consumer, thread, c.output, lse);
  }

  // O through this warpgroup's rows of the Q tile (every wgmma that read them has completed)
  // in the swizzled layout of the O map, then one TMA store per 64 columns; the LSE from
  // registers. Rows past seqlen_q and columns past the head dim are clipped by the store, where
  // the map ends with the sequence (dense O). In packed O the next sequence's rows follow: rows
  // that run past the sequence's end go out through copy_rows_out instead.
  static FLASHMMA_DEVICE void write_output(const Params& params, const Smem& smem,
                                           const Sequence& seq,
                                           const IndexRange& queries, int consumer, int thread,
                                           const float (&output)[1][kOutputTiles][4],
                                           const float (&lse)[1][kRowsPerThread]) {
    const int first_row = consumer * Config::kRowsPerWarpgroup;
    if constexpr (Config::kPersistent) {
      // The previous tile's store (issued by thread 0) has read these staging rows.
      if (thread == 0) ptx::sm90::tma_store_wait_read<0>();
      ptx::sm90::named_barrier_sync(static_cast<uint32_t>(Barrier::kEpilogue) + consumer,
                                    Config::kWarpgroupThreads);
    }
#pragma unroll
    for (int t = 0; t < kOutputTiles; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const fragment::Coord c = ptx::sm90::wgmma_accumulator_coord(thread, 4 * t + 2 * half);
        *reinterpret_cast<uint32_t*>(smem.o() +
                                     Config::QTile::byte_offset(first_row + c.row, c.col)) =
            pack_pair<Element>(output[0][t][2 * half], output[0][t][2 * half + 1]);
      }
    }
    ptx::sm90::fence_proxy_async_shared();
    ptx::sm90::named_barrier_sync(static_cast<uint32_t>(Barrier::kEpilogue) + consumer,
                                  Config::kWarpgroupThreads);
    const int64_t store_row = queries.begin + first_row;
    const bool packed = kVariableLengths && params.args.cu_seqlens_q != nullptr;
    if (packed && store_row + Config::kRowsPerWarpgroup > seq.lengths.seqlen_q) {
      copy_rows_out(params, smem, seq, store_row, first_row, thread);
    } else if (thread == 0 && store_row < seq.lengths.seqlen_q) {
      const MapOrigin origin = map_origin(params.args, seq);
#pragma unroll
      for (int d = 0; d < Config::kHeadDimSubTiles; ++d) {
        const int32_t coords[4] = {d * kSubTile,
                                   static_cast<int32_t>(origin.query_row + store_row),
                                   static_cast<int32_t>(seq.head),
                                   static_cast<int32_t>(origin.query_batch)};
        ptx::sm90::tma_store_tile<4>(
            &params.maps.o, coords,
            smem.o() + d * Config::kBlockM * kSubTileRowBytes + first_row * kSubTileRowBytes);
      }
      ptx::sm90::tma_store_commit_group();
      // Persistent: waited for before the next tile's O is staged (and before the block ends).
      if constexpr (!Config::kPersistent) ptx::sm90::tma_store_wait_read<0>();
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

  // Rows [store_row, seqlen_q) of this warpgroup's staged O (at most 63) to global memory, 16
  // bytes per thread and step, columns below the head dim only. TMA's strides and base are
  // 16-byte aligned (check_tma_layout), so these stores are too.
  static FLASHMMA_DEVICE void copy_rows_out(const Params& params, const Smem& smem,
                                            const Sequence& seq, int64_t store_row,
                                            int first_row, int thread) {
    constexpr int kChunkElements = 16 / static_cast<int>(sizeof(Element));
    const int chunks_per_row = params.args.head_dim / kChunkElements;
    const int64_t left = seq.lengths.seqlen_q - store_row;  // below kRowsPerWarpgroup here
    const int rows = left > 0 ? static_cast<int>(left) : 0;
    for (int chunk = thread; chunk < rows * chunks_per_row; chunk += Config::kWarpgroupThreads) {
      const int row = chunk / chunks_per_row;
      const int column = chunk % chunks_per_row * kChunkElements;
      const uint4 value = *reinterpret_cast<const uint4*>(
          smem.o() + Config::QTile::byte_offset(first_row + row, column));
      *reinterpret_cast<uint4*>(seq.o + (store_row + row) * seq.o_row_stride + column) = value;
    }
  }
};

}  // namespace sm90
}  // namespace flashmma
