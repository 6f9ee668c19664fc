// SPDX-License-Identifier: Apache-2.0
// The host-side description of one backward call: the forward call it differentiates (every
// field of ForwardParams, with O and the LSE now inputs) plus the upstream gradient dO and the
// three gradients it writes. Plain C++ (no CUDA headers).
//
//   D_i    = dO_i . O_i                                   (fp32, per query row)
//   P_ij   = exp(logit_ij - LSE_i)                        (recomputed, never stored)
//   dV_j   = sum_i P_ij dO_i          summed over the query heads of K/V head j's group
//   dS_ij  = P_ij (dO_i . V_j - D_i) * d logit_ij / d scaled score_ij
//   dQ_i   = scale sum_j dS_ij K_j    dK_j = scale sum_i dS_ij Q_i  (dK also over the group)
//
// The LSE is the caller's (the forward's, natural log, fp32 [batch, heads_q, seqlen_q]; it may
// come from a merged forward, e.g. over a ring of devices), and so is the workspace, whose size
// backward_workspace_bytes() gives: an fp32 dQ accumulator and two fp32 values per query row.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashmma/params.hpp"

namespace flashmma {

struct BackwardParams : ForwardParams {
  // The inherited q, k, v, o and lse are read, never written: O and the LSE of the forward call
  // with the same q, k, v, scale and variant fields (softmax_scale, mask, window, softcap,
  // ALiBi). Dense batches, or packed sequences of variable lengths (cu_seqlens_q, cu_seqlens_k,
  // total_q: then dO and dQ are packed as Q, dK and dV as K); seqused_k, paged caches, KV
  // appends, a cache batch index and num_splits > 1 are refused with a named error.
  const void* d_o = nullptr;  // [batch, seqlen_q, heads_q, head_dim] through do_strides
  void* dq = nullptr;         // [batch, seqlen_q, heads_q, head_dim] through dq_strides
  void* dk = nullptr;         // [batch, seqlen_k, heads_kv, head_dim] through dk_strides
  void* dv = nullptr;         // [batch, seqlen_k, heads_kv, head_dim] through dv_strides
  TensorStrides do_strides;
  TensorStrides dq_strides;
  TensorStrides dk_strides;
  TensorStrides dv_strides;

  // true: dK and dV are added to what the buffers hold (their old values are read), for a caller
  // that sums gradients over several calls (a ring of K/V blocks, say); false: overwritten.
  bool accumulate_dkv = false;

  // true: bitwise the same gradients from run to run. dK and dV always are (each block sums its
  // keys' in registers); dQ is summed across key tiles, with atomics in any order by default,
  // in the order of the key tiles when deterministic (a block waits for the previous key tile
  // that sees the same query tile: slower, see docs/perf.md).
  bool deterministic = false;
};

// Where the backward's workspace parts live. Rows of every (batch, query head) are padded to a
// multiple of kBackwardRowPadding, so a query tile of any supported BlockM is whole.
inline constexpr int64_t kBackwardRowPadding = 128;
inline constexpr std::size_t kBackwardWorkspaceAlignment = 256;
inline constexpr int64_t kBackwardMinBlockM = 16;

struct BackwardWorkspace {
  int64_t padded_rows = 0;         // seqlen_q rounded up to kBackwardRowPadding
  std::size_t dq_offset = 0;       // fp32 [batch, heads_q, padded_rows, head_dim]
  std::size_t lse_log2_offset = 0; // fp32 [batch, heads_q, padded_rows]: LSE * log2(e)
  std::size_t delta_offset = 0;    // fp32 [batch, heads_q, padded_rows]: D = dO . O
  // int32 [batch, heads_q, padded_rows / kBackwardMinBlockM]: the deterministic order's counters,
  // one per 16 query rows (a query tile of BlockM rows uses the first of its BlockM / 16).
  std::size_t order_offset = 0;
  std::size_t bytes = 0;
};

inline std::size_t backward_align(std::size_t bytes) {
  return (bytes + kBackwardWorkspaceAlignment - 1) / kBackwardWorkspaceAlignment *
         kBackwardWorkspaceAlignment;
}

inline BackwardWorkspace backward_workspace_layout(const ProblemShape& shape) {
  BackwardWorkspace w;
  w.padded_rows =
      (shape.seqlen_q + kBackwardRowPadding - 1) / kBackwardRowPadding * kBackwardRowPadding;
  const std::size_t rows =
      static_cast<std::size_t>(shape.batch * shape.heads_q * w.padded_rows);
  w.dq_offset = 0;
  w.lse_log2_offset = backward_align(rows * static_cast<std::size_t>(shape.head_dim) * 4);
  w.delta_offset = w.lse_log2_offset + backward_align(rows * 4);
  w.order_offset = w.delta_offset + backward_align(rows * 4);
  w.bytes = w.order_offset + backward_align(rows / kBackwardMinBlockM * 4);
  return w;
}

// Bytes of workspace a backward call needs (params.workspace, params.workspace_bytes).
inline std::size_t backward_workspace_bytes(const BackwardParams& p) {
  if (p.batch <= 0 || p.seqlen_q <= 0 || p.heads_q <= 0 || p.head_dim <= 0) return 0;
  return backward_workspace_layout(p).bytes;
}

}  // namespace flashmma
