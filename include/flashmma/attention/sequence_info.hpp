// SPDX-License-Identifier: Apache-2.0
// The facts of one work tile's sequence: which batch entry and heads it is, the lengths, and the
// base pointers of its rows. Built once per work tile; the only code that reads the lengths and
// strides of ForwardArgs: dense batches, and packed ones of variable lengths (cu_seqlens_q,
// cu_seqlens_k, seqused_k, kv_batch_index) alike.
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/kv_pages.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

// How the rows of a query tile map to (query head, query position) and to the row-indexed outputs
// (LSE, split partials). Rows are numbered from 0 within a sequence's work tiles.
//
// QueryRows: row r is query r of the work tile's head (every dense kernel; constant steps, so
// the compiler folds them away).
struct QueryRows {
  // The query head of row `row` of a warp whose first row has head `first_head`.
  FLASHMMA_HOST_DEVICE static constexpr int32_t head(int32_t first_head, int) { return first_head; }
  FLASHMMA_HOST_DEVICE static constexpr int32_t head_step() { return 0; }
  FLASHMMA_HOST_DEVICE static constexpr int32_t query_step() { return 1; }
  FLASHMMA_HOST_DEVICE static constexpr int64_t index_step() { return 1; }
};

// PackableRows: as QueryRows, or, for a call of one query per sequence on GQA heads ("packed
// GQA", ForwardArgs::pack_gqa), row r is query 0 of query head r of the K/V head's group: the
// group's heads share one block, so each K/V tile is read once per group rather than once per
// query head. Runtime steps, for the split kernel (which runs both kinds of call).
struct PackableRows {
  int32_t heads;        // 1 when packed, else 0
  int32_t last_head;    // the group's last query head (the work tile's head when not packed)
  int64_t index_stride; // the LSE index step of a row: lse_head_stride when packed, else 1
  // A packed tile's rows past its group (padding, computed and never stored) keep the group's
  // last head, so that a policy reading per-head data (ALiBi slopes) stays within the heads.
  FLASHMMA_HOST_DEVICE int32_t head(int32_t first_head, int row) const {
    const int32_t h = first_head + row * heads;
    return h < last_head ? h : last_head;
  }
  FLASHMMA_HOST_DEVICE int32_t head_step() const { return heads; }
  FLASHMMA_HOST_DEVICE int32_t query_step() const { return 1 - heads; }
  FLASHMMA_HOST_DEVICE int64_t index_step() const { return index_stride; }
};

// A sequence whose lengths (or cache entry) the call's params did not allow for: stops the
// kernel (the launch's stream then reports an error), since going on would read past K and V or
// leave O unwritten.
FLASHMMA_HOST_DEVICE void report_bad_sequence_lengths() {
#if defined(__CUDA_ARCH__)
  __trap();
#endif
}

// kVariableLengths false compiles the dense case alone (a kernel that refuses cu_seqlens and
// seqused_k, validate.hpp's KernelRequirements::variable_lengths): its code is then exactly that
// of a kernel written for dense batches. kPagedKV true reads the block table of a paged KV cache
// too (attention/kv_pages.hpp), for the kernels that load K and V through it.
template <class Element, bool kVariableLengths = true, bool kPagedKV = false>
struct SequenceInfo {
  using Rows = std::conditional_t<kVariableLengths, PackableRows, QueryRows>;

  int64_t batch;
  int64_t head;     // query head (of row 0)
  int64_t kv_head;  // the K/V head it reads
  SequenceLengths lengths;
  Rows row_map;
  int64_t rows;  // rows of the sequence's work tiles: seqlen_q, or seqlen_q x group when packed
  // The sequence's first query and key row in packed tensors (cu_seqlens_q, cu_seqlens_k); 0 in
  // dense ones, whose batch strides place the sequence.
  int64_t first_query;
  int64_t first_key;
  // Row 0 and key 0 of this (batch, head) in each tensor; row r is at q + r * q_row_stride (the
  // head stride when packed).
  const Element* q;
  const Element* k;
  const Element* v;
  Element* o;
  // The LSE row of this (batch, head)'s row 0 (params.hpp's LSE layout): the index of
  // row-indexed outputs (the LSE, split-KV's partials) is row_index + row * row_map.index_step().
  int64_t row_index;
  float* lse;  // nullptr when the LSE is not written; else lse + row_index
  int64_t q_row_stride;
  int64_t k_row_stride;
  int64_t v_row_stride;
  int64_t o_row_stride;
  // A paged cache's pages: then k and v point at row 0 of page 0 of the K/V head, and key j's
  // row is at pages.row_offset(j, ...) from them.
  std::conditional_t<kPagedKV, KVPages, NoKVPages> pages;

  FLASHMMA_HOST_DEVICE SequenceInfo(const ForwardArgs<Element>& args, const WorkTile& tile)
      : batch(tile.batch),
        head(tile.head),
        kv_head(head / args.group_size),
        q_row_stride(args.q_strides.row),
        k_row_stride(args.k_strides.row),
        v_row_stride(args.v_strides.row),
        o_row_stride(args.o_strides.row) {
    // The first row of the sequence in packed tensors, and its lengths.
    first_query = 0;
    first_key = 0;
    int64_t seqlen_q = args.seqlen_q;
    int64_t seqlen_k = args.seqlen_k;
    if constexpr (kVariableLengths) {
      if (args.cu_seqlens_q != nullptr) {
        first_query = args.cu_seqlens_q[batch];
        seqlen_q = args.cu_seqlens_q[batch + 1] - first_query;
      }
      if (args.cu_seqlens_k != nullptr) {
        first_key = args.cu_seqlens_k[batch];
        seqlen_k = args.cu_seqlens_k[batch + 1] - first_key;
      }
      const int64_t used_k = args.seqused_k != nullptr ? args.seqused_k[batch] : seqlen_k;
      // The grid covers args.seqlen_q queries and the kernels address args.seqlen_k keys at
      // most: a sequence beyond them (or a negative length) is a caller's error that would
      // otherwise leave rows unwritten or read past K and V.
      if (seqlen_q < 0 || seqlen_q > args.seqlen_q || seqlen_k < 0 ||
          seqlen_k > args.seqlen_k || used_k < 0 || used_k > seqlen_k) {
        report_bad_sequence_lengths();
      }
      seqlen_k = used_k;
    }
    lengths = sequence_lengths(seqlen_q, seqlen_k);
    rows = seqlen_q;
    if constexpr (kVariableLengths) {
      row_map = {0, static_cast<int32_t>(head), 1};
      if (args.pack_gqa) {
        // The work tile's head is the K/V head; row r is query head kv_head * group + r.
        kv_head = tile.head;
        head = kv_head * args.group_size;
        rows = seqlen_q * args.group_size;
        q_row_stride = args.q_strides.head;
        o_row_stride = args.o_strides.head;
        row_map = {1, static_cast<int32_t>(head + args.group_size - 1), args.lse_head_stride};
      }
    }
    // The K/V batch entry: a cache's own entry of the sequence (kv_batch_index), or its own.
    int64_t kv_batch = batch;
    if constexpr (kVariableLengths) {
      if (args.kv_batch_index != nullptr) {
        kv_batch = args.kv_batch_index[batch];
        if (kv_batch < 0 || kv_batch >= args.kv_batch_entries) report_bad_sequence_lengths();
      }
    }
    q = args.q + batch * args.q_strides.batch + first_query * args.q_strides.row +
        head * args.q_strides.head;
    k = args.k + kv_batch * args.k_strides.batch + first_key * args.k_strides.row +
        kv_head * args.k_strides.head;
    v = args.v + kv_batch * args.v_strides.batch + first_key * args.v_strides.row +
        kv_head * args.v_strides.head;
    o = args.o + batch * args.o_strides.batch + first_query * args.o_strides.row +
        head * args.o_strides.head;
    if constexpr (kPagedKV) {
      if (args.block_table != nullptr) {
        pages.table = args.block_table + batch * args.block_table_batch_stride;
        pages.page_size = args.page_size;
        pages.num_pages = args.num_pages;
        pages.k_page_stride = args.k_strides.batch;
        pages.v_page_stride = args.v_strides.batch;
        k = args.k + kv_head * args.k_strides.head;
        v = args.v + kv_head * args.v_strides.head;
      }
    }
    if constexpr (kVariableLengths) {
      row_index = batch * args.lse_batch_stride + head * args.lse_head_stride + first_query;
    } else {
      row_index = (batch * args.heads_q + head) * args.seqlen_q;
    }
    // row_index again, formed only where the LSE is written: formed unconditionally it changed
    // the register allocation (and the spills) of the d = 128 kernels.
    lse = args.lse == nullptr ? nullptr : args.lse + row_index;
  }

  // The rows of work tile `m_block` of `block_m` rows that exist, [first, min(+block_m, rows)).
  FLASHMMA_HOST_DEVICE IndexRange row_tile(int64_t m_block, int64_t block_m) const {
    const int64_t first = m_block * block_m;
    return {first, first + block_m < rows ? first + block_m : rows};
  }

  // The queries of a non-empty range of rows (one query, 0, when packed).
  FLASHMMA_HOST_DEVICE IndexRange queries_of(const IndexRange& tile_rows) const {
    return {tile_rows.begin * row_map.query_step(),
            (tile_rows.end - 1) * row_map.query_step() + 1};
  }

  // The logical coordinates of row `row` (key 0): a warp's origin, from which ScoreSoftmax
  // forms its rows' (row_map.head() keeps a packed tile's padding rows on real heads; the
  // origin itself is not clamped, so that row_of() finds the row of any warp).
  FLASHMMA_HOST_DEVICE ScoreCoord row_coord(int64_t row) const {
    return score_coord(batch, head + row * row_map.head_step(), row * row_map.query_step(), 0);
  }

  // The row of a row's coordinates (row_coord's inverse): a packed row's query is 0 and its
  // head tells it, an unpacked row's query is the row.
  FLASHMMA_HOST_DEVICE int64_t row_of(const ScoreCoord& c) const {
    return c.query + (row_map.head_step() != 0 ? c.head - head : 0);
  }

  // Index of row `row` in the row-indexed outputs (LSE, split partials).
  FLASHMMA_HOST_DEVICE int64_t row_output_index(int64_t row) const {
    return row_index + row * row_map.index_step();
  }

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
