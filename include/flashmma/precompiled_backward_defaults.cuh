// SPDX-License-Identifier: Apache-2.0
// The backward's default dispatch, precompiled: precompiled_defaults.cuh's counterpart for
// backward(params). Where FLASHMMA_PRECOMPILED_KERNELS is defined (flashmma::kernels defines it
// for everything that links it), each default backward head dim below is an explicit
// instantiation that the library holds, so that a unit calling flashmma::backward(params)
// compiles no backward kernel. src/CMakeLists.txt reads this list too, and compiles one
// translation unit per head dim. A build without the backward (FLASHMMA_DISABLE_BACKWARD) or
// without some element types or head dims (kernel_families.hpp) instantiates fewer; backward(params)
// then never calls the others, so their declarations here ask nothing of the linker.
#pragma once

#include "flashmma/backward.cuh"

#ifdef FLASHMMA_PRECOMPILED_KERNELS

namespace flashmma {

extern template Status backward_default_config<__half, 64>(const BackwardParams&, cudaStream_t);
extern template Status backward_default_config<__half, 128>(const BackwardParams&, cudaStream_t);
extern template Status backward_default_config<__half, 256>(const BackwardParams&, cudaStream_t);

extern template Status backward_default_config<__nv_bfloat16, 64>(const BackwardParams&,
                                                                  cudaStream_t);
extern template Status backward_default_config<__nv_bfloat16, 128>(const BackwardParams&,
                                                                   cudaStream_t);
extern template Status backward_default_config<__nv_bfloat16, 256>(const BackwardParams&,
                                                                   cudaStream_t);

}  // namespace flashmma

#endif  // FLASHMMA_PRECOMPILED_KERNELS
