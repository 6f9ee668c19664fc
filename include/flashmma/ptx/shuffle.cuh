// SPDX-License-Identifier: Apache-2.0
// Warp shuffles for the softmax row reductions. An m16n8 accumulator row lives on 4
// consecutive lanes (a "quad"), so row max and row sum need two butterfly steps, xor 1 and 2.
#pragma once

#include "flashmma/macros.hpp"

namespace flashmma {
namespace ptx {

inline constexpr unsigned kFullWarpMask = 0xffffffffu;

// shfl.sync.bfly.b32: the value held by lane (lane ^ lane_mask).
FLASHMMA_DEVICE float shfl_xor(float value, int lane_mask) {
  return __shfl_xor_sync(kFullWarpMask, value, lane_mask);
}

// Max over the 4 lanes of a quad (every lane of the quad gets the result).
FLASHMMA_DEVICE float quad_max(float value) {
  value = fmaxf(value, shfl_xor(value, 1));
  return fmaxf(value, shfl_xor(value, 2));
}

// Sum over the 4 lanes of a quad (every lane of the quad gets the result).
FLASHMMA_DEVICE float quad_sum(float value) {
  value += shfl_xor(value, 1);
  return value + shfl_xor(value, 2);
}

}  // namespace ptx
}  // namespace flashmma
