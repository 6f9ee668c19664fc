// SPDX-License-Identifier: Apache-2.0
// The configurations the forward tests instantiate, defined once. Each list is a std::tuple of
// TileConfig types for Catch2's TEMPLATE_LIST_TEST_CASE; every kernel instantiation costs compile
// time, so each list is compiled by its own test file.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <tuple>

#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {
namespace test {

// The general configs flashmma::forward(params) dispatches to, one per kernel head dim.
using DefaultFp16Configs = DefaultConfigsFor<__half>;
using DefaultBf16Configs = DefaultConfigsFor<__nv_bfloat16>;
// The causal and compact defaults that differ from the general ones, both element types.
using DefaultAlternateConfigs = decltype(std::tuple_cat(DefaultAlternateConfigsFor<__half>{},
                                                      DefaultAlternateConfigsFor<__nv_bfloat16>{}));

// Shapes the defaults do not use, each chosen to stress one part of the kernel:
using CustomConfigs = std::tuple<
    // The split schedule with padded rows at a head dim whose default swizzles, one row tile
    // per warp.
    TileConfig<__half, 64, 64, 64, 4, 1, SmemLayout::kPaddedRows>,
    // Three stages with the swizzle, and a 32-key step at head dim 128.
    TileConfig<__nv_bfloat16, 128, 64, 32, 4, 3, SmemLayout::kXorSwizzle>,
    // The smallest block: one warp, 16 queries by 16 keys.
    TileConfig<__half, 32, 16, 16, 1, 1, SmemLayout::kPaddedRows>,
    // The largest head dim with the narrowest key step, padded rows where the default swizzles.
    TileConfig<__nv_bfloat16, 256, 64, 16, 4, 1, SmemLayout::kPaddedRows>,
    // Two warps and a head dim that is not a power of two.
    TileConfig<__half, 96, 32, 64, 2, 2, SmemLayout::kPaddedRows>,
    // The ring schedule with two m16 row tiles per warp (BlockM = 32 * Warps), Q fragments
    // kept in registers.
    TileConfig<__nv_bfloat16, 64, 128, 32, 4, 2, SmemLayout::kXorSwizzle>,
    // Two row tiles per warp with Q re-read from shared memory (2 * 96 > 128 registers).
    TileConfig<__half, 96, 64, 32, 2, 2, SmemLayout::kPaddedRows>>;

}  // namespace test
}  // namespace flashmma
