// SPDX-License-Identifier: Apache-2.0
// The policy-aware host reference: applies a score policy's visible() and transform() to every
// (query, key) pair in double, and compares a finished run's O and LSE with it. A new policy is
// tested by handing its host copy (host pointers where it holds any) here; nothing else changes.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashmma/attention/score_policy.hpp"
#include "support/catch.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"

namespace flashmma {
namespace test {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <class Element>
std::vector<double> host_values(const DeviceBuffer<Element>& buffer) {
  std::vector<double> values;
  for (const Element& x : buffer.to_host()) values.push_back(to_double(x));
  return values;
}

// Compares the O and LSE that a run left in `t` with the host reference of `policy`. Rows that
// see no key must hold O = 0 and LSE = -inf exactly.
template <class Element, class Policy>
void check_against_policy_reference(const CaseTensors<Element>& t, const Policy& policy) {
  const std::vector<double> q = host_values(t.q);
  const std::vector<double> k = host_values(t.k);
  const std::vector<double> v = host_values(t.v);
  const std::vector<double> o = host_values(t.o);
  const std::vector<float> lse = t.lse.to_host();
  const ForwardParams& p = t.params;
  const double scale = resolved_softmax_scale(p.softmax_scale, p.head_dim);
  const SequenceLengths lengths = flashmma::sequence_lengths(p.seqlen_q, p.seqlen_k);
  const int64_t d = p.head_dim;

  double error_sq = 0, reference_sq = 0, worst_lse = 0;
  int64_t empty_mismatches = 0;
  std::vector<double> logits(static_cast<std::size_t>(p.seqlen_k));
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv_head = h / p.group_size();
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const double* q_row = &q[element_offset(p.q_strides, b, i, h)];
        double row_max = -kInfinity;
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          const ScoreCoord coord = flashmma::score_coord(b, h, i, j);
          double logit = -kInfinity;
          if (policy_visible(policy, coord, lengths)) {
            const double* k_row = &k[element_offset(p.k_strides, b, j, kv_head)];
            double dot = 0;
            for (int64_t x = 0; x < d; ++x) dot += q_row[x] * k_row[x];
            logit = scale * dot;
            if constexpr (Policy::kTransformsScores) {
              logit = policy.transform(static_cast<float>(logit), coord, lengths);
            }
          }
          logits[j] = logit;
          row_max = std::fmax(row_max, logit);
        }
        const int64_t o_offset = element_offset(p.o_strides, b, i, h);
        const double kernel_lse = lse[(b * p.heads_q + h) * p.seqlen_q + i];
        if (row_max == -kInfinity) {  // no visible key: O = 0, LSE = -inf
          bool zero = kernel_lse == -kInfinity;
          for (int64_t x = 0; x < d; ++x) zero = zero && o[o_offset + x] == 0.0;
          if (!zero) ++empty_mismatches;
          continue;
        }
        double sum = 0;
        std::vector<double> out(static_cast<std::size_t>(d), 0.0);
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          if (logits[j] == -kInfinity) continue;
          const double weight = std::exp(logits[j] - row_max);
          sum += weight;
          const double* v_row = &v[element_offset(p.v_strides, b, j, kv_head)];
          for (int64_t x = 0; x < d; ++x) out[x] += weight * v_row[x];
        }
        for (int64_t x = 0; x < d; ++x) {
          const double exact = out[x] / sum;
          error_sq += (o[o_offset + x] - exact) * (o[o_offset + x] - exact);
          reference_sq += exact * exact;
        }
        const double exact_lse = row_max + std::log(sum);
        worst_lse = std::fmax(worst_lse, std::fabs(kernel_lse - exact_lse) /
                                             (1.0 + std::fabs(exact_lse)));
      }
    }
  }
  const double relative_l2 = reference_sq > 0 ? std::sqrt(error_sq / reference_sq) : 0.0;
  INFO("relative L2 error " << relative_l2 << ", worst LSE error " << worst_lse);
  CHECK(empty_mismatches == 0);
  CHECK(relative_l2 <= Tolerance<Element>::kRelativeL2);
  CHECK(worst_lse <= 1e-3);
}

// Runs forward<Config>(params, policy) on the case and compares O and the LSE with the host
// reference of `reference_policy` (the same policy with host pointers where it holds any).
template <class Config, class Policy>
void check_policy(const AttentionCase& c, const Policy& policy, const Policy& reference_policy) {
  using Element = typename Config::element_type;
  INFO("config: " << describe_config<Config>());
  INFO("case: " << c.describe());
  CaseTensors<Element> t = make_case_tensors<Element>(c);
  const Status status = forward<Config>(t.params, policy);
  INFO("forward returned: " << status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  check_against_policy_reference(t, reference_policy);
}

// The policy tests' cases: odd lengths both ways, GQA, and a row count that leaves rows without
// keys under some windows.
inline std::vector<AttentionCase> policy_cases(int64_t head_dim) {
  return {make_case(2, 129, 129, 4, 2, head_dim, false, Layout::kBSHD),
          make_case(1, 77, 301, 2, 1, head_dim, false, Layout::kBHSD),
          make_case(1, 301, 77, 4, 4, head_dim, false, Layout::kBSHD)};
}

}  // namespace test
}  // namespace flashmma
