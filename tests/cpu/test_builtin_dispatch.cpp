// SPDX-License-Identifier: Apache-2.0
// Which built-in policy and config flashmma::forward(params) runs (default_dispatch.hpp): the
// mask, window, softcap and ALiBi fields to one of six kernels per config, the exact
// normalisation of windows that hide nothing, and the description of the kernel.
#include "support/catch.hpp"

#include <flashmma/default_dispatch.hpp>
#include <flashmma/params.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace {

using Catch::Contains;
using flashmma::BuiltinPolicy;
using flashmma::ForwardParams;
using flashmma::MaskKind;

ForwardParams params(int64_t seqlen_q, int64_t seqlen_k) {
  ForwardParams p;
  p.batch = 1;
  p.seqlen_q = seqlen_q;
  p.seqlen_k = seqlen_k;
  p.heads_q = 4;
  p.heads_kv = 4;
  p.head_dim = 128;
  return p;
}

const float* fake_slopes() { return reinterpret_cast<const float*>(0x60000); }

}  // namespace

TEST_CASE("The fields choose one of four built-in policies", "[dispatch]") {
  ForwardParams p = params(1000, 1000);
  CHECK(flashmma::builtin_policy_for(p) == BuiltinPolicy::kFullAttention);
  p.mask = MaskKind::kCausal;
  CHECK(flashmma::builtin_policy_for(p) == BuiltinPolicy::kCausalMask);
  p.window_right = 0;  // the causal mask spelled twice
  CHECK(flashmma::builtin_policy_for(p) == BuiltinPolicy::kCausalMask);
  p.window_left = 256;
  CHECK(flashmma::builtin_policy_for(p) == BuiltinPolicy::kSlidingWindow);

  ForwardParams window = params(1000, 1000);
  window.window_left = -1;
  window.window_right = 0;  // causal spelled as a window
  CHECK(flashmma::builtin_policy_for(window) == BuiltinPolicy::kCausalMask);
  window.window_right = 3;
  CHECK(flashmma::builtin_policy_for(window) == BuiltinPolicy::kSlidingWindow);

  ForwardParams capped = params(1000, 1000);
  capped.softcap = 30.f;
  CHECK(flashmma::builtin_policy_for(capped) == BuiltinPolicy::kSoftcap);
  ForwardParams alibi = params(1000, 1000);
  alibi.alibi_slopes = fake_slopes();
  alibi.mask = MaskKind::kCausal;
  CHECK(flashmma::builtin_policy_for(alibi) == BuiltinPolicy::kAlibi);
  alibi.softcap = 5.f;
  CHECK(flashmma::builtin_policy_for(alibi) == BuiltinPolicy::kSoftcapAlibi);
}

TEST_CASE("The transform policies carry the fields", "[dispatch]") {
  ForwardParams p = params(64, 80);
  p.mask = MaskKind::kCausal;
  p.window_left = 10;
  p.softcap = 20.f;
  p.alibi_slopes = fake_slopes();
  p.alibi_batch_stride = 4;
  bool visited = false;
  flashmma::visit_builtin_policy(p, [&](const auto& policy) {
    using Policy = std::decay_t<decltype(policy)>;
    REQUIRE(std::is_same<Policy, flashmma::SoftcapAlibiWindow>::value);
    if constexpr (std::is_same<Policy, flashmma::SoftcapAlibiWindow>::value) {
      CHECK(policy.first.cap == 20.f);
      CHECK(policy.first.inverse_cap == 1.f / 20.f);
      CHECK(policy.second.first.slopes == fake_slopes());
      CHECK(policy.second.first.batch_stride == 4);
      CHECK(policy.second.second.left == 10);
      CHECK(policy.second.second.right == 0);
    }
    visited = true;
    return 0;
  });
  CHECK(visited);
}

// A side is made unbounded only when it hides no key of the problem, so the result is the same.
TEST_CASE("Windows that hide nothing run as no window", "[dispatch]") {
  for (const auto& lengths : {std::pair<int64_t, int64_t>{100, 100}, {37, 300}, {300, 37}}) {
    const int64_t seqlen_q = lengths.first;
    const int64_t seqlen_k = lengths.second;
    CAPTURE(seqlen_q, seqlen_k);
    ForwardParams p = params(seqlen_q, seqlen_k);
    const flashmma::SequenceLengths sequence = flashmma::sequence_lengths(seqlen_q, seqlen_k);
    for (int64_t left : {int64_t{0}, seqlen_k - 2, seqlen_k - 1, seqlen_k, int64_t{-1}}) {
      for (int64_t right : {int64_t{0}, seqlen_q - 2, seqlen_q - 1, int64_t{100000}}) {
        p.window_left = left;
        p.window_right = right;
        const flashmma::SlidingWindow raw{{}, left, right};
        const flashmma::SlidingWindow normalised = flashmma::effective_window(p);
        bool same = true;
        for (int64_t i = 0; i < seqlen_q; ++i) {
          for (int64_t j = 0; j < seqlen_k; ++j) {
            const flashmma::ScoreCoord coord = flashmma::score_coord(0, 0, i, j);
            same = same && raw.visible(coord, sequence) == normalised.visible(coord, sequence);
          }
        }
        CAPTURE(left, right, normalised.left, normalised.right);
        CHECK(same);
        CHECK((normalised.left == -1) == (left == -1 || left >= seqlen_k - 1));
        CHECK((normalised.right == -1) == (right == -1 || right >= seqlen_q - 1));
      }
    }
  }
}

TEST_CASE("describe_default_kernel names the policy, config and block order", "[dispatch]") {
  ForwardParams p = params(4096, 4096);
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x10000);
  p.o = reinterpret_cast<void*>(0x20000);
  p.q_strides = p.k_strides = p.v_strides = p.o_strides =
      flashmma::bshd_strides(4096, 4, 128);
  const flashmma::DeviceInfo hopper{90, 227 * 1024, 50 * 1024 * 1024};
  std::string kernel;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, kernel).ok());
  CHECK_THAT(kernel, Contains("FullAttention, PlainScheduler>") && Contains("BlockM 256"));

  p.window_left = 512;
  p.window_right = 0;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, kernel).ok());
  CHECK_THAT(kernel, Contains("SlidingWindow, HeaviestFirstScheduler>") && Contains("BlockM 128"));

  p.softcap = 50.f;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, kernel).ok());
  CHECK_THAT(kernel, Contains("Combined<Softcap, SlidingWindow>, HeaviestFirstScheduler>"));

  p.softcap = -1.f;
  CHECK_FALSE(flashmma::describe_default_kernel(p, hopper, kernel).ok());
}
