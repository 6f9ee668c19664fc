// SPDX-License-Identifier: Apache-2.0
// BlockM = 96 over 4 warps gives each warp 24 query rows: not a whole number of m16 tiles.
// expected-error: BlockM must be a multiple of 16 * Warps
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 64, 96, 64, 4, 2,
                                     flashmma::SmemLayout::kXorSwizzle>;
