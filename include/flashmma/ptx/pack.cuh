// SPDX-License-Identifier: Apache-2.0
// fp32 pairs to the packed 16-bit pairs that mma.sync and wgmma A operands and 4-byte stores
// take (round to nearest even).
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {

// Two fp32 values as one register of two 16-bit elements (the first in the low half).
template <class Element>
FLASHMMA_DEVICE uint32_t pack_pair(float first, float second);

template <>
FLASHMMA_DEVICE uint32_t pack_pair<__half>(float first, float second) {
  const __half2 pair = __floats2half2_rn(first, second);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

template <>
FLASHMMA_DEVICE uint32_t pack_pair<__nv_bfloat16>(float first, float second) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(first, second);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// One register of two 16-bit elements back to two fp32 values (exact).
template <class Element>
FLASHMMA_DEVICE float2 unpack_pair(uint32_t pair);
template <>
FLASHMMA_DEVICE float2 unpack_pair<__half>(uint32_t pair) {
  return __half22float2(*reinterpret_cast<const __half2*>(&pair));
}
template <>
FLASHMMA_DEVICE float2 unpack_pair<__nv_bfloat16>(uint32_t pair) {
  return __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&pair));
}

}  // namespace flashmma
