// SPDX-License-Identifier: Apache-2.0
// merge_softmax (attention/softmax_merge.hpp): partial softmax results over disjoint key sets
// merge into the result over their union, in any split, and empty partials follow the empty-row
// convention (O = 0, LSE = -inf) without NaNs.
#include "support/catch.hpp"

#include <flashmma/attention/softmax_merge.hpp>

#include <cmath>
#include <cstddef>
#include <iterator>
#include <random>
#include <vector>

namespace {

struct Partial {
  float lse = -INFINITY;
  std::vector<float> o;
};

// Softmax of logits[begin, end) against values (one column per output element).
Partial softmax_over(const std::vector<float>& logits, const std::vector<std::vector<float>>& values,
                     std::size_t begin, std::size_t end, std::size_t dims) {
  Partial p;
  p.o.assign(dims, 0.f);
  if (begin >= end) return p;
  double m = -INFINITY;
  for (std::size_t j = begin; j < end; ++j) m = std::fmax(m, logits[j]);
  double sum = 0;
  std::vector<double> acc(dims, 0.0);
  for (std::size_t j = begin; j < end; ++j) {
    const double w = std::exp(logits[j] - m);
    sum += w;
    for (std::size_t d = 0; d < dims; ++d) acc[d] += w * values[j][d];
  }
  p.lse = static_cast<float>(m + std::log(sum));
  for (std::size_t d = 0; d < dims; ++d) p.o[d] = static_cast<float>(acc[d] / sum);
  return p;
}

Partial merge(const Partial& a, const Partial& b) {
  const flashmma::SoftmaxMergeWeights w = flashmma::merge_softmax(a.lse, b.lse);
  Partial merged;
  merged.lse = w.lse;
  for (std::size_t d = 0; d < a.o.size(); ++d) {
    merged.o.push_back(w.weight_a * a.o[d] + w.weight_b * b.o[d]);
  }
  return merged;
}

// Random logits (one per key) and values (kDims per key).
struct Keys {
  std::vector<float> logits;
  std::vector<std::vector<float>> values;
};
Keys random_keys(unsigned seed, std::size_t keys, std::size_t dims) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.f, 3.f);
  Keys k{std::vector<float>(keys), std::vector<std::vector<float>>(keys, std::vector<float>(dims))};
  for (std::size_t j = 0; j < keys; ++j) {
    k.logits[j] = normal(rng);
    for (float& v : k.values[j]) v = normal(rng);
  }
  return k;
}

TEST_CASE("merging partial softmax results over a split of the keys gives the whole", "[merge]") {
  constexpr std::size_t kKeys = 37, kDims = 5;
  const auto [logits, values] = random_keys(7, kKeys, kDims);
  const Partial whole = softmax_over(logits, values, 0, kKeys, kDims);
  for (std::size_t split = 0; split <= kKeys; ++split) {
    const Partial merged = merge(softmax_over(logits, values, 0, split, kDims),
                                 softmax_over(logits, values, split, kKeys, kDims));
    INFO("split at " << split);
    REQUIRE(merged.lse == Approx(whole.lse).epsilon(1e-5));
    for (std::size_t d = 0; d < kDims; ++d) REQUIRE(merged.o[d] == Approx(whole.o[d]).margin(1e-5));
  }
  // Three ways, merged left to right and right to left.
  const Partial a = softmax_over(logits, values, 0, 10, kDims);
  const Partial b = softmax_over(logits, values, 10, 20, kDims);
  const Partial c = softmax_over(logits, values, 20, kKeys, kDims);
  const Partial left = merge(merge(a, b), c);
  const Partial right = merge(a, merge(b, c));
  REQUIRE(left.lse == Approx(whole.lse).epsilon(1e-5));
  REQUIRE(right.lse == Approx(whole.lse).epsilon(1e-5));
}

TEST_CASE("many partials at once: the folded LSE and merge_weight give the whole", "[merge]") {
  constexpr std::size_t kKeys = 53, kDims = 4;
  const auto [logits, values] = random_keys(11, kKeys, kDims);
  const Partial whole = softmax_over(logits, values, 0, kKeys, kDims);
  // Uneven parts, two of them empty (as split-KV's splits past a row's keys are).
  const std::size_t bounds[] = {0, 5, 5, 19, 20, 41, 53, 53};
  std::vector<Partial> parts;
  for (std::size_t i = 0; i + 1 < std::size(bounds); ++i) {
    parts.push_back(softmax_over(logits, values, bounds[i], bounds[i + 1], kDims));
  }
  float lse = -INFINITY;
  for (const Partial& p : parts) lse = flashmma::merge_softmax(lse, p.lse).lse;
  REQUIRE(lse == Approx(whole.lse).epsilon(1e-5));
  std::vector<float> o(kDims, 0.f);
  float weights = 0.f;
  for (const Partial& p : parts) {
    const float w = flashmma::merge_weight(p.lse, lse);
    if (p.lse == -INFINITY) CHECK(w == 0.f);
    weights += w;
    for (std::size_t d = 0; d < kDims; ++d) o[d] += w * p.o[d];
  }
  CHECK(weights == Approx(1.f).epsilon(1e-5));
  for (std::size_t d = 0; d < kDims; ++d) REQUIRE(o[d] == Approx(whole.o[d]).margin(1e-5));
  // Every partial empty: the union is empty and every weight 0 (no NaN).
  CHECK(flashmma::merge_weight(-INFINITY, -INFINITY) == 0.f);
}

TEST_CASE("empty partials: O = 0 and LSE = -inf, never NaN", "[merge]") {
  const flashmma::SoftmaxMergeWeights both_empty = flashmma::merge_softmax(-INFINITY, -INFINITY);
  CHECK(both_empty.lse == -INFINITY);
  CHECK(both_empty.weight_a == 0.f);
  CHECK(both_empty.weight_b == 0.f);
  const flashmma::SoftmaxMergeWeights one_empty = flashmma::merge_softmax(2.5f, -INFINITY);
  CHECK(one_empty.lse == 2.5f);
  CHECK(one_empty.weight_a == 1.f);
  CHECK(one_empty.weight_b == 0.f);
  const flashmma::SoftmaxMergeWeights other_empty = flashmma::merge_softmax(-INFINITY, -1.f);
  CHECK(other_empty.lse == -1.f);
  CHECK(other_empty.weight_a == 0.f);
  CHECK(other_empty.weight_b == 1.f);
  // Large logits do not overflow: the merge works around the larger LSE.
  const flashmma::SoftmaxMergeWeights large = flashmma::merge_softmax(1000.f, 1000.f);
  CHECK(large.lse == Approx(1000.f + std::log(2.f)));
  CHECK(large.weight_a == 0.5f);
}

}  // namespace
