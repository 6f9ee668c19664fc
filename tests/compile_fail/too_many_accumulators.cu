// SPDX-License-Identifier: Apache-2.0
// HeadDim = 256 and BlockN = 160 need 4 * (32 + 20) = 208 fp32 accumulators per thread.
// expected-error: O (HeadDim / 2) plus S (BlockN / 2) accumulators per row tile exceed 192
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 256, 16, 160, 1, 1,
                                     flashmma::SmemLayout::kXorSwizzle>;
