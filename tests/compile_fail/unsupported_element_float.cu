// SPDX-License-Identifier: Apache-2.0
// mma.sync m16n8k16 takes 16-bit operands: float is not an element type.
// expected-error: Element must be __half or __nv_bfloat16
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<float, 64, 128, 64, 8, 2,
                                     flashmma::SmemLayout::kXorSwizzle>;
