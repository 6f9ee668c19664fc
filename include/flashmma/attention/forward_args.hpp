// SPDX-License-Identifier: Apache-2.0
// What every forward kernel reads of the call, whatever its architecture: the params with typed
// pointers and the softmax scale folded (filled on the host by detail::make_forward_args in
// forward.cuh). Kernels read it through SequenceInfo (sequence_info.hpp), never field by field.
#pragma once

#include <cstdint>

#include "flashmma/attention/dropout.hpp"
#include "flashmma/params.hpp"

namespace flashmma {

template <class Element>
struct ForwardArgs {
  const Element* q;
  const Element* k;
  const Element* v;
  Element* o;
  float* lse;  // nullptr: not written
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t heads_q;
  int64_t group_size;  // heads_q / heads_kv
  int head_dim;        // runtime head dim, <= the kernel's compile-time head dim
  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  TensorStrides o_strides;
  float softmax_scale;
  float softmax_scale_log2;  // softmax_scale * log2(e)
  // Variable lengths (params.hpp): nullptr for dense sequences.
  const int32_t* cu_seqlens_q;
  const int32_t* cu_seqlens_k;
  const int32_t* seqused_k;
  int64_t lse_batch_stride;  // LSE row of (batch, head, first query):
  int64_t lse_head_stride;   //   batch * lse_batch_stride + head * lse_head_stride + first
  // A paged KV cache (params.hpp): nullptr for contiguous K and V.
  const int32_t* block_table;
  int64_t block_table_batch_stride;
  int32_t page_size;
  int32_t num_pages;
  const int32_t* kv_batch_index;  // nullptr: sequence b reads K/V batch entry b
  int64_t kv_batch_entries;       // K/V batch entries (kv_batch_index's range)
  // Packed GQA (SequenceInfo's PackableRows): the grid's heads are the K/V heads and a work
  // tile's rows the query heads of its group. Only for seqlen_q == 1, on the split kernel.
  bool pack_gqa;
  DropoutArgs dropout;  // read by kernels compiled with dropout (attention/dropout.hpp)
};

}  // namespace flashmma
