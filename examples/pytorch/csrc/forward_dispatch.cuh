// SPDX-License-Identifier: Apache-2.0
// Runs the default config for params.head_dim (flashmma::forward_default_config: general, causal
// or compact) among a range of flashmma::kSupportedHeadDims.
// Included only by the forward_*.cu units (see forward_launch.hpp).
#pragma once

#include <cstddef>
#include <string>

#include "flashmma/forward.cuh"
#include "forward_launch.hpp"

namespace flashmma_torch {

// Tries kSupportedHeadDims[Index], then the next ones up to End (exclusive).
template <class Element, std::size_t Index, std::size_t End>
flashmma::Status forward_default_in(const flashmma::ForwardParams& params, cudaStream_t stream) {
  if constexpr (Index == End) {
    return flashmma::Status::error(
        flashmma::ErrorCode::kInvalidArgument,
        "flashmma_torch: internal error: this unit has no kernel for head_dim " +
            std::to_string(params.head_dim));
  } else {
    constexpr int kHeadDim = flashmma::kSupportedHeadDims[Index];
    if (flashmma::kernel_head_dim_for(params.head_dim) == kHeadDim) {
      return flashmma::forward_default_config<Element, kHeadDim>(params, stream);
    }
    return forward_default_in<Element, Index + 1, End>(params, stream);
  }
}

}  // namespace flashmma_torch
