// SPDX-License-Identifier: Apache-2.0
// Portability macros shared by every header. Kept tiny on purpose.
#pragma once

// Functions that the kernels call and the CPU tests check: plain inline when built by a host
// compiler, __host__ __device__ under nvcc.
#if defined(__CUDACC__)
#define FLASHMMA_HOST_DEVICE __host__ __device__ __forceinline__
#define FLASHMMA_DEVICE __device__ __forceinline__
#else
#define FLASHMMA_HOST_DEVICE inline
#endif

// One feature macro per architecture, true only in device passes for that architecture.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FLASHMMA_SM80_ENABLED 1
#endif
