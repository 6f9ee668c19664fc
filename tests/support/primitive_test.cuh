// SPDX-License-Identifier: Apache-2.0
// What the PTX primitive tests share (gpu/test_ptx_primitives.cu and the sm_90a tests through
// gpu/test_sm90_support.cuh): device copies, the check after a launch, the bits of 16-bit
// elements, and operand values that every product and sum keeps exact.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/gpu_helpers.cuh"
#include "support/reference.hpp"

namespace flashmma {
namespace test {

// A device buffer holding a copy of `host`.
template <class T>
DeviceBuffer<T> to_device(const std::vector<T>& host) {
  DeviceBuffer<T> buffer(static_cast<int64_t>(host.size()));
  buffer.copy_from_host(host);
  return buffer;
}

// Waits for the kernel just launched and fails the test on any CUDA error (a trap included).
inline void sync_and_check() {
  FLASHMMA_CUDA_CHECK(cudaGetLastError());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
}

// The 16-bit pattern of x rounded to Element.
template <class Element>
uint16_t element_bits(double x) {
  const Element e = from_double<Element>(x);
  uint16_t bits;
  std::memcpy(&bits, &e, sizeof(bits));
  return bits;
}

template <class Element>
double element_value(uint16_t bits) {
  Element e;
  std::memcpy(&e, &bits, sizeof(bits));
  return to_double(e);
}

// Two 16-bit values in one register, the first in the low half (as mma, ldmatrix and wgmma
// order them).
inline uint32_t pack_bits(uint16_t low, uint16_t high) {
  return static_cast<uint32_t>(low) | (static_cast<uint32_t>(high) << 16);
}

// A value k / 8 with k in [-16, 16], exact in fp16 and bf16, from a deterministic hash: products
// are multiples of 1/64 below 4 in size, so sums of a few hundred are exact in fp32 and results
// compare with ==.
inline double eighths(uint64_t seed, uint64_t index) {
  const uint64_t bits = mix64(seed ^ mix64(index));
  return static_cast<double>(static_cast<int64_t>(bits % 33) - 16) / 8.0;
}

}  // namespace test
}  // namespace flashmma
