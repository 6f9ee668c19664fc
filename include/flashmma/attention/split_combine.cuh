// SPDX-License-Identifier: Apache-2.0
// The combine step of split-KV: each query row's partials (one normalized fp32 O and one LSE per
// split, attention/split_kv.hpp) merged into the row's O, in the output's element type and
// strides, and its LSE. The merge is merge_softmax (softmax_merge.hpp), applied split after split.
//
// A kernel type for launch.cuh: one warp per row, lane l holding columns l, l + 32, ... of it,
// so that every read of a partial row is coalesced. A split that saw no key of a row (LSE -inf)
// has weight 0 and its O is not read at all (0 x garbage could be NaN).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "flashmma/attention/softmax_merge.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/traits/arch.hpp"

namespace flashmma {

template <class Element>
struct SplitCombineKernel {
  using arch_tag = arch::Sm80;  // plain CUDA: runs wherever the forward kernels do

  struct Params {
    const float* partial_o;    // workspace + layout.o_offset
    const float* partial_lse;  // workspace + layout.lse_offset
    SplitWorkspace layout;
    Element* o;                // O through o_strides (dense, or packed: batch stride 0)
    TensorStrides o_strides;
    float* lse;                // nullptr, or the LSE (params.hpp's layout)
    int64_t heads_q;
    int64_t rows_per_head;     // lse_head_stride: seqlen_q, or total_q for packed queries
  };

  static constexpr int kWarps = 4;
  static constexpr int kThreads = 32 * kWarps;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr std::size_t kSmemBytes = 0;
  static constexpr const char* kName = "split_combine_kernel";
  static constexpr int kMaxColumnsPerLane = 256 / 32;  // head_dim <= 256

  // Blocks for `rows` rows.
  static unsigned blocks(int64_t rows) {
    return static_cast<unsigned>((rows + kWarps - 1) / kWarps);
  }

  static FLASHMMA_DEVICE void run(const Params& params) {
    const int lane = static_cast<int>(threadIdx.x) % 32;
    const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarps + threadIdx.x / 32;
    const SplitWorkspace& layout = params.layout;
    if (row >= layout.rows) return;
    const int head_dim = static_cast<int>(layout.head_dim);

    float merged[kMaxColumnsPerLane];
#pragma unroll
    for (int i = 0; i < kMaxColumnsPerLane; ++i) merged[i] = 0.f;
    float lse = -INFINITY;
    for (int64_t split = 0; split < layout.splits; ++split) {
      const SoftmaxMergeWeights w =
          merge_softmax(lse, params.partial_lse[layout.lse_index(split, row)]);
      lse = w.lse;
      if (w.weight_b == 0.f) continue;  // an empty split (or one that no longer counts)
      const float* partial = params.partial_o + layout.o_index(split, row, 0);
#pragma unroll
      for (int i = 0; i < kMaxColumnsPerLane; ++i) {
        const int column = lane + 32 * i;
        if (column < head_dim) merged[i] = w.weight_a * merged[i] + w.weight_b * partial[column];
      }
    }

    // The LSE's own layout: row = (batch * heads_q + head) * seqlen_q + query, or, for packed
    // queries, head * total_q + token (the token's row in packed O; batch 0, whose stride is 0).
    const int64_t query = row % params.rows_per_head;
    const int64_t head = row / params.rows_per_head % params.heads_q;
    const int64_t batch = row / params.rows_per_head / params.heads_q;
    Element* out = params.o + batch * params.o_strides.batch + query * params.o_strides.row +
                   head * params.o_strides.head;
#pragma unroll
    for (int i = 0; i < kMaxColumnsPerLane; ++i) {
      const int column = lane + 32 * i;
      if (column < head_dim) out[column] = static_cast<Element>(merged[i]);
    }
    if (params.lse != nullptr && lane == 0) params.lse[row] = lse;
  }
};

}  // namespace flashmma
