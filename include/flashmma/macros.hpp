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

// One feature macro per architecture, true only in device passes that have its instructions.
// A wrapper compiled where its macro is off traps (ptx/arch_guard.cuh) instead of doing nothing.
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
#define FLASHMMA_SM80_ENABLED 1
#endif
// wgmma, setmaxnreg and friends exist only in the architecture-specific sm_90a target, not in
// sm_90 (nor in any later architecture's code).
#if defined(__CUDA_ARCH__) && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define FLASHMMA_SM90A_ENABLED 1
#endif
