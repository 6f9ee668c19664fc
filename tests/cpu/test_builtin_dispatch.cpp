// SPDX-License-Identifier: Apache-2.0
// Which built-in policy and config flashmma::forward(params) runs (default_dispatch.hpp): the
// mask, window, softcap and ALiBi fields to one of six kernels per config (and the Hopper
// kernel's two ALiBi kernels), the exact normalisation of windows that hide nothing, and the
// description of the kernel.
#include "support/catch.hpp"

#include <flashmma/default_dispatch.hpp>
#include <flashmma/launch_plan.hpp>
#include <flashmma/params.hpp>

#include <cstdint>
#include <string>
#include <type_traits>

namespace {

using Catch::Contains;
using Catch::EndsWith;
using Catch::StartsWith;
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

// A call of 4096 queries and keys with stand-in addresses (nothing is launched), [B, S, H, D].
ForwardParams described_call(int64_t head_dim) {
  ForwardParams p = params(4096, 4096);
  p.head_dim = head_dim;
  p.q = p.k = p.v = reinterpret_cast<const void*>(0x10000);
  p.o = reinterpret_cast<void*>(0x20000);
  p.q_strides = p.k_strides = p.v_strides = p.o_strides =
      flashmma::bshd_strides(4096, 4, head_dim);
  return p;
}

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

// The Hopper kernel's own ALiBi kernels: only where the window hides nothing or is the causal
// one, with the slopes carried over; every other policy is visited as it is.
template <class Config>
std::string sm90_policy_of(const ForwardParams& p) {
  std::string name;
  flashmma::visit_builtin_policy(p, [&](const auto& policy) {
    return flashmma::visit_sm90_policy<Config>(policy, [&](const auto& sm90_policy) {
        using Sm90Policy = std::decay_t<decltype(sm90_policy)>;
      name = flashmma::builtin_policy_type_name<Sm90Policy>();
      if constexpr (std::is_same<Sm90Policy, flashmma::AlibiBias>::value) {
        CHECK(sm90_policy.slopes == fake_slopes());
        CHECK(sm90_policy.batch_stride == 3);
      } else if constexpr (std::is_same<Sm90Policy, flashmma::AlibiCausal>::value) {
        CHECK(sm90_policy.first.slopes == fake_slopes());
        CHECK(sm90_policy.first.batch_stride == 3);
      }
      return 0;
    });
  });
  return name;
}

TEST_CASE("visit_sm90_policy narrows ALiBi without a window or under the causal mask",
          "[dispatch][sm90]") {
  using Hopper128 = flashmma::Sm90DefaultConfig<__half, 128>::type;
  const auto sm90_policy_of = [](const ForwardParams& p) { return ::sm90_policy_of<Hopper128>(p); };
  ForwardParams alibi = params(1000, 1000);
  alibi.alibi_slopes = fake_slopes();
  alibi.alibi_batch_stride = 3;
  CHECK(sm90_policy_of(alibi) == "AlibiBias");
  alibi.window_left = 999;  // hides no key: no window
  CHECK(sm90_policy_of(alibi) == "AlibiBias");
  alibi.mask = MaskKind::kCausal;
  CHECK(sm90_policy_of(alibi) == "Combined<AlibiBias, CausalMask>");
  alibi.window_left = 100;
  CHECK(sm90_policy_of(alibi) == "Combined<AlibiBias, SlidingWindow>");
  alibi.mask = MaskKind::kNone;
  alibi.window_left = -1;
  alibi.window_right = 0;  // causal spelled as a window
  CHECK(sm90_policy_of(alibi) == "Combined<AlibiBias, CausalMask>");
  alibi.window_right = 5;
  CHECK(sm90_policy_of(alibi) == "Combined<AlibiBias, SlidingWindow>");
  alibi.softcap = 30.f;  // softcap and ALiBi keep their window
  alibi.window_right = -1;
  CHECK(sm90_policy_of(alibi) == "Combined<Softcap, Combined<AlibiBias, SlidingWindow>>");

  ForwardParams plain = params(1000, 1000);
  CHECK(sm90_policy_of(plain) == "FullAttention");
  plain.mask = MaskKind::kCausal;
  CHECK(sm90_policy_of(plain) == "CausalMask");
  plain.window_left = 10;
  CHECK(sm90_policy_of(plain) == "SlidingWindow");
  plain.softcap = 30.f;
  CHECK(sm90_policy_of(plain) == "Combined<Softcap, SlidingWindow>");

  // The three-warpgroup d = 64 tile (160 registers per consumer) keeps AlibiWindow.
  using Hopper64 = flashmma::Sm90DefaultConfig<__half, 64>::type;
  static_assert(Hopper64::kConsumerRegisters < 240, "the d = 64 default changed: revisit");
  alibi = params(1000, 1000);
  alibi.alibi_slopes = fake_slopes();
  alibi.alibi_batch_stride = 3;
  CHECK(::sm90_policy_of<Hopper64>(alibi) == "Combined<AlibiBias, SlidingWindow>");
  alibi.mask = MaskKind::kCausal;
  CHECK(::sm90_policy_of<Hopper64>(alibi) == "Combined<AlibiBias, SlidingWindow>");
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
  ForwardParams p = described_call(128);
  const flashmma::DeviceInfo hopper{90, 227 * 1024, 50 * 1024 * 1024, 132, 228 * 1024, 2048};
  const bool portable_only = false;  // a build without sm_90a code
  std::string kernel;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, portable_only, kernel).ok());
  CHECK_THAT(kernel, Contains("sm80::ForwardKernel<") &&
                         Contains("FullAttention, PlainScheduler>") && Contains("BlockM 256"));

  p.window_left = 512;
  p.window_right = 0;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, portable_only, kernel).ok());
  CHECK_THAT(kernel, Contains("SlidingWindow, HeaviestFirstScheduler>") && Contains("BlockM 128"));

  p.softcap = 50.f;
  REQUIRE(flashmma::describe_default_kernel(p, hopper, portable_only, kernel).ok());
  CHECK_THAT(kernel, Contains("Combined<Softcap, SlidingWindow>, HeaviestFirstScheduler>"));

  p.softcap = -1.f;
  CHECK_FALSE(flashmma::describe_default_kernel(p, hopper, portable_only, kernel).ok());
}

TEST_CASE("forward(params) runs the Hopper kernel on compute capability 9.0 where it can",
          "[dispatch][sm90]") {
  const flashmma::DeviceInfo h200{90, 227 * 1024, 60 * 1024 * 1024, 132, 228 * 1024, 2048};
  std::string kernel;

  SECTION("the head dims with a Hopper default, with every built-in policy") {
    for (const int64_t head_dim : {40, 64, 96, 104, 128, 152, 192, 200, 256}) {
      ForwardParams p = described_call(head_dim);
      CAPTURE(head_dim);
      REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
      CHECK_THAT(kernel, Contains("sm90::ForwardKernel<Sm90TileConfig<fp16, HeadDim " +
                                  std::to_string(flashmma::kernel_head_dim_for(head_dim))) &&
                             Contains("FullAttention, PlainScheduler>"));
      p.mask = flashmma::MaskKind::kCausal;
      p.softcap = 30.f;
      REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
      CHECK_THAT(kernel, Contains("sm90::ForwardKernel<") &&
                             Contains("Combined<Softcap, SlidingWindow>, HeaviestFirstScheduler>"));
    }
    ForwardParams p = described_call(128);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("BlockN 128") && Contains("ping-pong"));
    REQUIRE(flashmma::describe_default_kernel(described_call(64), h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("BlockM 192") && Contains("3 consumer warpgroups") &&
                           Contains("registers 24/160"));
    REQUIRE(flashmma::describe_default_kernel(described_call(160), h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("HeadDim 160, BlockM 128, BlockN 112"));
  }
  SECTION("ALiBi on kernels of its own there, AlibiWindow on the portable kernel") {
    ForwardParams p = described_call(128);
    p.alibi_slopes = fake_slopes();
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") &&
                           Contains(", AlibiBias, PlainScheduler>"));
    p.mask = MaskKind::kCausal;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") &&
                           Contains(", Combined<AlibiBias, CausalMask>, HeaviestFirstScheduler>"));
    p.window_left = 256;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") &&
                           Contains("Combined<AlibiBias, SlidingWindow>, HeaviestFirstScheduler>"));
    p.window_left = -1;
    ForwardParams d64 = described_call(64);
    d64.alibi_slopes = fake_slopes();
    REQUIRE(flashmma::describe_default_kernel(d64, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") && Contains("HeadDim 64,") &&
                           Contains("Combined<AlibiBias, SlidingWindow>, HeaviestFirstScheduler>"));
    REQUIRE(flashmma::describe_default_kernel(p, h200, false, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm80::ForwardKernel<") &&
                           Contains("Combined<AlibiBias, SlidingWindow>, HeaviestFirstScheduler>"));
  }
  SECTION("the portable kernel everywhere else") {
    const auto portable = [&](const ForwardParams& p, const flashmma::DeviceInfo& device,
                              bool sm90a_code) {
      REQUIRE(flashmma::describe_default_kernel(p, device, sm90a_code, kernel).ok());
      return kernel.rfind("sm80::ForwardKernel<TileConfig<", 0) == 0;
    };
    CHECK(portable(described_call(128), h200, false));  // no sm_90a code in the build
    flashmma::DeviceInfo a100 = h200;
    a100.compute_capability = 80;
    CHECK(portable(described_call(128), a100, true));
    flashmma::DeviceInfo blackwell = h200;
    blackwell.compute_capability = 100;  // sm_90a code does not run there
    CHECK(portable(described_call(128), blackwell, true));
    for (const int64_t head_dim : {8, 24, 32}) {  // the 32 kernel has no Hopper default
      CAPTURE(head_dim);
      CHECK(portable(described_call(head_dim), h200, true));
    }
    ForwardParams backwards = described_call(128);  // K read with a negative row stride
    backwards.k_strides.row = -backwards.k_strides.row;
    backwards.k = reinterpret_cast<const void*>(0x10000 + 4095 * 4 * 128 * 2);
    CHECK(portable(backwards, h200, true));
    ForwardParams unaligned = described_call(128);  // V 8-byte aligned; TMA and cp.async need 16
    unaligned.v = reinterpret_cast<const void*>(0x10008);
    CHECK_FALSE(flashmma::sm90::check_tma_layout(unaligned).ok());
    ForwardParams explicit_split = described_call(128);
    explicit_split.num_splits = 4;
    explicit_split.workspace = reinterpret_cast<void*>(0x40000);
    explicit_split.workspace_bytes = std::size_t{1} << 30;
    CHECK(portable(explicit_split, h200, true));
    CHECK_THAT(kernel, Contains("SplitScheduler> in 4 splits, then split_combine_kernel"));
  }
  SECTION("a decoding call runs on the split kernel: split with a workspace, whole without") {
    ForwardParams decode = described_call(128);
    decode.seqlen_q = 1;
    decode.seqlen_k = 65536;
    decode.q_strides = decode.o_strides = flashmma::bshd_strides(1, 4, 128);
    decode.k_strides = decode.v_strides = flashmma::bshd_strides(65536, 4, 128);
    REQUIRE(flashmma::describe_default_kernel(decode, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("sm80::ForwardKernel<TileConfig<fp16, HeadDim 128, BlockM 64") &&
                           Contains("SplitScheduler> in 1 split"));
    decode.workspace = reinterpret_cast<void*>(0x40000);
    decode.workspace_bytes = std::size_t{1} << 30;
    REQUIRE(flashmma::describe_default_kernel(decode, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("sm80::ForwardKernel<") && Contains("splits, then"));
    // 4 query heads over 2 K/V heads: the group's heads share a work tile.
    decode.heads_kv = 2;
    decode.k_strides = decode.v_strides = flashmma::bshd_strides(65536, 2, 128);
    REQUIRE(flashmma::describe_default_kernel(decode, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("splits, packed GQA, then split_combine_kernel"));
  }
}

// Prefill-sized variable lengths run on the Hopper default's kernels for them where TMA can map
// the tensors (launch_plan.hpp's variable_length_prefill); the rest on the portable split kernel.
TEST_CASE("variable lengths and paged caches: the split kernel, or the Hopper one for prefill",
          "[dispatch]") {
  const flashmma::DeviceInfo h200{90, 227 * 1024, 60 * 1024 * 1024, 132, 228 * 1024, 2048};
  std::string kernel;
  SECTION("packed queries and keys: one split, no combine") {
    ForwardParams p = described_call(128);
    p.cu_seqlens_q = reinterpret_cast<const int32_t*>(0x70000);
    p.cu_seqlens_k = reinterpret_cast<const int32_t*>(0x71000);
    p.total_q = 4096;
    p.q_strides.batch = p.k_strides.batch = p.v_strides.batch = p.o_strides.batch = 0;
    p.mask = MaskKind::kCausal;
    // Without total_k, TMA cannot map packed K: the split kernel.
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("sm80::ForwardKernel<") &&
                           Contains("CausalMask, SplitScheduler> in 1 split"));
    CHECK_THAT(kernel, !Contains("split_combine_kernel"));
    p.total_k = 4096;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<Sm90TileConfig<fp16, HeadDim 128") &&
                           Contains("CausalMask, HeaviestFirstScheduler, VariableLengths>"));
    // A window: the split kernel (no Hopper kernel for variable lengths with one).
    p.window_left = 100;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("SlidingWindow, SplitScheduler> in 1 split"));
  }
  SECTION("the d = 64 and 128 defaults' walking twins, where a workspace holds the counter") {
    ForwardParams p = described_call(128);
    p.batch = 4;  // 32 query tiles x 4 heads x 4: 512 tiles for 132 SMs; 32 key tiles
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("ping-pong, sm_90a>") && !Contains("walking"));
    p.workspace = reinterpret_cast<void*>(0x100000);
    p.workspace_bytes = flashmma::kTileCounterBytes;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("ping-pong, persistent, sm_90a>") &&
                           EndsWith("FullAttention, PlainScheduler> on 132 blocks walking its tiles"));
    // The causal mask walks up to the twin's Sm90WalkLimits::kMaskedKeyTiles (32) key tiles.
    using Walking128 = flashmma::Sm90DefaultConfig<__half, 128>::walking;
    static_assert(flashmma::Sm90WalkLimits<Walking128>::kMaskedKeyTiles == 32, "");
    static_assert(flashmma::Sm90WalkLimits<Walking128>::kKeyTiles == 32, "");
    p.mask = MaskKind::kCausal;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel,
               EndsWith("CausalMask, HeaviestFirstScheduler> on 132 blocks walking its tiles"));
    p.seqlen_k = 128 * 32 + 1;
    p.k_strides = p.v_strides = flashmma::bshd_strides(p.seqlen_k, 4, 128);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("CausalMask, HeaviestFirstScheduler>") && !Contains("walking"));
    // Other policies, and a workspace too small for the counter: one block per tile.
    p.window_left = 100;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") && !Contains("walking") &&
                           !Contains("persistent"));
    p.window_left = -1;
    p.workspace_bytes = flashmma::kTileCounterBytes - 1;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, !Contains("walking"));
    // Unmasked, one key tile more than the twin's kKeyTiles: one block per tile.
    p.workspace_bytes = flashmma::kTileCounterBytes;
    p.mask = MaskKind::kNone;
    p.seqlen_k = 128 * 32 + 1;
    p.k_strides = p.v_strides = flashmma::bshd_strides(p.seqlen_k, 4, 128);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<") && !Contains("walking"));
    // Variable lengths walk on the twin's kernel for them (its tiles counted to the longest
    // sequence: 16 x 4 heads x 4 sequences).
    p.mask = MaskKind::kNone;
    p.seqlen_k = 2048;
    p.total_q = p.total_k = 4 * 2048;
    p.q_strides = p.o_strides = flashmma::bshd_strides(p.total_q, 4, 128);
    p.k_strides = p.v_strides = flashmma::bshd_strides(p.total_k, 4, 128);
    p.q_strides.batch = p.k_strides.batch = p.v_strides.batch = p.o_strides.batch = 0;
    p.seqlen_q = 2048;
    p.cu_seqlens_q = reinterpret_cast<const int32_t*>(0x70000);
    p.cu_seqlens_k = reinterpret_cast<const int32_t*>(0x71000);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("ping-pong, persistent, sm_90a>") &&
                           EndsWith("FullAttention, PlainScheduler, VariableLengths> on 132 "
                                    "blocks walking its tiles"));
    // Without the counter, one block per tile on the one-tile default's kernel.
    p.workspace_bytes = 0;
    p.workspace = nullptr;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, EndsWith("FullAttention, PlainScheduler, VariableLengths>") &&
                           !Contains("persistent"));
    // d = 64 walks too (192-row tiles), up to 128 key tiles unmasked and 32 causal; its twin
    // waits for P V before the softmax, its one-tile default does not. d = 256 has no walking
    // twin.
    p = described_call(64);
    p.batch = 4;  // 22 query tiles of 192 rows x 4 heads x 4; 32 key tiles
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("softmax overlapped, sm_90a>") && !Contains("walking"));
    p.workspace = reinterpret_cast<void*>(0x100000);
    p.workspace_bytes = flashmma::kTileCounterBytes;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("HeadDim 64") &&
                           Contains("products overlapped, persistent, sm_90a>") &&
                           EndsWith("on 132 blocks walking its tiles"));
    using Walking64 = flashmma::Sm90DefaultConfig<__half, 64>::walking;
    for (const int64_t key_tiles : {32, 33, 128, 129}) {
      for (const MaskKind mask : {MaskKind::kNone, MaskKind::kCausal}) {
        CAPTURE(key_tiles, mask == MaskKind::kCausal);
        p.mask = mask;
        p.seqlen_k = 128 * key_tiles;
        p.k_strides = p.v_strides = flashmma::bshd_strides(p.seqlen_k, 4, 64);
        REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
        const bool walks = key_tiles <= (mask == MaskKind::kCausal ? 32 : 128);
        CHECK((kernel.find("blocks walking its tiles") != std::string::npos) == walks);
        // The workspace asked for: the counter wherever either limit walks.
        CHECK(flashmma::detail::tile_counter_bytes<Walking64>(p, h200) ==
              (key_tiles <= 128 ? flashmma::kTileCounterBytes : 0));
      }
    }
    p = described_call(256);
    p.batch = 4;
    p.workspace = reinterpret_cast<void*>(0x100000);
    p.workspace_bytes = flashmma::kTileCounterBytes;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("HeadDim 256") && !Contains("persistent") && !Contains("walking"));
  }
  SECTION("a KV append attends on the split kernel") {
    ForwardParams p = described_call(128);
    p.k_new = p.v_new = reinterpret_cast<const void*>(0x80000);
    p.seqlen_new = 1;
    p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(1, 4, 128);
    p.cache_seqlens = reinterpret_cast<const int32_t*>(0x75000);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("kv_append_kernel, then sm80::ForwardKernel<") &&
                           Contains("SplitScheduler> in 1 split"));
  }
  SECTION("seqused_k alone") {
    ForwardParams p = described_call(64);
    p.seqused_k = reinterpret_cast<const int32_t*>(0x72000);
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, StartsWith("sm90::ForwardKernel<Sm90TileConfig<fp16, HeadDim 64") &&
                           Contains("FullAttention, PlainScheduler, VariableLengths>"));
    // Without sm_90a code: the split kernel.
    REQUIRE(flashmma::describe_default_kernel(p, h200, false, kernel).ok());
    CHECK_THAT(kernel, Contains("FullAttention, SplitScheduler> in 1 split"));
  }
  SECTION("a paged cache, decoding: the KVPages kernel in several splits") {
    ForwardParams p = described_call(128);
    p.seqlen_q = 1;
    p.seqlen_k = 65536;
    p.q_strides = p.o_strides = flashmma::bshd_strides(1, 4, 128);
    p.k_strides = p.v_strides = flashmma::bshd_strides(16, 4, 128);  // pages of 16 keys
    p.block_table = reinterpret_cast<const int32_t*>(0x73000);
    p.block_table_batch_stride = 4096;
    p.page_size = 16;
    p.num_pages = 4096;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("FullAttention, SplitScheduler, KVPages> in 1 split"));
    p.workspace = reinterpret_cast<void*>(0x40000);
    p.workspace_bytes = std::size_t{1} << 30;
    REQUIRE(flashmma::describe_default_kernel(p, h200, true, kernel).ok());
    CHECK_THAT(kernel, Contains("SplitScheduler, KVPages> in ") &&
                           Contains("splits, then split_combine_kernel"));
  }
}
