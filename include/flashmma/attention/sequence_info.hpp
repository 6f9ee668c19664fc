// SPDX-License-Identifier: Apache-2.0
// The facts of one work tile's sequence: which batch entry and heads it is, the lengths, and the
// base pointers of its rows. Built once per work tile; the only code that reads the lengths and
// strides of ForwardArgs, so that variable-length batches change this file alone.
#pragma once

#include <cstdint>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

template <class Element>
struct SequenceInfo {
  int64_t batch;
  int64_t head;     // query head
  int64_t kv_head;  // the K/V head it reads
  SequenceLengths lengths;
  // Row 0 of this (batch, head) in each tensor; row r is at + r * row_stride().
  const Element* q;
  const Element* k;
  const Element* v;
  Element* o;
  // Row 0 of this (batch, head) among all rows of the call, (batch * heads_q + head) *
  // seqlen_q: the index of row-indexed outputs (the LSE, split-KV's partials).
  int64_t row_index;
  float* lse;  // nullptr when the LSE is not written; else contiguous over the rows
  int64_t q_row_stride;
  int64_t k_row_stride;
  int64_t v_row_stride;
  int64_t o_row_stride;

  FLASHMMA_HOST_DEVICE SequenceInfo(const ForwardArgs<Element>& args, const WorkTile& tile)
      : batch(tile.batch),
        head(tile.head),
        kv_head(head / args.group_size),
        lengths(sequence_lengths(args.seqlen_q, args.seqlen_k)),
        q(args.q + batch * args.q_strides.batch + head * args.q_strides.head),
        k(args.k + batch * args.k_strides.batch + kv_head * args.k_strides.head),
        v(args.v + batch * args.v_strides.batch + kv_head * args.v_strides.head),
        o(args.o + batch * args.o_strides.batch + head * args.o_strides.head),
        row_index((batch * args.heads_q + head) * args.seqlen_q),
        // row_index again, formed only where the LSE is written: formed unconditionally it
        // changed the register allocation (and the spills) of the d = 128 kernels.
        lse(args.lse == nullptr ? nullptr
                                : args.lse + (batch * args.heads_q + head) * args.seqlen_q),
        q_row_stride(args.q_strides.row),
        k_row_stride(args.k_strides.row),
        v_row_stride(args.v_strides.row),
        o_row_stride(args.o_strides.row) {}

  // The queries of query tile `m_block` of `block_m` rows that exist, [first, min(+block_m, seqlen_q)).
  FLASHMMA_HOST_DEVICE IndexRange query_tile(int64_t m_block, int64_t block_m) const {
    const int64_t first = m_block * block_m;
    return {first, first + block_m < lengths.seqlen_q ? first + block_m : lengths.seqlen_q};
  }

  // A score's logical coordinates, for the score policy.
  FLASHMMA_HOST_DEVICE ScoreCoord coord(int64_t query, int64_t key) const {
    return score_coord(batch, head, query, key);
  }
};

}  // namespace flashmma
