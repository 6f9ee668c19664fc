// SPDX-License-Identifier: Apache-2.0
// The configurations flashmma::forward(params, stream) picks: per (element type, head dim) a
// general config, the one it runs under the causal mask, and a compact one for GPUs whose
// per-block shared memory is too small for the other two. This is the single list that tests,
// examples and benchmarks iterate over.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>

#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// Head dims that have a kernel. Any other multiple of 8 up to 256 runs on the next one up, with
// the extra columns zero-filled on load and skipped on store.
inline constexpr int kSupportedHeadDims[] = {32, 64, 96, 128, 160, 192, 224, 256};

// The kernel head dim a runtime head dim runs on, or 0 when none can (> 256).
constexpr int kernel_head_dim_for(int64_t head_dim) {
  for (int supported : kSupportedHeadDims) {
    if (head_dim <= supported) return supported;
  }
  return 0;
}

// Per-block shared memory (opt-in) of compute capability 8.6 and 8.9 GPUs, the smallest of the
// supported architectures: every compact config fits it.
inline constexpr std::size_t kCompactSmemBytes = 99 * 1024;

// Tile choice per head dim, shared by fp16 and bf16 (same operand width, same mma rate), picked
// by measurement on an H200 (docs/perf.md, tuning log in docs/tuning-log.md). All take 64 keys a
// step:
//  - 32, 64, 96: 4 warps x 32 rows (two m16 tiles each, so every K/V fragment loaded from shared
//    memory feeds two mma), single-buffered split schedule (Stages = 1).
//  - 128: without the mask 8 warps x 32 rows with two K/V buffers (ring schedule, 128 KB); under
//    the mask, and as the compact fallback, 4 warps x 32 rows, split schedule (64 KB).
//  - 160: 4 warps x 16 rows, split schedule.
//  - 192: 8 warps x 16 rows, split schedule (96 KB); under the mask the ring schedule (144 KB).
//  - 224, 256: 8 warps x 16 rows, split schedule (119 and 128 KB); compact fallback 4 warps x 16
//    rows (89 and 96 KB).
// Every general and causal config fits the 163 KB of shared memory an A100 (sm_80) grants a
// block, every compact one the 99 KB of sm_86 / sm_89.
// Head dims that are multiples of 64 use the XOR swizzle, the others padded rows. All rescale O
// before the exponentials except the 4-warp d = 128 and the compact d = 224 configs. The causal
// grid takes its blocks heaviest first (attention/scheduler.hpp).
template <class Element, int HeadDim>
struct DefaultConfig;

// The split-schedule (Stages = 1) TileConfig most defaults are.
template <class Element, int HeadDim, int BlockM, int Warps, SmemLayout Layout,
          int MinBlocksPerSm = 1, RescaleOrder Rescale = RescaleOrder::kBeforeExp>
using SplitTile = TileConfig<Element, HeadDim, BlockM, /*BlockN=*/64, Warps, /*Stages=*/1,
                             Layout, MinBlocksPerSm, Rescale>;

// A head dim whose general config also serves the causal mask and the compact budget.
template <class Config>
struct OneDefaultForAll {
  using type = Config;
  using causal = Config;
  using compact = Config;
};

// Three blocks per SM (at most 168 registers a thread) measured 2-7% ahead of one.
template <class Element>
struct DefaultConfig<Element, 32>
    : OneDefaultForAll<SplitTile<Element, 32, 128, 4, SmemLayout::kPaddedRows, 3>> {};
template <class Element>
struct DefaultConfig<Element, 64>
    : OneDefaultForAll<SplitTile<Element, 64, 128, 4, SmemLayout::kXorSwizzle>> {};
template <class Element>
struct DefaultConfig<Element, 96>
    : OneDefaultForAll<SplitTile<Element, 96, 128, 4, SmemLayout::kPaddedRows>> {};
// Without the mask, 8 warps x 32 rows on two K/V buffers measured 1-3% ahead of the 4-warp tile
// (more at longer rows); under the mask the 4-warp tile's smaller blocks balance the triangle
// better (the 8-warp one was 13% behind at N = 1k). The 4-warp tile rescales O after the
// exponentials: 1-3% faster for it.
template <class Element>
struct DefaultConfig<Element, 128> {
  using type = TileConfig<Element, 128, 256, /*BlockN=*/64, 8, /*Stages=*/2,
                          SmemLayout::kXorSwizzle>;
  using causal = SplitTile<Element, 128, 128, 4, SmemLayout::kXorSwizzle, 1,
                           RescaleOrder::kAfterExp>;
  using compact = causal;
};
template <class Element>
struct DefaultConfig<Element, 160>
    : OneDefaultForAll<SplitTile<Element, 160, 64, 4, SmemLayout::kPaddedRows>> {};
// Under the mask the ring schedule (two K/V buffers, one barrier per tile) measured 3-5% ahead
// of the split one; without it they were even, and the split one needs 48 KB less.
template <class Element>
struct DefaultConfig<Element, 192> {
  using type = SplitTile<Element, 192, 128, 8, SmemLayout::kXorSwizzle>;
  using causal = TileConfig<Element, 192, 128, /*BlockN=*/64, 8, /*Stages=*/2,
                            SmemLayout::kXorSwizzle>;
  using compact = type;
};
template <class Element>
struct DefaultConfig<Element, 224> {
  using type = SplitTile<Element, 224, 128, 8, SmemLayout::kPaddedRows>;
  using causal = type;
  // O rescaled after the exponentials: 7-9% faster for this tile.
  using compact =
      SplitTile<Element, 224, 64, 4, SmemLayout::kPaddedRows, 1, RescaleOrder::kAfterExp>;
};
template <class Element>
struct DefaultConfig<Element, 256> {
  using type = SplitTile<Element, 256, 128, 8, SmemLayout::kXorSwizzle>;
  using causal = type;
  using compact = SplitTile<Element, 256, 64, 4, SmemLayout::kXorSwizzle>;
};

// The config of the default dispatch's split kernel (sm80::ForwardKernel with SplitScheduler):
// every call of variable lengths, on a paged KV cache or with a KV append, every decoding-sized
// call (a work tile's rows fit one tile of it: a few queries, or the query heads of a GQA group
// when packed) and every call it splits. 64 rows on 4 warps (one m16 tile each): a decoding
// tile holds 1-16 real rows, and each padded row costs tensor-core time that a memory-bound call
// has to hide behind its K/V reads. Two K/V buffers where they fit the compact budget (d <= 128),
// else the split schedule; 128 keys a step at d <= 64. Every one fits 99 KB, so it has no compact
// fallback.
template <class Element, int HeadDim>
struct SplitKernelConfig {
  static constexpr bool kSmallHead = HeadDim <= 64;
  static constexpr bool kTwoBuffers = HeadDim <= 128;
  static constexpr SmemLayout kLayout =
      HeadDim % 64 == 0 ? SmemLayout::kXorSwizzle : SmemLayout::kPaddedRows;
  using type = TileConfig<Element, HeadDim, /*BlockM=*/64, /*BlockN=*/kSmallHead ? 128 : 64,
                          /*Warps=*/4, /*Stages=*/kTwoBuffers ? 2 : 1, kLayout>;
};
template <class Element, int HeadDim>
using SplitKernelConfigT = typename SplitKernelConfig<Element, HeadDim>::type;

// The general default of a head dim (what forward() runs without a mask on GPUs with the
// shared memory for it).
template <class Element, int HeadDim>
using DefaultConfigT = typename DefaultConfig<Element, HeadDim>::type;

// Which of a head dim's three defaults forward() runs.
enum class DefaultTile { kGeneral, kCausal, kCompact };

// The general config, or the causal one under the causal mask; the compact one when the
// device's per-block shared memory (opt-in) cannot hold that choice.
template <class Element, int HeadDim>
constexpr DefaultTile default_tile(bool causal, std::size_t smem_per_block_optin) {
  using Defaults = DefaultConfig<Element, HeadDim>;
  const std::size_t wanted =
      causal ? Defaults::causal::kSmemBytes : Defaults::type::kSmemBytes;
  if (wanted > smem_per_block_optin) return DefaultTile::kCompact;
  return causal ? DefaultTile::kCausal : DefaultTile::kGeneral;
}

// The general defaults, one per supported head dim, in order.
template <class Element>
using DefaultConfigsFor =
    std::tuple<DefaultConfigT<Element, 32>, DefaultConfigT<Element, 64>,
               DefaultConfigT<Element, 96>, DefaultConfigT<Element, 128>,
               DefaultConfigT<Element, 160>, DefaultConfigT<Element, 192>,
               DefaultConfigT<Element, 224>, DefaultConfigT<Element, 256>>;

// The causal and compact defaults that differ from the general ones.
template <class Element>
using DefaultAlternateConfigsFor =
    std::tuple<typename DefaultConfig<Element, 128>::causal,
               typename DefaultConfig<Element, 192>::causal,
               typename DefaultConfig<Element, 224>::compact,
               typename DefaultConfig<Element, 256>::compact>;

}  // namespace flashmma
