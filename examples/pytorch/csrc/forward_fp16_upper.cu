// SPDX-License-Identifier: Apache-2.0
// The default fp16 kernels for the upper half of flashmma::kSupportedHeadDims.
#include "forward_dispatch.cuh"

namespace flashmma_torch {

flashmma::Status forward_fp16_upper(const flashmma::ForwardParams& params, cudaStream_t stream) {
  return forward_default_in<__half, kUpperHalfStart, kHeadDimCount>(params, stream);
}

}  // namespace flashmma_torch
