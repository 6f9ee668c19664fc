// SPDX-License-Identifier: Apache-2.0
// The default bf16 kernels for the lower half of flashmma::kSupportedHeadDims.
#include "forward_dispatch.cuh"

namespace flashmma_torch {

flashmma::Status forward_bf16_lower(const flashmma::ForwardParams& params, cudaStream_t stream) {
  return forward_default_in<__nv_bfloat16, 0, kUpperHalfStart>(params, stream);
}

}  // namespace flashmma_torch
