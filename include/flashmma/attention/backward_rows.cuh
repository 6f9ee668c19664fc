// SPDX-License-Identifier: Apache-2.0
// The backward pass's two row-wise steps around the main kernel, for every architecture:
//
//   BackwardPreprocessKernel  per query row: D = dO . O (fp32), the LSE in base 2 (LSE * log2(e),
//                             +inf for a row that saw no key, so that its recomputed P is 0), and
//                             the row's fp32 dQ accumulator zeroed (and, per 16 rows, the
//                             counter of the deterministic order). Rows of the workspace past
//                             seqlen_q get D = 0 and LSE 0: a query tile's padding rows then have
//                             finite P and dS = P (dP - D) = 0, since their dO is zero-filled.
//   BackwardConvertKernel     per query row: dQ = softmax_scale * accumulator, in the element type.
//
// One warp per row, a lane per 16-byte chunk of it (head_dim <= 256 is at most 32 chunks).
// Both follow launch.cuh's kernel contract.
#pragma once

#include <cuda_runtime.h>

#include <cmath>
#include <cstdint>

#include "flashmma/attention/backward_args.hpp"
#include "flashmma/backward_params.hpp"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/pack.cuh"
#include "flashmma/ptx/shuffle.cuh"
#include "flashmma/traits/arch.hpp"
#include "flashmma/traits/smem_layout.hpp"

namespace flashmma {

namespace detail {

inline constexpr int kRowKernelWarps = 8;  // rows per block

// The grid of a row kernel over `rows` rows of every (query head, batch).
inline GridShape row_kernel_grid(int64_t rows, int64_t heads_q, int64_t batch) {
  return {static_cast<unsigned>((rows + kRowKernelWarps - 1) / kRowKernelWarps),
          static_cast<unsigned>(heads_q), static_cast<unsigned>(batch)};
}

// The row this warp handles, and its sequence.
struct RowOfWarp {
  int64_t row;
  int lane;
};
FLASHMMA_DEVICE RowOfWarp row_of_warp() {
  return {static_cast<int64_t>(blockIdx.x) * kRowKernelWarps + threadIdx.x / 32,
          static_cast<int>(threadIdx.x % 32)};
}

}  // namespace detail

template <class Element>
struct BackwardPreprocessKernel {
  struct Params {
    BackwardArgs<Element> args;
  };
  static constexpr int kThreads = detail::kRowKernelWarps * 32;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr std::size_t kSmemBytes = 0;
  static constexpr const char* kName = "backward_preprocess_kernel";
  using arch_tag = arch::Sm80;

  static FLASHMMA_DEVICE void run(const Params& params) {
    const BackwardArgs<Element>& args = params.args;
    const detail::RowOfWarp at = detail::row_of_warp();
    if (at.row >= args.padded_rows) return;
    const BackwardSequence<Element> seq(args, WorkTile{0, blockIdx.y, blockIdx.z});
    const int64_t index = seq.workspace_row + at.row;
    const int head_dim = args.forward.head_dim;
    const int column = at.lane * kElementsPerChunk;
    float dot = 0.f;
    if (at.row < seq.lengths.seqlen_q && column < head_dim) {
      const uint4 o = *reinterpret_cast<const uint4*>(seq.o + at.row * seq.o_row_stride + column);
      const uint4 d_o =
          *reinterpret_cast<const uint4*>(seq.d_o + at.row * seq.do_row_stride + column);
      const uint32_t o_pairs[4] = {o.x, o.y, o.z, o.w};
      const uint32_t do_pairs[4] = {d_o.x, d_o.y, d_o.z, d_o.w};
#pragma unroll
      for (int i = 0; i < 4; ++i) {
        const float2 a = unpack_pair<Element>(o_pairs[i]);
        const float2 b = unpack_pair<Element>(do_pairs[i]);
        dot = fmaf(a.x, b.x, fmaf(a.y, b.y, dot));
      }
      float4* accumulator = reinterpret_cast<float4*>(args.dq_accum + index * head_dim + column);
      accumulator[0] = make_float4(0.f, 0.f, 0.f, 0.f);
      accumulator[1] = make_float4(0.f, 0.f, 0.f, 0.f);
    }
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      dot += __shfl_xor_sync(ptx::kFullWarpMask, dot, offset);
    }
    if (at.lane == 0) {
      if (at.row % kBackwardMinBlockM == 0) {
        args.order[index / kBackwardMinBlockM] = 0;  // no key tile has added its dQ yet
      }
      float lse_log2 = 0.f;
      if (at.row < seq.lengths.seqlen_q) {
        const float lse = seq.lse[at.row];
        lse_log2 = lse == -INFINITY ? INFINITY : lse * kLog2e;
      }
      args.lse_log2[index] = lse_log2;
      args.delta[index] = dot;
    }
  }
};

template <class Element>
struct BackwardConvertKernel {
  struct Params {
    BackwardArgs<Element> args;
  };
  static constexpr int kThreads = detail::kRowKernelWarps * 32;
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr std::size_t kSmemBytes = 0;
  static constexpr const char* kName = "backward_convert_kernel";
  using arch_tag = arch::Sm80;

  static FLASHMMA_DEVICE void run(const Params& params) {
    const BackwardArgs<Element>& args = params.args;
    const detail::RowOfWarp at = detail::row_of_warp();
    const BackwardSequence<Element> seq(args, WorkTile{0, blockIdx.y, blockIdx.z});
    const int head_dim = args.forward.head_dim;
    const int column = at.lane * kElementsPerChunk;
    if (at.row >= seq.lengths.seqlen_q || column >= head_dim) return;
    const float4* accumulator = reinterpret_cast<const float4*>(
        args.dq_accum + (seq.workspace_row + at.row) * head_dim + column);
    const float4 low = accumulator[0];
    const float4 high = accumulator[1];
    const float scale = args.forward.softmax_scale;
    uint4 out;
    out.x = pack_pair<Element>(low.x * scale, low.y * scale);
    out.y = pack_pair<Element>(low.z * scale, low.w * scale);
    out.z = pack_pair<Element>(high.x * scale, high.y * scale);
    out.w = pack_pair<Element>(high.z * scale, high.w * scale);
    *reinterpret_cast<uint4*>(seq.dq + at.row * seq.dq_row_stride + column) = out;
  }
};

}  // namespace flashmma
