// SPDX-License-Identifier: Apache-2.0
// flashmma_mma_peak: the throughput ceiling of the portable path on this GPU.
//
//   flashmma_mma_peak
//
// Every warp issues mma.sync.m16n8k16 (fp16 or bf16 in, fp32 accumulate; the instruction both
// GEMMs of the forward kernel are made of) on 8 independent accumulators, so no mma waits on the
// previous one's result; nothing is stored inside the loop. Two operand sources:
//   registers   A and B never change: the tensor cores alone.
//   ldmatrix    B is loaded from shared memory by one ldmatrix.x4 per two mma (conflict-free
//               XOR-swizzled rows), as Q K^T loads K when a warp owns one m16 row tile.
// Two occupancies: two blocks per SM of 4, 8 and 16 warps, and one block of 4 warps per SM, i.e.
// one warp per warp scheduler, which is what a scheduler has while the other warps of a
// ping-pong schedule run their softmax. The best of these is what an attention kernel built on
// mma.sync can at most approach: its softmax, shared-memory loads and barriers take issue slots
// from the same warps.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <exception>

#include "device_buffer.hpp"
#include "flashmma/ptx/ldmatrix.cuh"
#include "flashmma/ptx/mma.cuh"
#include "flashmma/ptx/smem.cuh"

namespace {

using flashmma_bench::check_cuda;

constexpr int kChains = 8;  // independent accumulators per warp
constexpr int kWarmupSteps = 100;
constexpr int kTimedSteps = 20000;
constexpr double kFlopsPerMma = 2.0 * 16 * 8 * 16;

// The B tile of the ldmatrix source: 64 rows of 64 16-bit elements (128 bytes, 8 chunks of 16).
constexpr int kTileRows = 64;
constexpr int kRowBytes = 128;
constexpr int kChunkBytes = 16;

enum class Operands { kRegisters, kLdmatrix };

template <class Element, Operands kSource>
__global__ void mma_loop(float* sink, int steps) {
#if defined(FLASHMMA_SM80_ENABLED)
  __shared__ __align__(16) uint32_t tile[kTileRows * kRowBytes / 4];
  const uint32_t lane = threadIdx.x % 32;
  if constexpr (kSource == Operands::kLdmatrix) {
    // Small normal 16-bit pairs, so that the accumulators stay finite.
    for (int i = static_cast<int>(threadIdx.x); i < kTileRows * kRowBytes / 4; i += blockDim.x) {
      tile[i] = 0x30003000u ^ (static_cast<uint32_t>(i) & 0x00ff00ffu);
    }
    __syncthreads();
  }
  // Operand bits vary per lane so that the compiler cannot fold anything.
  const uint32_t a[4] = {0x3c003c00u ^ lane, 0x38003800u, 0x3c003800u, 0x38003c00u ^ lane};
  uint32_t b[4] = {0x30003000u ^ lane, 0x30003400u, 0x30003000u, 0x30003400u ^ lane};
  // ldmatrix.x4 source rows: lanes 0-15 address rows 0-15 of a 16-row block, chunk lane / 16;
  // chunks are XOR-swizzled with row % 8 so that each 8-row phase touches every bank once.
  const uint32_t row = lane % 16;
  const uint32_t lane_address = flashmma::ptx::smem_address(tile) + row * kRowBytes +
                                (((lane / 16) ^ (row % 8)) * kChunkBytes);
  float c[kChains][4] = {};
  for (int step = 0; step < steps; ++step) {
#pragma unroll
    for (int pair = 0; pair < kChains / 2; ++pair) {
      if constexpr (kSource == Operands::kLdmatrix) {
        const uint32_t block = (pair + step) % (kTileRows / 16);  // a different block each step
        flashmma::ptx::ldmatrix_x4(b, lane_address + block * 16 * kRowBytes);
      }
      const uint32_t b_first[2] = {b[0], b[1]};
      const uint32_t b_second[2] = {b[2], b[3]};
      flashmma::ptx::mma_m16n8k16_acc<Element>(c[2 * pair], a, b_first);
      flashmma::ptx::mma_m16n8k16_acc<Element>(c[2 * pair + 1], a, b_second);
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

template <class Element, Operands kSource>
double measure(int blocks, int warps, float* sink) {
  mma_loop<Element, kSource><<<blocks, warps * 32>>>(sink, kWarmupSteps);
  check_cuda(cudaGetLastError(), "launching mma_loop");
  cudaEvent_t start, stop;
  check_cuda(cudaEventCreate(&start), "cudaEventCreate");
  check_cuda(cudaEventCreate(&stop), "cudaEventCreate");
  check_cuda(cudaEventRecord(start), "cudaEventRecord");
  mma_loop<Element, kSource><<<blocks, warps * 32>>>(sink, kTimedSteps);
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

template <Operands kSource>
void print_row(const char* label, int blocks, int warps, float* sink) {
  std::printf("  %-38s fp16 %6.1f TFLOP/s, bf16 %6.1f TFLOP/s\n", label,
              measure<__half, kSource>(blocks, warps, sink),
              measure<__nv_bfloat16, kSource>(blocks, warps, sink));
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
  const int sms = properties.multiProcessorCount;
  std::printf("%s, %d SMs: mma.sync.m16n8k16, fp32 accumulate, %d accumulators per warp\n",
              properties.name, sms, kChains);
  char label[64];
  for (int warps : {4, 8, 16}) {
    std::snprintf(label, sizeof(label), "%2d warps per block, 2 blocks per SM:", warps);
    print_row<Operands::kRegisters>(label, 2 * sms, warps, sink);
  }
  print_row<Operands::kRegisters>(" 4 warps, 1 block per SM:", sms, 4, sink);
  std::printf("B from shared memory (one ldmatrix.x4 per two mma):\n");
  print_row<Operands::kLdmatrix>(" 4 warps per block, 2 blocks per SM:", 2 * sms, 4, sink);
  print_row<Operands::kLdmatrix>(" 8 warps per block, 2 blocks per SM:", 2 * sms, 8, sink);
  print_row<Operands::kLdmatrix>(" 4 warps, 1 block per SM:", sms, 4, sink);
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
