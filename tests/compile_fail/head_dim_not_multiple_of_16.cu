// SPDX-License-Identifier: Apache-2.0
// HeadDim = 40 is not a whole number of k16 steps (40 runs on the HeadDim 64 config).
// expected-error: HeadDim must be a positive multiple of 16
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__half, 40, 128, 64, 8, 2,
                                     flashmma::SmemLayout::kPaddedRows>;
