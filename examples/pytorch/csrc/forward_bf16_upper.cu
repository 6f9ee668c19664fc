// SPDX-License-Identifier: Apache-2.0
// The default bf16 kernels for the upper half of flashmma::kSupportedHeadDims.
#include "forward_dispatch.cuh"

namespace flashmma_torch {

flashmma::Status forward_bf16_upper(const flashmma::ForwardParams& params, cudaStream_t stream) {
  return forward_default_in<__nv_bfloat16, kUpperHalfStart, kHeadDimCount>(params, stream);
}

}  // namespace flashmma_torch
