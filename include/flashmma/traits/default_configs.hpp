// SPDX-License-Identifier: Apache-2.0
// The configurations flashmma::forward(params, stream) picks, one per (element type, head dim).
// This is the single list that tests, examples and benchmarks iterate over.
#pragma once

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

// Tile choice per head dim, shared by fp16 and bf16 (same operand width, same mma rate), picked
// by measurement on an H200 (docs/perf.md, tuning log in docs/tuning.md):
//  - 32 to 128: 4 warps x 32 rows (two m16 tiles each, so every K/V fragment loaded from shared
//    memory feeds two mma), 64 keys a step (128 for d = 32).
//  - 160 to 224: 8 warps x 16 rows, 64 keys a step (32 for d = 224).
//  - 256: 4 warps x 16 rows, 32 keys a step, two blocks per SM.
// Every default fits the 163 KB of shared memory an A100 (sm_80) grants a block; the 128-row
// d = 256 tile was faster on an H200 but needs 192 KB.
// Head dims that are multiples of 64 use the XOR swizzle, the others padded rows.
template <class Element, int HeadDim>
struct DefaultConfig;

#define FLASHMMA_DEFAULT_CONFIG(DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, LAYOUT, MIN_BLOCKS)         \
  template <class Element>                                                                       \
  struct DefaultConfig<Element, DIM> {                                                           \
    using type =                                                                                 \
        TileConfig<Element, DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, SmemLayout::LAYOUT, MIN_BLOCKS>; \
  };
FLASHMMA_DEFAULT_CONFIG(32, 128, 128, 4, 2, kPaddedRows, 1)
FLASHMMA_DEFAULT_CONFIG(64, 128, 64, 4, 2, kXorSwizzle, 1)
FLASHMMA_DEFAULT_CONFIG(96, 128, 64, 4, 2, kPaddedRows, 1)
FLASHMMA_DEFAULT_CONFIG(128, 128, 64, 4, 2, kXorSwizzle, 1)
FLASHMMA_DEFAULT_CONFIG(160, 128, 64, 8, 2, kPaddedRows, 1)
FLASHMMA_DEFAULT_CONFIG(192, 128, 64, 8, 2, kXorSwizzle, 1)
FLASHMMA_DEFAULT_CONFIG(224, 128, 32, 8, 2, kPaddedRows, 1)
FLASHMMA_DEFAULT_CONFIG(256, 64, 32, 4, 2, kXorSwizzle, 2)
#undef FLASHMMA_DEFAULT_CONFIG

template <class Element, int HeadDim>
using DefaultConfigT = typename DefaultConfig<Element, HeadDim>::type;

template <class Element>
using DefaultConfigsFor =
    std::tuple<DefaultConfigT<Element, 32>, DefaultConfigT<Element, 64>,
               DefaultConfigT<Element, 96>, DefaultConfigT<Element, 128>,
               DefaultConfigT<Element, 160>, DefaultConfigT<Element, 192>,
               DefaultConfigT<Element, 224>, DefaultConfigT<Element, 256>>;

}  // namespace flashmma
