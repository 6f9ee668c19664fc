// SPDX-License-Identifier: Apache-2.0
// The default bf16 backward kernels (backward_element.cuh).
#include "backward_element.cuh"

namespace flashmma_torch {

flashmma::Status backward_bf16(const flashmma::BackwardParams& params, cudaStream_t stream) {
  return backward_default_for<__nv_bfloat16>(params, stream);
}

}  // namespace flashmma_torch
