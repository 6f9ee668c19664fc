// SPDX-License-Identifier: Apache-2.0
// One query row of policy-aware attention on the host, in double: the logits a score policy
// makes of the scaled scores (its transform in float, as the kernels run it; -inf where it hides
// the key) and their log-sum-exp. The forward's (policy_reference.cuh), the backward's and the
// KV cache's references form their rows here, so that they agree on what a policy means.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>

#include "flashmma/attention/score_policy.hpp"

namespace flashmma {
namespace test {

// Fills logits[0, keys) for query `query` of (batch, head): scale * dot(j), transformed, or
// -inf where the policy hides key j (dot is not called there). `scores`, when not null, gets the
// scaled score of every visible key (transform_gradient's argument). Returns the row's largest
// logit: -inf when the row sees no key.
template <class Policy, class Dot>
double policy_row_logits(const Policy& policy, int64_t batch, int64_t head, int64_t query,
                         const SequenceLengths& lengths, double scale, Dot&& dot,
                         double* scores, double* logits) {
  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < lengths.seqlen_k; ++j) {
    const ScoreCoord c = score_coord(batch, head, query, j);
    logits[j] = -std::numeric_limits<double>::infinity();
    if (!policy_visible(policy, c, lengths)) continue;
    const double scaled = scale * dot(j);
    if (scores != nullptr) scores[j] = scaled;
    logits[j] = scaled;
    if constexpr (Policy::kTransformsScores) {
      logits[j] = policy.transform(static_cast<float>(scaled), c, lengths);
    }
    row_max = std::fmax(row_max, logits[j]);
  }
  return row_max;
}

// log(sum_j exp(logits[j])) for a row whose largest logit is row_max (finite).
inline double row_log_sum_exp(const double* logits, int64_t keys, double row_max) {
  double sum = 0;
  for (int64_t j = 0; j < keys; ++j) sum += std::exp(logits[j] - row_max);
  return row_max + std::log(sum);
}

}  // namespace test
}  // namespace flashmma
