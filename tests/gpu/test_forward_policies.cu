// SPDX-License-Identifier: Apache-2.0
// forward<Config, Policy>: the built-in score policies (sliding windows, ALiBi, softcap and
// their combinations) and a user's own policy, through the kernel's tile skipping, masking and
// score transforms, against the host reference that applies the same policy to every (query,
// key) pair in double (support/policy_reference.cuh). The policies' own formulas are checked against hand-computed values on the
// CPU (tests/cpu/test_score_policy.cpp); this file checks that the kernels apply them.
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_reference.cuh"
#include "support/prefix_lm.hpp"

namespace {

using flashmma::AlibiBias;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::ScoreCoord;
using flashmma::SequenceLengths;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::test::AttentionCase;
using flashmma::test::DeviceBuffer;

// Tiles of every schedule: split (Stages 1), ring (2) and overlapped (3); 1 to 8 warps; one and
// two row tiles per warp; both element types.
using PolicyConfigs = std::tuple<
    flashmma::DefaultConfigT<__half, 64>,
    flashmma::TileConfig<__nv_bfloat16, 128, 64, 32, 4, 3, flashmma::SmemLayout::kXorSwizzle>,
    flashmma::TileConfig<__half, 32, 16, 16, 1, 1, flashmma::SmemLayout::kPaddedRows>,
    flashmma::DefaultConfigT<__nv_bfloat16, 128>>;

}  // namespace

TEMPLATE_LIST_TEST_CASE("sliding windows: band, one-sided, width 0, wider than the sequence",
                        "[gpu][forward][policy]", PolicyConfigs) {
  const std::vector<SlidingWindow> windows = {
      {{}, 32, 0}, {{}, 0, 0}, {{}, 5, 17}, {{}, -1, 40}, {{}, 100000, 100000}, {{}, 64, -1}};
  for (const AttentionCase& c : flashmma::test::policy_cases(TestType::kHeadDim)) {
    for (const SlidingWindow& window : windows) {
      INFO("window (" << window.left << ", " << window.right << ")");
      flashmma::test::check_policy<TestType>(c, window, window);
    }
  }
}

TEMPLATE_LIST_TEST_CASE("ALiBi and softcap, alone, together and with windows",
                        "[gpu][forward][policy]", PolicyConfigs) {
  const int64_t heads = 4;
  std::vector<float> slopes;  // [batch 2, heads 4]
  for (int64_t i = 0; i < 2 * heads; ++i) slopes.push_back(std::exp2(-0.5f * (i + 1)));
  DeviceBuffer<float> device_slopes(static_cast<int64_t>(slopes.size()));
  FLASHMMA_CUDA_CHECK(cudaMemcpy(device_slopes.get(), slopes.data(), device_slopes.bytes(),
                                 cudaMemcpyHostToDevice));
  const AlibiBias alibi{{}, device_slopes.get(), heads};
  const AlibiBias host_alibi{{}, slopes.data(), heads};
  const AlibiBias per_head{{}, device_slopes.get(), 0};
  const AlibiBias host_per_head{{}, slopes.data(), 0};
  using flashmma::test::Layout;
  const AttentionCase c =
      flashmma::test::make_case(2, 133, 200, heads, 2, TestType::kHeadDim, false, Layout::kBSHD);
  const AttentionCase tall =
      flashmma::test::make_case(2, 200, 133, heads, 1, TestType::kHeadDim, false, Layout::kBSHD);

  flashmma::test::check_policy<TestType>(c, alibi, host_alibi);
  flashmma::test::check_policy<TestType>(tall, per_head, host_per_head);
  for (const float cap : {30.f, 0.5f}) {  // 0.5: a tiny cap flattens every score
    INFO("softcap " << cap);
    flashmma::test::check_policy<TestType>(c, Softcap::with_cap(cap), Softcap::with_cap(cap));
  }
  using AlibiCausal = Combined<AlibiBias, CausalMask>;
  flashmma::test::check_policy<TestType>(tall, AlibiCausal{{}, alibi, {}},
                                         AlibiCausal{{}, host_alibi, {}});
  using Everything = Combined<Softcap, Combined<AlibiBias, SlidingWindow>>;
  const SlidingWindow window{{}, 48, 0};
  const Everything all{{}, Softcap::with_cap(20.f), {{}, alibi, window}};
  const Everything host_all{{}, Softcap::with_cap(20.f), {{}, host_alibi, window}};
  flashmma::test::check_policy<TestType>(c, all, host_all);

  // One query over GQA heads runs packed (a work tile's rows are the heads of a group): every
  // row's slope is its own head's, in both K/V groups, and the window is the query's.
  const AttentionCase decode =
      flashmma::test::make_case(2, 1, 300, heads, 2, TestType::kHeadDim, false, Layout::kBHSD);
  flashmma::test::check_policy<TestType>(decode, alibi, host_alibi);
  flashmma::test::check_policy<TestType>(decode, per_head, host_per_head);
  const Everything narrow{{}, Softcap::with_cap(20.f), {{}, alibi, SlidingWindow{{}, 48, 0}}};
  const Everything host_narrow{{}, Softcap::with_cap(20.f), {{}, host_alibi, SlidingWindow{{}, 48, 0}}};
  flashmma::test::check_policy<TestType>(decode, narrow, host_narrow);
}

TEMPLATE_LIST_TEST_CASE("a user's policy: prefix-LM", "[gpu][forward][policy]", PolicyConfigs) {
  for (const int64_t prefix : {0, 40, 1000}) {
    INFO("prefix " << prefix);
    flashmma::test::PrefixLM policy;
    policy.prefix = prefix;
    for (const AttentionCase& c : flashmma::test::policy_cases(TestType::kHeadDim)) {
      flashmma::test::check_policy<TestType>(c, policy, policy);
    }
  }
}

TEST_CASE("forward<Config, Policy> refuses params.mask = kCausal", "[gpu][forward][policy]") {
  using Config = flashmma::DefaultConfigT<__half, 64>;
  flashmma::test::CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(
      flashmma::test::make_case(1, 64, 64, 1, 1, 64, true, flashmma::test::Layout::kBSHD));
  const flashmma::Status status = flashmma::forward<Config>(t.params, SlidingWindow{{}, 8, 0});
  CHECK(status.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("CausalMask"));
}
