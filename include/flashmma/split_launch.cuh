// SPDX-License-Identifier: Apache-2.0
// The two launches of a split-KV call (attention/split_kv.hpp): the forward kernel with
// SplitScheduler writing partials, then SplitCombineKernel writing O and the LSE. forward.cuh's
// launch path comes here where launch_plan.hpp's plan_split_kernel says: more than one split,
// variable lengths, a paged KV cache or an append (runs_on_split_kernel), packed GQA, and in
// the default dispatch every decoding-sized call.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>
#include <sstream>
#include <string>

#include "flashmma/attention/forward_args.hpp"
#include "flashmma/attention/kv_pages.hpp"
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

template <class Config, class Policy, class Pages = NoKVPages, class Dropout = NoDropout>
using SplitForwardKernel = sm80::ForwardKernel<Config, Policy, SplitScheduler, Pages, Dropout>;

// The launches of a split call, on `stream`: partials, then their merge. With one split
// (variable lengths or a paged KV cache that need no split: runs_on_split_kernel) the kernel
// writes O and the LSE itself and there is nothing to merge.
// Pages: NoKVPages, or KVPages for a paged KV cache; Dropout: attention/dropout.hpp's.
template <class Config, class Policy, class Pages, class Dropout = NoDropout>
Status launch_split_forward_on(const ForwardParams& p, const Policy& policy,
                               const ForwardArgs<typename Config::element_type>& args,
                               const SchedulerInputs& in, int splits, cudaStream_t stream) {
  using Element = typename Config::element_type;
  using Kernel = SplitForwardKernel<Config, Policy, Pages, Dropout>;
  SplitOutput output{nullptr, nullptr, SplitWorkspace{}};
  if (splits > 1) {
    if (Status s = check_workspace(p, splits); !s) return s;
    output.layout = split_layout(p, splits);
    auto* workspace = static_cast<unsigned char*>(p.workspace);
    output.partial_o = reinterpret_cast<float*>(workspace + output.layout.o_offset);
    output.partial_lse = reinterpret_cast<float*>(workspace + output.layout.lse_offset);
  }
  typename Kernel::Params kernel_params{args, policy, SplitScheduler::make_params(in, splits),
                                        output};
  if (Status s = launch_kernel<Kernel>(kernel_params, SplitScheduler::grid(in, splits), stream);
      !s || splits == 1)
    return s;
  using Combine = SplitCombineKernel<Element>;
  typename Combine::Params combine{output.partial_o, output.partial_lse, output.layout,
                                   args.o,           p.o_strides,        p.lse,
                                   p.heads_q,        lse_head_stride(p)};
  return launch_kernel<Combine>(combine, GridShape{Combine::blocks(output.layout.rows), 1, 1},
                                stream);
}

// Dropout: the kernel's (attention/dropout.hpp). One compiled with dropout runs every call
// given to it, dropout_p = 0 included (its mask then keeps every pair); those calls have no
// paged cache (validate_params, forward_with_dropout).
// kPagedKernels false (the default dispatch of a build without FLASHMMA_DISABLE_PAGEDKV's
// kernels, which refuses paged calls first) compiles no KVPages kernel.
template <class Config, class Policy, class Dropout = NoDropout, bool kPagedKernels = true>
Status launch_split_forward(const ForwardParams& p, const Policy& policy,
                            const ForwardArgs<typename Config::element_type>& args,
                            const SchedulerInputs& in, int splits, cudaStream_t stream) {
  if constexpr (Dropout::kEnabled) {
    return launch_split_forward_on<Config, Policy, NoKVPages, Dropout>(p, policy, args, in,
                                                                      splits, stream);
  } else {
    if constexpr (kPagedKernels) {
      if (paged_kv(p)) {
        return launch_split_forward_on<Config, Policy, KVPages>(p, policy, args, in, splits,
                                                                stream);
      }
    }
    return launch_split_forward_on<Config, Policy, NoKVPages>(p, policy, args, in, splits,
                                                              stream);
  }
}

}  // namespace detail
}  // namespace flashmma
