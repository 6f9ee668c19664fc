// SPDX-License-Identifier: Apache-2.0
// The backward pass flashmma_torch launches (compiled in backward.cu, which includes no PyTorch
// header).
#pragma once

#include <cuda_runtime_api.h>

#include "flashmma/backward_params.hpp"
#include "flashmma/status.hpp"

namespace flashmma_torch {

flashmma::Status launch_backward(const flashmma::BackwardParams& params, cudaStream_t stream);

}  // namespace flashmma_torch
