// SPDX-License-Identifier: Apache-2.0
// The combine step of split-KV: each query row's partials (one normalized fp32 O and one LSE per
// split, attention/split_kv.hpp) merged into the row's O, in the output's element type and
// strides, and its LSE, by softmax_merge.hpp's many-partial form.
//
// A kernel type for launch.cuh: one block per row. Warp 0 finds the row's LSE from every
// split's (lane l holds splits l, l + 32, ...) and puts each split's weight in shared memory;
// thread t sums column t (and t + kThreads) of the splits' partial O's, reading them whatever
// the weights, so that no read waits for an LSE and the first kPrefetched splits' reads are in
// flight while warp 0 works. Merged split after split by one warp per row, each read waiting
// for its LSE, a row of 33 splits took 26 us on an H200 (the decoding call of 1 x 128k keys
// spent 17% of its time there). A split that saw no key of a row (LSE -inf) has weight 0 and its
// O, read but never written, is not used (0 x garbage could be NaN).
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
  static constexpr int kMaxColumnsPerThread = (256 + kThreads - 1) / kThreads;  // head_dim <= 256
  static constexpr int kSplitsPerLane = (kMaxSplits + 31) / 32;
  static constexpr int kPrefetched = 8;  // splits read per thread before the weights are known

  // Blocks for `rows` rows.
  static unsigned blocks(int64_t rows) { return static_cast<unsigned>(rows); }

  static FLASHMMA_DEVICE void run(const Params& params) {
    constexpr unsigned kAllLanes = 0xffffffffu;
    const int thread = static_cast<int>(threadIdx.x);
    const int64_t row = blockIdx.x;
    const SplitWorkspace& layout = params.layout;
    const int head_dim = static_cast<int>(layout.head_dim);
    const int splits = static_cast<int>(layout.splits);
    // This thread's column c of split s: partial[s * split_stride + c].
    const float* const partial = params.partial_o + layout.o_index(0, row, 0);
    const int64_t split_stride = layout.o_index(1, 0, 0);

    // The first splits' values, read before their weights exist.
    float prefetched[kPrefetched][kMaxColumnsPerThread];
#pragma unroll
    for (int s = 0; s < kPrefetched; ++s) {
#pragma unroll
      for (int i = 0; i < kMaxColumnsPerThread; ++i) {
        const int column = thread + kThreads * i;
        prefetched[s][i] =
            s < splits && column < head_dim ? partial[s * split_stride + column] : 0.f;
      }
    }

    // Warp 0: the row's LSE over every split, and each split's weight in it.
    __shared__ float weights[kSplitsPerLane * 32];
    __shared__ float row_lse;
    if (thread < 32) {
      float lse_of[kSplitsPerLane];
      float lse = -INFINITY;
#pragma unroll
      for (int j = 0; j < kSplitsPerLane; ++j) {
        const int split = thread + 32 * j;
        lse_of[j] = split < splits ? params.partial_lse[layout.lse_index(split, row)] : -INFINITY;
        lse = merge_softmax(lse, lse_of[j]).lse;
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        lse = merge_softmax(lse, __shfl_xor_sync(kAllLanes, lse, offset)).lse;
      }
#pragma unroll
      for (int j = 0; j < kSplitsPerLane; ++j) weights[thread + 32 * j] = merge_weight(lse_of[j], lse);
      if (thread == 0) row_lse = lse;
    }
    __syncthreads();

    float merged[kMaxColumnsPerThread];
#pragma unroll
    for (int i = 0; i < kMaxColumnsPerThread; ++i) {
      merged[i] = 0.f;
#pragma unroll
      for (int s = 0; s < kPrefetched; ++s) {
        const float w = weights[s];  // 0 past the splits
        merged[i] += w == 0.f ? 0.f : w * prefetched[s][i];
      }
    }
#pragma unroll 8
    for (int s = kPrefetched; s < splits; ++s) {
      const float w = weights[s];
#pragma unroll
      for (int i = 0; i < kMaxColumnsPerThread; ++i) {
        const int column = thread + kThreads * i;
        if (column < head_dim) {
          const float value = partial[s * split_stride + column];
          merged[i] += w == 0.f ? 0.f : w * value;
        }
      }
    }
    const float lse = row_lse;

    // The LSE's own layout: row = (batch * heads_q + head) * seqlen_q + query, or, for packed
    // queries, head * total_q + token (the token's row in packed O; batch 0, whose stride is 0).
    const int64_t query = row % params.rows_per_head;
    const int64_t head = row / params.rows_per_head % params.heads_q;
    const int64_t batch = row / params.rows_per_head / params.heads_q;
    Element* out = params.o + batch * params.o_strides.batch + query * params.o_strides.row +
                   head * params.o_strides.head;
#pragma unroll
    for (int i = 0; i < kMaxColumnsPerThread; ++i) {
      const int column = thread + kThreads * i;
      if (column < head_dim) out[column] = static_cast<Element>(merged[i]);
    }
    if (params.lse != nullptr && thread == 0) params.lse[row] = lse;
  }
};

}  // namespace flashmma
