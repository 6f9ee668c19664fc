// SPDX-License-Identifier: Apache-2.0
// What flashmma_bench and its output check share: CUDA errors as exceptions, and an owned device
// allocation.
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

}  // namespace flashmma_bench
