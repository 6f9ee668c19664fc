// SPDX-License-Identifier: Apache-2.0
// The Hopper backward kernel (sm90::BackwardKernel, through backward<Sm90BackwardTileConfig>)
// against the fp64 host reference (support/backward_reference.hpp): the three defaults (d = 64
// with BlockM 128, dQ split by query rows; d = 128 with BlockM 64, dQ split by head-dim columns;
// d = 256, the consumers splitting the head dim), a head dim padded to 128 in shared memory, three
// stages; odd lengths in both orders, GQA and MQA,
// every layout, head dims below the kernel's, rows that see no key, an explicit scale,
// accumulation into dK and dV; every built-in policy and a user's own; dropout; the
// deterministic order; and the default dispatch choosing this kernel on the GPU. Built for sm_90a
// only; it skips elsewhere (test_sm90_support.cuh).
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/backward.cuh"
#include "gpu/test_sm90_support.cuh"
#include "support/attention_case.hpp"
#include "support/backward_case.cuh"
#include "support/backward_matrix.cuh"
#include "support/gpu_helpers.cuh"

namespace {

using flashmma::BackwardParams;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::FullAttention;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::Sm90BackwardTileConfig;
using flashmma::Status;
using flashmma::test::BackwardCase;
using flashmma::test::DeviceBuffer;
using flashmma::test::ReferenceDropout;

using DefaultConfigs = std::tuple<flashmma::Sm90DefaultBackwardConfigT<__half, 64>,
                                  flashmma::Sm90DefaultBackwardConfigT<__nv_bfloat16, 128>,
                                  flashmma::Sm90DefaultBackwardConfigT<__half, 256>>;
using Configs = decltype(std::tuple_cat(
    DefaultConfigs{}, std::tuple<Sm90BackwardTileConfig<__nv_bfloat16, 96, 64>,
                                 Sm90BackwardTileConfig<__half, 128, 64, /*Stages=*/3>>{}));

}  // namespace

TEMPLATE_LIST_TEST_CASE("sm90 backward: full attention and the causal mask",
                        "[gpu][sm90][backward]", Configs) {
  flashmma::test::check_backward_policy_cases<TestType>(FullAttention{}, FullAttention{});
  flashmma::test::check_backward_policy_cases<TestType>(CausalMask{}, CausalMask{});
}

TEMPLATE_LIST_TEST_CASE("sm90 backward: windows, softcap and ALiBi together",
                        "[gpu][sm90][backward]", DefaultConfigs) {
  flashmma::test::check_window_softcap_alibi<TestType>();
}

TEST_CASE("sm90 backward: a user's policy with a mask and a transform", "[gpu][sm90][backward]") {
  flashmma::test::check_user_policy<flashmma::Sm90DefaultBackwardConfigT<__nv_bfloat16, 128>>();
}

TEMPLATE_LIST_TEST_CASE("sm90 backward: dropout against the reference's mask",
                        "[gpu][sm90][backward][dropout]", DefaultConfigs) {
  using Element = typename TestType::element_type;
  const ReferenceDropout dropout{0.17f, 0x243f6a8885a308d3ull, 5};
  std::vector<BackwardCase> cases = flashmma::test::backward_cases(TestType::kHeadDim);
  cases.erase(cases.begin() + 5, cases.end());
  for (BackwardCase& c : cases) c.dropout = dropout;
  cases[1].dropout.p = 0.5f;
  cases[2].dropout.offset = 77;
  const SlidingWindow window{{}, 30, 2};
  for (const BackwardCase& c : cases) {
    flashmma::test::check_backward_case<Element>(c, CausalMask{}, [](const BackwardParams& p) {
      return flashmma::backward_with_dropout<TestType>(p, CausalMask{});
    });
    flashmma::test::check_backward_case<Element>(c, window, [&](const BackwardParams& p) {
      return flashmma::backward_with_dropout<TestType>(p, window);
    });
  }
}

TEST_CASE("sm90 backward: the deterministic mode gives the same bits in every run",
          "[gpu][sm90][backward]") {
  // d = 64 (dQ's vector reductions) and d = 256 (its staging tile and bulk reductions).
  flashmma::test::check_deterministic<flashmma::Sm90DefaultBackwardConfigT<__half, 64>>(1000, 1100);
  flashmma::test::check_deterministic<flashmma::Sm90DefaultBackwardConfigT<__half, 256>>(
      500, 700);
}

// backward(params) is a switch over backward_default_config<Element, HeadDim>; the test calls one
// directly, so that this file compiles that head dim's defaults only (30 kernels, not the
// dispatch's 180).
TEST_CASE("sm90 backward: the default of a head dim runs it on this GPU, with params' fields",
          "[gpu][sm90][backward]") {
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  const bool loaded = flashmma::detail::sm90a_code_loaded<flashmma::sm90::BackwardKernel<
      flashmma::Sm90DefaultBackwardConfigT<__nv_bfloat16, 128>, FullAttention>>();
  REQUIRE(loaded);
  BackwardParams shape;
  static_cast<flashmma::ProblemShape&>(shape) =
      flashmma::make_problem_shape(2, 100, 120, 4, 2, 128);
  shape.dtype = flashmma::ScalarType::kBFloat16;
  // Only the layout and the route matter here: the checks below need no data.
  std::vector<char> placeholder(256);
  shape.q = shape.k = shape.v = shape.d_o = placeholder.data();
  shape.q_strides = shape.do_strides = flashmma::bshd_strides(100, 4, 128);
  shape.k_strides = shape.v_strides = flashmma::bshd_strides(120, 2, 128);
  CHECK(flashmma::runs_sm90_backward_default(shape, device, loaded));
  BackwardParams odd_stride = shape;
  odd_stride.q_strides.row = 4 * 128 + 4;  // 8 bytes past a 16-byte multiple: no TMA map
  CHECK(!flashmma::runs_sm90_backward_default(odd_stride, device, loaded));

  const BackwardCase c = flashmma::test::backward_case(2, 100, 120, 4, 2, 128);
  const SlidingWindow causal{{}, -1, 0};
  flashmma::test::check_backward_case<__nv_bfloat16>(c, causal, [](BackwardParams p) {
    p.mask = flashmma::MaskKind::kCausal;
    return flashmma::backward_default_config<__nv_bfloat16, 128>(p);
  });
  const Combined<Softcap, SlidingWindow> softcap{{}, Softcap::with_cap(5.f), {{}, -1, -1}};
  // A head dim padded to the kernel's in shared memory (d = 256's route is the same function,
  // checked on the CPU; its kernel runs in the tests above).
  const BackwardCase d96 = flashmma::test::backward_case(1, 150, 150, 2, 1, 96);
  flashmma::test::check_backward_case<__nv_bfloat16>(d96, softcap, [](BackwardParams p) {
    p.softcap = 5.f;
    return flashmma::backward_default_config<__nv_bfloat16, 128>(p);
  });
}

TEST_CASE("sm90 backward: refusals launch nothing and name the field", "[gpu][sm90][backward]") {
  using Config = flashmma::Sm90DefaultBackwardConfigT<__half, 64>;
  BackwardParams p;
  static_cast<flashmma::ProblemShape&>(p) = flashmma::make_problem_shape(1, 16, 16, 1, 1, 64);
  const Status no_q = flashmma::backward<Config>(p);
  CHECK(no_q.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(no_q.message().find("q is null") != std::string::npos);
  p.head_dim = 128;
  const Status too_wide = flashmma::backward<Config>(p);
  CHECK(!too_wide.ok());
}
