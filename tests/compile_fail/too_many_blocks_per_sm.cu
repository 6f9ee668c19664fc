// SPDX-License-Identifier: Apache-2.0
// 8 blocks of 16 warps would need 128 resident warps; an SM holds at most 64.
// expected-error: MinBlocksPerSm must be >= 1, and MinBlocksPerSm * Warps at most 64
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 64, 256, 64, 16, 2,
                                     flashmma::SmemLayout::kXorSwizzle, 8>;
