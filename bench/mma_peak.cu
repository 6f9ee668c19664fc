// SPDX-License-Identifier: Apache-2.0
// flashmma_mma_peak: the throughput ceiling of the portable path on this GPU.
//
//   flashmma_mma_peak
//
// Every warp issues mma.sync.m16n8k16 (fp16 or bf16 in, fp32 accumulate; the instruction both
// GEMMs of the forward kernel are made of) on 8 independent accumulators, so no mma waits on the
// previous one's result; nothing is loaded or stored inside the loop. Two blocks per SM, of 4, 8
// and 16 warps. The best of these is what an attention kernel built on mma.sync can at most
// approach: its softmax, shared-memory loads and barriers take issue slots from the same warps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "device_buffer.hpp"
#include "flashmma/ptx/mma.cuh"

namespace {

using flashmma_bench::check_cuda;

constexpr int kChains = 8;         // independent accumulators per warp
constexpr int kWarmupSteps = 100;
constexpr int kTimedSteps = 20000;
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;

template <class Element>
__global__ void mma_loop(float* sink, int steps) {
#if defined(FLASHMMA_SM80_ENABLED)
  // Operand bits vary per lane so that the compiler cannot fold anything; the values (small
  // normal numbers) keep the accumulators finite.
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t a[4] = {0x3c003c00u ^ lane, 0x38003800u, 0x3c003800u, 0x38003c00u ^ lane};
  const uint32_t b[2] = {0x30003000u ^ lane, 0x30003400u};
  float c[kChains][4] = {};
  for (int step = 0; step < steps; ++step) {
#pragma unroll
    for (int chain = 0; chain < kChains; ++chain) {
      flashmma::ptx::mma_m16n8k16_acc<Element>(c[chain], a, b);
    }
  }
  float total = 0.f;
#pragma unroll
  for (int chain = 0; chain < kChains; ++chain) {
    total += c[chain][0] + c[chain][1] + c[chain][2] + c[chain][3];
  }
  if (total == 1234.5f) *sink = total;  // keeps the loop alive; never true in practice
#endif
}

template <class Element>
double measure(int blocks, int warps, float* sink) {
  mma_loop<Element><<<blocks, warps * 32>>>(sink, kWarmupSteps);
  check_cuda(cudaGetLastError(), "launching mma_loop");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start), "cudaEventRecord");
  mma_loop<Element><<<blocks, warps * 32>>>(sink, kTimedSteps);
  check_cuda(cudaGetLastError(), "launching mma_loop");
  check_cuda(cudaEventRecord(stop), "cudaEventRecord");
  check_cuda(cudaEventSynchronize(stop), "cudaEventSynchronize");
  float ms = 0.f;
  check_cuda(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
  check_cuda(cudaEventDestroy(start), "cudaEventDestroy");
  check_cuda(cudaEventDestroy(stop), "cudaEventDestroy");
  const double mmas = static_cast<double>(blocks) * warps * kTimedSteps * kChains;
  return mmas * kFlopsPerMma / (ms * 1e-3) / 1e12;
}

int run() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp properties{};
  check_cuda(cudaGetDeviceProperties(&properties, device), "cudaGetDeviceProperties");
  if (properties.major < 8) {
    std::fprintf(stderr, "flashmma_mma_peak needs compute capability 8.0 or newer (found %d.%d)\n",
                 properties.major, properties.minor);
    return 1;
  }
  const flashmma_bench::DeviceBuffer sink_buffer(sizeof(float));
  float* const sink = sink_buffer.as<float>();
  const int blocks = 2 * properties.multiProcessorCount;
  std::printf("%s, %d SMs: mma.sync.m16n8k16, fp32 accumulate, %d blocks\n", properties.name,
              properties.multiProcessorCount, blocks);
  for (int warps : {4, 8, 16}) {
    std::printf("  %2d warps per block: fp16 %6.1f TFLOP/s, bf16 %6.1f TFLOP/s\n", warps,
                measure<__half>(blocks, warps, sink), measure<__nv_bfloat16>(blocks, warps, sink));
  }
  return 0;
}

}  // namespace

int main() {
  try {
    return run();
  } catch (const std::exception& error) {
    std::fprintf(stderr, "flashmma_mma_peak: %s\n", error.what());
    return 1;
  }
}
