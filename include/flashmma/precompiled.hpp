// SPDX-License-Identifier: Apache-2.0
// The default dispatch of flashmma::kernels as plain functions, for code that a host compiler
// builds alone (a .cpp file, no nvcc, no CUDA header): link flashmma::kernels and call
//
//   flashmma::Status s = flashmma::precompiled::forward(params, stream);
//
// They run what flashmma::forward(params) and flashmma::backward(params) of forward.cuh and
// backward.cuh run, from the library's instances. Their own namespace keeps them apart from
// those templates, which a .cu file may see beside them. The stream is a cudaStream_t
// (CUstream_st* is its type), declared here so that no CUDA header is needed.
#pragma once

#include <cstddef>

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"

struct CUstream_st;

namespace flashmma {
namespace precompiled {

// forward(params, stream): validates, then launches on `stream` (nullptr: the default stream).
[[nodiscard]] Status forward(const ForwardParams& params, CUstream_st* stream = nullptr);

// backward(params, stream), likewise; params.workspace must hold backward_workspace_bytes.
[[nodiscard]] Status backward(const BackwardParams& params, CUstream_st* stream = nullptr);

// The workspace bytes forward(params) needs (launch_plan.hpp's forward_workspace_bytes).
[[nodiscard]] Status forward_workspace_bytes(const ForwardParams& params, std::size_t& bytes);

// The workspace bytes backward(params) needs (backward_params.hpp's backward_workspace_bytes).
std::size_t backward_workspace_bytes(const BackwardParams& params);

// Whether this library holds the kernels a call needs (kernel_families.hpp): validation's
// error, the error that names the option that would build them, or success. No GPU is needed.
[[nodiscard]] Status check_forward_families(const ForwardParams& params);
[[nodiscard]] Status check_backward_families(const BackwardParams& params);

// The number of CUDA devices the runtime sees (0 where there is none, or no driver).
int device_count();

}  // namespace precompiled
}  // namespace flashmma
