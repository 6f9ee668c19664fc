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

// Tile choice per head dim, shared by fp16 and bf16 (same operand width, same mma rate).
//  - up to 128: 8 warps x 16 rows = 128 query rows, 64 keys a step. Q stays in registers.
//  - 160, 192: 4 warps, 64 keys a step: O takes up to 96 registers a thread.
//  - 224, 256: 4 warps, 32 keys a step: O takes up to 128 registers a thread.
// Head dims that are multiples of 64 use the XOR swizzle, the others padded rows.
template <class Element, int HeadDim>
struct DefaultConfig;

#define FLASHMMA_DEFAULT_CONFIG(DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, LAYOUT)                    \
  template <class Element>                                                                       \
  struct DefaultConfig<Element, DIM> {                                                           \
    using type = TileConfig<Element, DIM, BLOCK_M, BLOCK_N, WARPS, STAGES, SmemLayout::LAYOUT>;  \
  };
FLASHMMA_DEFAULT_CONFIG(32, 128, 64, 8, 2, kPaddedRows)
FLASHMMA_DEFAULT_CONFIG(64, 128, 64, 8, 2, kXorSwizzle)
FLASHMMA_DEFAULT_CONFIG(96, 128, 64, 8, 2, kPaddedRows)
FLASHMMA_DEFAULT_CONFIG(128, 128, 64, 8, 2, kXorSwizzle)
FLASHMMA_DEFAULT_CONFIG(160, 64, 64, 4, 2, kPaddedRows)
FLASHMMA_DEFAULT_CONFIG(192, 64, 64, 4, 2, kXorSwizzle)
FLASHMMA_DEFAULT_CONFIG(224, 64, 32, 4, 2, kPaddedRows)
FLASHMMA_DEFAULT_CONFIG(256, 64, 32, 4, 2, kXorSwizzle)
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
