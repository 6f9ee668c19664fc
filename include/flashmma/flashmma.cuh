// SPDX-License-Identifier: Apache-2.0
// Umbrella header: include this and call flashmma::forward(params, stream).
#pragma once

#include "flashmma/forward.cuh"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"
