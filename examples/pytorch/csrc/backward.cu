// SPDX-License-Identifier: Apache-2.0
// The backward kernels flashmma_torch launches: flashmma::backward(params), the default backward
// config of each kernel head dim (64, 128, 256) for both element types and the built-in policies.
#include "backward_launch.hpp"
#include "flashmma/backward.cuh"

namespace flashmma_torch {

flashmma::Status launch_backward(const flashmma::BackwardParams& params, cudaStream_t stream) {
  return flashmma::backward(params, stream);
}

}  // namespace flashmma_torch
