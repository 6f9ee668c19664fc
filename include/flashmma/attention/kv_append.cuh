// SPDX-License-Identifier: Apache-2.0
// The append step of a KV-cache call (attention/kv_append.hpp): new keys and values written into
// the cache (contiguous or paged), keys and queries rotated, the new lengths written. A kernel
// type for launch.cuh, plain CUDA like the split-KV combine, with one warp per row of head_dim
// values, so that its reads and writes are coalesced.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "flashmma/attention/kv_append.hpp"
#include "flashmma/attention/kv_pages.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/ptx/grid_dependency.cuh"
#include "flashmma/traits/arch.hpp"

namespace flashmma {

template <class Element>
struct KVAppendKernel {
  using arch_tag = arch::Sm80;  // plain CUDA: runs wherever the forward kernels do

  struct Params {
    const Element* k_new;  // [batch, seqlen_new, heads_kv, head_dim]
    const Element* v_new;
    TensorStrides k_new_strides;
    TensorStrides v_new_strides;
    int64_t seqlen_new;
    Element* k_cache;  // [entries, capacity, heads_kv, d], or pages [pages, page_size, ...]
    Element* v_cache;
    TensorStrides k_cache_strides;
    TensorStrides v_cache_strides;
    int64_t capacity;                // rows of a cache entry (seqlen_k)
    const int32_t* cache_seqlens;    // [batch]: rows in the cache before the call
    const int32_t* kv_batch_index;   // nullptr, or [batch]: the cache entry of each sequence
    int64_t kv_batch_entries;        // entries of a contiguous cache (kv_batch_index's range)
    const int32_t* block_table;      // nullptr (contiguous), or [batch, block_table_batch_stride]
    int64_t block_table_batch_stride;
    int32_t page_size;
    int32_t num_pages;
    const Element* q;                // [batch, seqlen_q, heads_q, head_dim] through q_strides
    TensorStrides q_strides;
    Element* q_rotated;              // nullptr (no rotary table), or dense, the same shape
    int64_t seqlen_q;
    int64_t heads_q;
    bool rotate_queries_per_row;     // causal or a window: query i at L + i, else every one at L
    const Element* rotary_cos;       // nullptr, or [rotary_positions, rotary_dim / 2]
    const Element* rotary_sin;
    int rotary_dim;
    bool rotary_interleaved;
    int64_t rotary_positions;
    int32_t* lengths;                // [batch]: out, cache_seqlens + seqlen_new
    int64_t batch;
    int64_t heads_kv;
    int head_dim;
  };

  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr std::size_t kSmemBytes = 0;
  static constexpr const char* kName = kKVAppendKernelName;
  static constexpr bool kWaitsForPrerequisiteGrids = true;  // launch.cuh: overlapped launch

  static FLASHMMA_HOST_DEVICE int64_t kv_rows(const Params& p) { return p.batch * p.seqlen_new * p.heads_kv; }
  static FLASHMMA_HOST_DEVICE int64_t query_rows(const Params& p) {
    return p.q_rotated != nullptr ? p.batch * p.seqlen_q * p.heads_q : 0;
  }
  // Blocks for every row (at least one: block 0 writes the lengths).
  static unsigned blocks(const Params& p) {
    const int64_t rows = kv_rows(p) + query_rows(p);
    return static_cast<unsigned>(rows > 0 ? (rows + kWarps - 1) / kWarps : 1);
  }

  static FLASHMMA_DEVICE void run(const Params& p) {
    // The caller's kernels before this one may still be writing the new rows or the lengths;
    // the split kernel after it waits for all of this grid in turn.
    ptx::wait_for_prerequisite_grids();
    ptx::allow_dependent_launch();
    if (blockIdx.x == 0) {
      for (int64_t b = threadIdx.x; b < p.batch; b += kThreads) {
        p.lengths[b] = static_cast<int32_t>(p.cache_seqlens[b] + p.seqlen_new);
      }
    }
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    if (row < kv_rows(p)) {
      append_row(p, row, lane);
    } else if (row < kv_rows(p) + query_rows(p)) {
      rotate_query_row(p, row - kv_rows(p), lane);
    }
  }

 private:
  // Writes `source` (head_dim values) to `destination`, the first rotary_dim columns rotated at
  // `position` when `rotate`.
  static FLASHMMA_DEVICE void write_row(const Params& p, const Element* source,
                                        Element* destination, bool rotate, int64_t position,
                                        int lane) {
    int first_plain = 0;
    if (rotate) {
      if (position >= p.rotary_positions) report_bad_sequence_lengths();
      const int half = p.rotary_dim / 2;
      const Element* cos_row = p.rotary_cos + position * half;
      const Element* sin_row = p.rotary_sin + position * half;
      for (int pair = lane; pair < half; pair += 32) {
        const RotaryPair columns = rotary_pair(pair, p.rotary_dim, p.rotary_interleaved);
        const float x = static_cast<float>(source[columns.first]);
        const float y = static_cast<float>(source[columns.second]);
        const float c = static_cast<float>(cos_row[pair]);
        const float s = static_cast<float>(sin_row[pair]);
        destination[columns.first] = static_cast<Element>(x * c - y * s);
        destination[columns.second] = static_cast<Element>(x * s + y * c);
      }
      first_plain = p.rotary_dim;
    }
    for (int column = first_plain + lane; column < p.head_dim; column += 32) {
      destination[column] = source[column];
    }
  }

  // Row `row` of the new keys and values, rows ordered (batch, new row, KV head).
  static FLASHMMA_DEVICE void append_row(const Params& p, int64_t row, int lane) {
    const int64_t head = row % p.heads_kv;
    const int64_t j = row / p.heads_kv % p.seqlen_new;
    const int64_t b = row / p.heads_kv / p.seqlen_new;
    const int64_t cached = p.cache_seqlens[b];
    const int64_t position = cached + j;
    if (cached < 0 || cached + p.seqlen_new > p.capacity) report_bad_sequence_lengths();
    int64_t k_offset, v_offset;
    if (p.block_table != nullptr) {
      const int32_t page = p.block_table[b * p.block_table_batch_stride + position / p.page_size];
      report_bad_page(page, p.num_pages);
      const int64_t slot = position % p.page_size;
      k_offset = page * p.k_cache_strides.batch + slot * p.k_cache_strides.row;
      v_offset = page * p.v_cache_strides.batch + slot * p.v_cache_strides.row;
    } else {
      int64_t entry = b;
      if (p.kv_batch_index != nullptr) {
        entry = p.kv_batch_index[b];
        if (entry < 0 || entry >= p.kv_batch_entries) report_bad_sequence_lengths();
      }
      k_offset = entry * p.k_cache_strides.batch + position * p.k_cache_strides.row;
      v_offset = entry * p.v_cache_strides.batch + position * p.v_cache_strides.row;
    }
    k_offset += head * p.k_cache_strides.head;
    v_offset += head * p.v_cache_strides.head;
    const Element* k_source = p.k_new + b * p.k_new_strides.batch + j * p.k_new_strides.row +
                              head * p.k_new_strides.head;
    const Element* v_source = p.v_new + b * p.v_new_strides.batch + j * p.v_new_strides.row +
                              head * p.v_new_strides.head;
    write_row(p, k_source, p.k_cache + k_offset, p.rotary_cos != nullptr, position, lane);
    write_row(p, v_source, p.v_cache + v_offset, false, 0, lane);
  }

  // Row `row` of the queries, rows ordered (batch, query, head), into the dense copy.
  static FLASHMMA_DEVICE void rotate_query_row(const Params& p, int64_t row, int lane) {
    const int64_t head = row % p.heads_q;
    const int64_t i = row / p.heads_q % p.seqlen_q;
    const int64_t b = row / p.heads_q / p.seqlen_q;
    const int64_t position = p.cache_seqlens[b] + (p.rotate_queries_per_row ? i : 0);
    const Element* source =
        p.q + b * p.q_strides.batch + i * p.q_strides.row + head * p.q_strides.head;
    write_row(p, source, p.q_rotated + row * p.head_dim, true, position, lane);
  }
};

}  // namespace flashmma
