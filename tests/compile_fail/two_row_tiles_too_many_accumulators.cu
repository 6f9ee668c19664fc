// SPDX-License-Identifier: Apache-2.0
// Two m16 row tiles per warp double the accumulators: 4 * 2 * (16 + 8) = 192 fits at HeadDim
// 128 with BlockN 64, but 4 * 2 * (16 + 16) = 256 does not with BlockN 128.
// expected-error: O (HeadDim / 2) plus S (BlockN / 2) accumulators per row tile exceed 192
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 128, 128, 128, 4, 1,
                                     flashmma::SmemLayout::kXorSwizzle>;
