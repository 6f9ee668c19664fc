// SPDX-License-Identifier: Apache-2.0
// Umbrella header: include this from a .cu file and call flashmma::forward(params, stream).
#pragma once

#if !defined(__CUDACC__)
#error "flashmma/flashmma.cuh holds CUDA kernels: include it from a .cu file compiled by nvcc. Host-compiler code may include flashmma/params.hpp, status.hpp, validate.hpp, device.hpp and default_dispatch.hpp, and call a forward() compiled elsewhere (or link flashmma::kernels)."
#else

#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/forward.cuh"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"
#include "flashmma/version.hpp"
#endif
