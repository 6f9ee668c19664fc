// SPDX-License-Identifier: Apache-2.0
// (128 + 2 * 4 * 64) rows of 512 bytes = 320 KiB of shared memory.
// expected-error: shared memory (BlockM + 2 * Stages * BlockN) * row bytes exceeds 227 KiB
#include <flashmma/traits/tile_config.hpp>

template struct flashmma::TileConfig<__nv_bfloat16, 256, 128, 64, 8, 4,
                                     flashmma::SmemLayout::kXorSwizzle>;
