// SPDX-License-Identifier: Apache-2.0
// What the forward kernel reads: the params with typed pointers and the scale folded
// (filled by make_kernel_args() in forward.cuh).
#pragma once

#include <cstdint>

#include "flashmma/params.hpp"

namespace flashmma {

template <class Element>
struct ForwardKernelArgs {
  const Element* q;
  const Element* k;
  const Element* v;
  Element* o;
  float* lse;  // nullptr: not written
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t heads_q;
  int64_t group_size;  // heads_q / heads_kv
  int head_dim;        // runtime head dim, <= Config::kHeadDim
  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  TensorStrides o_strides;
  float softmax_scale;
  float softmax_scale_log2;  // softmax_scale * log2(e)
  int64_t causal_groups;  // (head, batch) pair groups of the causal block order (block_order.cuh)
};

}  // namespace flashmma
