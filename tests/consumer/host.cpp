// SPDX-License-Identifier: Apache-2.0
// A downstream program built by the host compiler alone, on flashmma::kernels through the plain
// header flashmma/precompiled.hpp: one forward and one backward call. The consumer test builds
// it (which fails if the library lacks a function this file calls) and runs it: without a GPU it
// checks a refused call only, and exits 77, which CTest reports as skipped.
#include <flashmma/precompiled.hpp>

// The CUDA runtime's C API is plain C++: the buffers are the program's own.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstdio>
#include <vector>

namespace {

constexpr int kSkipped = 77;
constexpr int64_t kBatch = 1, kSeqlen = 128, kHeads = 2, kHeadDim = 64;
constexpr int64_t kElements = kBatch * kSeqlen * kHeads * kHeadDim;
constexpr int64_t kRows = kBatch * kHeads * kSeqlen;

bool report(const char* what, const flashmma::Status& status) {
  std::printf("%s: %s\n", what, status.message().c_str());
  return status.ok();
}

}  // namespace

int main() {
  flashmma::ForwardParams unset;  // no tensors: refused before anything is launched
  if (report("forward without tensors", flashmma::precompiled::forward(unset))) return 1;
  if (flashmma::precompiled::device_count() == 0) {
    std::printf("no CUDA device: skipped\n");
    return kSkipped;
  }

  // q, k, v, o, do, dq, dk, dv (fp16, zeros) and the LSE.
  std::vector<void*> tensors(8, nullptr);
  for (void*& tensor : tensors) {
    if (cudaMalloc(&tensor, kElements * 2) != cudaSuccess) return 1;
    cudaMemset(tensor, 0, kElements * 2);
  }
  void* lse = nullptr;  // the C API allocates void*
  if (cudaMalloc(&lse, kRows * sizeof(float)) != cudaSuccess) return 1;

  flashmma::BackwardParams params;
  params.dtype = flashmma::ScalarType::kFloat16;
  params.q = tensors[0];
  params.k = tensors[1];
  params.v = tensors[2];
  params.o = tensors[3];
  params.lse = static_cast<float*>(lse);
  params.batch = kBatch;
  params.seqlen_q = params.seqlen_k = kSeqlen;
  params.heads_q = params.heads_kv = kHeads;
  params.head_dim = kHeadDim;
  params.mask = flashmma::MaskKind::kCausal;
  params.q_strides = params.k_strides = params.v_strides = params.o_strides =
      flashmma::bshd_strides(kSeqlen, kHeads, kHeadDim);
  bool ok = report("forward", flashmma::precompiled::forward(params));

  params.d_o = tensors[4];
  params.dq = tensors[5];
  params.dk = tensors[6];
  params.dv = tensors[7];
  params.do_strides = params.dq_strides = params.dk_strides = params.dv_strides = params.q_strides;
  params.workspace_bytes = flashmma::precompiled::backward_workspace_bytes(params);
  if (cudaMalloc(&params.workspace, params.workspace_bytes) != cudaSuccess) return 1;
  ok = report("backward", flashmma::precompiled::backward(params)) && ok;
  const cudaError_t sync = cudaDeviceSynchronize();
  std::printf("synchronize: %s\n", cudaGetErrorString(sync));

  for (void* tensor : tensors) cudaFree(tensor);
  cudaFree(lse);
  cudaFree(params.workspace);
  return ok && sync == cudaSuccess ? 0 : 1;
}
