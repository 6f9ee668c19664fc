// SPDX-License-Identifier: Apache-2.0
// The public entry points as a user calls them: default dispatch over head dims and dtypes,
// determinism, argument errors on a real device, the softmax scale, and (hidden) tensors of more
// than 2^31 elements. This file calls flashmma::forward(params); where the flashmma::kernels
// library is built, tests/CMakeLists.txt links it, so the default dispatch tested here is the
// precompiled one (the examples' basic_forward runs the header-only one).
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/flashmma.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"

namespace {

using flashmma::ErrorCode;
using flashmma::ForwardParams;
using flashmma::MaskKind;
using flashmma::ScalarType;
using flashmma::Status;
using flashmma::test::AttentionCase;
using flashmma::test::CaseTensors;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;
using flashmma::test::make_case;
using flashmma::test::same_bytes;

Status default_forward(const ForwardParams& params) { return flashmma::forward(params); }

// Head dims with and without a kernel of their own: 8, 24 and 40 run on the 32 and 64 kernels,
// 200 on 224; 256 is the largest.
constexpr int64_t kDispatchHeadDims[] = {8, 24, 40, 200, 256};

std::vector<AttentionCase> dispatch_cases() {
  std::vector<AttentionCase> cases;
  for (const int64_t head_dim : kDispatchHeadDims) {
    cases.push_back(make_case(2, 65, 127, 4, 1, head_dim, true, Layout::kPaddedBSHD));
    cases.push_back(make_case(1, 127, 63, 2, 2, head_dim, false, Layout::kBHSD));
  }
  return cases;
}

template <class Element>
void run_twenty_times_and_compare(const AttentionCase& c) {
  constexpr int kRuns = 20;
  INFO("case: " << c.describe());
  CaseTensors<Element> t = flashmma::test::make_case_tensors<Element>(c);
  std::vector<Element> first_o;
  std::vector<float> first_lse;
  int differing_runs = 0;
  int failed_runs = 0;
  for (int run = 0; run < kRuns; ++run) {
    flashmma::test::poison(t.o);  // every run must write every element again
    flashmma::test::poison(t.lse);
    const Status status = flashmma::forward(t.params);
    if (!status.ok()) ++failed_runs;
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    std::vector<Element> o = t.o.to_host();
    std::vector<float> lse = t.lse.to_host();
    if (run == 0) {
      first_o = std::move(o);
      first_lse = std::move(lse);
    } else if (!same_bytes(o, first_o) || !same_bytes(lse, first_lse)) {
      ++differing_runs;
    }
  }
  REQUIRE(failed_runs == 0);
  REQUIRE(differing_runs == 0);
  flashmma::test::require_matches_reference(t);
}

// One invalid call: how to break valid params, and what the error must mention.
struct InvalidCall {
  const char* what;
  std::function<void(ForwardParams&)> mutate;
  const char* expected_message;
};

std::vector<InvalidCall> invalid_calls() {
  return {
      {"batch = 0", [](ForwardParams& p) { p.batch = 0; }, "batch must be >= 1"},
      {"seqlen_k = -3", [](ForwardParams& p) { p.seqlen_k = -3; }, "seqlen_k must be >= 1"},
      {"heads_q not a multiple of heads_kv",
       [](ForwardParams& p) {
         p.heads_q = 4;
         p.heads_kv = 3;
       },
       "heads_q (4) must be a multiple of heads_kv (3)"},
      {"head_dim 20", [](ForwardParams& p) { p.head_dim = 20; }, "head_dim"},
      {"head_dim 264", [](ForwardParams& p) { p.head_dim = 264; }, "head_dim"},
      {"k null", [](ForwardParams& p) { p.k = nullptr; }, "k is null"},
      {"v misaligned",
       [](ForwardParams& p) { p.v = static_cast<const __half*>(p.v) + 1; },
       "v must be 16-byte aligned"},
      {"o row stride", [](ForwardParams& p) { p.o_strides.row += 4; }, "o_strides.row"},
      {"q batch stride", [](ForwardParams& p) { p.q_strides.batch += 2; }, "q_strides.batch"},
      {"q strides unset", [](ForwardParams& p) { p.q_strides = {}; }, "q_strides is unset"},
      {"o rows on one place", [](ForwardParams& p) { p.o_strides.row = 0; },
       "o_strides.row is 0, but o is written"},
      {"o heads overlapping", [](ForwardParams& p) { p.o_strides.head = 32; }, "o's rows overlap"},
      {"lse misaligned",
       [](ForwardParams& p) { p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(p.lse) + 2); },
       "lse must be 4-byte aligned"},
      {"negative scale", [](ForwardParams& p) { p.softmax_scale = -1.f; }, "softmax_scale"},
      {"infinite scale",
       [](ForwardParams& p) { p.softmax_scale = std::numeric_limits<float>::infinity(); },
       "softmax_scale"},
      {"unknown mask", [](ForwardParams& p) { p.mask = static_cast<MaskKind>(7); }, "mask"},
      {"unknown dtype", [](ForwardParams& p) { p.dtype = static_cast<ScalarType>(5); }, "dtype"},
  };
}

// Returns true when O and the LSE still hold exactly what they held before the call.
template <class Element>
bool outputs_untouched(const CaseTensors<Element>& t, const std::vector<Element>& o_before,
                       const std::vector<float>& lse_before) {
  const std::vector<Element> o_after = t.o.to_host();
  const std::vector<float> lse_after = t.lse.to_host();
  return same_bytes(o_after, o_before) && same_bytes(lse_after, lse_before);
}

// Runs one rejected call and checks code, message and untouched outputs.
template <class Element, class Launch>
void require_rejected(CaseTensors<Element>& t, const ForwardParams& params, Launch&& launch,
                      const std::string& expected_message, ErrorCode expected_code) {
  const std::vector<Element> o_before = t.o.to_host();
  const std::vector<float> lse_before = t.lse.to_host();
  const Status status = launch(params);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  INFO("message: " << status.message());
  INFO("expected to contain: " << expected_message);
  const bool rejected = !status.ok();
  const bool right_code = status.code() == expected_code;
  const bool names_argument = status.message().find(expected_message) != std::string::npos;
  const bool untouched = outputs_untouched(t, o_before, lse_before);
  REQUIRE(rejected);
  REQUIRE(right_code);
  REQUIRE(names_argument);
  REQUIRE(untouched);
}

}  // namespace

TEST_CASE("forward(params) dispatches every head dim and dtype", "[gpu][forward][api]") {
  for (const AttentionCase& c : dispatch_cases()) {
    DYNAMIC_SECTION("fp16 " << c.describe()) {
      flashmma::test::check_forward_case<__half>(c, default_forward);
    }
    DYNAMIC_SECTION("bf16 " << c.describe()) {
      flashmma::test::check_forward_case<__nv_bfloat16>(c, default_forward);
    }
  }
}

// On an H100 or H200 running sm_90a code, forward(params) takes the Hopper default of the head
// dims that have one (launch_plan.hpp's runs_sm90_default), with and without the mask, and its
// results match the reference like the portable kernel's (the variant fields on it:
// test_forward_variant_params.cu). Elsewhere the case says why it checks nothing more.
TEST_CASE("forward(params) runs the Hopper kernel on compute capability 9.0",
          "[gpu][forward][api][sm90]") {
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  if (device.compute_capability != 90 || !flashmma::sm90a_code_loaded()) {
    SUCCEED("not a compute capability 9.0 GPU running sm_90a code: the portable kernel runs");
    return;
  }
  // Every kernel head dim with a Hopper default, some through a smaller head dim (40 on 64, 152
  // on 160, 200 on 224), and so every default config.
  for (const int64_t head_dim : {40, 64, 96, 128, 152, 192, 200, 256}) {
    for (const bool causal : {false, true}) {
      const AttentionCase c = make_case(2, 300, 333, 4, 2, head_dim, causal, Layout::kBSHD);
      DYNAMIC_SECTION("bf16 " << c.describe()) {
        const CaseTensors<__nv_bfloat16> t =
            flashmma::test::make_case_tensors<__nv_bfloat16>(c);
        std::string kernel;
        REQUIRE(flashmma::describe_default_kernel(t.params, device, true, kernel).ok());
        INFO(kernel);
        CHECK(kernel.rfind("sm90::ForwardKernel<Sm90TileConfig<bf16", 0) == 0);
        flashmma::test::check_forward_case<__nv_bfloat16>(c, default_forward);
      }
    }
  }
}

// Inputs broadcast along some dimensions (a zero stride, as PyTorch's expand() gives) are legal
// (validate_tensor.hpp): K and V shared by the batch, one Q head for every query head. The
// reference reads through the same strides, so it sees the same shared rows. On an H100/H200 the
// Hopper kernel reads them through TMA maps with a zero stride.
TEST_CASE("forward(params) reads inputs broadcast along a dimension", "[gpu][forward][api]") {
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  for (const int64_t head_dim : {64, 128}) {
    for (const bool causal : {false, true}) {
      const AttentionCase c = make_case(2, 200, 257, 4, 2, head_dim, causal, Layout::kBSHD);
      DYNAMIC_SECTION("fp16 " << c.describe()) {
        CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
        t.params.k_strides.batch = 0;
        t.params.v_strides.batch = 0;
        t.params.q_strides.head = 0;
        std::string kernel;
        REQUIRE(flashmma::describe_default_kernel(t.params, device, flashmma::sm90a_code_loaded(),
                                                  kernel).ok());
        INFO(kernel);
        const flashmma::Status status = default_forward(t.params);
        INFO("forward returned: " << status.message());
        REQUIRE(status.ok());
        FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
        flashmma::test::require_matches_reference(t);
      }
    }
  }
}

// Under the causal mask the kernel walks the (head, batch) pairs in groups whose K/V fit in a share
// of L2, each heaviest query tile first (attention/scheduler.hpp); the other tests are too small
// for more than one group. Here 15 pairs (5 batch entries of 3 heads) each get enough keys that 14
// of them overflow this device's share, so there are at least two groups on any GPU, and both
// coordinates of a pair vary within a group.
TEST_CASE("causal forward over several L2 groups of (head, batch) pairs", "[gpu][forward][api]") {
  using Config = flashmma::DefaultConfig<__half, 256>::type;
  constexpr int64_t kBatch = 5;
  constexpr int64_t kHeads = 3;
  constexpr int64_t kPairs = kBatch * kHeads;
  constexpr int64_t kHeadDim = 256;
  constexpr int64_t kKvBytesPerKey = 2 * kHeadDim * sizeof(__half);  // a K row and a V row
  constexpr int64_t kKeysMultiple = 128;
  flashmma::DeviceInfo device;
  const Status queried = flashmma::query_device(device);
  REQUIRE(queried.ok());
  const int64_t l2_share = static_cast<int64_t>(device.l2_cache_bytes) / 2;
  const int64_t min_keys = l2_share / ((kPairs - 1) * kKvBytesPerKey) + 1;
  const int64_t seqlen = std::max<int64_t>(
      kKeysMultiple, (min_keys + kKeysMultiple - 1) / kKeysMultiple * kKeysMultiple);
  const int64_t groups = flashmma::detail::causal_group_count(
      kPairs, seqlen, kHeadDim, /*group_size=*/1, static_cast<int64_t>(sizeof(__half)),
      Config::kBlockM, static_cast<int64_t>(device.l2_cache_bytes));
  INFO("L2 " << device.l2_cache_bytes << " bytes, seqlen " << seqlen << ", " << groups
             << " groups");
  CHECK(groups >= 2);
  flashmma::test::check_forward_case<__half>(
      make_case(kBatch, seqlen, seqlen, kHeads, kHeads, kHeadDim, true, Layout::kBSHD),
      default_forward);
}

TEST_CASE("forward(params) is deterministic", "[gpu][forward][api]") {
  // Long enough for many key tiles and several blocks per head; causal and GQA on.
  const AttentionCase c = make_case(2, 1000, 1000, 4, 1, 128, true, Layout::kBSHD);
  SECTION("fp16") { run_twenty_times_and_compare<__half>(c); }
  SECTION("bf16") {
    AttentionCase c96 = c;
    c96.head_dim = 96;
    c96.causal = false;
    run_twenty_times_and_compare<__nv_bfloat16>(c96);
  }
}

TEST_CASE("invalid params are rejected without touching the outputs", "[gpu][forward][api]") {
  const AttentionCase c = make_case(2, 65, 127, 4, 2, 64, true, Layout::kBSHD);
  CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
  // Pre-filled with values a kernel could write (not just the poison), so "untouched" means
  // untouched and not merely "still NaN".
  flashmma::test::fill_normal(t.o, 12345);
  FLASHMMA_CUDA_CHECK(cudaMemset(t.lse.get(), 0x3F, t.lse.bytes()));

  for (const InvalidCall& call : invalid_calls()) {
    DYNAMIC_SECTION("forward(params): " << call.what) {
      ForwardParams params = t.params;
      call.mutate(params);
      require_rejected(t, params, default_forward, call.expected_message,
                       ErrorCode::kInvalidArgument);
    }
    DYNAMIC_SECTION("forward<Config>(params): " << call.what) {
      ForwardParams params = t.params;
      call.mutate(params);
      require_rejected(
          t, params,
          [](const ForwardParams& p) { return flashmma::forward<flashmma::DefaultConfigT<__half, 64>>(p); },
          call.expected_message, ErrorCode::kInvalidArgument);
    }
  }
  SECTION("forward<Config>: head_dim above the config's") {
    require_rejected(
        t, t.params,
        [](const ForwardParams& p) { return flashmma::forward<flashmma::DefaultConfigT<__half, 32>>(p); },
        "head_dim 64 exceeds the config's HeadDim 32", ErrorCode::kInvalidArgument);
  }
  SECTION("forward<Config>: dtype of another config") {
    require_rejected(
        t, t.params,
        [](const ForwardParams& p) {
          return flashmma::forward<flashmma::DefaultConfigT<__nv_bfloat16, 64>>(p);
        },
        "dtype is fp16 but the config was built for bf16", ErrorCode::kInvalidArgument);
  }
}

TEST_CASE("softmax_scale: explicit default equals NaN, other values are applied",
          "[gpu][forward][api]") {
  const AttentionCase c = make_case(1, 127, 200, 4, 1, 72, true, Layout::kBSHD);
  CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);

  const Status default_status = flashmma::forward(t.params);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<__half> default_o = t.o.to_host();
  const std::vector<float> default_lse = t.lse.to_host();
  const bool default_ok = default_status.ok();
  REQUIRE(default_ok);
  flashmma::test::require_matches_reference(t);

  SECTION("1 / sqrt(head_dim) given explicitly is bitwise the default") {
    flashmma::test::poison(t.o);
    flashmma::test::poison(t.lse);
    t.params.softmax_scale = 1.0f / std::sqrt(static_cast<float>(c.head_dim));
    const Status status = flashmma::forward(t.params);
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    const bool ok = status.ok();
    const bool same_o = same_bytes(t.o.to_host(), default_o);
    const bool same_lse = same_bytes(t.lse.to_host(), default_lse);
    REQUIRE(ok);
    REQUIRE(same_o);
    REQUIRE(same_lse);
  }
  SECTION("another scale changes the result and matches the reference") {
    flashmma::test::poison(t.o);
    flashmma::test::poison(t.lse);
    t.params.softmax_scale = 0.37f;
    const Status status = flashmma::forward(t.params);
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    const bool ok = status.ok();
    const bool same_o = same_bytes(t.o.to_host(), default_o);
    REQUIRE(ok);
    REQUIRE_FALSE(same_o);
    flashmma::test::require_matches_reference(t);
  }
}

// Tensors of more than 2^31 elements: every offset must be computed in 64 bits. Batch 4097 of
// 4096 x 128 rows puts batch 4096 at element 2^31 exactly; the checked batches are the first, a
// middle one and that last one. Needs about 9 GB of device memory; run with "[.large]".
TEST_CASE("forward handles tensors of more than 2^31 elements", "[gpu][forward][api][.large]") {
  constexpr int64_t kBatch = 4097;
  constexpr int64_t kLong = 4096;
  constexpr int64_t kShort = 128;
  constexpr int64_t kHeadDim = 128;
  const int64_t checked_batches[] = {0, kBatch / 2, kBatch - 1};

  AttentionCase c;
  SECTION("K and V beyond 2^31 elements") {
    c = make_case(kBatch, kShort, kLong, 2, 1, kHeadDim, true, Layout::kBSHD);
  }
  SECTION("Q and O beyond 2^31 elements") {
    c = make_case(kBatch, kLong, kShort, 1, 1, kHeadDim, false, Layout::kBSHD);
  }
  INFO("case: " << c.describe());
  CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
  const Status status = flashmma::forward(t.params);
  INFO("forward returned: " << status.message());
  const bool ok = status.ok();
  REQUIRE(ok);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());

  const int64_t o_nan = flashmma::test::count_nan(t.o, c.q_elements());
  const int64_t lse_nan = flashmma::test::count_nan(t.lse, c.lse_elements());
  REQUIRE(o_nan == 0);
  REQUIRE(lse_nan == 0);

  const auto problem = flashmma::test::reference_problem<__half>(t.params);
  for (const int64_t b : checked_batches) {
    INFO("batch " << b);
    const flashmma::test::ReferenceRows ref = flashmma::test::compute_reference(problem, b, 1);
    const flashmma::test::AccuracyStats stats =
        flashmma::test::compare_with_reference(t.o, t.params.o_strides, &t.lse, ref);
    flashmma::test::require_accurate<__half>(stats);
  }
}
