// SPDX-License-Identifier: Apache-2.0
// The two launches of a split-KV call (attention/split_kv.hpp): the forward kernel with
// SplitScheduler writing partials, then SplitCombineKernel writing O and the LSE. forward.cuh's
// launch path comes here when the plan (launch_plan.hpp) has more than one split.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/scheduler.hpp"
#include "flashmma/attention/split_combine.cuh"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/launch.cuh"
#include "flashmma/launch_plan.hpp"
#include "flashmma/params.hpp"
#include "flashmma/sm80/forward_kernel.cuh"
#include "flashmma/status.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/validate.hpp"

namespace flashmma {
namespace detail {

template <class Config, class Policy>
using SplitForwardKernel = sm80::ForwardKernel<Config, Policy, SplitScheduler>;

// The two launches of a split call, on `stream`: partials, then their merge.
template <class Config, class Policy>
Status launch_split_forward(const ForwardParams& p, const Policy& policy,
                            const ForwardArgs<typename Config::element_type>& args,
                            const SchedulerInputs& in, int splits, cudaStream_t stream) {
  using Element = typename Config::element_type;
  using Kernel = SplitForwardKernel<Config, Policy>;
  if (Status s = check_workspace(p, splits); !s) return s;
  const SplitWorkspace layout = split_layout(p, splits);
  auto* workspace = static_cast<unsigned char*>(p.workspace);
  float* partial_o = reinterpret_cast<float*>(workspace + layout.o_offset);
  float* partial_lse = reinterpret_cast<float*>(workspace + layout.lse_offset);
  typename Kernel::Params kernel_params{args, policy, SplitScheduler::make_params(in, splits),
                                        SplitOutput{partial_o, partial_lse, layout}};
  if (Status s = launch_kernel<Kernel>(kernel_params, SplitScheduler::grid(in, splits), stream);
      !s)
    return s;
  using Combine = SplitCombineKernel<Element>;
  typename Combine::Params combine{partial_o, partial_lse, layout,
                                   args.o,    p.o_strides, p.lse,
                                   p.heads_q, p.seqlen_q};
  return launch_kernel<Combine>(combine, GridShape{Combine::blocks(layout.rows), 1, 1}, stream);
}

}  // namespace detail
}  // namespace flashmma
