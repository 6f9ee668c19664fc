// SPDX-License-Identifier: Apache-2.0
// The backward pass flashmma_torch launches (compiled in backward.cu, backward_fp16.cu and
// backward_bf16.cu, which include no PyTorch header).
#pragma once

#include <cuda_runtime_api.h>

#include "flashmma/backward_params.hpp"
#include "flashmma/status.hpp"

namespace flashmma_torch {

flashmma::Status launch_backward(const flashmma::BackwardParams& params, cudaStream_t stream);
flashmma::Status backward_fp16(const flashmma::BackwardParams& params, cudaStream_t stream);
flashmma::Status backward_bf16(const flashmma::BackwardParams& params, cudaStream_t stream);

}  // namespace flashmma_torch
