// SPDX-License-Identifier: Apache-2.0
// The policy-aware host reference: applies a score policy's visible() and transform() to every
// (query, key) pair in double, and compares a finished run's O and LSE with it. A new policy is
// tested by handing its host copy (host pointers where it holds any) here; nothing else changes.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "flashmma/attention/score_policy.hpp"
#include "support/catch.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_row.hpp"

namespace flashmma {
namespace test {

inline constexpr double kInfinity = std::numeric_limits<double>::infinity();

template <class Element>
std::vector<double> host_values(const DeviceBuffer<Element>& buffer) {
  std::vector<double> values;
  for (const Element& x : buffer.to_host()) values.push_back(to_double(x));
  return values;
}

// One sequence of a call as the reference reads it: its batch entry, its lengths, and the rows
// where it starts in packed tensors (0 in dense ones, which their batch strides place).
struct HostSequence {
  int64_t batch;
  int64_t first_query;
  int64_t first_key;
  SequenceLengths lengths;
};

// The sequences of a call, from host copies of its cu_seqlens_q, cu_seqlens_k and seqused_k
// (each empty where the call has none).
inline std::vector<HostSequence> host_sequences(const ForwardParams& p,
                                                const std::vector<int32_t>& cu_seqlens_q = {},
                                                const std::vector<int32_t>& cu_seqlens_k = {},
                                                const std::vector<int32_t>& seqused_k = {}) {
  std::vector<HostSequence> sequences;
  for (int64_t b = 0; b < p.batch; ++b) {
    HostSequence s{b, 0, 0, flashmma::sequence_lengths(p.seqlen_q, p.seqlen_k)};
    if (!cu_seqlens_q.empty()) {
      s.first_query = cu_seqlens_q[b];
      s.lengths.seqlen_q = cu_seqlens_q[b + 1] - cu_seqlens_q[b];
    }
    if (!cu_seqlens_k.empty()) {
      s.first_key = cu_seqlens_k[b];
      s.lengths.seqlen_k = cu_seqlens_k[b + 1] - cu_seqlens_k[b];
    }
    if (!seqused_k.empty()) s.lengths.seqlen_k = seqused_k[b];
    sequences.push_back(s);
  }
  return sequences;
}

// Compares a run's O and LSE (host copies, in the params' layouts) with the host reference of
// `policy` over `sequences` (host_sequences). Rows that see no key must hold O = 0 and
// LSE = -inf exactly. `lse` may be empty when the call wrote none.
template <class Element, class Policy>
void check_outputs_against_policy_reference(const ForwardParams& p,
                                            const std::vector<HostSequence>& sequences,
                                            const std::vector<double>& q,
                                            const std::vector<double>& k,
                                            const std::vector<double>& v,
                                            const std::vector<double>& o,
                                            const std::vector<float>& lse, const Policy& policy) {
  const double scale = resolved_softmax_scale(p.softmax_scale, p.head_dim);
  const int64_t d = p.head_dim;
  double error_sq = 0, reference_sq = 0, worst_lse = 0;
  int64_t empty_mismatches = 0;
  std::vector<double> logits(static_cast<std::size_t>(p.seqlen_k));
  std::vector<double> out(static_cast<std::size_t>(d));
  for (const HostSequence& seq : sequences) {
    const int64_t b = seq.batch;
    const auto q_offset = [&](int64_t i, int64_t h) {
      return element_offset(p.q_strides, b, seq.first_query + i, h);
    };
    const auto o_offset = [&](int64_t i, int64_t h) {
      return element_offset(p.o_strides, b, seq.first_query + i, h);
    };
    for (int64_t h = 0; h < p.heads_q; ++h) {
      const int64_t kv_head = h / p.group_size();
      const auto k_row = [&](int64_t j) {
        return &k[element_offset(p.k_strides, b, seq.first_key + j, kv_head)];
      };
      const auto v_row = [&](int64_t j) {
        return &v[element_offset(p.v_strides, b, seq.first_key + j, kv_head)];
      };
      for (int64_t i = 0; i < seq.lengths.seqlen_q; ++i) {
        const double* q_row = &q[q_offset(i, h)];
        const auto dot = [&](int64_t j) {
          const double* key = k_row(j);
          double sum = 0;
          for (int64_t x = 0; x < d; ++x) sum += q_row[x] * key[x];
          return sum;
        };
        const double row_max = policy_row_logits(policy, b, h, i, seq.lengths, scale, dot,
                                                  nullptr, logits.data());
        const double* kernel_o = &o[o_offset(i, h)];
        const int64_t lse_row = b * lse_batch_stride(p) + h * lse_head_stride(p) +
                                seq.first_query + i;
        const bool has_lse = !lse.empty();
        const double kernel_lse = has_lse ? lse[lse_row] : 0.0;
        if (row_max == -kInfinity) {  // no visible key: O = 0, LSE = -inf
          bool zero = !has_lse || kernel_lse == -kInfinity;
          for (int64_t x = 0; x < d; ++x) zero = zero && kernel_o[x] == 0.0;
          if (!zero) ++empty_mismatches;
          continue;
        }
        const double row_lse = row_log_sum_exp(logits.data(), seq.lengths.seqlen_k, row_max);
        std::fill(out.begin(), out.end(), 0.0);
        for (int64_t j = 0; j < seq.lengths.seqlen_k; ++j) {
          if (logits[j] == -kInfinity) continue;
          const double weight = std::exp(logits[j] - row_lse);
          const double* value = v_row(j);
          for (int64_t x = 0; x < d; ++x) out[x] += weight * value[x];
        }
        for (int64_t x = 0; x < d; ++x) {
          error_sq += (kernel_o[x] - out[x]) * (kernel_o[x] - out[x]);
          reference_sq += out[x] * out[x];
        }
        if (has_lse) {
          worst_lse = std::fmax(worst_lse,
                                std::fabs(kernel_lse - row_lse) / (1.0 + std::fabs(row_lse)));
        }
      }
    }
  }
  const double relative_l2 = reference_sq > 0 ? std::sqrt(error_sq / reference_sq) : 0.0;
  INFO("relative L2 error " << relative_l2 << ", worst LSE error " << worst_lse);
  CHECK(empty_mismatches == 0);
  CHECK(relative_l2 <= Tolerance<Element>::kRelativeL2);
  CHECK(worst_lse <= 1e-3);
}

// Compares the O and LSE that a run left in `t` (a dense case) with the host reference of
// `policy`.
template <class Element, class Policy>
void check_against_policy_reference(const CaseTensors<Element>& t, const Policy& policy) {
  check_outputs_against_policy_reference<Element>(
      t.params, host_sequences(t.params), host_values(t.q), host_values(t.k), host_values(t.v),
      host_values(t.o), t.lse.to_host(), policy);
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
