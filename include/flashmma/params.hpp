// SPDX-License-Identifier: Apache-2.0
// The host-side description of one attention call: pointers, sizes and strides.
// Plain C++ (no CUDA headers) so that engines and tests can build it anywhere.
#pragma once

#include <cstddef>
#include <cstdint>
#include <limits>

#include "flashmma/problem_shape.hpp"

namespace flashmma {

// Element type of Q, K, V and O (all four share it). The LSE is always fp32.
enum class ScalarType : int { kFloat16, kBFloat16 };

// Which scores a query row may see.
//   kNone:   every key.
//   kCausal: key j is visible to query i iff j <= i + (seqlen_k - seqlen_q), i.e. the mask is
//            aligned to the bottom-right corner of the score matrix (FlashAttention >= 2.1).
//            A query row that sees no key produces O = 0 and LSE = -inf.
enum class MaskKind : int { kNone, kCausal };

// Strides are in elements, not bytes, and are signed 64-bit so that tensors of more than 2^31
// elements and any permutation of [batch, seq, head, dim] can be described. The last dimension
// (head_dim) must be contiguous.
struct TensorStrides {
  int64_t batch = 0;
  int64_t head = 0;
  int64_t row = 0;  // one step along the sequence
};

// Strides of a contiguous [batch, seq, heads, head_dim] tensor (FlashAttention's layout).
inline TensorStrides bshd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorStrides{seqlen * heads * head_dim, head_dim, heads * head_dim};
}

// Strides of a contiguous [batch, heads, seq, head_dim] tensor.
inline TensorStrides bhsd_strides(int64_t seqlen, int64_t heads, int64_t head_dim) {
  return TensorStrides{heads * seqlen * head_dim, seqlen * head_dim, head_dim};
}

// Everything the forward pass needs: the problem's shape (batch, seqlen_q, seqlen_k, heads_q,
// heads_kv, head_dim, from ProblemShape), the tensors, and the attention variant. Fill it, call
// validate() or let forward() do so.
//
//   O[b, s, h, :] = softmax_j(logit(b, h, s, j)) V[b, j, h / group, :]
//   LSE[b, h, s]  = log(sum_j exp(logit(b, h, s, j)))   (natural log, over visible keys)
//   logit         = scale * Q[b, s, h, :] . K[b, j, h / group, :], then the softcap, then the
//                   ALiBi bias; -inf where the mask or the window hides key j from query s
//
// with group = heads_q / heads_kv (1: multi-head, heads_q: multi-query, else grouped-query).
// The variant fields follow FlashAttention-2's flash_attn_func (window_size, softcap,
// alibi_slopes), with masks aligned to the bottom-right corner when seqlen_q != seqlen_k.
// flashmma::forward(params) runs them as built-in score policies (attention/builtin_policies.hpp);
// forward<Config, Policy>(params, policy) runs a policy of your own instead.
struct ForwardParams : ProblemShape {
  ScalarType dtype = ScalarType::kFloat16;

  const void* q = nullptr;  // [batch, seqlen_q, heads_q, head_dim] through q_strides
  const void* k = nullptr;  // [batch, seqlen_k, heads_kv, head_dim] through k_strides
  const void* v = nullptr;  // [batch, seqlen_k, heads_kv, head_dim] through v_strides
  void* o = nullptr;        // [batch, seqlen_q, heads_q, head_dim] through o_strides
  // Optional: fp32 [batch, heads_q, seqlen_q] ([heads_q, total_q] with cu_seqlens_q),
  // contiguous. nullptr skips it.
  float* lse = nullptr;

  // The sizes are ProblemShape's. head_dim: any multiple of 8 up to 256; a kernel built for a
  // larger head dim zero-fills the rest.

  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  TensorStrides o_strides;

  // Multiplies Q.K^T before the softmax. NaN (the default) means 1 / sqrt(head_dim).
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();

  MaskKind mask = MaskKind::kNone;

  // Sliding window: query i sees key j iff i + d - window_left <= j <= i + d + window_right,
  // d = seqlen_k - seqlen_q; -1 leaves that side unbounded. (-1, -1) is no window; (-1, 0) is
  // the causal mask. With mask == kCausal the window's right side is 0: window_right must be
  // -1 or 0 there.
  int64_t window_left = -1;
  int64_t window_right = -1;

  // > 0: each scaled score s becomes softcap * tanh(s / softcap) before the softmax. 0: off.
  float softcap = 0.f;

  // ALiBi. nullptr: off. Otherwise an fp32 device pointer; the slope of batch entry b and query
  // head h is alibi_slopes[b * alibi_batch_stride + h], and the score of (i, j) gets
  // -slope * |i + d - j| added after the softcap. alibi_batch_stride 0 shares one slope per head
  // across the batch ([heads_q]); heads_q reads a [batch, heads_q] array.
  const float* alibi_slopes = nullptr;
  int64_t alibi_batch_stride = 0;

  // Dropout (training, FlashAttention-2's semantics): each probability is dropped (set to 0)
  // with probability dropout_p and the kept ones are scaled by the inverse keep rate, by the mask
  // that attention/philox.hpp draws from (dropout_seed, dropout_offset) and each pair's (batch,
  // query head, query, key), never stored: the backward regenerates it from the same three
  // values. 0 (the default): none. In [0, 1), taken to 2^-16. The LSE is that of the
  // probabilities before dropout. Runs on kernels compiled with it: forward_with_dropout<Config>
  // and backward_with_dropout<Config>, or the default forward(params) and backward(params); not
  // with a paged KV cache or k_new (inference calls).
  float dropout_p = 0.f;
  uint64_t dropout_seed = 0;
  uint32_t dropout_offset = 0;

  // Split-KV: the keys of each query tile cut into parts that separate blocks compute, then
  // merged, for calls whose query tiles are too few to fill the GPU (decoding). 0 (the
  // default): a count chosen from the problem and the device, and only where `workspace` is
  // given; 1: never; 2 to 128: that many (at most one per key tile). The partials go to
  // `workspace`, a device buffer of the caller's, 256-byte aligned, of `workspace_bytes` >=
  // forward_workspace_bytes(params) bytes; nothing is allocated inside the library.
  // A persistent Hopper config (Sm90TileConfig's Persistent, the d = 64 and 128 defaults) keeps
  // the counter that balances its blocks there (kTileCounterBytes; it needs no initialization, and
  // a CUDA graph may replay the call):
  // without a workspace such a call runs one block per tile, as the one-tile kernel. Calls that
  // share a workspace must not run at once.
  int num_splits = 0;
  void* workspace = nullptr;
  std::size_t workspace_bytes = 0;

  // Variable-length batches, in FlashAttention's varlen layout. With cu_seqlens_q, Q and O are
  // packed, [total_q, heads_q, head_dim] (q_strides.batch and o_strides.batch 0), sequence b's
  // queries at rows [cu_seqlens_q[b], cu_seqlens_q[b + 1]); seqlen_q is then the longest
  // sequence's length (max_seqlen_q), total_q the rows of Q, and the LSE is [heads_q, total_q].
  // cu_seqlens_k does the same for K and V ([total_k, heads_kv, head_dim]; seqlen_k the
  // longest). Either may come alone: packed queries over a dense cache, say. They are int32
  // device arrays of batch + 1 prefix sums from 0, read by the kernels, so that a captured CUDA
  // graph may change them between replays. nullptr: every sequence has seqlen_q (seqlen_k).
  // A sequence longer than seqlen_q (seqlen_k) stops the kernel with an error (a trap).
  const int32_t* cu_seqlens_q = nullptr;
  const int32_t* cu_seqlens_k = nullptr;
  int64_t total_q = 0;  // rows of packed Q and O; only with cu_seqlens_q
  // Rows of packed K and V; only with cu_seqlens_k. Optional: 0 leaves it unknown, and such a
  // call runs on the portable kernel. The sm_90a kernel reads K and V through TMA, whose tensor
  // maps need the rows (forward(params) runs packed keys there only when it is given).
  int64_t total_k = 0;
  // Optional int32 device [batch]: how many keys each sequence uses, from its first (a KV
  // cache's filled length), at most its length. nullptr: all of them. Read by the kernels.
  const int32_t* seqused_k = nullptr;

  // A paged KV cache (vLLM's and FlashAttention's layout). With block_table, K and V are pools of
  // pages, [num_pages, page_size, heads_kv, head_dim] through k_strides and v_strides (whose
  // batch stride steps from one page to the next), and key j of sequence b lives in page
  // block_table[b * block_table_batch_stride + j / page_size], row j % page_size. The table is
  // an int32 device array read by the kernels; its rows hold at least ceil(seqlen_k / page_size)
  // entries, seqlen_k being the most keys a sequence may have, and seqused_k (optional) says
  // how many each has. Any page size from 1 up. An entry outside [0, num_pages) stops the
  // kernel (a trap). Not with cu_seqlens_k.
  const int32_t* block_table = nullptr;
  int64_t block_table_batch_stride = 0;  // entries per row of the table
  int64_t page_size = 0;                 // keys per page
  int64_t num_pages = 0;                 // pages in each pool

  // The cache entry of each sequence: an int32 device [batch] array (FlashAttention's
  // cache_batch_idx); sequence b reads K and V of batch entry kv_batch_index[b], one of the
  // kv_batch_entries entries of K and V. nullptr: b. Contiguous K and V only (not with
  // block_table or cu_seqlens_k). An index outside [0, kv_batch_entries) stops the kernel.
  const int32_t* kv_batch_index = nullptr;
  int64_t kv_batch_entries = 0;

  // KV append (FlashAttention's flash_attn_with_kvcache): with k_new and v_new, the call first
  // writes seqlen_new new keys and values of each sequence into the cache (K and V, which must
  // then be writable; contiguous or paged) at rows [cache_seqlens[b], cache_seqlens[b] +
  // seqlen_new), then attends over the cache's first cache_seqlens[b] + seqlen_new keys. The
  // rows must fit: cache_seqlens[b] + seqlen_new <= seqlen_k, else the append stops with a trap.
  // Needs a workspace (forward_workspace_bytes): the new lengths, and the rotated queries, live
  // there. Dense queries only (no cu_seqlens_q), and seqused_k is replaced by cache_seqlens.
  const void* k_new = nullptr;  // [batch, seqlen_new, heads_kv, head_dim] through k_new_strides
  const void* v_new = nullptr;  // the same through v_new_strides
  TensorStrides k_new_strides;
  TensorStrides v_new_strides;
  int64_t seqlen_new = 0;
  const int32_t* cache_seqlens = nullptr;  // int32 device [batch]: rows before the call

  // Rotary position embedding of the new keys and of the queries (with k_new): tables cos and
  // sin, [rotary_positions, rotary_dim / 2] in the element type, contiguous. The first
  // rotary_dim columns of a row form rotary_dim / 2 pairs, (2i, 2i + 1) when rotary_interleaved
  // (GPT-J, FlashAttention's default) or (i, i + rotary_dim / 2) (GPT-NeoX); (x, y) becomes
  // (x cos - y sin, x sin + y cos) at the row's position. New key j of sequence b is at
  // position cache_seqlens[b] + j; query i at cache_seqlens[b] + i under a causal mask or a
  // window, else at cache_seqlens[b]. Q itself is not written: the rotated queries go to the
  // workspace. nullptr: no rotation.
  const void* rotary_cos = nullptr;
  const void* rotary_sin = nullptr;
  int64_t rotary_dim = 0;        // even, at most head_dim
  int64_t rotary_positions = 0;  // rows of the tables; every position used must be below it
  bool rotary_interleaved = true;
};

// True when the call drops probabilities (dropout_p > 0).
inline bool uses_dropout(const ForwardParams& p) { return p.dropout_p > 0.f; }

// True when the call appends new keys and values to its cache first (k_new).
inline bool appends_kv(const ForwardParams& p) { return p.k_new != nullptr; }

// True when K and V are pages of a paged KV cache (block_table).
inline bool paged_kv(const ForwardParams& p) { return p.block_table != nullptr; }

// True when Q and O are packed sequences of varying lengths (cu_seqlens_q).
inline bool packed_queries(const ForwardParams& p) { return p.cu_seqlens_q != nullptr; }

// True when sequences have lengths of their own (cu_seqlens_q, cu_seqlens_k, seqused_k), read by
// the kernels.
inline bool has_variable_lengths(const ForwardParams& p) {
  return p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr || p.seqused_k != nullptr;
}

// The LSE's rows, [batch, heads_q, seqlen_q] or, with packed queries, [heads_q, total_q]: LSE
// row (b, h, query i) is at b * lse_batch_stride(p) + h * lse_head_stride(p) + first + i, with
// first 0 or cu_seqlens_q[b].
inline int64_t lse_head_stride(const ForwardParams& p) {
  return packed_queries(p) ? p.total_q : p.seqlen_q;
}
inline int64_t lse_batch_stride(const ForwardParams& p) {
  return packed_queries(p) ? 0 : p.heads_q * p.seqlen_q;
}
inline int64_t lse_rows(const ForwardParams& p) {
  return packed_queries(p) ? p.heads_q * p.total_q : p.lse_elements();
}

}  // namespace flashmma
