// SPDX-License-Identifier: Apache-2.0
// Umbrella header: include this from a .cu file and call flashmma::forward(params, stream).
// From a host compiler, forward.cuh (first below) stops with the one #error that says what host
// code may include instead.
#pragma once

#include "flashmma/forward.cuh"

#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate.hpp"
#include "flashmma/version.hpp"
