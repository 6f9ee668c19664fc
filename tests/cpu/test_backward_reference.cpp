// SPDX-License-Identifier: Apache-2.0
// The backward pass's host reference (support/backward_reference.hpp) and the policies'
// transform_gradient: each gradient the reference returns matches the central finite difference
// of the loss sum(dO * O) with respect to every element of Q, K and V, for every built-in policy
// and their combination, under GQA, both length orders and rows that see no key.
#include "support/catch.hpp"

#include <flashmma/attention/builtin_policies.hpp>
#include <flashmma/attention/score_policy.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "support/backward_reference.hpp"
#include "support/random_values.hpp"

namespace {

using flashmma::AlibiBias;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::FullAttention;
using flashmma::ProblemShape;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::test::backward_reference;
using flashmma::test::normal_values;
using flashmma::test::ReferenceDropout;

static_assert(flashmma::check_backward_policy<FullAttention>());
static_assert(flashmma::check_backward_policy<CausalMask>());
static_assert(flashmma::check_backward_policy<SlidingWindow>());
static_assert(flashmma::check_backward_policy<AlibiBias>());
static_assert(flashmma::check_backward_policy<Softcap>());
static_assert(flashmma::check_backward_policy<Combined<Softcap, Combined<AlibiBias, SlidingWindow>>>());

// sum(dO * O) for the given inputs: the loss whose gradients the reference returns.
template <class Policy>
double loss(const ProblemShape& shape, double scale, const Policy& policy,
            const std::vector<double>& q, const std::vector<double>& k,
            const std::vector<double>& v, const std::vector<double>& d_o,
            const ReferenceDropout& dropout) {
  const std::vector<double> o = backward_reference(shape, scale, policy, q, k, v, d_o, dropout).o;
  double total = 0;
  for (std::size_t i = 0; i < o.size(); ++i) total += d_o[i] * o[i];
  return total;
}

// Largest |finite difference - analytic| over every element of `x` (one of q, k, v).
template <class Policy>
double worst_difference(const ProblemShape& shape, double scale, const Policy& policy,
                        std::vector<double>& q, std::vector<double>& k, std::vector<double>& v,
                        const std::vector<double>& d_o, const ReferenceDropout& dropout,
                        std::vector<double>& x, const std::vector<double>& analytic,
                        double step) {
  double worst = 0;
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + step;
    const double up = loss(shape, scale, policy, q, k, v, d_o, dropout);
    x[i] = saved - step;
    const double down = loss(shape, scale, policy, q, k, v, d_o, dropout);
    x[i] = saved;
    worst = std::max(worst, std::fabs((up - down) / (2 * step) - analytic[i]));
  }
  return worst;
}

double largest(const std::vector<double>& values) {
  double m = 0;
  for (double x : values) m = std::max(m, std::fabs(x));
  return m;
}

// Checks dQ, dK and dV against finite differences. A policy that transforms scores runs its
// transform in float (as the kernels do), so its loss is smooth only to float rounding: a larger
// step and tolerance there.
template <class Policy>
void check_gradients(const ProblemShape& shape, const Policy& policy,
                     bool scores_have_gradient = true, const ReferenceDropout& dropout = {}) {
  const double scale = 0.7;
  std::vector<double> q = normal_values(shape.q_elements(), 1);
  std::vector<double> k = normal_values(shape.kv_elements(), 2);
  std::vector<double> v = normal_values(shape.kv_elements(), 3);
  const std::vector<double> d_o = normal_values(shape.q_elements(), 4);
  const flashmma::test::BackwardReference r =
      backward_reference(shape, scale, policy, q, k, v, d_o, dropout);
  const bool in_float = Policy::kTransformsScores;
  const double step = in_float ? 1e-3 : 1e-5;
  const double tolerance = in_float ? 2e-3 : 1e-7;
  const double dq = worst_difference(shape, scale, policy, q, k, v, d_o, dropout, q, r.dq, step);
  const double dk = worst_difference(shape, scale, policy, q, k, v, d_o, dropout, k, r.dk, step);
  const double dv = worst_difference(shape, scale, policy, q, k, v, d_o, dropout, v, r.dv, step);
  INFO("worst |finite difference - reference|: dQ " << dq << ", dK " << dk << ", dV " << dv
                                                   << " (largest gradient "
                                                   << largest(r.dq) << ", " << largest(r.dk)
                                                   << ", " << largest(r.dv) << ")");
  CHECK(dq <= tolerance * std::max(1.0, largest(r.dq)));
  CHECK(dk <= tolerance * std::max(1.0, largest(r.dk)));
  CHECK(dv <= tolerance * std::max(1.0, largest(r.dv)));
  // Not all zero, or the check would pass vacuously (but a row that sees one key has P = 1 and
  // no score gradient at all).
  CHECK((largest(r.dq) > 1e-3) == scores_have_gradient);
  CHECK(largest(r.dv) > 1e-3);
}

// GQA (4 query heads over 2), both length orders, an odd head dim's worth of columns.
const ProblemShape kWide = flashmma::make_problem_shape(2, 5, 9, 4, 2, 6);
const ProblemShape kTall = flashmma::make_problem_shape(1, 9, 5, 4, 2, 6);

TEST_CASE("the backward reference matches finite differences without and with masks",
          "[backward][reference]") {
  for (const ProblemShape& shape : {kWide, kTall}) {
    INFO("seqlen_q " << shape.seqlen_q << ", seqlen_k " << shape.seqlen_k);
    check_gradients(shape, FullAttention{});
    check_gradients(shape, CausalMask{});  // the tall case has rows that see no key
    check_gradients(shape, SlidingWindow{{}, 2, 1});
    check_gradients(shape, SlidingWindow{{}, 0, 0}, /*scores_have_gradient=*/false);
  }
}

TEST_CASE("the backward reference matches finite differences through the score transforms",
          "[backward][reference]") {
  const std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};  // one per query head
  const AlibiBias alibi{{}, slopes.data(), 0};
  const Softcap cap = Softcap::with_cap(1.5f);  // small: the tanh bends the scores hard
  for (const ProblemShape& shape : {kWide, kTall}) {
    INFO("seqlen_q " << shape.seqlen_q << ", seqlen_k " << shape.seqlen_k);
    check_gradients(shape, cap);
    check_gradients(shape, alibi);
    check_gradients(shape, Combined<AlibiBias, CausalMask>{{}, alibi, {}});
    check_gradients(shape, Combined<Softcap, Combined<AlibiBias, SlidingWindow>>{
                               {}, cap, {{}, alibi, SlidingWindow{{}, 3, 0}}});
  }
}

TEST_CASE("the backward reference matches finite differences under dropout",
          "[backward][reference][dropout]") {
  // The mask is fixed by (seed, offset), so the loss stays differentiable in Q, K and V.
  const ReferenceDropout dropout{0.3f, 0x5eed5eed12345678ull, 11};
  for (const ProblemShape& shape : {kWide, kTall}) {
    INFO("seqlen_q " << shape.seqlen_q << ", seqlen_k " << shape.seqlen_k);
    check_gradients(shape, FullAttention{}, true, dropout);
    check_gradients(shape, CausalMask{}, true, dropout);
    check_gradients(shape, Softcap::with_cap(1.5f), true, dropout);
  }
  // Dropout changes O, and p = 0 is no dropout at all.
  const std::vector<double> q = normal_values(kWide.q_elements(), 1);
  const std::vector<double> k = normal_values(kWide.kv_elements(), 2);
  const std::vector<double> v = normal_values(kWide.kv_elements(), 3);
  const std::vector<double> d_o = normal_values(kWide.q_elements(), 4);
  const auto plain = backward_reference(kWide, 0.7, FullAttention{}, q, k, v, d_o);
  const auto dropped = backward_reference(kWide, 0.7, FullAttention{}, q, k, v, d_o, dropout);
  const auto none = backward_reference(kWide, 0.7, FullAttention{}, q, k, v, d_o,
                                       ReferenceDropout{0.f, 1, 2});
  CHECK(plain.o != dropped.o);
  CHECK(plain.lse == dropped.lse);
  CHECK(plain.o == none.o);
  CHECK(plain.dq == none.dq);
}

TEST_CASE("transform_gradient is the transform's derivative", "[backward][policy]") {
  const flashmma::SequenceLengths lengths{16, 16};
  const std::vector<float> slopes = {0.5f};
  const Combined<Softcap, AlibiBias> both{{}, Softcap::with_cap(2.f), {{}, slopes.data(), 0}};
  for (float s = -6.f; s <= 6.f; s += 0.5f) {
    const flashmma::ScoreCoord c{0, 0, 9, 4};
    const float h = 1e-2f;
    const float numeric = (both.transform(s + h, c, lengths) - both.transform(s - h, c, lengths)) /
                          (2 * h);
    INFO("scaled score " << s);
    CHECK(std::fabs(both.transform_gradient(s, both.transform(s, c, lengths), c, lengths) -
                    numeric) < 1e-3f);
  }
}

}  // namespace
