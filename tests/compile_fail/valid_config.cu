// SPDX-License-Identifier: Apache-2.0
// Positive control: the same explicit instantiation as the other cases, of a valid config.
// It must compile, which shows that the failures come from the configs and not the harness.
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 128, 128, 64, 8, 2,
                                     flashmma::SmemLayout::kXorSwizzle>;
