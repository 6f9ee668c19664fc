// SPDX-License-Identifier: Apache-2.0
// The Hopper (sm_90a) backward kernel: TMA loads, wgmma, warp specialization. A composition of the
// shared layer (sequence facts, the policy's query range, BackwardScores, the gradient writers
// and dQ's deterministic order, dropout) and the sm90 PTX layer, in the portable backward's
// order (sm80/backward_kernel.cuh; the GEMMs and the roles: traits/sm90_backward_config.hpp).
//
// One block per (key tile of BlockN keys, K/V head, batch):
//
//   producer warpgroup (registers lowered; one elected thread works)
//     K, V -> smem once (TMA, kv_full)
//     for each step t (query head of the group, query tile that sees the keys), slot t % Stages:
//       wait q_empty[slot]; Q_t, dO_t (TMA) and their rows' LSE and D (bulk copies of the
//       workspace rows) -> smem, q_full[slot]
//   consumer warpgroup c (its keys and queries, or its head-dim columns: the config's split):
//     wait kv_full
//     for each step t:
//       wait q_full; S^T, dP^T of its keys and queries (SS, one group), wait
//       P^T, dS^T (BackwardScores, dropout); dS^T (and P^T when the head dim is split) -> the
//       step's buffers
//       keys split: dV += P^T dO_t, dK += dS^T Q_t (RS, one group)
//       both consumers meet (named barrier): the step's dS^T (and P^T) are whole in shared memory
//       head dim split: dV += P^T dO_t, dK += dS^T Q_t for its columns (SS)
//       dQ_t = dS K, its share (SS); wait for the group(s), release the slot (q_empty); add dQ
//       to the fp32 accumulator (in the deterministic order when asked): vector reductions from
//       registers, or, head dim split, through the staging tile, one bulk reduction per row
//       (sm90/dq_staging.cuh)
//     dK *= scale (and dV *= 1 / (1 - p) with dropout), stored from registers
//
// dS^T and P^T alternate between two buffers: the meeting of step t tells that both warpgroups
// are done with step t - 1's products, whose buffers step t + 1 writes. The same meeting frees
// dQ's staging tile: the threads that issued step t - 1's bulk reductions wait until those have
// read it before they arrive. The slot's barriers follow the forward's rule
// (sm90/forward_kernel.cuh): round r of a slot waits for parity r % 2 of q_full; the producer
// waits for parity (r + 1) % 2 of q_empty, which a fresh barrier passes.
// Every consumer thread arrives on q_empty once it is done with the slot: each read the rows' LSE
// and D itself (generic loads, unlike the wgmmas' reads of Q and dO), and its own arrival is what
// orders those reads before the next bulk copy into the slot (an arrival by one thread after a
// named barrier orders them too, but compute-sanitizer's racecheck does not follow that chain
// and reported the copies as hazards).
//
// Dense batches only: packed sequences run on the portable kernel (a box of packed Q would take
// the next sequence's rows in, whose dO is not zero).
#pragma once

#include <cuda.h>
#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashmma/attention/backward_args.hpp"
#include "flashmma/attention/backward_gradients.cuh"
#include "flashmma/attention/backward_scores.cuh"
#include "flashmma/attention/dropout.cuh"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/backward_params.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/smem.cuh"
#include "flashmma/ptx/sm90.cuh"
#include "flashmma/sm90/dq_staging.cuh"
#include "flashmma/sm90/tile_loads.cuh"
#include "flashmma/traits/sm90_backward_config.hpp"

namespace flashmma {
namespace sm90 {

// The tensor maps of one backward call (host: sm90/tensor_maps.hpp): Q and dO load boxes of 64
// head-dim columns by BlockM rows, K and V by 128 rows.
struct BackwardTensorMaps {
  CUtensorMap q;
  CUtensorMap k;
  CUtensorMap v;
  CUtensorMap d_o;
};

template <class Config, class Policy, class Dropout = NoDropout>
struct BackwardKernel {
  static_assert(IsSm90BackwardTileConfig<Config>::value,
                "Config must be a flashmma::Sm90BackwardTileConfig<...>");
  static_assert(check_backward_policy<Policy>(), "");

  using Element = typename Config::element_type;
  using arch_tag = typename Config::arch_tag;
  using Sequence = BackwardSequence<Element, /*kVariableLengths=*/false>;

  struct Params {
    BackwardTensorMaps maps;  // first: CUtensorMap is 64-byte aligned
    BackwardArgs<Element> args;
    Policy policy;
  };

  static constexpr int kThreads = Config::kThreads;
  static constexpr int kMinBlocksPerSm = Config::kMinBlocksPerSm;
  static constexpr std::size_t kSmemBytes = Config::kSmemBytes;
  static constexpr const char* kName =
      Dropout::kEnabled ? "sm90_backward_kernel (dropout)" : "sm90_backward_kernel";

  static constexpr int kBlockM = Config::kBlockM;
  static constexpr int kBlockN = Config::kBlockN;
  static constexpr int kHeadDim = Config::kHeadDimPadded;
  static constexpr int kSubTile = kSm90SubTileElements;
  static constexpr uint32_t kSubTileRowBytes = kSubTile * sizeof(Element);  // 128
  static constexpr int kScoreQueries = Config::kScoreQueries;  // a consumer's S^T columns
  static constexpr int kQueryTiles = kScoreQueries / kMmaN;     // n8 tiles of them
  static constexpr int kQuerySlices = kScoreQueries / kMmaK;    // k16 slices (RS operands)
  static constexpr int kBlockQuerySlices = kBlockM / kMmaK;     // k16 slices of dV's, dK's sums
  static constexpr int kHeadDimSlices = kHeadDim / kMmaK;       // k16 slices of S^T's, dP^T's
  static constexpr int kKeySlices = kBlockN / kMmaK;            // k16 slices of dQ's
  static constexpr int kGradColumns = Config::kGradColumns;     // a consumer's dK, dV columns
  static constexpr int kGradTiles = kGradColumns / kMmaN;
  static constexpr int kDqTiles = Config::kDqColumns / kMmaN;

  static GridShape grid(const ProblemShape& shape) { return KeyTileWalk::grid(shape, kBlockN); }

  // The block's shared memory, carved from the dynamic allocation rounded up to 1024 bytes.
  struct Smem {
    unsigned char* base;

    FLASHMMA_DEVICE unsigned char* k() const { return base + Config::kKOffset; }
    FLASHMMA_DEVICE unsigned char* v() const { return base + Config::kVOffset; }
    FLASHMMA_DEVICE unsigned char* q(int slot) const {
      return base + Config::kQOffset + static_cast<std::size_t>(slot) * Config::kQBytes;
    }
    FLASHMMA_DEVICE unsigned char* d_o(int slot) const {
      return base + Config::kDoOffset + static_cast<std::size_t>(slot) * Config::kQBytes;
    }
    FLASHMMA_DEVICE unsigned char* ds(int step) const {
      return base + Config::kDsOffset + static_cast<std::size_t>(step % 2) * Config::kDsBytes;
    }
    FLASHMMA_DEVICE unsigned char* p(int step) const {  // kSplitsHeadDim only
      return base + Config::kPOffset + static_cast<std::size_t>(step % 2) * Config::kDsBytes;
    }
    FLASHMMA_DEVICE float* dq_stage() const {
      return reinterpret_cast<float*>(base + Config::kDqStageOffset);
    }
    FLASHMMA_DEVICE float* lse_log2(int slot) const {
      return reinterpret_cast<float*>(base + Config::kLseOffset) + slot * kBlockM;
    }
    FLASHMMA_DEVICE float* delta(int slot) const {
      return reinterpret_cast<float*>(base + Config::kDeltaOffset) + slot * kBlockM;
    }
    FLASHMMA_DEVICE uint64_t* barrier(int index) const {
      return reinterpret_cast<uint64_t*>(base + Config::kBarrierOffset) + index;
    }
    FLASHMMA_DEVICE uint64_t* kv_full() const { return barrier(0); }
    FLASHMMA_DEVICE uint64_t* q_full(int slot) const { return barrier(1 + slot); }
    FLASHMMA_DEVICE uint64_t* q_empty(int slot) const {
      return barrier(1 + Config::kStages + slot);
    }
  };

  // Named barriers (0 is __syncthreads'): the consumers meet at kDsReady once a step's dS^T is
  // stored, and at kDqTurn around dQ's sums in the deterministic order; consumer c's warpgroup
  // meets at kDqStaged + c once its share of dQ is in the staging tile.
  enum class Barrier : uint32_t { kDsReady = 1, kDqTurn = 2, kDqStaged = 3 };
  static constexpr uint32_t kConsumerThreads =
      Config::kConsumerWarpgroups * ptx::sm90::kWarpgroupThreads;

  static FLASHMMA_DEVICE int slot_of(int step) { return step % Config::kStages; }
  static FLASHMMA_DEVICE uint32_t parity_of(int step) {
    return static_cast<uint32_t>(step / Config::kStages) & 1u;
  }

  // What both roles know of the block: its keys, the query tiles that see them, the steps.
  struct Block {
    int n_block;
    int first_head;  // the K/V head's group: query heads first_head + g, g < walk.group
    IndexRange keys;
    KeyTileWalk walk;
    int steps;

    FLASHMMA_DEVICE int member(int step) const { return walk.member(step); }
    FLASHMMA_DEVICE int first_query(int step) const { return walk.first_query(step, kBlockM); }
  };

  static FLASHMMA_DEVICE void run(const Params& params) {
#if defined(FLASHMMA_SM90A_ENABLED)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const Smem smem{swizzle_aligned(smem_raw)};

    if (threadIdx.x == 0) {
      ptx::sm90::mbarrier_init(smem.kv_full(), 1);
#pragma unroll
      for (int slot = 0; slot < Config::kStages; ++slot) {
        ptx::sm90::mbarrier_init(smem.q_full(slot), 1);
        ptx::sm90::mbarrier_init(smem.q_empty(slot), kConsumerThreads);
      }
      ptx::sm90::fence_mbarrier_init();
    }
    __syncthreads();  // the last block-wide barrier: the producer's idle warps exit below

    const BackwardArgs<Element>& args = params.args;
    Block block;
    block.n_block = static_cast<int>(blockIdx.x);
    block.walk.group = static_cast<int>(args.forward.group_size);
    block.first_head = static_cast<int>(blockIdx.y) * block.walk.group;
    const Sequence seq(args, WorkTile{0, static_cast<unsigned>(block.first_head), blockIdx.z});
    const int first_key = block.n_block * kBlockN;
    block.keys = IndexRange{first_key, first_key + kBlockN < seq.lengths.seqlen_k
                                           ? first_key + kBlockN
                                           : seq.lengths.seqlen_k};
    block.walk.q_tiles = query_tiles(params.policy, seq.lengths, block.keys, kBlockM);
    block.steps = block.walk.steps();

    // Broadcast from lane 0, so that ptxas keeps what follows from it in uniform registers.
    const int warpgroup =
        __shfl_sync(0xffffffffu, static_cast<int>(threadIdx.x) / Config::kWarpgroupThreads, 0);
    if (warpgroup == 0) {
      ptx::sm90::setmaxnreg_dec<Config::kProducerRegisters>();
      if (threadIdx.x / 32 == 0 && ptx::sm90::elect_one_sync()) produce(params, smem, seq, block);
    } else {
      ptx::sm90::setmaxnreg_inc<Config::kConsumerRegisters>();
      consume(params, smem, seq, block, warpgroup - 1);
    }
#else
    (void)params;
    ptx::trap_missing_instruction();
#endif
  }

 private:
  // The producer: one thread issues every load. A block whose keys no query sees loads nothing
  // (its consumers write zeros and exit without waiting).
  static FLASHMMA_DEVICE void produce(const Params& params, const Smem& smem, const Sequence& seq,
                                      const Block& block) {
    if (block.steps == 0) return;
    const BackwardArgs<Element>& args = params.args;
    constexpr int kSubTiles = Config::kHeadDimSubTiles;
    ptx::sm90::mbarrier_arrive_expect_tx(smem.kv_full(), 2 * Config::kKVBytes);
    load_rows<kBlockN, kSubTiles>(smem.k(), &params.maps.k, block.keys.begin, seq.kv_head,
                                  seq.batch, smem.kv_full());
    load_rows<kBlockN, kSubTiles>(smem.v(), &params.maps.v, block.keys.begin, seq.kv_head,
                                  seq.batch, smem.kv_full());
    for (int step = 0; step < block.steps; ++step) {
      const int slot = slot_of(step);
      const int head = block.first_head + block.member(step);
      const int first_query = block.first_query(step);
      ptx::sm90::mbarrier_wait_parity(smem.q_empty(slot), parity_of(step) ^ 1u);
      uint64_t* const full = smem.q_full(slot);
      ptx::sm90::mbarrier_arrive_expect_tx(full, 2 * Config::kQBytes + 2 * Config::kRowValueBytes);
      load_rows<kBlockM, kSubTiles>(smem.q(slot), &params.maps.q, first_query, head, seq.batch,
                                    full);
      load_rows<kBlockM, kSubTiles>(smem.d_o(slot), &params.maps.d_o, first_query, head,
                                    seq.batch, full);
      // The workspace rows are padded to whole tiles (kBackwardRowPadding): no bounds here.
      const int64_t row = seq.workspace_row_of(block.member(step)) + first_query;
      ptx::sm90::bulk_copy_load(smem.lse_log2(slot), args.lse_log2 + row,
                                Config::kRowValueBytes, full);
      ptx::sm90::bulk_copy_load(smem.delta(slot), args.delta + row, Config::kRowValueBytes, full);
    }
  }

  template <int kTiles>
  using Fragments = float[1][kTiles][4];
  template <int kTiles>
  static FLASHMMA_DEVICE float (&flat(float (&fragments)[1][kTiles][4]))[4 * kTiles] {
    return reinterpret_cast<float(&)[4 * kTiles]>(fragments);
  }
  // A k16-sliced operand of an RS wgmma, from accumulators (ptx::sm90::accumulator_for_a).
  using Operand = uint32_t[kQuerySlices][ptx::sm90::kWgmmaARegisters];

  static FLASHMMA_DEVICE void pack_operand(const Fragments<kQueryTiles>& accumulators,
                                           Operand& operand) {
#pragma unroll
    for (int s = 0; s < kQuerySlices; ++s) {
#pragma unroll
      for (int r = 0; r < ptx::sm90::kWgmmaARegisters; ++r) {
        const float(&fragment)[4] = accumulators[0][2 * s + r / 2];
        operand[s][r] = pack_pair<Element>(fragment[2 * (r % 2)], fragment[2 * (r % 2) + 1]);
      }
    }
  }
  static FLASHMMA_DEVICE void fence_operand(Operand& operand) {
#pragma unroll
    for (int s = 0; s < kQuerySlices; ++s) ptx::sm90::wgmma_fence_operand(operand[s]);
  }

  // This warpgroup's rows of dS^T or P^T (packed as the RS operand; its keys from
  // `first_key_row`, its queries from `first_query_column`) into the step's buffer, where the
  // wgmmas read them as dQ's MN-major A (queries contiguous) or dK's and dV's K-major A: element
  // pairs of adjacent queries are one 32-bit store.
  static FLASHMMA_DEVICE void store_scores(unsigned char* buffer, const Operand& operand,
                                           int thread, int first_key_row,
                                           int first_query_column) {
#pragma unroll
    for (int s = 0; s < kQuerySlices; ++s) {
#pragma unroll
      for (int r = 0; r < ptx::sm90::kWgmmaARegisters; ++r) {
        const fragment::Coord c = ptx::sm90::wgmma_a_coord(thread, r, 0);
        *reinterpret_cast<uint32_t*>(
            buffer + Config::DsTile::byte_offset(first_query_column + kMmaK * s + c.col,
                                                 first_key_row + c.row)) = operand[s][r];
      }
    }
  }

  // A consumer warpgroup: its share of S^T and of the gradients (the config's split), from the
  // block's keys to its dK and dV and its share of every dQ.
  static FLASHMMA_DEVICE void consume(const Params& params, const Smem& smem, const Sequence& seq,
                                      const Block& block, int consumer) {
    namespace wg = ptx::sm90;
    constexpr bool kSplitsHeadDim = Config::kSplitsHeadDim;
    const BackwardArgs<Element>& args = params.args;
    const SequenceLengths& lengths = seq.lengths;
    const int head_dim = args.forward.head_dim;
    const int thread = static_cast<int>(threadIdx.x) % Config::kWarpgroupThreads;
    const int warp = thread / 32;
    const int lane = thread % 32;
    // This warpgroup's keys, queries of S^T and head-dim columns of dK and dV within the block's.
    const int first_key_row = kSplitsHeadDim ? 0 : consumer * Config::kKeysPerWarpgroup;
    const int first_query_column = kSplitsHeadDim ? consumer * kScoreQueries : 0;
    const int first_grad_column = kSplitsHeadDim ? consumer * kGradColumns : 0;
    const int key_row = first_key_row + warp * wg::kWgmmaRowsPerWarp;  // this warp's 16 keys
    const int first_key = block.keys.begin;

    BackwardScores<Policy> scores;
    scores.policy = params.policy;
    scores.lengths = lengths;
    scores.batch = static_cast<int32_t>(seq.batch);
    scores.softmax_scale = args.forward.softmax_scale;
    scores.softmax_scale_log2 = args.forward.softmax_scale_log2;
    scores.lane = lane;
    std::conditional_t<Dropout::kEnabled, WarpDropout, NoDropout> dropout;
    if constexpr (Dropout::kEnabled) {
      dropout.args = args.forward.dropout;
      dropout.lane = lane;
    }

    Fragments<kGradTiles> dk;
    Fragments<kGradTiles> dv;
#pragma unroll
    for (int t = 0; t < kGradTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) dk[0][t][i] = dv[0][t][i] = 0.f;
    }

    // Shared-memory addresses of this warpgroup's operands: its rows of K and V (A of S^T and
    // dP^T); its query rows of dS (dQ's A, BlockM = 128) or its head-dim columns of K (dQ's B,
    // BlockM = 64); its head-dim columns of Q and dO (dK's and dV's B, head dim split).
    const uint32_t k_address = ptx::smem_address(smem.k()) + first_key_row * kSubTileRowBytes;
    const uint32_t v_address = ptx::smem_address(smem.v()) + first_key_row * kSubTileRowBytes;
    const uint32_t dq_a_offset =
        Config::kDqSplitsRows ? consumer * Config::DsTile::kLeadingByteOffset : 0u;
    const uint32_t dq_b_address =
        ptx::smem_address(smem.k()) +
        (Config::kDqSplitsRows ? 0u
                               : consumer * (Config::kDqColumns / kSubTile) *
                                     Config::KTileByColumns::kLeadingByteOffset);
    const uint32_t grad_b_offset =
        (first_grad_column / kSubTile) * Config::QTileByColumns::kLeadingByteOffset;
    const int dq_first_row = Config::kDqSplitsRows ? consumer * wg::kWgmmaM : 0;
    const int dq_first_column = Config::kDqSplitsRows ? 0 : consumer * Config::kDqColumns;
    const DqStagingTile<Config::kDqStagePitch> dq_stage{smem.dq_stage()};  // kStagesDq only
    // This warpgroup's share of dQ is kWgmmaM rows: thread r < kWgmmaM reduces row r's.
    const bool adds_dq_row = Config::kStagesDq && thread < wg::kWgmmaM;

    if (block.steps > 0) wg::mbarrier_wait_parity(smem.kv_full(), 0);
    for (int step = 0; step < block.steps; ++step) {
      const int slot = slot_of(step);
      const int g = block.member(step);
      const int first_query = block.first_query(step);
      const IndexRange queries{first_query, first_query + kBlockM < lengths.seqlen_q
                                                ? first_query + kBlockM
                                                : lengths.seqlen_q};
      const bool needs_mask = tile_needs_mask(params.policy, lengths, queries,
                                              first_key + first_key_row,
                                              Config::kKeysPerWarpgroup);
      scores.head = block.first_head + g;
      const uint32_t q_address = ptx::smem_address(smem.q(slot));
      const uint32_t do_address = ptx::smem_address(smem.d_o(slot));
      const int score_query = first_query + first_query_column;  // S^T's first column

      [[maybe_unused]] KeepBits<kQueryTiles> keep;
      if constexpr (Dropout::kEnabled) {
        dropout.stream = static_cast<uint32_t>(seq.batch * args.forward.heads_q + scores.head);
        keep = dropout.template keep_rows_are_keys<kQueryTiles>(first_key + key_row, score_query);
      }

      // S^T and dP^T of this warpgroup's keys and queries, one group.
      Fragments<kQueryTiles> s;
      Fragments<kQueryTiles> dp;
      const uint32_t query_rows = first_query_column * kSubTileRowBytes;
      wg::mbarrier_wait_parity(smem.q_full(slot), parity_of(step));
      wg::wgmma_fence_operand(flat(s));
      wg::wgmma_fence_operand(flat(dp));
      wg::wgmma_fence();
#pragma unroll
      for (int k = 0; k < kHeadDimSlices; ++k) {
        wg::wgmma_ss<Element, kScoreQueries, wg::Major::kK>(
            flat(s), Config::KTile::descriptor(k_address, k),
            Config::QTile::descriptor(q_address + query_rows, k), /*accumulate=*/k > 0);
      }
#pragma unroll
      for (int k = 0; k < kHeadDimSlices; ++k) {
        wg::wgmma_ss<Element, kScoreQueries, wg::Major::kK>(
            flat(dp), Config::KTile::descriptor(v_address, k),
            Config::QTile::descriptor(do_address + query_rows, k), /*accumulate=*/k > 0);
      }
      wg::wgmma_commit_group();
      wg::wgmma_wait_group<0>();
      wg::wgmma_fence_operand(flat(s));
      wg::wgmma_fence_operand(flat(dp));

      // P^T and dS^T in one pass (the forward's dropout mask on both, as in the portable kernel).
      const float* const lse_log2 = smem.lse_log2(slot) + first_query_column;
      const float* const delta = smem.delta(slot) + first_query_column;
      if constexpr (Dropout::kEnabled) {
        scores.probabilities_and_gradients(s, dp, lse_log2, delta, first_key + key_row,
                                           score_query, needs_mask,
                                           KeptScores<kQueryTiles>{keep, dropout.args.scale});
      } else {
        scores.probabilities_and_gradients(s, dp, lse_log2, delta, first_key + key_row,
                                           score_query, needs_mask, KeepAll{});
      }
      Operand p_operand;
      Operand ds_operand;
      pack_operand(s, p_operand);
      pack_operand(dp, ds_operand);
      store_scores(smem.ds(step), ds_operand, thread, first_key_row, first_query_column);
      if constexpr (kSplitsHeadDim) {
        store_scores(smem.p(step), p_operand, thread, first_key_row, first_query_column);
      }
      wg::fence_proxy_async_shared();  // the generic stores, before wgmmas read them

      if constexpr (!kSplitsHeadDim) {
        // dV += P^T dO, dK += dS^T Q from registers: one group, left running.
        fence_operand(p_operand);
        fence_operand(ds_operand);
        wg::wgmma_fence_operand(flat(dv));
        wg::wgmma_fence_operand(flat(dk));
        wg::wgmma_fence();
#pragma unroll
        for (int k = 0; k < kQuerySlices; ++k) {
          wg::wgmma_rs<Element, kGradColumns, wg::Major::kMN>(
              flat(dv), p_operand[k], Config::QTileByColumns::descriptor(do_address, k),
              /*accumulate=*/true);
        }
#pragma unroll
        for (int k = 0; k < kQuerySlices; ++k) {
          wg::wgmma_rs<Element, kGradColumns, wg::Major::kMN>(
              flat(dk), ds_operand[k], Config::QTileByColumns::descriptor(q_address, k),
              /*accumulate=*/true);
        }
        wg::wgmma_commit_group();
      }

      // Both warpgroups' dS^T (and P^T) are in place. Keys split: dV and dK are waited for
      // before dQ is issued (with their operands live through dQ's wgmma, the d = 128 tile
      // spilled 72 bytes). Head dim split: dV and dK of this warpgroup's columns from shared
      // memory, in one group with dQ.
      if (adds_dq_row) wg::tma_store_wait_read<0>();  // the staging tile is free (see the top)
      wg::named_barrier_sync(static_cast<uint32_t>(Barrier::kDsReady), kConsumerThreads);
      if constexpr (!kSplitsHeadDim) {
        wg::wgmma_wait_group<0>();  // dV and dK have landed: Q and dO of the slot are free
        fence_operand(p_operand);
        fence_operand(ds_operand);
        wg::wgmma_fence_operand(flat(dv));
        wg::wgmma_fence_operand(flat(dk));
        wg::mbarrier_arrive(smem.q_empty(slot));
      }
      Fragments<kDqTiles> dq;
      wg::wgmma_fence_operand(flat(dq));
      if constexpr (kSplitsHeadDim) {
        wg::wgmma_fence_operand(flat(dv));
        wg::wgmma_fence_operand(flat(dk));
      }
      wg::wgmma_fence();
      if constexpr (kSplitsHeadDim) {
        const uint32_t p_address = ptx::smem_address(smem.p(step));
        const uint32_t ds_address = ptx::smem_address(smem.ds(step));
#pragma unroll
        for (int k = 0; k < kBlockQuerySlices; ++k) {
          wg::wgmma_ss<Element, kGradColumns, wg::Major::kMN>(
              flat(dv), Config::ScoreTile::descriptor(p_address, k),
              Config::QTileByColumns::descriptor(do_address + grad_b_offset, k),
              /*accumulate=*/true);
        }
#pragma unroll
        for (int k = 0; k < kBlockQuerySlices; ++k) {
          wg::wgmma_ss<Element, kGradColumns, wg::Major::kMN>(
              flat(dk), Config::ScoreTile::descriptor(ds_address, k),
              Config::QTileByColumns::descriptor(q_address + grad_b_offset, k),
              /*accumulate=*/true);
        }
      }
      const uint32_t dq_a_address = ptx::smem_address(smem.ds(step)) + dq_a_offset;
#pragma unroll
      for (int k = 0; k < kKeySlices; ++k) {
        wg::wgmma_ss<Element, Config::kDqColumns, wg::Major::kMN, wg::Major::kMN>(
            flat(dq), Config::DsTile::descriptor(dq_a_address, k),
            Config::KTileByColumns::descriptor(dq_b_address, k), /*accumulate=*/k > 0);
      }
      wg::wgmma_commit_group();
      wg::wgmma_wait_group<0>();
      wg::wgmma_fence_operand(flat(dq));
      if constexpr (kSplitsHeadDim) {
        wg::wgmma_fence_operand(flat(dv));
        wg::wgmma_fence_operand(flat(dk));
        wg::mbarrier_arrive(smem.q_empty(slot));
      }

      const int64_t row = seq.workspace_row_of(g);
      // The order's leader is the first consumer thread; the producer takes no part.
      const auto turn = make_dq_turn(
          args.order + (row + first_query) / kBackwardMinBlockM,
          consumer == 0 && thread == 0, [] {
            wg::named_barrier_sync(static_cast<uint32_t>(Barrier::kDqTurn), kConsumerThreads);
          });
      if constexpr (Config::kStagesDq) {
        // dQ_t -> the staging tile; once the warpgroup's share is whole there, one bulk
        // reduction per row. In the deterministic order the turn's barrier (both consumers) is
        // the meeting, and a row's sums are complete, and ordered before the generic release,
        // when it passes.
        dq_stage.store(dq[0], dq_first_row + warp * wg::kWgmmaRowsPerWarp, dq_first_column, lane);
        wg::fence_proxy_async_shared();
      }
      if (args.deterministic) {
        turn.wait(params.policy, lengths, block.n_block, first_query / kBlockM, kBlockN, kBlockM);
        // The acquire, before the bulk sums (adds_dq_row: staged only; the direct sums below
        // are generic-proxy adds).
        if (adds_dq_row) wg::fence_proxy_async_global();
      } else if (Config::kStagesDq) {
        wg::named_barrier_sync(static_cast<uint32_t>(Barrier::kDqStaged) + consumer,
                               Config::kWarpgroupThreads);
      }
      if constexpr (Config::kStagesDq) {
        if (adds_dq_row) {
          const int tile_row = dq_first_row + thread;
          if (first_query + tile_row < lengths.seqlen_q) {
            dq_stage.add_row(args.dq_accum + (row + first_query + tile_row) * head_dim, tile_row,
                             dq_first_column, Config::kDqColumns, head_dim);
          }
          wg::tma_store_commit_group();
          if (args.deterministic) {
            wg::tma_store_wait<0>();
            wg::fence_proxy_async_global();
          }
        }
      } else {
        add_dq_rows(args.dq_accum + row * head_dim, dq[0],
                    first_query + dq_first_row + warp * wg::kWgmmaRowsPerWarp, dq_first_column,
                    lengths.seqlen_q, head_dim, lane);
      }
      if (args.deterministic) turn.pass(block.n_block);
    }
    // The last reductions, done before the block's shared memory goes to another block.
    if (adds_dq_row) wg::tma_store_wait<0>();

    // dK = softmax_scale * sum dS^T Q; a key tile that no query sees writes zeros.
#pragma unroll
    for (int t = 0; t < kGradTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) dk[0][t][i] *= args.forward.softmax_scale;
    }
    if constexpr (Dropout::kEnabled) {  // dV = scale * sum of the kept P^T dO
#pragma unroll
      for (int t = 0; t < kGradTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) dv[0][t][i] *= dropout.args.scale;
      }
    }
    store_gradient(seq.dk, seq.dk_row_stride, dk[0], first_key + key_row, first_grad_column,
                   lengths.seqlen_k, head_dim, args.accumulate_dkv, lane);
    store_gradient(seq.dv, seq.dv_row_stride, dv[0], first_key + key_row, first_grad_column,
                   lengths.seqlen_k, head_dim, args.accumulate_dkv, lane);
  }
};

}  // namespace sm90
}  // namespace flashmma
