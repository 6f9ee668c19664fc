// SPDX-License-Identifier: Apache-2.0
// flashmma/precompiled.hpp's functions: the default dispatch behind a plain C++ interface, so
// that code built by a host compiler alone can call it. Each one forwards to the template of
// forward.cuh or backward.cuh, whose instances the library's other units hold, so this unit
// compiles no kernel.
#include "flashmma/precompiled.hpp"

#include <cuda_runtime.h>

#include <type_traits>

#include "flashmma/backward.cuh"
#include "flashmma/forward.cuh"
#include "flashmma/launch_plan.hpp"

// cudaStream_t is CUstream_st*: the plain header's signatures are the runtime's own.
static_assert(std::is_same_v<cudaStream_t, CUstream_st*>,
              "flashmma/precompiled.hpp takes cudaStream_t as CUstream_st*");

namespace flashmma {
namespace precompiled {

Status forward(const ForwardParams& params, CUstream_st* stream) {
  return flashmma::forward(params, stream);
}

Status backward(const BackwardParams& params, CUstream_st* stream) {
  return flashmma::backward(params, stream);
}

Status forward_workspace_bytes(const ForwardParams& params, std::size_t& bytes) {
  return flashmma::forward_workspace_bytes(params, bytes);
}

std::size_t backward_workspace_bytes(const BackwardParams& params) {
  return flashmma::backward_workspace_bytes(params);
}

Status check_forward_families(const ForwardParams& params) {
  if (Status s = validate_params(params); !s) return s;
  return flashmma::check_forward_families(params);
}

Status check_backward_families(const BackwardParams& params) {
  if (Status s = validate_backward_params(params); !s) return s;
  return flashmma::check_backward_families(params);
}

int device_count() {
  int count = 0;
  return cudaGetDeviceCount(&count) == cudaSuccess ? count : 0;
}

}  // namespace precompiled
}  // namespace flashmma
