// SPDX-License-Identifier: Apache-2.0
// Which kernel backward(params) runs, as host code callable from a .cpp file (the forward's
// counterpart is launch_plan.hpp): the Hopper default (traits/sm90_backward_config.hpp) on a
// compute capability 9.0 GPU whose loaded code holds sm_90a, for a dense batch whose Q, K, V and
// dO TMA can describe (every kernel head dim: 64, 128, 256); else the portable default
// (traits/backward_config.hpp), which takes every valid call.
#pragma once

#include "flashmma/backward_params.hpp"
#include "flashmma/sm90/tensor_maps.hpp"
#include "flashmma/traits/backward_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {

// `sm90a_code`: whether the Hopper backward kernel's loaded code holds sm_90a (backward.cuh asks
// the kernel's module). Params are validated (validate_backward_params).
inline bool runs_sm90_backward_default(const BackwardParams& p, const DeviceInfo& device,
                                       bool sm90a_code) {
  if (!sm90a_code || device.compute_capability != 90) return false;
  if (backward_kernel_head_dim_for(p.head_dim) == 0) return false;
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) return false;
  return sm90::check_backward_tma_layout(p).ok();
}

}  // namespace flashmma
