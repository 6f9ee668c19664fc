// SPDX-License-Identifier: Apache-2.0
// All PTX primitives.
#pragma once

#include "flashmma/ptx/cp_async.cuh"
#include "flashmma/ptx/grid_dependency.cuh"
#include "flashmma/ptx/ldmatrix.cuh"
#include "flashmma/ptx/math.cuh"
#include "flashmma/ptx/mma.cuh"
#include "flashmma/ptx/shuffle.cuh"
#include "flashmma/ptx/smem.cuh"
