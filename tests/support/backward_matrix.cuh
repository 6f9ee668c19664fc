// SPDX-License-Identifier: Apache-2.0
// The backward tests' case matrix and policy checks, shared by every backward kernel's test
// (test_backward.cu: the portable kernel; test_backward_sm90.cu: the Hopper one): each runs
// backward<Config, Policy> over the same shapes against the fp64 reference.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "flashmma/backward.cuh"
#include "support/backward_case.cuh"
#include "support/backward_policies.hpp"
#include "support/gpu_helpers.cuh"

namespace flashmma {
namespace test {

// Odd lengths in both orders, GQA and MQA, every layout, one query, a head dim below the
// kernel's, several key and query tiles, an explicit scale, accumulation into dK and dV.
inline std::vector<BackwardCase> backward_cases(int64_t d) {
  std::vector<BackwardCase> cases = {
      backward_case(2, 128, 128, 2, 2, d, Layout::kBSHD),
      backward_case(1, 77, 133, 4, 2, d, Layout::kBHSD),         // GQA, seqlen_q < seqlen_k
      backward_case(2, 200, 64, 4, 1, d, Layout::kPaddedBSHD),   // MQA, seqlen_q > seqlen_k
      backward_case(1, 1, 50, 8, 1, d, Layout::kBSHD),           // one query
      backward_case(1, 65, 300, 2, 1, d - 8, Layout::kBSHD),     // head_dim below the kernel's
      backward_case(1, 333, 257, 2, 2, d, Layout::kBSHD),        // several key and query tiles
  };
  BackwardCase scaled = backward_case(1, 96, 96, 2, 2, d);
  scaled.softmax_scale = 0.3f;
  cases.push_back(scaled);
  BackwardCase accumulate = backward_case(1, 70, 190, 2, 1, d);
  accumulate.accumulate_dkv = true;
  cases.push_back(accumulate);
  return cases;
}

// backward<Config, Policy> on every case.
template <class Config, class Policy, class HostPolicy>
void check_backward_policy_cases(const Policy& policy, const HostPolicy& host_policy) {
  using Element = typename Config::element_type;
  for (const BackwardCase& c : backward_cases(Config::kHeadDim)) {
    check_backward_case<Element>(c, host_policy, [&](const BackwardParams& p) {
      return flashmma::backward<Config>(p, policy);
    });
  }
}

// A window alone, and softcap and ALiBi (slopes in device memory) under it.
template <class Config>
void check_window_softcap_alibi() {
  const int64_t heads = 8;
  std::vector<float> slopes;  // [batch 2, heads 8]
  for (int64_t i = 0; i < 2 * heads; ++i) slopes.push_back(std::exp2(-0.5f * (i + 1)));
  DeviceBuffer<float> device_slopes(static_cast<int64_t>(slopes.size()));
  device_slopes.copy_from_host(slopes);
  const SlidingWindow window{{}, 24, 7};
  using All = Combined<Softcap, Combined<AlibiBias, SlidingWindow>>;
  const All policy{{}, Softcap::with_cap(2.f),
                   {{}, AlibiBias{{}, device_slopes.get(), heads}, window}};
  const All host{{}, Softcap::with_cap(2.f), {{}, AlibiBias{{}, slopes.data(), heads}, window}};
  check_backward_policy_cases<Config>(window, window);
  check_backward_policy_cases<Config>(policy, host);
}

// A user's policy (ChunkedTemperature: a mask and a transform with its gradient).
template <class Config>
void check_user_policy() {
  std::vector<float> temperatures;
  for (int i = 0; i < 8; ++i) temperatures.push_back(0.5f + 0.25f * i);
  DeviceBuffer<float> device_temperatures(8);
  device_temperatures.copy_from_host(temperatures);
  ChunkedTemperature policy;
  policy.temperatures = device_temperatures.get();
  ChunkedTemperature host = policy;
  host.temperatures = temperatures.data();
  check_backward_policy_cases<Config>(policy, host);
}

// The deterministic order: 50 runs with the same bits, for full attention, the causal mask and a
// window, over many key tiles per query tile and GQA (where the default order of dQ's sums
// varies), at the config's head dim.
template <class Config>
void check_deterministic(int64_t seqlen_q, int64_t seqlen_k) {
  using Element = typename Config::element_type;
  const SlidingWindow window{{}, 300, 100};
  for (const int variant : {0, 1, 2}) {
    CAPTURE(variant);
    BackwardCase c = backward_case(2, seqlen_q, seqlen_k, 4, 2, Config::kHeadDim);
    c.deterministic = true;
    c.repeats = 50;
    const auto run = [&](const BackwardParams& p) {
      if (variant == 0) return backward<Config>(p, FullAttention{});
      if (variant == 1) return backward<Config>(p, CausalMask{});
      return backward<Config>(p, window);
    };
    if (variant == 0) check_backward_case<Element>(c, FullAttention{}, run);
    if (variant == 1) check_backward_case<Element>(c, CausalMask{}, run);
    if (variant == 2) check_backward_case<Element>(c, window, run);
  }
}

}  // namespace test
}  // namespace flashmma
