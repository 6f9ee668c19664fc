// SPDX-License-Identifier: Apache-2.0
// The FlashAttention-2 backward kernel on mma.sync (sm_80+), a composition of the shared layer
// (sequence facts, the policy's query range, BackwardScores) and the sm80 pieces.
//
// One block per (key tile of BlockN keys, K/V head, batch). K and V are loaded once; the block
// walks the query tiles that see its keys (the policy's query_range: tiles a mask hides are
// never visited), for every query head of the K/V head's group, so dK and dV are sums over the
// group kept in registers and written once, with no atomics. Per query tile t:
//
//   S^T  = K Q^T,  dP^T = V dO^T     each warp: its 16 keys x BlockM queries
//   P^T  = exp(transform(S^T) - LSE)  masked as the policy says (BackwardScores)
//   dV  += P^T dO                    P^T straight from registers
//   dS^T = P^T (dP^T - D)            (times the transform's derivative)
//   dK  += dS^T Q
//   dS^T -> shared memory (one of two buffers)
//   after the next barrier: dQ_t = dS_t K, added to the fp32 accumulator with atomics
//
// Q, dO and their rows' LSE and D stream through two stages: tile t + 1's copies are issued
// right after the one barrier of step t, which makes tile t and dS_{t-1} visible and tells that
// every warp is done with tile t - 1 (whose stage tile t + 1 reuses) and with dS_{t-2} (whose
// buffer dS_t reuses). dK is scaled by softmax_scale at the end; dQ by the convert kernel
// (attention/backward_rows.cuh).
#pragma once

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
#include "flashmma/macros.hpp"
#include "flashmma/ptx/arch_guard.cuh"
#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/ordering.cuh"
#include "flashmma/ptx/red.cuh"
#include "flashmma/sm80/backward_warp_mma.cuh"
#include "flashmma/sm80/tile_io.cuh"
#include "flashmma/traits/backward_config.hpp"

namespace flashmma {
namespace sm80 {

// kVariableLengths: packed sequences of variable lengths (attention/backward_args.hpp's
// BackwardSequence); the launch picks the dense kernel for dense batches.
// Dropout: NoDropout, or PhiloxDropout (attention/dropout.hpp), which the launch compiles with
// kVariableLengths only (it takes dense batches too): dV sums the kept probabilities, dP is
// scaled where kept and 0 where dropped before dS = P (dP - D), and dV is scaled at the end.
template <class Config, class Policy, bool kVariableLengths = false, class Dropout = NoDropout>
struct BackwardKernel {
  static_assert(IsBackwardTileConfig<Config>::value,
                "Config must be a flashmma::BackwardTileConfig<...>");
  static_assert(check_backward_policy<Policy>(), "");

  using Element = typename Config::element_type;
  using arch_tag = typename Config::arch_tag;

  struct Params {
    BackwardArgs<Element> args;
    Policy policy;
  };

  static constexpr int kThreads = Config::kThreads;
  static constexpr int kMinBlocksPerSm = Config::kMinBlocksPerSm;
  static constexpr std::size_t kSmemBytes = Config::kSmemBytes;
  static constexpr const char* kName =
      Dropout::kEnabled ? "backward_kernel (dropout)"
                        : kVariableLengths ? "backward_kernel (variable lengths)" : "backward_kernel";

  static GridShape grid(const ProblemShape& shape) {
    return KeyTileWalk::grid(shape, Config::kBlockN);
  }

  static FLASHMMA_DEVICE void run(const Params& params) {
#if defined(FLASHMMA_SM80_ENABLED)
    constexpr int kWarpSize = 32;
    constexpr int kBlockM = Config::kBlockM;
    constexpr int kBlockN = Config::kBlockN;
    const BackwardArgs<Element>& args = params.args;
    const int head_dim = args.forward.head_dim;

    extern __shared__ __align__(16) unsigned char smem[];
    Element* const k_tile = reinterpret_cast<Element*>(smem + Config::kKOffset);
    Element* const v_tile = reinterpret_cast<Element*>(smem + Config::kVOffset);
    Element* const q_stages = reinterpret_cast<Element*>(smem + Config::kQOffset);
    Element* const do_stages = reinterpret_cast<Element*>(smem + Config::kDoOffset);
    Element* const ds_t = reinterpret_cast<Element*>(smem + Config::kDsOffset);
    float* const lse_stages = reinterpret_cast<float*>(smem + Config::kLseOffset);
    float* const delta_stages = reinterpret_cast<float*>(smem + Config::kDeltaOffset);

    const int n_block = static_cast<int>(blockIdx.x);
    const int kv_head = static_cast<int>(blockIdx.y);
    const int batch = static_cast<int>(blockIdx.z);
    const int group = static_cast<int>(args.forward.group_size);
    const int first_head = kv_head * group;
    // The group's first query head: its K and V (every head of the group reads them), lengths.
    const BackwardSequence<Element, kVariableLengths> kv_seq(
        args, WorkTile{0, static_cast<unsigned>(first_head), static_cast<unsigned>(batch)});
    const SequenceLengths lengths = kv_seq.lengths;
    const int first_key = n_block * kBlockN;
    const IndexRange keys{first_key, first_key + kBlockN < lengths.seqlen_k
                                         ? first_key + kBlockN
                                         : lengths.seqlen_k};
    // The grid covers the longest sequence's keys: a shorter one's tiles past its end have no
    // row of dK or dV to write (with packed sequences those rows are the next sequence's).
    if (keys.empty()) return;
    const KeyTileWalk walk{query_tiles(params.policy, lengths, keys, kBlockM), group};
    const int steps = walk.steps();

    // K and V, once: the oldest cp.async group, waited for with the first query tile.
    const TileCopy<Config, kBlockN> k_copy(kv_seq.k_row_stride, head_dim);
    const TileCopy<Config, kBlockN> v_copy(kv_seq.v_row_stride, head_dim);
    k_copy.issue(k_tile, kv_seq.k, first_key, lengths.seqlen_k - first_key);
    v_copy.issue(v_tile, kv_seq.v, first_key, lengths.seqlen_k - first_key);
    ptx::cp_async_commit();

    // Step t: query head first_head + walk.member(t), query tile walk.first_query(t) / kBlockM.
    const auto step_member = [&](int step) { return walk.member(step); };
    const auto step_first_query = [&](int step) { return walk.first_query(step, kBlockM); };
    const auto issue_step = [&](int step) {
      if (step >= steps) return;
      const int g = step_member(step);
      const int first_query = step_first_query(step);
      const int stage = step % Config::kStages;
      // Built per step: their per-thread offsets are one multiply-add, cheaper than the
      // registers they would hold across the loop.
      const TileCopy<Config, kBlockM> q_copy(kv_seq.q_row_stride, head_dim);
      const TileCopy<Config, kBlockM> do_copy(kv_seq.do_row_stride, head_dim);
      q_copy.issue(q_stages + stage * Config::kQTileElements, kv_seq.q_of(g), first_query,
                   lengths.seqlen_q - first_query);
      do_copy.issue(do_stages + stage * Config::kQTileElements, kv_seq.d_o_of(g), first_query,
                    lengths.seqlen_q - first_query);
      // The rows' LSE and D: whole tiles of the padded workspace rows, 4 floats a copy.
      constexpr int kRowChunks = kBlockM / 4;
      const int thread = static_cast<int>(threadIdx.x);
      if (thread < 2 * kRowChunks) {
        const bool is_delta = thread >= kRowChunks;
        const int chunk = is_delta ? thread - kRowChunks : thread;
        const float* source = (is_delta ? args.delta : args.lse_log2) +
                              kv_seq.workspace_row_of(g) + first_query + 4 * chunk;
        float* destination = (is_delta ? delta_stages : lse_stages) + stage * kBlockM + 4 * chunk;
        ptx::cp_async_cg_16(ptx::smem_address(destination), source, true);
      }
    };
    issue_step(0);
    ptx::cp_async_commit();

    const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
    const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
    const int key_row = warp / Config::kColumnSplit * kMmaM;  // the warp's 16 keys in the tile
    const int grad_column = warp % Config::kColumnSplit * Config::kGradColumns;
    const int dq_row = warp % Config::kDqRowTiles * kMmaM;
    const int dq_column = warp / Config::kDqRowTiles * Config::kDqColumns;

    BackwardScores<Policy> scores;
    scores.policy = params.policy;
    scores.lengths = lengths;
    scores.batch = batch;
    scores.softmax_scale = args.forward.softmax_scale;
    scores.softmax_scale_log2 = args.forward.softmax_scale_log2;
    scores.lane = lane;
    std::conditional_t<Dropout::kEnabled, WarpDropout, NoDropout> dropout;
    if constexpr (Dropout::kEnabled) {
      dropout.args = args.forward.dropout;
      dropout.lane = lane;
    }

    float dk[Config::kGradTiles][4];
    float dv[Config::kGradTiles][4];
    fill_zero(dk);
    fill_zero(dv);

    // One barrier per step: it makes tile t (and the dS^T of tile t - 1) visible and tells that
    // every warp is done with tile t - 1's operands and with the dS^T buffer tile t writes. dQ of
    // tile t - 1 is formed after it, from its own dS^T buffer, so the atomics of one tile overlap
    // the GEMMs of the next.
    for (int step = 0; step <= steps && steps > 0; ++step) {
      ptx::cp_async_wait<0>();
      __syncthreads();
      issue_step(step + 1);
      ptx::cp_async_commit();

      if (step > 0) {
        const int previous = step - 1;
        float dq[Config::kDqTiles][4];
        transposed_times_tile<Config, Config::kDqTiles, Config::kKeySlices,
                              Config::kDsRowStride>(dq, ds_buffer(ds_t, previous), dq_row, k_tile,
                                                    dq_column, lane);
        const int64_t row = kv_seq.workspace_row_of(step_member(previous));
        const int first_query = step_first_query(previous);
        const auto turn = make_dq_turn(
            args.order + (row + first_query) / kBackwardMinBlockM, threadIdx.x == 0,
            [] { __syncthreads(); });
        if (args.deterministic) {
          turn.wait(params.policy, lengths, n_block, first_query / kBlockM, kBlockN, kBlockM);
        }
        add_dq_rows(args.dq_accum + row * head_dim, dq, first_query + dq_row, dq_column,
                    lengths.seqlen_q, head_dim, lane);
        if (args.deterministic) turn.pass(n_block);
      }
      if (step == steps) break;

      const int stage = step % Config::kStages;
      const Element* q_tile = q_stages + stage * Config::kQTileElements;
      const Element* do_tile = do_stages + stage * Config::kQTileElements;
      const float* lse_log2 = lse_stages + stage * kBlockM;
      const float* delta = delta_stages + stage * kBlockM;
      const int first_query = step_first_query(step);
      const IndexRange queries{first_query, first_query + kBlockM < lengths.seqlen_q
                                                ? first_query + kBlockM
                                                : lengths.seqlen_q};
      const bool needs_mask =
          tile_needs_mask(params.policy, lengths, queries, first_key, kBlockN);
      scores.head = first_head + step_member(step);

      // Dropout's mask of the step, one bit a score: drawn before S^T and dP^T, while their
      // accumulators are not live yet (drawn after them, the d = 128 kernel spilled 92 bytes
      // rather than 84).
      [[maybe_unused]] KeepBits<Config::kQueryTiles> keep;
      if constexpr (Dropout::kEnabled) {
        dropout.stream = static_cast<uint32_t>(batch * args.forward.heads_q + scores.head);
        keep = dropout.template keep_rows_are_keys<Config::kQueryTiles>(first_key + key_row,
                                                                        first_query);
      }

      // S^T and dP^T back to back: two independent chains of mma for the scheduler to interleave.
      float s[1][Config::kQueryTiles][4];
      float dp[1][Config::kQueryTiles][4];
      float factor[1][Config::kQueryTiles][4];
      rows_times_rows_t<Config>(s[0], k_tile, key_row, q_tile, lane);
      rows_times_rows_t<Config>(dp[0], v_tile, key_row, do_tile, lane);
      scores.probabilities(s, factor, lse_log2, first_key + key_row, first_query, needs_mask);
      if constexpr (Dropout::kEnabled) {
        WarpDropout::apply(dp[0], keep, dropout.args.scale);  // dP where kept, scaled; else 0
        scores.gradients(dp, s, factor, delta);
        WarpDropout::apply(s[0], keep, 1.f);  // the kept P (dV is scaled at the end)
        registers_times_tile<Config>(dv, s[0], do_tile, grad_column, lane);
      } else {
        registers_times_tile<Config>(dv, s[0], do_tile, grad_column, lane);
        scores.gradients(dp, s, factor, delta);
      }
      registers_times_tile<Config>(dk, dp[0], q_tile, grad_column, lane);
      if (grad_column == 0) store_ds(ds_buffer(ds_t, step), dp[0], key_row, lane);
    }
    ptx::cp_async_wait<0>();  // K and V, when no query tile sees the keys

    // dK = softmax_scale * sum dS^T Q; a key tile that no query sees writes zeros.
#pragma unroll
    for (int t = 0; t < Config::kGradTiles; ++t) {
#pragma unroll
      for (int i = 0; i < 4; ++i) dk[t][i] *= args.forward.softmax_scale;
    }
    if constexpr (Dropout::kEnabled) {  // dV = scale * sum of the kept P^T dO
#pragma unroll
      for (int t = 0; t < Config::kGradTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) dv[t][i] *= dropout.args.scale;
      }
    }
    store_gradient(kv_seq.dk, kv_seq.dk_row_stride, dk, first_key + key_row, grad_column,
                   lengths.seqlen_k, head_dim, args.accumulate_dkv, lane);
    store_gradient(kv_seq.dv, kv_seq.dv_row_stride, dv, first_key + key_row, grad_column,
                   lengths.seqlen_k, head_dim, args.accumulate_dkv, lane);
#else
    (void)params;
    ptx::trap_missing_instruction();
#endif
  }

 private:
  // The warp's 16 rows of dS^T into the shared [BlockN, BlockM] tile, as element pairs.
  static FLASHMMA_DEVICE void store_ds(Element* ds_t, const float (&ds)[Config::kQueryTiles][4],
                                       int key_row, int lane) {
#pragma unroll
    for (int t = 0; t < Config::kQueryTiles; ++t) {
#pragma unroll
      for (int half = 0; half < 2; ++half) {
        const fragment::Coord c = fragment::c_coord(lane, 2 * half);
        *reinterpret_cast<uint32_t*>(ds_t + (key_row + c.row) * Config::kDsRowStride +
                                     t * kMmaN + c.col) =
            pack_pair<Element>(ds[t][2 * half], ds[t][2 * half + 1]);
      }
    }
  }

  // The dS^T buffer of step `step` (two alternate).
  static FLASHMMA_DEVICE Element* ds_buffer(Element* ds_t, int step) {
    return ds_t + (step % 2) * Config::kDsElements;
  }
};

}  // namespace sm80
}  // namespace flashmma
