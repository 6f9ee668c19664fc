// SPDX-License-Identifier: Apache-2.0
// flashmma::forward(params) and forward<Config>(params) with FlashAttention-2's variant fields
// (window_left / window_right, softcap, alibi_slopes): each call must run the built-in policy the
// fields describe. The reference is written from the fields' definition in params.hpp, not from
// the dispatch's own translation (default_dispatch.hpp), so a wrong translation, a wrong window
// normalisation or a wrong kernel choice shows here. Where flashmma::kernels is built this file
// links it and compiles only the kernels of its forward<Config> calls.
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <utility>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_reference.cuh"
#include "support/variant_fields.cuh"

namespace {

using flashmma::ForwardParams;
using flashmma::MaskKind;
using flashmma::test::AttentionCase;
using flashmma::test::CaseTensors;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;
using flashmma::test::Slopes;
using flashmma::test::Variant;

const std::vector<Variant>& variants() {
  static const std::vector<Variant> all = {
      {"no variant"},
      {"causal", true},
      {"window (-1, 0): causal spelled as a window", false, -1, 0},
      {"window (32, 0)", false, 32, 0},
      {"window (0, 0): the diagonal alone", false, 0, 0},
      {"window (5, 17)", false, 5, 17},
      {"window (-1, 40)", false, -1, 40},
      {"window (64, -1)", false, 64, -1},
      {"window wider than the sequence", false, 100000, 100000},
      {"causal with window_left 16", true, 16, -1},
      {"causal with window (16, 0)", true, 16, 0},
      {"softcap 30", false, -1, -1, 30.f},
      {"softcap 0.5 (tiny)", false, -1, -1, 0.5f},
      {"ALiBi per head", false, -1, -1, 0.f, true},
      {"ALiBi per batch entry and head", false, -1, -1, 0.f, true, true},
      {"ALiBi, causal", true, -1, -1, 0.f, true},
      {"softcap, ALiBi and window (48, 3)", false, 48, 3, 20.f, true, true},
      {"softcap, causal", true, -1, -1, 5.f},
      {"softcap and ALiBi, no window", false, -1, -1, 50.f, true},
  };
  return all;
}

// Odd lengths both ways (seqlen_q > seqlen_k leaves rows without keys under causal masks and
// windows), GQA, two layouts.
std::vector<AttentionCase> cases(int64_t head_dim) {
  return {flashmma::test::make_case(2, 129, 129, 4, 2, head_dim, false, Layout::kBSHD),
          flashmma::test::make_case(1, 77, 301, 2, 1, head_dim, false, Layout::kBHSD),
          flashmma::test::make_case(2, 301, 77, 4, 4, head_dim, false, Layout::kBSHD)};
}

template <class Element, class Forward>
void check_variants(int64_t head_dim, Forward&& forward) {
  const Slopes slopes;
  for (const AttentionCase& c : cases(head_dim)) {
    for (const Variant& v : variants()) {
      INFO("case: " << c.describe() << "; variant: " << v.what);
      CaseTensors<Element> t = flashmma::test::make_case_tensors<Element>(c);
      apply(v, slopes, t.params);
      const flashmma::Status status = forward(t.params);
      INFO("forward returned: " << status.message());
      REQUIRE(status.ok());
      FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
      flashmma::test::check_against_policy_reference(t,
                                                     reference_policy(v, slopes, t.params));
    }
  }
}

// A config no default uses, with three stages: forward<Config>(params) compiles its six
// built-in kernels here.
using OwnConfig =
    flashmma::TileConfig<__half, 64, 64, 32, 4, 3, flashmma::SmemLayout::kXorSwizzle>;

}  // namespace

TEST_CASE("forward(params) runs the window, softcap and ALiBi fields", "[gpu][forward][variant]") {
  const auto run = [](const ForwardParams& p) { return flashmma::forward(p); };
  SECTION("fp16, head dim 64") { check_variants<__half>(64, run); }
  SECTION("bf16, head dim 128") { check_variants<__nv_bfloat16>(128, run); }
  SECTION("fp16, head dim 88 (runs on 96, padded rows)") { check_variants<__half>(88, run); }
  SECTION("bf16, head dim 256") { check_variants<__nv_bfloat16>(256, run); }
}

TEST_CASE("forward<Config>(params) runs the variant fields too", "[gpu][forward][variant]") {
  check_variants<__half>(64, [](const ForwardParams& p) { return flashmma::forward<OwnConfig>(p); });
}

TEST_CASE("forward(params) with variant fields is deterministic", "[gpu][forward][variant]") {
  const Slopes slopes;
  const AttentionCase c = flashmma::test::make_case(2, 333, 517, 4, 1, 128, false, Layout::kBSHD);
  CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
  apply({"everything", true, 100, 0, 30.f, true, true}, slopes, t.params);
  REQUIRE(flashmma::forward(t.params).ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<__half> first = t.o.to_host();
  const std::vector<float> first_lse = t.lse.to_host();
  REQUIRE(flashmma::forward(t.params).ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<__half> second = t.o.to_host();
  CHECK(std::memcmp(first.data(), second.data(), first.size() * sizeof(__half)) == 0);
  CHECK(std::memcmp(first_lse.data(), t.lse.to_host().data(), first_lse.size() * sizeof(float)) ==
        0);
}

TEST_CASE("invalid variant fields are rejected without touching the outputs",
          "[gpu][forward][variant]") {
  const AttentionCase c = flashmma::test::make_case(1, 65, 65, 2, 2, 64, false, Layout::kBSHD);
  CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
  const std::vector<__half> o_before = t.o.to_host();
  const std::vector<float> lse_before = t.lse.to_host();
  const Slopes slopes;

  const std::vector<std::pair<const char*, void (*)(ForwardParams&)>> breaks = {
      {"window_left must be -1 (unbounded)", [](ForwardParams& p) { p.window_left = -3; }},
      {"window_right must be -1 or 0 when mask is MaskKind::kCausal",
       [](ForwardParams& p) {
         p.mask = MaskKind::kCausal;
         p.window_right = 4;
       }},
      {"softcap must be 0 (off) or a positive finite number",
       [](ForwardParams& p) { p.softcap = -2.f; }},
      {"alibi_batch_stride is set but alibi_slopes is null",
       [](ForwardParams& p) { p.alibi_batch_stride = 2; }},
  };
  for (const auto& broken : breaks) {
    INFO("expected: " << broken.first);
    ForwardParams p = t.params;
    broken.second(p);
    for (const flashmma::Status& status :
         {flashmma::forward(p), flashmma::forward<OwnConfig>(p)}) {
      CHECK(status.code() == flashmma::ErrorCode::kInvalidArgument);
      CHECK_THAT(status.message(), Catch::Contains(broken.first));
    }
  }
  // A caller's own policy: the built-in fields would be ignored there, so they are refused.
  ForwardParams with_alibi = t.params;
  with_alibi.alibi_slopes = slopes.device.get();
  const flashmma::Status own_policy =
      flashmma::forward<OwnConfig>(with_alibi, flashmma::SlidingWindow{{}, 8, 0});
  CHECK(own_policy.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK_THAT(own_policy.message(), Catch::Contains("alibi_slopes must be null"));

  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<__half> o_after = t.o.to_host();
  CHECK(std::memcmp(o_before.data(), o_after.data(), o_before.size() * sizeof(__half)) == 0);
  const std::vector<float> lse_after = t.lse.to_host();
  CHECK(std::memcmp(lse_before.data(), lse_after.data(), lse_before.size() * sizeof(float)) == 0);
}
