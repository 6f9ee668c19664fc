// SPDX-License-Identifier: Apache-2.0
// backward<Config, Policy> and backward<Config> (the built-in policies from params' fields)
// against the fp64 host reference (support/backward_reference.hpp), over tiles of every shape
// the config allows (2 to 8 warps, BlockM 16 to 64, a column split, padded and swizzled rows),
// odd lengths in both orders, GQA and MQA, every layout, head dims below the kernel's, rows that
// see no key, an explicit scale, accumulation into dK and dV, and every built-in policy and a
// user's own (a mask and a transform with its gradient).
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <tuple>
#include <vector>

#include "flashmma/backward.cuh"
#include "support/attention_case.hpp"
#include "support/backward_case.cuh"
#include "support/backward_matrix.cuh"
#include "support/gpu_helpers.cuh"

namespace {

using flashmma::AlibiBias;
using flashmma::BackwardParams;
using flashmma::BackwardTileConfig;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::FullAttention;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::Status;
using flashmma::test::BackwardCase;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;

// Every tile shape runs full attention and the causal mask; the three defaults also run the
// other policies and packed sequences (each (config, policy) pair is two kernels, dense and
// packed: the file compiles what it must cover, no more).
using DefaultBackwardConfigs = std::tuple<flashmma::DefaultBackwardConfigT<__half, 64>,
                                          flashmma::DefaultBackwardConfigT<__nv_bfloat16, 128>,
                                          flashmma::DefaultBackwardConfigT<__half, 256>>;
using BackwardConfigs = decltype(std::tuple_cat(
    DefaultBackwardConfigs{},
    std::tuple<BackwardTileConfig<__nv_bfloat16, 32, 16, 2, 1, flashmma::SmemLayout::kPaddedRows>,
               BackwardTileConfig<__half, 128, 32, 4, 1, flashmma::SmemLayout::kXorSwizzle>,
               BackwardTileConfig<__half, 96, 32, 4>>{}));

}  // namespace

TEMPLATE_LIST_TEST_CASE("backward: full attention and the causal mask", "[gpu][backward]",
                        BackwardConfigs) {
  flashmma::test::check_backward_policy_cases<TestType>(FullAttention{}, FullAttention{});
  flashmma::test::check_backward_policy_cases<TestType>(CausalMask{}, CausalMask{});
}

TEMPLATE_LIST_TEST_CASE("backward: windows, softcap and ALiBi together", "[gpu][backward]",
                        DefaultBackwardConfigs) {
  flashmma::test::check_window_softcap_alibi<TestType>();
}

using UserPolicyConfigs =
    std::tuple<flashmma::DefaultBackwardConfigT<__half, 64>,
               BackwardTileConfig<__nv_bfloat16, 32, 16, 2, 1, flashmma::SmemLayout::kPaddedRows>>;

TEMPLATE_LIST_TEST_CASE("backward: a user's policy with a mask and a transform",
                        "[gpu][backward]", UserPolicyConfigs) {
  flashmma::test::check_user_policy<TestType>();
}

TEST_CASE("backward<Config>: the built-in policy of params' fields", "[gpu][backward]") {
  using Config = flashmma::DefaultBackwardConfigT<__nv_bfloat16, 128>;
  using Element = Config::element_type;
  std::vector<float> slopes = {0.5f, 0.25f, 0.125f, 0.0625f};
  DeviceBuffer<float> device_slopes(4);
  device_slopes.copy_from_host(slopes);
  struct Fields {
    const char* name;
    flashmma::MaskKind mask;
    int64_t left, right;
    float softcap;
    bool alibi;
  };
  const Fields variants[] = {{"full", flashmma::MaskKind::kNone, -1, -1, 0.f, false},
                             {"causal", flashmma::MaskKind::kCausal, -1, -1, 0.f, false},
                             {"window", flashmma::MaskKind::kNone, 16, 4, 0.f, false},
                             {"softcap causal", flashmma::MaskKind::kCausal, -1, -1, 5.f, false},
                             {"alibi window", flashmma::MaskKind::kNone, 30, -1, 0.f, true},
                             {"softcap alibi", flashmma::MaskKind::kNone, -1, -1, 5.f, true}};
  const BackwardCase c = flashmma::test::backward_case(2, 100, 120, 4, 2, 128);
  for (const Fields& f : variants) {
    INFO(f.name);
    SlidingWindow window{{}, f.left, f.mask == flashmma::MaskKind::kCausal ? 0 : f.right};
    AlibiBias alibi{{}, slopes.data(), 0};
    const Softcap cap = Softcap::with_cap(f.softcap > 0.f ? f.softcap : 1.f);
    const auto launch = [&](BackwardParams p) {
      p.mask = f.mask;
      p.window_left = f.left;
      p.window_right = f.right;
      p.softcap = f.softcap;
      p.alibi_slopes = f.alibi ? device_slopes.get() : nullptr;
      return flashmma::backward<Config>(p);
    };
    // The reference applies the same policy the dispatch builds (default_dispatch.hpp).
    if (f.softcap > 0.f && f.alibi) {
      flashmma::test::check_backward_case<Element>(
          c, Combined<Softcap, Combined<AlibiBias, SlidingWindow>>{{}, cap, {{}, alibi, window}},
          launch);
    } else if (f.softcap > 0.f) {
      flashmma::test::check_backward_case<Element>(c, Combined<Softcap, SlidingWindow>{{}, cap, window},
                                                   launch);
    } else if (f.alibi) {
      flashmma::test::check_backward_case<Element>(c, Combined<AlibiBias, SlidingWindow>{{}, alibi, window},
                                                   launch);
    } else {
      flashmma::test::check_backward_case<Element>(c, window, launch);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("backward: packed sequences of variable lengths (cu_seqlens)",
                        "[gpu][backward][varlen]", DefaultBackwardConfigs) {
  using Element = typename TestType::element_type;
  // Lengths 0 and 1, odd ones, queries longer and shorter than keys, one sequence alone.
  const std::vector<int32_t> lengths_q = {5, 0, 77, 130, 1, 3};
  const std::vector<int32_t> lengths_k = {64, 9, 200, 130, 0, 1};
  const SlidingWindow window{{}, 40, 10};
  const auto run = [](const auto& policy) {
    return [&policy](const BackwardParams& p) { return flashmma::backward<TestType>(p, policy); };
  };
  for (const int64_t group : {1, 4}) {
    INFO("heads_q = " << 2 * group << ", heads_kv = 2");
    flashmma::test::check_backward_varlen_case<Element>(
        lengths_q, lengths_k, 2 * group, 2, TestType::kHeadDim, FullAttention{}, run(FullAttention{}));
    flashmma::test::check_backward_varlen_case<Element>(
        lengths_q, lengths_k, 2 * group, 2, TestType::kHeadDim, CausalMask{}, run(CausalMask{}));
    flashmma::test::check_backward_varlen_case<Element>(lengths_q, lengths_k, 2 * group, 2,
                                                        TestType::kHeadDim, window, run(window));
  }
  const std::vector<int32_t> one = {333};
  flashmma::test::check_backward_varlen_case<Element>(one, one, 2, 1, TestType::kHeadDim,
                                                      CausalMask{}, run(CausalMask{}));
}

TEST_CASE("backward: the deterministic mode gives the same bits in every run", "[gpu][backward]") {
  flashmma::test::check_deterministic<flashmma::DefaultBackwardConfigT<__half, 64>>(1000, 1100);
}

TEST_CASE("backward: refusals launch nothing and name the field", "[gpu][backward]") {
  using Config = flashmma::DefaultBackwardConfigT<__half, 64>;
  BackwardParams p;
  static_cast<flashmma::ProblemShape&>(p) = flashmma::make_problem_shape(1, 16, 16, 1, 1, 64);
  const Status no_q = flashmma::backward<Config>(p);
  CHECK(no_q.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(no_q.message().find("q is null") != std::string::npos);
  p.head_dim = 128;
  const Status too_wide = flashmma::backward<Config>(p);
  CHECK(!too_wide.ok());
}
