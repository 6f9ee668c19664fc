// SPDX-License-Identifier: Apache-2.0
// The backward kernels flashmma_torch launches: flashmma::backward(params)'s choice, spread over
// two translation units by element type (backward_fp16.cu, backward_bf16.cu) so that the build
// compiles them in parallel; this one picks the unit.
#include "backward_launch.hpp"

namespace flashmma_torch {

flashmma::Status launch_backward(const flashmma::BackwardParams& params, cudaStream_t stream) {
  if (params.dtype == flashmma::ScalarType::kFloat16) return backward_fp16(params, stream);
  return backward_bf16(params, stream);
}

}  // namespace flashmma_torch
