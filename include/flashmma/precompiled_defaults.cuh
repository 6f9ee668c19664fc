// SPDX-License-Identifier: Apache-2.0
// The default dispatch, precompiled. Where FLASHMMA_PRECOMPILED_KERNELS is defined (the CMake
// target flashmma::kernels defines it for everything that links it), each default head dim below
// is declared an explicit instantiation that the library holds: a translation unit that calls
// flashmma::forward(params) then compiles none of the 132 default kernels and links the ones
// flashmma::kernels compiled once. Without the definition this header declares nothing, and
// flashmma stays header-only.
//
// This list is the library's list too: src/CMakeLists.txt reads it to generate the library's
// translation units (one per head dim), so that an instance added here is compiled there. A build
// of fewer element types or head dims (FLASHMMA_KERNEL_DTYPES, FLASHMMA_KERNEL_HEAD_DIMS;
// kernel_families.hpp) compiles fewer: forward(params) then never calls the others, so their
// declarations here ask nothing of the linker. precompiled_backward_defaults.cuh is the
// backward's list.
#pragma once

#include "flashmma/forward.cuh"

#ifdef FLASHMMA_PRECOMPILED_KERNELS

namespace flashmma {

extern template Status forward_default_config<__half, 32>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 64>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 96>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 128>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 160>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 192>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 224>(const ForwardParams&, cudaStream_t);
extern template Status forward_default_config<__half, 256>(const ForwardParams&, cudaStream_t);

extern template Status forward_default_config<__nv_bfloat16, 32>(const ForwardParams&,
                                                                 cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 64>(const ForwardParams&,
                                                                 cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 96>(const ForwardParams&,
                                                                 cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 128>(const ForwardParams&,
                                                                  cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 160>(const ForwardParams&,
                                                                  cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 192>(const ForwardParams&,
                                                                  cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 224>(const ForwardParams&,
                                                                  cudaStream_t);
extern template Status forward_default_config<__nv_bfloat16, 256>(const ForwardParams&,
                                                                  cudaStream_t);

}  // namespace flashmma

#endif  // FLASHMMA_PRECOMPILED_KERNELS
