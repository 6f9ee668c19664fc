// SPDX-License-Identifier: Apache-2.0
// The CUDA runtime, seen from the host entry points: errors as Status, and what validation and
// the default dispatch need to know of the current device. Host code: no kernel in here.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>

#include "flashmma/status.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

namespace detail {

inline Status cuda_status(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return Status::success();
  return Status::error(ErrorCode::kCudaError, std::string("flashmma: ") + what + " failed: " +
                                                  cudaGetErrorName(error) + " (" +
                                                  cudaGetErrorString(error) + ")");
}

inline Status device_attribute(int& value, cudaDeviceAttr attribute, int device,
                               const char* name) {
  return cuda_status(cudaDeviceGetAttribute(&value, attribute, device), name);
}

}  // namespace detail

// Reads what validate_for_device() and the default dispatch need from the current device.
[[nodiscard]] inline Status query_device(DeviceInfo& info) {
  int device = 0;
  if (Status s = detail::cuda_status(cudaGetDevice(&device), "cudaGetDevice"); !s) return s;
  int major = 0, minor = 0, smem_optin = 0, l2_bytes = 0;
  if (Status s = detail::device_attribute(major, cudaDevAttrComputeCapabilityMajor, device,
                                          "cudaDeviceGetAttribute(ComputeCapabilityMajor)");
      !s)
    return s;
  if (Status s = detail::device_attribute(minor, cudaDevAttrComputeCapabilityMinor, device,
                                          "cudaDeviceGetAttribute(ComputeCapabilityMinor)");
      !s)
    return s;
  if (Status s = detail::device_attribute(smem_optin, cudaDevAttrMaxSharedMemoryPerBlockOptin,
                                          device,
                                          "cudaDeviceGetAttribute(MaxSharedMemoryPerBlockOptin)");
      !s)
    return s;
  if (Status s = detail::device_attribute(l2_bytes, cudaDevAttrL2CacheSize, device,
                                          "cudaDeviceGetAttribute(L2CacheSize)");
      !s)
    return s;
  int sm_count = 0, smem_per_sm = 0, threads_per_sm = 0;
  if (Status s = detail::device_attribute(sm_count, cudaDevAttrMultiProcessorCount, device,
                                          "cudaDeviceGetAttribute(MultiProcessorCount)");
      !s)
    return s;
  if (Status s = detail::device_attribute(
          smem_per_sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device,
          "cudaDeviceGetAttribute(MaxSharedMemoryPerMultiprocessor)");
      !s)
    return s;
  if (Status s = detail::device_attribute(threads_per_sm, cudaDevAttrMaxThreadsPerMultiProcessor,
                                          device,
                                          "cudaDeviceGetAttribute(MaxThreadsPerMultiProcessor)");
      !s)
    return s;
  info.sm_count = sm_count;
  info.smem_per_sm = static_cast<std::size_t>(smem_per_sm);
  info.max_threads_per_sm = threads_per_sm;
  info.compute_capability = major * 10 + minor;
  info.smem_per_block_optin = static_cast<std::size_t>(smem_optin);
  info.l2_cache_bytes = static_cast<std::size_t>(l2_bytes);
  return Status::success();
}

}  // namespace flashmma
