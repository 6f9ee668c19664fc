// SPDX-License-Identifier: Apache-2.0
// All sm_90a (Hopper) PTX primitives, in flashmma::ptx::sm90: wgmma, TMA, mbarrier, the async
// proxy fence, named barriers, setmaxnreg, elect.sync, stmatrix, and the constexpr layouts they
// share (swizzles, shared-memory descriptors, operand tiles, fragment maps).
//
// One gate for the whole layer: every instruction wrapper is compiled only where
// FLASHMMA_SM90A_ENABLED is set (device code for sm_90a) and traps elsewhere, including the
// instructions plain sm_90 has too (TMA, mbarrier, stmatrix): their users are sm_90a kernels
// (arch::Sm90a), which the launch path runs only from sm_90a code. The constexpr layout headers
// and tensor_map.hpp (host) build anywhere, and the first also with a host-only C++ compiler.
#pragma once

#include "flashmma/ptx/sm90/async_proxy.cuh"
#include "flashmma/ptx/sm90/elect.cuh"
#include "flashmma/ptx/sm90/mbarrier.cuh"
#include "flashmma/ptx/sm90/named_barrier.cuh"
#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/setmaxnreg.cuh"
#include "flashmma/ptx/sm90/smem_descriptor.hpp"
#include "flashmma/ptx/sm90/stmatrix.cuh"
#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/ptx/sm90/tensor_map.hpp"
#include "flashmma/ptx/sm90/tma.cuh"
#include "flashmma/ptx/sm90/wgmma.cuh"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
