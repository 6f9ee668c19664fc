// SPDX-License-Identifier: Apache-2.0
// The default backward kernels of one element type: flashmma::backward_default_config of the
// kernel head dim (64, 128, 256) that holds the call's, as flashmma::backward(params) picks it.
#pragma once

#include "backward_launch.hpp"
#include "flashmma/backward.cuh"

namespace flashmma_torch {

template <class Element>
flashmma::Status backward_default_for(const flashmma::BackwardParams& params,
                                      cudaStream_t stream) {
  if (flashmma::Status s = flashmma::validate_backward_params(params); !s) return s;
  switch (flashmma::backward_kernel_head_dim_for(params.head_dim)) {
    case 64: return flashmma::backward_default_config<Element, 64>(params, stream);
    case 128: return flashmma::backward_default_config<Element, 128>(params, stream);
    default: return flashmma::backward_default_config<Element, 256>(params, stream);
  }
}

}  // namespace flashmma_torch
