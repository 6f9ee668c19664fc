// SPDX-License-Identifier: Apache-2.0
// Dropout, forward and backward (forward_with_dropout, backward_with_dropout): O, the LSE and
// dQ, dK, dV against the fp64 host reference drawing the same mask (attention/philox.hpp), over
// the three default backward tiles and their head dims (the forward on the split kernel and on
// the sm_90a kernel, which draw the mask on fragments of their own), odd lengths, GQA, every layout, the
// causal mask, a window and softcap, packed sequences, and the deterministic mode; then what
// dropout_p = 0 gives, and the refusals (plain forward<Config> and backward<Config> compile no
// dropout; paged caches and appends take none; p outside [0, 1)).
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/backward.cuh"
#include "flashmma/forward.cuh"
#include "support/attention_case.hpp"
#include "support/backward_case.cuh"
#include "support/gpu_helpers.cuh"

namespace {

using flashmma::BackwardParams;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::ForwardParams;
using flashmma::FullAttention;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::Status;
using flashmma::test::BackwardCase;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;
using flashmma::test::LayoutTensor;
using flashmma::test::ReferenceDropout;

// (forward tile, Hopper forward tile, backward tile) of one element type and head dim: the
// split kernel's and the Hopper default's configs (where the default dispatch runs dropout) and
// the default backward tile.
template <class Element, int HeadDim>
struct Tiles {
  using Forward = flashmma::SplitKernelConfigT<Element, HeadDim>;
  using Hopper = typename flashmma::Sm90DefaultConfig<Element, HeadDim>::type;
  using Backward = flashmma::DefaultBackwardConfigT<Element, HeadDim>;
};
using DropoutTiles =
    std::tuple<Tiles<__half, 64>, Tiles<__nv_bfloat16, 128>, Tiles<__half, 256>>;

constexpr ReferenceDropout kDropout{0.17f, 0x243f6a8885a308d3ull, 5};

// forward_with_dropout<Config>(p, policy) on the case: O and the LSE against the reference.
template <class Config, class Policy, class HostPolicy>
void check_forward(const BackwardCase& c, const Policy& policy, const HostPolicy& host_policy) {
  using Element = typename Config::element_type;
  INFO(c.describe());
  const double scale = flashmma::test::resolved_softmax_scale(c.softmax_scale, c.head_dim);
  const auto rounded = [](std::vector<double> values) {
    for (double& x : values) x = flashmma::test::round_to<Element>(x);
    return values;
  };
  const unsigned seed = static_cast<unsigned>(c.seqlen_q * 13 + c.seqlen_k + c.head_dim);
  const std::vector<double> q = rounded(flashmma::test::normal_values(c.q_elements(), seed));
  const std::vector<double> k = rounded(flashmma::test::normal_values(c.kv_elements(), seed + 1));
  const std::vector<double> v = rounded(flashmma::test::normal_values(c.kv_elements(), seed + 2));
  const std::vector<double> d_o(q.size(), 0.0);
  const flashmma::test::BackwardReference ref =
      flashmma::test::backward_reference(c, scale, host_policy, q, k, v, d_o, c.dropout);

  LayoutTensor<Element> q_t(c.layout, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  LayoutTensor<Element> o_t(c.layout, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  LayoutTensor<Element> k_t(c.layout, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  LayoutTensor<Element> v_t(c.layout, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  q_t.upload(&q);
  k_t.upload(&k);
  v_t.upload(&v);
  o_t.upload(nullptr);
  DeviceBuffer<float> lse(c.batch * c.heads_q * c.seqlen_q);

  ForwardParams p;
  static_cast<flashmma::ProblemShape&>(p) = c;
  p.dtype = flashmma::ElementTraits<Element>::kScalarType;
  p.q = q_t.buffer.get();
  p.k = k_t.buffer.get();
  p.v = v_t.buffer.get();
  p.o = o_t.buffer.get();
  p.lse = lse.get();
  p.q_strides = q_t.strides;
  p.k_strides = k_t.strides;
  p.v_strides = v_t.strides;
  p.o_strides = o_t.strides;
  p.softmax_scale = c.softmax_scale;
  p.dropout_p = c.dropout.p;
  p.dropout_seed = c.dropout.seed;
  p.dropout_offset = c.dropout.offset;
  const Status status = flashmma::forward_with_dropout<Config>(p, policy);
  INFO(status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());

  int64_t lost = 0;
  const std::vector<double> o = o_t.download(lost);
  const double error = flashmma::test::relative_l2(o, ref.o);
  INFO("O: relative L2 error " << error);
  CHECK(flashmma::test::all_finite(o));
  CHECK(error <= flashmma::test::Tolerance<Element>::kRelativeL2);
  CHECK(lost == 0);
  const std::vector<float> got_lse = lse.to_host();
  double worst = 0;
  for (std::size_t i = 0; i < got_lse.size(); ++i) {
    if (std::isinf(ref.lse[i])) {
      CHECK(std::isinf(got_lse[i]));
    } else {
      worst = std::fmax(worst, std::fabs(got_lse[i] - ref.lse[i]));
    }
  }
  INFO("LSE: worst difference " << worst);
  CHECK(worst < 1e-3);  // dropout leaves the LSE that of the probabilities before it
}

std::vector<BackwardCase> dropout_cases(int64_t d) {
  using flashmma::test::backward_case;
  std::vector<BackwardCase> cases = {
      backward_case(2, 128, 128, 2, 2, d, Layout::kBSHD),
      backward_case(1, 77, 133, 4, 2, d, Layout::kBHSD),        // GQA, seqlen_q < seqlen_k
      backward_case(2, 200, 64, 4, 1, d, Layout::kPaddedBSHD),  // MQA, seqlen_q > seqlen_k
      backward_case(1, 65, 65, 2, 1, d - 8, Layout::kBSHD),     // head_dim below the kernel's
  };
  for (BackwardCase& c : cases) c.dropout = kDropout;
  cases[1].dropout.p = 0.5f;
  cases[2].dropout.offset = 77;
  return cases;
}

template <class Tile, class Policy, class HostPolicy>
void check_policy(const Policy& policy, const HostPolicy& host_policy) {
  using Element = typename Tile::Backward::element_type;
  for (const BackwardCase& c : dropout_cases(Tile::Backward::kHeadDim)) {
    check_forward<typename Tile::Forward>(c, policy, host_policy);
    check_forward<typename Tile::Hopper>(c, policy, host_policy);
    flashmma::test::check_backward_case<Element>(c, host_policy, [&](const BackwardParams& p) {
      return flashmma::backward_with_dropout<typename Tile::Backward>(p, policy);
    });
  }
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("dropout: forward and backward against the reference's mask",
                        "[gpu][dropout]", DropoutTiles) {
  check_policy<TestType>(FullAttention{}, FullAttention{});
  check_policy<TestType>(CausalMask{}, CausalMask{});
}

TEST_CASE("dropout: a window with softcap, and the built-in policies of params' fields",
          "[gpu][dropout]") {
  using Tile = Tiles<__half, 64>;
  using Policy = Combined<Softcap, SlidingWindow>;
  const Policy policy{{}, Softcap::with_cap(3.f), SlidingWindow{{}, 20, 5}};
  check_policy<Tile>(policy, policy);
  // backward_with_dropout<Config>(p) and forward_with_dropout<Config>(p): the causal mask from
  // params.mask.
  BackwardCase c = flashmma::test::backward_case(1, 90, 90, 2, 2, 64);
  c.dropout = kDropout;
  flashmma::test::check_backward_case<__half>(c, CausalMask{}, [](BackwardParams p) {
    p.mask = flashmma::MaskKind::kCausal;
    return flashmma::backward_with_dropout<Tile::Backward>(p);
  });
}

TEMPLATE_LIST_TEST_CASE("dropout: packed sequences draw each sequence's mask by its index",
                        "[gpu][dropout][varlen]", DropoutTiles) {
  using Element = typename TestType::Backward::element_type;
  const std::vector<int32_t> lengths_q = {5, 0, 77, 130, 1};
  const std::vector<int32_t> lengths_k = {64, 9, 200, 130, 0};
  const auto run = [](const auto& policy) {
    return [&policy](const BackwardParams& p) {
      return flashmma::backward_with_dropout<typename TestType::Backward>(p, policy);
    };
  };
  flashmma::test::check_backward_varlen_case<Element>(lengths_q, lengths_k, 4, 2,
                                                      TestType::Backward::kHeadDim, CausalMask{},
                                                      run(CausalMask{}), kDropout);
}

TEST_CASE("dropout: deterministic gradients give the same bits in every run", "[gpu][dropout]") {
  using Tile = Tiles<__half, 64>;
  BackwardCase c = flashmma::test::backward_case(2, 600, 700, 4, 2, 64);
  c.dropout = kDropout;
  c.deterministic = true;
  c.repeats = 20;
  flashmma::test::check_backward_case<__half>(c, FullAttention{}, [](const BackwardParams& p) {
    return flashmma::backward_with_dropout<Tile::Backward>(p, FullAttention{});
  });
}

TEST_CASE("dropout: p = 0 on the dropout kernels is no dropout", "[gpu][dropout]") {
  using Tile = Tiles<__nv_bfloat16, 128>;
  BackwardCase c = flashmma::test::backward_case(1, 100, 150, 4, 2, 128);
  c.dropout = ReferenceDropout{0.f, 1234, 0};
  check_forward<Tile::Forward>(c, CausalMask{}, CausalMask{});
  flashmma::test::check_backward_case<__nv_bfloat16>(c, CausalMask{}, [](const BackwardParams& p) {
    return flashmma::backward_with_dropout<Tile::Backward>(p, CausalMask{});
  });
}

TEST_CASE("dropout: refusals name the field and launch nothing", "[gpu][dropout]") {
  using Forward = flashmma::SplitKernelConfigT<__half, 64>;
  using Backward = flashmma::DefaultBackwardConfigT<__half, 64>;
  DeviceBuffer<__half> q(64 * 64), k(64 * 64), v(64 * 64), o(64 * 64);
  ForwardParams p;
  static_cast<flashmma::ProblemShape&>(p) = flashmma::make_problem_shape(1, 64, 64, 1, 1, 64);
  p.q = q.get();
  p.k = k.get();
  p.v = v.get();
  p.o = o.get();
  p.q_strides = p.k_strides = p.v_strides = p.o_strides = flashmma::bshd_strides(64, 1, 64);
  p.dropout_p = 0.1f;
  const auto message_has = [](const Status& s, const std::string& text) {
    INFO(s.message());
    CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
    CHECK(s.message().find(text) != std::string::npos);
  };
  // forward<Config> compiles no dropout kernel.
  message_has(flashmma::forward<Forward>(p), "forward_with_dropout<Config>");
  // backward<Config> likewise, on a call that is otherwise complete.
  DeviceBuffer<__half> d_o(64 * 64), dq(64 * 64), dk(64 * 64), dv(64 * 64);
  DeviceBuffer<float> lse(64);
  BackwardParams b;
  static_cast<ForwardParams&>(b) = p;
  b.lse = lse.get();
  b.d_o = d_o.get();
  b.dq = dq.get();
  b.dk = dk.get();
  b.dv = dv.get();
  b.do_strides = b.dq_strides = b.dk_strides = b.dv_strides = p.q_strides;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(flashmma::backward_workspace_bytes(b)));
  b.workspace = workspace.get();
  b.workspace_bytes = workspace.bytes();
  REQUIRE(flashmma::validate_backward_params(b).ok());
  message_has(flashmma::backward<Backward>(b), "backward_with_dropout<Config>");
  ForwardParams bad = p;
  bad.dropout_p = 1.f;
  message_has(flashmma::forward_with_dropout<Forward>(bad), "dropout_p must be in [0, 1)");
  bad.dropout_p = std::nanf("");
  message_has(flashmma::forward_with_dropout<Forward>(bad), "dropout_p must be in [0, 1)");
  DeviceBuffer<int32_t> table(1);
  bad = p;
  bad.block_table = table.get();
  bad.block_table_batch_stride = 1;
  bad.page_size = 64;
  bad.num_pages = 1;
  message_has(flashmma::forward_with_dropout<Forward>(bad), "not with block_table");
  bad.dropout_p = 0.f;  // forward_with_dropout takes training calls only, p = 0 too
  message_has(flashmma::forward_with_dropout<Forward>(bad), "forward_with_dropout runs training calls");
}
