// SPDX-License-Identifier: Apache-2.0
// What every backward kernel reads of the call, whatever its architecture: the forward's view of
// it (ForwardArgs: Q, K, V, O, the LSE, lengths, strides, scales) and the gradients and workspace
// (filled on the host by detail::make_backward_args in backward.cuh). Kernels read it through
// BackwardSequence, never field by field.
#pragma once

#include <cstdint>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"

namespace flashmma {

template <class Element>
struct BackwardArgs {
  ForwardArgs<Element> forward;  // o and lse are read here, never written
  const Element* d_o;
  Element* dq;
  Element* dk;
  Element* dv;
  TensorStrides do_strides;
  TensorStrides dq_strides;
  TensorStrides dk_strides;
  TensorStrides dv_strides;
  // The workspace (backward_params.hpp's BackwardWorkspace): per (batch, query head) a run of
  // padded_rows rows in each of the three arrays.
  float* dq_accum;  // row stride head_dim
  float* lse_log2;  // LSE * log2(e); +inf for a row that saw no key (its P is then 0)
  float* delta;     // D = dO . O
  int32_t* order;   // per 16 query rows: 1 + the last key tile that added its dQ (deterministic)
  int64_t padded_rows;
  bool accumulate_dkv;
  bool deterministic;

  // The workspace row of query 0 of (batch, query head).
  FLASHMMA_HOST_DEVICE int64_t workspace_row(int64_t batch, int64_t head) const {
    return (batch * forward.heads_q + head) * padded_rows;
  }
};

// The facts of one (batch, query head)'s sequence for a backward kernel: the forward's
// (SequenceInfo: lengths, Q, K, V, O, the LSE row) and the gradients' base pointers and the
// workspace row of its query 0. kVariableLengths: packed sequences of variable lengths
// (cu_seqlens_q, cu_seqlens_k) too; false compiles the dense case alone, whose lengths stay
// in the kernel's parameters (as the forward's dense kernels keep them: read per sequence, they
// cost the d = 128 backward tile 64 bytes of spills).
template <class Element, bool kVariableLengths = true>
struct BackwardSequence : SequenceInfo<Element, kVariableLengths> {
  const Element* d_o;
  Element* dq;
  Element* dk;  // of the K/V head
  Element* dv;
  int64_t do_row_stride;
  int64_t dq_row_stride;
  int64_t dk_row_stride;
  int64_t dv_row_stride;
  int64_t workspace_row;  // row of query 0 in dq_accum, lse_log2 and delta
  // Steps from this query head to the next one of the group (heads g of a group are
  // head + g): its Q, dO and workspace rows are at q + g * q_head_stride, and so on.
  int64_t q_head_stride;
  int64_t do_head_stride;
  int64_t workspace_head_stride;

  // `tile.head` is a query head; its K/V head is the base's kv_head.
  FLASHMMA_HOST_DEVICE BackwardSequence(const BackwardArgs<Element>& args, const WorkTile& tile)
      : SequenceInfo<Element, kVariableLengths>(args.forward, tile),
        do_row_stride(args.do_strides.row),
        dq_row_stride(args.dq_strides.row),
        dk_row_stride(args.dk_strides.row),
        dv_row_stride(args.dv_strides.row),
        q_head_stride(args.forward.q_strides.head),
        do_head_stride(args.do_strides.head),
        workspace_head_stride(args.padded_rows) {
    const int64_t b = this->batch;
    d_o = args.d_o + b * args.do_strides.batch + this->first_query * args.do_strides.row +
          this->head * args.do_strides.head;
    dq = args.dq + b * args.dq_strides.batch + this->first_query * args.dq_strides.row +
         this->head * args.dq_strides.head;
    dk = args.dk + b * args.dk_strides.batch + this->first_key * args.dk_strides.row +
         this->kv_head * args.dk_strides.head;
    dv = args.dv + b * args.dv_strides.batch + this->first_key * args.dv_strides.row +
         this->kv_head * args.dv_strides.head;
    workspace_row = args.workspace_row(b, this->head);
  }

  // Q, dO and the workspace row of query 0 of query head head + g.
  FLASHMMA_HOST_DEVICE const Element* q_of(int g) const { return this->q + g * q_head_stride; }
  FLASHMMA_HOST_DEVICE const Element* d_o_of(int g) const { return d_o + g * do_head_stride; }
  FLASHMMA_HOST_DEVICE int64_t workspace_row_of(int g) const {
    return workspace_row + g * workspace_head_stride;
  }
};

}  // namespace flashmma
