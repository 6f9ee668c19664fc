// SPDX-License-Identifier: Apache-2.0
// CPU tests of the reference attention (tests/support/reference.hpp) on cases small enough to
// compute by hand, and of the case matrix the GPU tests run (tests/support/attention_case.hpp).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <set>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "support/attention_case.hpp"
#include "support/reference.hpp"

namespace {

using flashmma::ForwardParams;
using flashmma::MaskKind;
using flashmma::test::AttentionCase;
using flashmma::test::Layout;
using flashmma::test::ReferencePrecision;
using flashmma::test::ReferenceProblem;

constexpr double kInfinity = std::numeric_limits<double>::infinity();

enum Tensor { kQ, kK, kV };

// Q, K and V on the host in one of the test layouts; padding holds NaN, which the reference must
// never read.
template <class Element>
struct HostAttention {
  std::vector<Element> q;
  std::vector<Element> k;
  std::vector<Element> v;
  ReferenceProblem<Element> problem;

  // value(tensor, b, s, h, d) gives each logical element.
  template <class Value>
  HostAttention(const AttentionCase& c, Value&& value) {
    using flashmma::test::from_double;
    const int64_t pitch = flashmma::test::row_pitch(c.layout, c.head_dim);
    const flashmma::TensorStrides q_strides =
        flashmma::test::layout_strides(c.layout, c.seqlen_q, c.heads_q, c.head_dim);
    const flashmma::TensorStrides kv_strides =
        flashmma::test::layout_strides(c.layout, c.seqlen_k, c.heads_kv, c.head_dim);
    const Element nan = from_double<Element>(std::numeric_limits<double>::quiet_NaN());
    q.assign(static_cast<std::size_t>(c.batch * c.seqlen_q * c.heads_q * pitch), nan);
    k.assign(static_cast<std::size_t>(c.batch * c.seqlen_k * c.heads_kv * pitch), nan);
    v.assign(k.size(), nan);
    for (int64_t b = 0; b < c.batch; ++b) {
      for (int64_t d = 0; d < c.head_dim; ++d) {
        for (int64_t h = 0; h < c.heads_q; ++h) {
          for (int64_t s = 0; s < c.seqlen_q; ++s) {
            q[flashmma::test::element_offset(q_strides, b, s, h) + d] =
                from_double<Element>(value(kQ, b, s, h, d));
          }
        }
        for (int64_t h = 0; h < c.heads_kv; ++h) {
          for (int64_t s = 0; s < c.seqlen_k; ++s) {
            const int64_t at = flashmma::test::element_offset(kv_strides, b, s, h) + d;
            k[at] = from_double<Element>(value(kK, b, s, h, d));
            v[at] = from_double<Element>(value(kV, b, s, h, d));
          }
        }
      }
    }
    static_cast<flashmma::ProblemShape&>(problem) = c;
    problem.q = q.data();
    problem.k = k.data();
    problem.v = v.data();
    problem.q_strides = q_strides;
    problem.k_strides = kv_strides;
    problem.v_strides = kv_strides;
    problem.softmax_scale =
        flashmma::test::resolved_softmax_scale(c.softmax_scale, c.head_dim);
    problem.causal = c.causal;
  }
  HostAttention(const HostAttention&) = delete;  // problem points into the vectors
  HostAttention& operator=(const HostAttention&) = delete;
};

struct Row {
  std::vector<double> out;
  double lse;
};

template <ReferencePrecision Precision = ReferencePrecision::kFp64, class Element>
Row row(const HostAttention<Element>& host, int64_t b, int64_t h, int64_t i) {
  Row r;
  r.out.assign(static_cast<std::size_t>(host.problem.head_dim), -12345.0);
  r.lse = flashmma::test::reference_row<Element, Precision>(host.problem, b, h, i, r.out.data());
  return r;
}

AttentionCase small_case(int64_t seqlen_q, int64_t seqlen_k, int64_t head_dim, bool causal) {
  AttentionCase c;
  c.seqlen_q = seqlen_q;
  c.seqlen_k = seqlen_k;
  c.head_dim = head_dim;
  c.causal = causal;
  return c;
}

// A deterministic value in [-2, 2) (exact in fp16 and bf16: a multiple of 1/64).
double pseudo_random(uint64_t index) {
  uint64_t x = index * 0x9e3779b97f4a7c15ull + 0x632be59bd9b4e019ull;
  x ^= x >> 29;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 32;
  return static_cast<double>(static_cast<int64_t>(x % 256) - 128) / 64.0;
}

double random_value(int tensor, int64_t b, int64_t s, int64_t h, int64_t d) {
  return pseudo_random(static_cast<uint64_t>((((tensor * 7 + b) * 4099 + s) * 31 + h) * 257 + d));
}

}  // namespace

TEST_CASE("reference: equal scores give the mean of the visible V rows", "[reference]") {
  // Q = 0 makes every score 0: P is uniform over the visible keys and LSE = log(count).
  const AttentionCase c = small_case(1, 5, 16, false);
  HostAttention<__half> host(c, [](int tensor, int64_t, int64_t s, int64_t, int64_t d) {
    return tensor == kQ ? 0.0 : tensor == kK ? random_value(kK, 0, s, 0, d)
                                             : static_cast<double>(s) + 0.25 * d;
  });
  const Row r = row(host, 0, 0, 0);
  for (int64_t d = 0; d < c.head_dim; ++d) {
    const double mean = (0 + 1 + 2 + 3 + 4) / 5.0 + 0.25 * d;
    REQUIRE(r.out[d] == Approx(mean).margin(1e-12));
  }
  REQUIRE(r.lse == Approx(std::log(5.0)).margin(1e-12));
}

TEST_CASE("reference: one dominant score selects its V row", "[reference]") {
  // Key 3 scores 16 * 16 = 256 (scale 1), every other key 0: P = e^-256 elsewhere.
  AttentionCase c = small_case(1, 6, 16, false);
  c.softmax_scale = 1.0f;
  HostAttention<__nv_bfloat16> host(c, [](int tensor, int64_t, int64_t s, int64_t, int64_t d) {
    if (tensor == kQ) return d == 0 ? 16.0 : 0.0;
    if (tensor == kK) return (d == 0 && s == 3) ? 16.0 : 0.0;
    return static_cast<double>(10 * s + d);
  });
  const Row r = row(host, 0, 0, 0);
  for (int64_t d = 0; d < c.head_dim; ++d) REQUIRE(r.out[d] == Approx(30.0 + d).margin(1e-9));
  REQUIRE(r.lse == Approx(256.0).margin(1e-12));
}

TEST_CASE("reference: causal mask is aligned to the bottom-right corner", "[reference]") {
  // With Q = 0, row i averages V over the keys it sees; V row j is the constant j + 1.
  auto uniform = [](int tensor, int64_t, int64_t s, int64_t, int64_t) {
    return tensor == kQ ? 0.0 : tensor == kK ? 1.0 : static_cast<double>(s + 1);
  };
  SECTION("seqlen_q < seqlen_k: row i sees keys 0..i + 2") {
    const AttentionCase c = small_case(3, 5, 8, true);
    HostAttention<__half> host(c, uniform);
    for (int64_t i = 0; i < 3; ++i) {
      const int64_t visible = i + 3;
      REQUIRE(flashmma::test::visible_key_end(host.problem, i) == visible);
      const Row r = row(host, 0, 0, i);
      const double mean = (visible + 1) / 2.0;  // mean of 1..visible
      REQUIRE(r.out[0] == Approx(mean).margin(1e-12));
      REQUIRE(r.out[7] == Approx(mean).margin(1e-12));
      REQUIRE(r.lse == Approx(std::log(static_cast<double>(visible))).margin(1e-12));
    }
  }
  SECTION("seqlen_q > seqlen_k: rows 0 and 1 see nothing") {
    const AttentionCase c = small_case(5, 3, 8, true);
    HostAttention<__half> host(c, uniform);
    for (int64_t i = 0; i < 2; ++i) {
      REQUIRE(flashmma::test::visible_key_end(host.problem, i) <= 0);
      const Row empty = row(host, 0, 0, i);
      const Row empty_low = row<ReferencePrecision::kLowPrecision>(host, 0, 0, i);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        REQUIRE(empty.out[d] == 0.0);
        REQUIRE(empty_low.out[d] == 0.0);
      }
      REQUIRE(empty.lse == -kInfinity);
      REQUIRE(empty_low.lse == -kInfinity);
    }
    for (int64_t i = 2; i < 5; ++i) {
      const int64_t visible = i - 1;
      const Row r = row(host, 0, 0, i);
      REQUIRE(r.out[3] == Approx((visible + 1) / 2.0).margin(1e-12));
      REQUIRE(r.lse == Approx(std::log(static_cast<double>(visible))).margin(1e-12));
    }
  }
  SECTION("square: the usual lower triangle") {
    const AttentionCase c = small_case(4, 4, 8, true);
    HostAttention<__half> host(c, uniform);
    for (int64_t i = 0; i < 4; ++i) REQUIRE(flashmma::test::visible_key_end(host.problem, i) == i + 1);
  }
  SECTION("non-causal rows see every key") {
    const AttentionCase c = small_case(5, 3, 8, false);
    HostAttention<__half> host(c, uniform);
    for (int64_t i = 0; i < 5; ++i) {
      REQUIRE(flashmma::test::visible_key_end(host.problem, i) == 3);
      REQUIRE(row(host, 0, 0, i).out[0] == Approx(2.0).margin(1e-12));
    }
  }
}

TEST_CASE("reference: grouped-query heads share K/V head h / (heads_q / heads_kv)",
          "[reference]") {
  // V of kv head g is the constant g + 1, so an output row names the kv head it read.
  AttentionCase c = small_case(3, 4, 16, false);
  c.heads_q = 8;
  c.heads_kv = 2;
  c.batch = 2;
  HostAttention<__half> host(c, [](int tensor, int64_t b, int64_t s, int64_t h, int64_t d) {
    return tensor == kV ? static_cast<double>(h + 1) : random_value(tensor, b, s, h, d);
  });
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads_q; ++h) {
      REQUIRE(flashmma::test::kv_head_for(host.problem, h) == h / 4);
      const Row r = row(host, b, h, 2);
      REQUIRE(r.out[5] == Approx(static_cast<double>(h / 4 + 1)).margin(1e-12));
    }
  }
  SECTION("multi-query and multi-head extremes") {
    ReferenceProblem<__half> p = host.problem;
    p.heads_kv = 1;
    REQUIRE(flashmma::test::kv_head_for(p, 7) == 0);
    p.heads_kv = 8;
    REQUIRE(flashmma::test::kv_head_for(p, 7) == 7);
  }
}

TEST_CASE("reference: BSHD, BHSD and padded layouts give identical rows", "[reference]") {
  AttentionCase c = small_case(9, 13, 24, true);
  c.batch = 2;
  c.heads_q = 4;
  c.heads_kv = 2;
  AttentionCase bhsd = c;
  bhsd.layout = Layout::kBHSD;
  AttentionCase padded = c;
  padded.layout = Layout::kPaddedBSHD;
  HostAttention<__half> host_bshd(c, random_value);
  HostAttention<__half> host_bhsd(bhsd, random_value);
  HostAttention<__half> host_padded(padded, random_value);
  int differing_rows = 0;
  for (int64_t b = 0; b < c.batch; ++b) {
    for (int64_t h = 0; h < c.heads_q; ++h) {
      for (int64_t i = 0; i < c.seqlen_q; ++i) {
        const Row a = row(host_bshd, b, h, i);
        const Row x = row(host_bhsd, b, h, i);
        const Row y = row(host_padded, b, h, i);
        // Same values, same order of operations: bitwise equal, and padding (NaN) never read.
        if (a.out != x.out || a.out != y.out || a.lse != x.lse || a.lse != y.lse) ++differing_rows;
      }
    }
  }
  REQUIRE(differing_rows == 0);
}

TEST_CASE("reference: output and LSE match a direct softmax", "[reference]") {
  AttentionCase c = small_case(5, 37, 32, false);
  c.softmax_scale = 0.3f;
  HostAttention<__nv_bfloat16> host(c, random_value);
  const double scale = static_cast<double>(0.3f);
  for (int64_t i = 0; i < c.seqlen_q; ++i) {
    // Scores are small here, so exp() needs no max subtraction.
    std::vector<double> weights(static_cast<std::size_t>(c.seqlen_k));
    double sum = 0.0;
    for (int64_t j = 0; j < c.seqlen_k; ++j) {
      double dot = 0.0;
      for (int64_t d = 0; d < c.head_dim; ++d) {
        dot += random_value(kQ, 0, i, 0, d) * random_value(kK, 0, j, 0, d);
      }
      weights[j] = std::exp(scale * dot);
      sum += weights[j];
    }
    const Row r = row(host, 0, 0, i);
    REQUIRE(r.lse == Approx(std::log(sum)).epsilon(1e-13));
    for (int64_t d = 0; d < c.head_dim; ++d) {
      double expected = 0.0;
      for (int64_t j = 0; j < c.seqlen_k; ++j) {
        expected += weights[j] / sum * random_value(kV, 0, j, 0, d);
      }
      REQUIRE(r.out[d] == Approx(expected).margin(1e-12));
    }
  }
}

TEST_CASE("reference: default scale is 1/sqrt(head_dim) as forward() computes it", "[reference]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  REQUIRE(flashmma::test::resolved_softmax_scale(nan, 64) == 0.125);
  REQUIRE(flashmma::test::resolved_softmax_scale(nan, 72) ==
          static_cast<double>(1.0f / std::sqrt(72.0f)));
  REQUIRE(flashmma::test::resolved_softmax_scale(0.3f, 64) == static_cast<double>(0.3f));

  ForwardParams p;
  p.dtype = flashmma::ScalarType::kBFloat16;
  p.batch = 2;
  p.seqlen_q = 3;
  p.seqlen_k = 5;
  p.heads_q = 4;
  p.heads_kv = 2;
  p.head_dim = 40;
  p.q_strides = flashmma::bhsd_strides(3, 4, 40);
  p.k_strides = flashmma::bshd_strides(5, 2, 40);
  p.v_strides = flashmma::bshd_strides(5, 2, 48);
  p.mask = MaskKind::kCausal;
  const ReferenceProblem<__nv_bfloat16> problem =
      flashmma::test::reference_problem<__nv_bfloat16>(p);
  REQUIRE(problem.seqlen_q == 3);
  REQUIRE(problem.seqlen_k == 5);
  REQUIRE(problem.group_size() == 2);
  REQUIRE(problem.causal);
  REQUIRE(problem.q_strides.head == 3 * 40);
  REQUIRE(problem.v_strides.row == 2 * 48);
  REQUIRE(problem.softmax_scale == static_cast<double>(1.0f / std::sqrt(40.0f)));
}

TEMPLATE_TEST_CASE("reference: low precision differs from fp64 by a little", "[reference]",
                   __half, __nv_bfloat16) {
  using Element = TestType;
  AttentionCase c = small_case(16, 64, 32, true);
  c.heads_q = 2;
  HostAttention<Element> host(c, random_value);
  double max_difference = 0.0;
  double max_magnitude = 0.0;
  int unrepresentable = 0;
  for (int64_t h = 0; h < c.heads_q; ++h) {
    for (int64_t i = 0; i < c.seqlen_q; ++i) {
      const Row exact = row(host, 0, h, i);
      const Row low = row<ReferencePrecision::kLowPrecision>(host, 0, h, i);
      REQUIRE(low.lse == exact.lse);  // the LSE never sees the rounding
      for (int64_t d = 0; d < c.head_dim; ++d) {
        max_difference = std::max(max_difference, std::fabs(low.out[d] - exact.out[d]));
        max_magnitude = std::max(max_magnitude, std::fabs(exact.out[d]));
        if (flashmma::test::round_to<Element>(low.out[d]) != low.out[d]) ++unrepresentable;
      }
    }
  }
  // Rounding each P to Element moves O by at most half an ulp of max|V| (the weights sum to 1),
  // rounding O by at most half an ulp of |O|: half an ulp is 2^-11 (fp16) or 2^-8 (bf16), and the
  // test values have |V| <= 2. Twice that bounds both with room for the second-order terms.
  constexpr double kMaxAbsV = 2.0;
  const double half_ulp =
      std::is_same<Element, __half>::value ? std::ldexp(1.0, -11) : std::ldexp(1.0, -8);
  const double bound = 2.0 * half_ulp * (max_magnitude + kMaxAbsV);
  CAPTURE(max_difference, max_magnitude, bound);
  REQUIRE(unrepresentable == 0);
  REQUIRE(max_difference > 0.0);
  REQUIRE(max_difference <= bound);
}

TEST_CASE("reference: a head_dim beyond the fixed arrays gives NaN, not an overflow",
          "[reference]") {
  const AttentionCase c = small_case(1, 2, 264, false);
  HostAttention<__half> host(c, random_value);
  const Row r = row(host, 0, 0, 0);
  REQUIRE(std::isnan(r.lse));
  REQUIRE(std::isnan(r.out[0]));
}

TEST_CASE("case matrix covers what its comment promises", "[case_matrix]") {
  const std::vector<AttentionCase> cases = flashmma::test::forward_case_matrix(64);
  const int64_t seqlens[] = {1, 7, 63, 64, 65, 127, 1000, 4097};
  constexpr int64_t kShortPartner = 65;
  CAPTURE(cases.size());
  REQUIRE(cases.size() >= 25);
  REQUIRE(cases.size() <= 40);

  std::set<std::string> names;
  std::set<std::pair<int64_t, bool>> group_causal;
  std::set<std::pair<int, bool>> layout_causal;
  int q_shorter = 0, q_longer = 0, empty_rows = 0, without_lse = 0, explicit_scale = 0;
  int long_with_short = 0, too_many_heads = 0;
  for (const AttentionCase& c : cases) {
    names.insert(c.describe());
    group_causal.insert({c.group_size(), c.causal});
    layout_causal.insert({static_cast<int>(c.layout), c.causal});
    if (c.seqlen_q < c.seqlen_k) ++q_shorter;
    if (c.seqlen_q > c.seqlen_k) ++q_longer;
    if (c.causal && c.seqlen_q > c.seqlen_k) ++empty_rows;
    if (!c.with_lse) ++without_lse;
    if (c.softmax_scale == c.softmax_scale) ++explicit_scale;
    const bool has_4097 = c.seqlen_q == 4097 || c.seqlen_k == 4097;
    if (has_4097 && std::min(c.seqlen_q, c.seqlen_k) <= kShortPartner) ++long_with_short;
    if (has_4097 && std::min(c.seqlen_q, c.seqlen_k) >= 1000 && c.heads_q > 4) ++too_many_heads;
    if (c.heads_q > 8) ++too_many_heads;
    REQUIRE(c.heads_q % c.heads_kv == 0);
    REQUIRE(c.head_dim == 64);
  }
  REQUIRE(names.size() == cases.size());  // section names must be unique
  for (const int64_t s : seqlens) {
    int as_q = 0, as_k = 0, square = 0;
    for (const AttentionCase& c : cases) {
      if (c.seqlen_q == s) ++as_q;
      if (c.seqlen_k == s) ++as_k;
      if (c.seqlen_q == s && c.seqlen_k == s) ++square;
    }
    CAPTURE(s);
    REQUIRE(as_q > square);  // also paired with another seqlen
    REQUIRE(as_k > square);
    REQUIRE(square >= 1);
  }
  for (const int64_t group : {1, 4, 8}) {
    for (const bool causal : {false, true}) REQUIRE(group_causal.count({group, causal}) == 1);
  }
  for (const Layout layout : {Layout::kBSHD, Layout::kBHSD, Layout::kPaddedBSHD}) {
    for (const bool causal : {false, true}) {
      REQUIRE(layout_causal.count({static_cast<int>(layout), causal}) == 1);
    }
  }
  REQUIRE(q_shorter >= 4);
  REQUIRE(q_longer >= 4);
  REQUIRE(empty_rows >= 3);
  REQUIRE(without_lse >= 1);
  REQUIRE(explicit_scale >= 1);
  REQUIRE(long_with_short >= 3);
  REQUIRE(too_many_heads == 0);
}

TEST_CASE("case matrix: layouts keep strides multiples of 8 for every head dim",
          "[case_matrix]") {
  for (int64_t head_dim = 8; head_dim <= 256; head_dim += 8) {
    for (const Layout layout : {Layout::kBSHD, Layout::kBHSD, Layout::kPaddedBSHD}) {
      const flashmma::TensorStrides s = flashmma::test::layout_strides(layout, 7, 3, head_dim);
      const bool multiples = s.batch % 8 == 0 && s.head % 8 == 0 && s.row % 8 == 0;
      REQUIRE(multiples);
      REQUIRE(flashmma::test::layout_elements(layout, 2, 7, 3, head_dim) == 2 * s.batch);
    }
  }
}

TEST_CASE("case matrix: routed head dims run on the kernel they are tested with",
          "[case_matrix]") {
  for (const int kernel_head_dim : flashmma::kSupportedHeadDims) {
    const std::vector<int64_t> dims = flashmma::test::routed_head_dims(kernel_head_dim);
    REQUIRE(!dims.empty());
    for (const int64_t dim : dims) {
      CAPTURE(kernel_head_dim, dim);
      REQUIRE(dim % 8 == 0);
      REQUIRE(flashmma::kernel_head_dim_for(dim) == kernel_head_dim);
    }
  }
  for (const int64_t dim : {40, 72, 136, 200, 248}) {
    bool covered = false;
    for (const int kernel_head_dim : flashmma::kSupportedHeadDims) {
      for (const int64_t routed : flashmma::test::routed_head_dims(kernel_head_dim)) {
        if (routed == dim) covered = true;
      }
    }
    CAPTURE(dim);
    REQUIRE(covered);
  }
}
