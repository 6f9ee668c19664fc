// SPDX-License-Identifier: Apache-2.0
// The persistent Hopper kernels against the one-tile defaults (docs/tuning-log.md, step 47):
//   A  the d = 128 and d = 64 Hopper defaults (Sm90DefaultConfig<bf16, d>::type), one block a tile
//   B  their walking twins (::walking) without a workspace: one block a tile
//   C  the twins with a tile counter in the workspace: walking where persistent_walk says
//   D  the twins walking whatever the key length (one block per SM slot, the tile counter):
//      what their Sm90WalkLimits are measured against
// Every output and LSE of B, C and D is compared with A's bit for bit ("diffs": the count that
// differ), then each is timed in interleaved rounds (PROBE_ROUNDS, default 7, of PROBE_ITERS
// calls, default 10; the median round), bf16, B * N = 16k, H * d = 2048, and a few odd shapes.
//   cmake --build BUILD --target flashmma_sm90_persistent_probe
//   BUILD/bench/flashmma_sm90_persistent_probe
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>
#include <cuda_bf16.h>
#include "flashmma/flashmma.cuh"
using namespace flashmma;
using D128 = Sm90DefaultConfig<__nv_bfloat16, 128>::type;
using D128P = Sm90DefaultConfig<__nv_bfloat16, 128>::walking;
using D64 = Sm90DefaultConfig<__nv_bfloat16, 64>::type;
using D64P = Sm90DefaultConfig<__nv_bfloat16, 64>::walking;
static_assert(!D128::kPersistent && D128P::kPersistent && D64P::kPersistent, "");
// Stops the probe on a CUDA error, naming it.
#define CK(x)                                                     \
  do {                                                            \
    cudaError_t e = (x);                                          \
    if (e != cudaSuccess) {                                       \
      printf("cuda %s at %d\n", cudaGetErrorString(e), __LINE__); \
      exit(1);                                                    \
    }                                                             \
  } while (0)
// D: forward<P>'s launch with the walk forced on (persistent_walk's limits not applied).
template <class P, class Policy>
Status forward_walking(const ForwardParams& params, void* workspace) {
  static DeviceInfo device;
  static const bool queried = query_device(device).ok();
  if (!queried) return Status::error(ErrorCode::kInvalidArgument, "query_device failed");
  detail::PersistentWalk walk;
  walk.blocks = detail::blocks_per_sm<P>(device) * device.sm_count;
  walk.tile_counter = static_cast<unsigned long long*>(workspace);
  return detail::launch_sm90_kernel<P, Policy>(params, Policy{}, device, walk, nullptr);
}
// Uniform values in [-1, 1) from a hash of the index.
__global__ void fill(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; i < n;
       i += (int64_t)gridDim.x * blockDim.x) {
    uint32_t x = (uint32_t)(i * 2654435761u) ^ seed;
    x ^= x >> 13;
    x *= 0x5bd1e995;
    x ^= x >> 15;
    p[i] = __float2bfloat16(((x & 0xffff) / 65536.f - 0.5f) * 2.f);
  }
}
template <class A, class P>
void run(int64_t b, int64_t h, int64_t n, int64_t d, bool causal, int sets, int rounds) {
  const int64_t elems = b * n * h * d;
  std::vector<__nv_bfloat16*> q(sets), k(sets), v(sets);
  for (int s = 0; s < sets; ++s) {
    CK(cudaMalloc(&q[s], elems * 2));
    CK(cudaMalloc(&k[s], elems * 2));
    CK(cudaMalloc(&v[s], elems * 2));
    fill<<<1024, 256>>>(q[s], elems, 1 + 3 * s);
    fill<<<1024, 256>>>(k[s], elems, 2 + 3 * s);
    fill<<<1024, 256>>>(v[s], elems, 3 + 3 * s);
  }
  constexpr int kColumns = 4;
  __nv_bfloat16* o[kColumns];
  float* l[kColumns];
  for (int i = 0; i < kColumns; ++i) {
    CK(cudaMalloc(&o[i], elems * 2));
    CK(cudaMalloc(&l[i], b * h * n * 4));
  }
  void* ws;
  CK(cudaMalloc(&ws, kTileCounterBytes));
  CK(cudaMemset(ws, 0x5a, kTileCounterBytes));
  ForwardParams p;
  p.dtype = ScalarType::kBFloat16;
  p.batch = b;
  p.seqlen_q = n;
  p.seqlen_k = n;
  p.heads_q = h;
  p.heads_kv = h;
  p.head_dim = d;
  p.q_strides = bshd_strides(n, h, d);
  p.k_strides = p.q_strides;
  p.v_strides = p.q_strides;
  p.o_strides = p.q_strides;
  p.mask = causal ? MaskKind::kCausal : MaskKind::kNone;
  // which: 0 = A (the one-tile default), 1 = B (the twin, no workspace), 2 = C (the twin with
  // the tile counter), 3 = D (the twin, walking forced); s: the input set (rotated so that L2
  // does not hold the last call's K/V).
  auto call = [&](int which, int s) {
    ForwardParams x = p;
    x.q = q[s];
    x.k = k[s];
    x.v = v[s];
    x.o = o[which];
    x.lse = l[which];
    if (which >= 2) {
      x.workspace = ws;
      x.workspace_bytes = kTileCounterBytes;
    }
    Status st = which == 0   ? forward<A>(x)
                : which < 3 ? forward<P>(x)
                : causal    ? forward_walking<P, CausalMask>(x, ws)
                            : forward_walking<P, FullAttention>(x, ws);
    if (!st.ok()) {
      printf("error %s\n", st.message().c_str());
      exit(1);
    }
  };
  for (int w = 0; w < kColumns; ++w) call(w, 0);
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> ho[kColumns];
  std::vector<float> hl[kColumns];
  for (int w = 0; w < kColumns; ++w) {
    ho[w].resize(elems);
    hl[w].resize(b * h * n);
    CK(cudaMemcpy(ho[w].data(), o[w], elems * 2, cudaMemcpyDeviceToHost));
    CK(cudaMemcpy(hl[w].data(), l[w], hl[w].size() * 4, cudaMemcpyDeviceToHost));
  }
  int64_t diff = 0;
  for (int w = 1; w < kColumns; ++w) {
    for (int64_t i = 0; i < elems; ++i) diff += ho[0][i] != ho[w][i];
    for (size_t i = 0; i < hl[0].size(); ++i) diff += hl[0][i] != hl[w][i];
  }
  const int iters = getenv("PROBE_ITERS") ? atoi(getenv("PROBE_ITERS")) : 10;
  cudaEvent_t e0, e1;
  cudaEventCreate(&e0);
  cudaEventCreate(&e1);
  std::vector<float> t[kColumns];
  for (int round = 0; round < rounds; ++round) {
    for (int w = 0; w < kColumns; ++w) {
      cudaEventRecord(e0);
      for (int i = 0; i < iters; ++i) call(w, i % sets);
      cudaEventRecord(e1);
      CK(cudaEventSynchronize(e1));
      float x;
      cudaEventElapsedTime(&x, e0, e1);
      t[w].push_back(x / iters);
    }
  }
  cudaEventDestroy(e0);
  cudaEventDestroy(e1);
  double ms[kColumns];
  for (int w = 0; w < kColumns; ++w) {
    std::sort(t[w].begin(), t[w].end());
    ms[w] = t[w][t[w].size() / 2];
  }
  const double flops = 4.0 * b * h * n * n * d / (causal ? 2 : 1);
  printf(
      "d=%3lld n=%5lld b=%3lld h=%2lld causal=%d: one-tile %.1f TF | persistent, no ws %.1f TF "
      "x%.3f | walking %.1f TF x%.3f | forced walk %.1f TF x%.3f | diffs %lld\n",
      (long long)d, (long long)n, (long long)b, (long long)h, causal, flops / ms[0] / 1e9,
      flops / ms[1] / 1e9, ms[0] / ms[1], flops / ms[2] / 1e9, ms[0] / ms[2],
      flops / ms[3] / 1e9, ms[0] / ms[3], (long long)diff);
  fflush(stdout);
  for (int s = 0; s < sets; ++s) {
    cudaFree(q[s]);
    cudaFree(k[s]);
    cudaFree(v[s]);
  }
  for (int i = 0; i < kColumns; ++i) {
    cudaFree(o[i]);
    cudaFree(l[i]);
  }
  cudaFree(ws);
}
int main() {
  const int rounds = getenv("PROBE_ROUNDS") ? atoi(getenv("PROBE_ROUNDS")) : 7;
  for (int causal = 0; causal < 2; ++causal) {
    for (int64_t n : {1024, 2048, 4096, 8192, 16384})
      run<D128, D128P>(16384 / n, 16, n, 128, causal, 3, rounds);
    for (int64_t n : {1024, 2048, 4096, 8192, 16384})
      run<D64, D64P>(16384 / n, 32, n, 64, causal, 3, rounds);
  }
  run<D128, D128P>(3, 5, 1000, 128, false, 1, 3);
  run<D128, D128P>(2, 3, 777, 128, true, 1, 3);
  run<D64, D64P>(1, 2, 300, 64, true, 1, 3);
  run<D128, D128P>(1, 1, 64, 128, false, 1, 3);
  run<D128, D128P>(4, 12, 1000, 128, true, 1, 3);
  run<D64, D64P>(4, 12, 1000, 64, true, 1, 3);
  return 0;
}
