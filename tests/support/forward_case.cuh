// SPDX-License-Identifier: Apache-2.0
// Runs one AttentionCase through a forward entry point and checks it against the reference, so
// that each forward test file is a loop over cases.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <string>
#include <utility>

#include "support/catch.hpp"

#include "flashmma/default_dispatch.hpp"
#include "flashmma/forward.cuh"
#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "support/attention_case.hpp"
#include "support/gpu_helpers.cuh"
#include "support/reference.hpp"

namespace flashmma {
namespace test {

// The device tensors of one case and the params that describe them.
template <class Element>
struct CaseTensors {
  DeviceBuffer<Element> q;
  DeviceBuffer<Element> k;
  DeviceBuffer<Element> v;
  DeviceBuffer<Element> o;
  DeviceBuffer<float> lse;  // empty when the case skips the LSE
  ForwardParams params;
};

// Allocates a case's tensors (each followed by kGuardElements), fills Q, K and V with N(0, 1)
// drawn from the case's seed (NaN in padding and guard), and poisons O and the LSE.
template <class Element>
CaseTensors<Element> make_case_tensors(const AttentionCase& c) {
  CaseTensors<Element> t;
  const int64_t pitch = row_pitch(c.layout, c.head_dim);
  const int64_t q_elements = layout_elements(c.layout, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  const int64_t kv_elements =
      layout_elements(c.layout, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  t.q = DeviceBuffer<Element>(q_elements + kGuardElements);
  t.k = DeviceBuffer<Element>(kv_elements + kGuardElements);
  t.v = DeviceBuffer<Element>(kv_elements + kGuardElements);
  t.o = DeviceBuffer<Element>(q_elements + kGuardElements);
  const uint64_t seed = c.seed();
  fill_normal(t.q, mix64(seed + 1), q_elements, pitch, c.head_dim);
  fill_normal(t.k, mix64(seed + 2), kv_elements, pitch, c.head_dim);
  fill_normal(t.v, mix64(seed + 3), kv_elements, pitch, c.head_dim);
  poison(t.o);
  if (c.with_lse) {
    t.lse = DeviceBuffer<float>(c.lse_elements() + kGuardElements);
    poison(t.lse);
  }

  ForwardParams& p = t.params;
  static_cast<ProblemShape&>(p) = c;
  p.dtype = ElementTraits<Element>::kScalarType;
  p.q = t.q.get();
  p.k = t.k.get();
  p.v = t.v.get();
  p.o = t.o.get();
  p.lse = c.with_lse ? t.lse.get() : nullptr;
  p.q_strides = layout_strides(c.layout, c.seqlen_q, c.heads_q, c.head_dim);
  p.k_strides = layout_strides(c.layout, c.seqlen_k, c.heads_kv, c.head_dim);
  p.v_strides = p.k_strides;
  p.o_strides = p.q_strides;
  p.softmax_scale = c.softmax_scale;
  p.mask = c.causal ? MaskKind::kCausal : MaskKind::kNone;
  return t;
}

// Checks a finished forward call's O and LSE against the reference of every batch.
template <class Element>
void require_matches_reference(const CaseTensors<Element>& t) {
  const ReferenceRows ref =
      compute_reference(reference_problem<Element>(t.params), 0, t.params.batch);
  const DeviceBuffer<float>* lse = t.params.lse != nullptr ? &t.lse : nullptr;
  const AccuracyStats stats = compare_with_reference(t.o, t.params.o_strides, lse, ref);
  require_accurate<Element>(stats);
}

// Runs `launch(params)` (a forward entry point) on the case and checks the result.
template <class Element, class Launch>
void check_forward_case(const AttentionCase& c, Launch&& launch) {
  INFO("case: " << c.describe());
  CaseTensors<Element> t = make_case_tensors<Element>(c);
  const Status status = std::forward<Launch>(launch)(t.params);
  INFO("forward returned: " << status.message());
  const bool launched = status.ok();
  REQUIRE(launched);
  FLASHMMA_CUDA_CHECK(cudaGetLastError());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  require_matches_reference(t);
}

// forward<Config> with the policy a case's mask field runs as (builtin_policy_for: the causal
// mask, or no mask where the causal one hides no key, as for one query row), through
// forward<Config, Policy>: the kernel forward<Config>(params) runs for that field, and the only
// one a test of the case needs compiled (forward<Config>(params) compiles every built-in policy's:
// six kernels per config, eight on Hopper, which made each config's tests several times longer
// to build). test_forward_variant_params and test_forward_api run the fields' path.
template <class Config>
Status forward_case_policy(const ForwardParams& params) {
  ForwardParams p = params;
  p.mask = MaskKind::kNone;  // the policy carries it
  if (builtin_policy_for(params) == BuiltinPolicy::kCausalMask) {
    return forward<Config>(p, CausalMask{});
  }
  return forward<Config>(p, FullAttention{});
}

// One case through forward<Config>.
template <class Config>
void check_config_case(const AttentionCase& c) {
  INFO("config: " << describe_config<Config>());
  check_forward_case<typename Config::element_type>(c, forward_case_policy<Config>);
}

// The whole matrix for one config: forward_case_matrix at the config's head dim, then the
// routed head dims below it. Each case is its own Catch2 section, so one failure does not hide
// the others.
template <class Config>
void check_config_case_matrix() {
  for (const AttentionCase& c : forward_case_matrix(Config::kHeadDim)) {
    DYNAMIC_SECTION(c.describe()) { check_config_case<Config>(c); }
  }
  for (const int64_t head_dim : routed_head_dims(Config::kHeadDim)) {
    for (const AttentionCase& c : routed_head_dim_cases(head_dim)) {
      DYNAMIC_SECTION(c.describe()) { check_config_case<Config>(c); }
    }
  }
}

}  // namespace test
}  // namespace flashmma
