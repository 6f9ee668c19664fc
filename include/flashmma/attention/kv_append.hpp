// SPDX-License-Identifier: Apache-2.0
// KV append (FlashAttention's flash_attn_with_kvcache): what a call that brings new keys and
// values does before it attends, in host-and-device arithmetic. The kernel is kv_append.cuh;
// forward.cuh runs it, then the attention, on the same stream.
//
//   1. the seqlen_new new keys and values of sequence b go to cache rows [L_b, L_b + seqlen_new),
//      L_b = cache_seqlens[b], of its cache entry (kv_batch_index[b], or b) or of its pages; the
//      keys rotated at positions L_b + j when a rotary table is given;
//   2. the queries are rotated, into the workspace (q itself is not written): query i at
//      position L_b + i under a causal mask or a window, else every query at L_b;
//   3. the lengths L_b + seqlen_new go to the workspace, and the attention reads them as
//      seqused_k.
#pragma once

#include <cstddef>
#include <cstdint>

#include "flashmma/attention/split_kv.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

inline constexpr const char* kKVAppendKernelName = "kv_append_kernel";  // in kernel descriptions

// Rotary position embedding of one pair of a row (the first rotary_dim columns of a row are
// rotary_dim / 2 pairs, the rest pass through):
//   interleaved (GPT-J, FlashAttention's default): pair i is columns (2i, 2i + 1);
//   halves (GPT-NeoX): pair i is columns (i, i + rotary_dim / 2);
// (x, y) becomes (x cos - y sin, x sin + y cos), with cos and sin of entry i of the position's row
// of the tables ([positions, rotary_dim / 2]).
struct RotaryPair {
  int first;
  int second;
};

FLASHMMA_HOST_DEVICE RotaryPair rotary_pair(int pair, int rotary_dim, bool interleaved) {
  return interleaved ? RotaryPair{2 * pair, 2 * pair + 1} : RotaryPair{pair, pair + rotary_dim / 2};
}

// Where an append call keeps its intermediates in the caller's workspace, after any split-KV
// partials (byte offsets from the workspace's start, each 256-byte aligned):
//   lengths: int32 [batch], the keys each sequence attends to (cache_seqlens + seqlen_new);
//   queries: the rotated queries, dense [batch, seqlen_q, heads_q, head_dim] in the element
//            type, only with a rotary table.
struct AppendWorkspace {
  std::size_t lengths_offset = 0;
  std::size_t queries_offset = 0;
  std::size_t bytes = 0;  // the whole workspace, partials included
};

FLASHMMA_HOST_DEVICE std::size_t align_workspace(std::size_t bytes) {
  return (bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
}

// `split_bytes`: the split-KV partials' bytes (0 without a split). `query_elements`: 0 without a
// rotary table.
FLASHMMA_HOST_DEVICE AppendWorkspace append_workspace(std::size_t split_bytes, int64_t batch,
                                                      int64_t query_elements,
                                                      std::size_t element_bytes) {
  AppendWorkspace w;
  w.lengths_offset = align_workspace(split_bytes);
  w.queries_offset = align_workspace(w.lengths_offset + static_cast<std::size_t>(batch) * 4);
  w.bytes = w.queries_offset + static_cast<std::size_t>(query_elements) * element_bytes;
  return w;
}

}  // namespace flashmma
