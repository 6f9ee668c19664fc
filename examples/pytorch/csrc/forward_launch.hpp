// SPDX-License-Identifier: Apache-2.0
// The kernels flashmma_torch launches: flashmma's default configs, one per (dtype, head dim),
// spread over four translation units so that a parallel build compiles them side by side.
// Each unit instantiates one element type for one half of flashmma::kSupportedHeadDims.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>
#include <iterator>

#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"

namespace flashmma_torch {

inline constexpr std::size_t kHeadDimCount = std::size(flashmma::kSupportedHeadDims);
// Index in kSupportedHeadDims of the first head dim served by the *_upper units.
inline constexpr std::size_t kUpperHalfStart = kHeadDimCount / 2;

flashmma::Status forward_fp16_lower(const flashmma::ForwardParams& params, cudaStream_t stream);
flashmma::Status forward_fp16_upper(const flashmma::ForwardParams& params, cudaStream_t stream);
flashmma::Status forward_bf16_lower(const flashmma::ForwardParams& params, cudaStream_t stream);
flashmma::Status forward_bf16_upper(const flashmma::ForwardParams& params, cudaStream_t stream);

}  // namespace flashmma_torch
