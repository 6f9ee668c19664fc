// SPDX-License-Identifier: Apache-2.0
// Merging two softmax results over disjoint sets of keys: the one definition that split-KV's
// combine step and attention spread over several GPUs both use.
//
// A partial result of one query row is (lse, o): lse = log(sum of exp(logit)) over its keys
// (natural log, -inf when it saw no key) and o the row's output normalized over those keys
// (0 when it saw none). Over the union of the two key sets:
//
//   lse = log(exp(lse_a) + exp(lse_b))        computed around m = max(lse_a, lse_b)
//   o   = exp(lse_a - lse) o_a + exp(lse_b - lse) o_b
//
// Empty partials: with both empty, lse stays -inf and both weights are 0 (never -inf - -inf);
// with one empty, its weight is 0 and the other's is 1.
//
// Many partials at once (split-KV's combine step): the union's lse is merge_softmax's lse
// folded over theirs, in any order, and partial i's weight is merge_weight(lse_i, lse), the
// same exp(lse_i - lse) as above. Knowing every weight before reading any o lets a reader load
// all of the o's at once.
#pragma once

#include <cmath>

#include "flashmma/macros.hpp"

namespace flashmma {

struct SoftmaxMergeWeights {
  float lse;       // of the union
  float weight_a;  // multiplies o_a
  float weight_b;  // multiplies o_b
};

FLASHMMA_HOST_DEVICE SoftmaxMergeWeights merge_softmax(float lse_a, float lse_b) {
  const float m = fmaxf(lse_a, lse_b);
  if (m == -INFINITY) return {-INFINITY, 0.f, 0.f};
  const float a = expf(lse_a - m);  // exp(-inf) = 0 for an empty side
  const float b = expf(lse_b - m);
  const float sum = a + b;
  return {m + logf(sum), a / sum, b / sum};
}

// The weight of a partial in a union of partials (above): exp(lse_part - lse_union), 0 for an
// empty partial (and so for every partial of an empty union).
FLASHMMA_HOST_DEVICE float merge_weight(float lse_part, float lse_union) {
  return lse_part == -INFINITY ? 0.f : expf(lse_part - lse_union);
}

}  // namespace flashmma
