// SPDX-License-Identifier: Apache-2.0
// The default fp16 backward kernels (backward_element.cuh).
#include "backward_element.cuh"

namespace flashmma_torch {

flashmma::Status backward_fp16(const flashmma::BackwardParams& params, cudaStream_t stream) {
  return backward_default_for<__half>(params, stream);
}

}  // namespace flashmma_torch
