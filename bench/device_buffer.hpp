// SPDX-License-Identifier: Apache-2.0
// What the benchmark programs share: CUDA errors as exceptions, an owned device allocation and a
// pair of timing events.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <stdexcept>
#include <string>

namespace flashmma_bench {

// A CUDA runtime error: fatal, since the context may be unusable after it.
struct CudaFailure : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A device allocation that did not fit: the case fails, the run goes on.
struct OutOfMemory : std::runtime_error {
  using std::runtime_error::runtime_error;
};

inline void check_cuda(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    throw CudaFailure(std::string(what) + " failed: " + cudaGetErrorName(error) + " (" +
                      cudaGetErrorString(error) + ")");
  }
}

class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t bytes) : bytes_(bytes) {
    const cudaError_t error = cudaMalloc(&data_, bytes);
    if (error == cudaErrorMemoryAllocation) {
      cudaGetLastError();  // not sticky: clear it and let the next case try
      throw OutOfMemory("cudaMalloc of " + std::to_string(bytes) + " bytes: out of memory");
    }
    check_cuda(error, "cudaMalloc");
  }
  ~DeviceBuffer() { cudaFree(data_); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;

  template <class T>
  T* as() const {
    return static_cast<T*>(data_);
  }
  std::size_t bytes() const { return bytes_; }

 private:
  void* data_ = nullptr;
  std::size_t bytes_ = 0;
};

// Two CUDA events around timed work: record start(), the work, stop(); elapsed_ms() once both
// have completed.
class EventPair {
 public:
  EventPair() {
    check_cuda(cudaEventCreate(&start_), "cudaEventCreate");
    check_cuda(cudaEventCreate(&stop_), "cudaEventCreate");
  }
  ~EventPair() {
    cudaEventDestroy(start_);
    cudaEventDestroy(stop_);
  }
  EventPair(const EventPair&) = delete;
  EventPair& operator=(const EventPair&) = delete;

  cudaEvent_t start() const { return start_; }
  cudaEvent_t stop() const { return stop_; }
  float elapsed_ms() const {
    float ms = 0.f;
    check_cuda(cudaEventElapsedTime(&ms, start_, stop_), "cudaEventElapsedTime");
    return ms;
  }

 private:
  cudaEvent_t start_ = nullptr;
  cudaEvent_t stop_ = nullptr;
};

}  // namespace flashmma_bench
