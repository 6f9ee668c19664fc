// SPDX-License-Identifier: Apache-2.0
// The combine step of split-KV: each query row's partials (one normalized fp32 O and one LSE per
// split, attention/split_kv.hpp) merged into the row's O, in the output's element type and
// strides, and its LSE, by softmax_merge.hpp's many-partial form.
//
// A kernel type for launch.cuh: one block per row. The threads form slots of head_dim / 4, and
// a thread owns four consecutive columns (one 16-byte load) of every slots-th split; warp 0 finds
// the row's LSE from every split's (lane l holds splits l, l + 32, ...) and puts each split's
// weight in shared memory. The first kPrefetched of a thread's loads are issued before the
// weights are known, so that the row's partials are read in about one memory latency, not one
// per split; the slots' sums then meet in shared memory. On sm_90 the kernel is launched while
// the split kernel's last blocks run (ptx/grid_dependency.cuh) and waits for them in place.
// A split that saw no key of a row (LSE -inf) has weight 0 and its O, read but never written,
// is not used (0 x garbage could be NaN).
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstddef>
#include <cstdint>

#include "flashmma/attention/softmax_merge.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/ptx/grid_dependency.cuh"
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
  static constexpr bool kWaitsForPrerequisiteGrids = true;  // the split kernel's partials
  static constexpr int kColumnsPerLoad = 4;                 // a float4
  static constexpr int kSplitsPerLane = (kMaxSplits + 31) / 32;
  static constexpr int kPrefetched = 16;  // loads per thread issued before the weights are known
  static_assert(256 / kColumnsPerLoad < kThreads, "a row of head_dim <= 256 needs two slots");

  // Blocks for `rows` rows.
  static unsigned blocks(int64_t rows) { return static_cast<unsigned>(rows); }

  static FLASHMMA_DEVICE float4 fma4(float w, const float4& x, const float4& acc) {
    return make_float4(acc.x + w * x.x, acc.y + w * x.y, acc.z + w * x.z, acc.w + w * x.w);
  }

  static FLASHMMA_DEVICE void run(const Params& params) {
    constexpr unsigned kAllLanes = 0xffffffffu;
    ptx::wait_for_prerequisite_grids();
    ptx::allow_dependent_launch();  // the next call's split kernel waits for this grid's end
    const int thread = static_cast<int>(threadIdx.x);
    const int64_t row = blockIdx.x;
    const SplitWorkspace& layout = params.layout;
    const int splits = static_cast<int>(layout.splits);
    // Column groups of four: head_dim is a multiple of 8, and the workspace and each row of
    // it are 16-byte aligned (256-byte workspace, head_dim floats per row).
    const int groups = static_cast<int>(layout.head_dim) / kColumnsPerLoad;
    const int slots = kThreads / groups;
    const int slot = thread / groups;
    const int group = thread % groups;
    const bool active = slot < slots;  // a few threads idle where groups does not divide
    // This thread's columns of split s: partial[s * split_stride].
    const float4* const partial =
        reinterpret_cast<const float4*>(params.partial_o + layout.o_index(0, row, 0)) + group;
    const int64_t split_stride = layout.o_index(1, 0, 0) / kColumnsPerLoad;

    float4 prefetched[kPrefetched];
#pragma unroll
    for (int k = 0; k < kPrefetched; ++k) {
      const int split = slot + k * slots;
      prefetched[k] = active && split < splits ? partial[split * split_stride]
                                               : make_float4(0.f, 0.f, 0.f, 0.f);
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

    float4 sum = make_float4(0.f, 0.f, 0.f, 0.f);
#pragma unroll
    for (int k = 0; k < kPrefetched; ++k) {
      const int split = slot + k * slots;
      if (split < splits) {
        const float w = weights[split];
        if (w != 0.f) sum = fma4(w, prefetched[k], sum);
      }
    }
    if (active) {
#pragma unroll 4
      for (int split = slot + kPrefetched * slots; split < splits; split += slots) {
        const float4 value = partial[split * split_stride];
        const float w = weights[split];
        if (w != 0.f) sum = fma4(w, value, sum);
      }
    }

    // The slots' sums of each column group, added by the threads of slot 0.
    __shared__ float4 slot_sums[kThreads];
    slot_sums[thread] = sum;
    __syncthreads();
    if (thread >= groups) {
      if (params.lse != nullptr && thread == kThreads - 1) params.lse[row] = row_lse;
      return;
    }
    for (int other = 1; other < slots; ++other) {
      const float4 part = slot_sums[other * groups + thread];
      sum = make_float4(sum.x + part.x, sum.y + part.y, sum.z + part.z, sum.w + part.w);
    }

    // The LSE's own layout: row = (batch * heads_q + head) * seqlen_q + query, or, for packed
    // queries, head * total_q + token (the token's row in packed O; batch 0, whose stride is 0).
    const int64_t query = row % params.rows_per_head;
    const int64_t head = row / params.rows_per_head % params.heads_q;
    const int64_t batch = row / params.rows_per_head / params.heads_q;
    Element* const out = params.o + batch * params.o_strides.batch +
                         query * params.o_strides.row + head * params.o_strides.head +
                         thread * kColumnsPerLoad;
    out[0] = static_cast<Element>(sum.x);
    out[1] = static_cast<Element>(sum.y);
    out[2] = static_cast<Element>(sum.z);
    out[3] = static_cast<Element>(sum.w);
  }
};

}  // namespace flashmma
