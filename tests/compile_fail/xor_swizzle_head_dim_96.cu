// SPDX-License-Identifier: Apache-2.0
// The XOR swizzle permutes groups of 8 chunks; HeadDim = 96 has 12 chunks per row.
// expected-error: SmemLayout::kXorSwizzle needs HeadDim % 64 == 0
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 96, 128, 64, 8, 2,
                                     flashmma::SmemLayout::kXorSwizzle>;
