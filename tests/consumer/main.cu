// SPDX-License-Identifier: Apache-2.0
// A downstream program: one include, one config, one call. The consumer test compiles and links
// it against an installed flashmma; it does not run it.
#include <flashmma/flashmma.cuh>

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>

using Config = flashmma::DefaultConfigT<__half, 64>;

int main() {
  constexpr int64_t kBatch = 1, kSeqlen = 256, kHeads = 4, kHeadDim = 64;
  constexpr int64_t kElements = kBatch * kSeqlen * kHeads * kHeadDim;

  __half* buffers[4] = {};  // q, k, v, o
  for (__half*& buffer : buffers) {
    if (cudaMalloc(&buffer, kElements * sizeof(__half)) != cudaSuccess) {
      std::printf("cudaMalloc failed\n");
      return 1;
    }
    cudaMemset(buffer, 0, kElements * sizeof(__half));
  }

  flashmma::ForwardParams params;
  params.dtype = flashmma::ScalarType::kFloat16;
  params.q = buffers[0];
  params.k = buffers[1];
  params.v = buffers[2];
  params.o = buffers[3];
  params.batch = kBatch;
  params.seqlen_q = params.seqlen_k = kSeqlen;
  params.heads_q = params.heads_kv = kHeads;
  params.head_dim = kHeadDim;
  params.q_strides = params.k_strides = params.v_strides = params.o_strides =
      flashmma::bshd_strides(kSeqlen, kHeads, kHeadDim);
  params.mask = flashmma::MaskKind::kCausal;

  const flashmma::Status status = flashmma::forward<Config>(params);
  const cudaError_t sync = cudaDeviceSynchronize();
  std::printf("%s; %s\n", status.message().c_str(), cudaGetErrorString(sync));
  for (__half* buffer : buffers) cudaFree(buffer);
  return status.ok() && sync == cudaSuccess ? 0 : 1;
}
