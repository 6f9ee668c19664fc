// SPDX-License-Identifier: Apache-2.0
// The Hopper kernel (sm90::ForwardKernel, through forward<Sm90TileConfig>): the whole case matrix
// and the routed head dims (support/forward_case.cuh), the built-in score policies, a user's
// policy, and the layouts TMA cannot describe. Built for sm_90a only; it skips elsewhere
// (test_sm90_support.cuh).
#include "support/catch.hpp"

#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "gpu/test_sm90_support.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_reference.cuh"
#include "support/prefix_lm.hpp"

namespace {

using flashmma::AlibiBias;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::SlidingWindow;
using flashmma::Softcap;
using flashmma::Sm90TileConfig;
using flashmma::test::AttentionCase;
using flashmma::test::DeviceBuffer;

// Two consumer warpgroups with 128 keys per tile, and with 176 taking turns (ping-pong); three
// stages at head dim 64, and three consumer warpgroups (BlockM 192, d = 64's default); one
// consumer warpgroup at a head dim padded to 128 (96), on the sequential schedule; 112 keys at a
// head dim padded to 192 (160's default: three 64-column sub-tiles, the last one partly
// padding); the largest head dim with 80 keys.
using Sm90Configs =
    std::tuple<Sm90TileConfig<__nv_bfloat16, 128, 128>,
               Sm90TileConfig<__half, 128, 176, 2, 2, 24, 240,
                              flashmma::Sm90Schedule::kOverlapSoftmax, /*PingPong=*/true>,
               Sm90TileConfig<__half, 64, 128, 3>,
               Sm90TileConfig<__half, 64, 128, 2, 3, 24, 160>,
               Sm90TileConfig<__nv_bfloat16, 96, 64, 2, 1, 24, 256,
                              flashmma::Sm90Schedule::kSequential>,
               Sm90TileConfig<__nv_bfloat16, 160, 112>,
               Sm90TileConfig<__nv_bfloat16, 256, 80>,
               flashmma::Sm90DefaultConfig<__nv_bfloat16, 128>::walking>;  // persistent

// The walking twins of the d = 128 (ping-pong) and d = 64 (three consumer warpgroups) defaults.
using PersistentConfigs = std::tuple<flashmma::Sm90DefaultConfig<__nv_bfloat16, 128>::walking,
                                     flashmma::Sm90DefaultConfig<__half, 64>::walking>;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("the sm_90a kernel matches the reference over the case matrix",
                        "[gpu][forward][sm90]", Sm90Configs) {
  flashmma::test::check_config_case_matrix<TestType>();
}

TEMPLATE_LIST_TEST_CASE("the sm_90a kernel applies the score policies",
                        "[gpu][forward][sm90][policy]", Sm90Configs) {
  for (const AttentionCase& c : flashmma::test::policy_cases(TestType::kHeadDim)) {
    for (const SlidingWindow& window :
         {SlidingWindow{{}, 32, 0}, SlidingWindow{{}, 0, 0}, SlidingWindow{{}, 5, 17},
          SlidingWindow{{}, -1, 40}, SlidingWindow{{}, 64, -1}}) {
      INFO("window (" << window.left << ", " << window.right << ")");
      flashmma::test::check_policy<TestType>(c, window, window);
    }
    for (const int64_t prefix : {0, 40, 1000}) {
      INFO("prefix-LM " << prefix);
      flashmma::test::PrefixLM policy;
      policy.prefix = prefix;
      flashmma::test::check_policy<TestType>(c, policy, policy);
    }
  }
  const int64_t heads = 4;
  std::vector<float> slopes;  // [batch 2, heads 4]
  for (int64_t i = 0; i < 2 * heads; ++i) slopes.push_back(std::exp2(-0.5f * (i + 1)));
  DeviceBuffer<float> device_slopes(static_cast<int64_t>(slopes.size()));
  FLASHMMA_CUDA_CHECK(cudaMemcpy(device_slopes.get(), slopes.data(), device_slopes.bytes(),
                                 cudaMemcpyHostToDevice));
  using Everything = Combined<Softcap, Combined<AlibiBias, SlidingWindow>>;
  const SlidingWindow window{{}, 48, 0};
  const Everything all{{}, Softcap::with_cap(20.f), {{}, {{}, device_slopes.get(), heads}, window}};
  const Everything host_all{{}, Softcap::with_cap(20.f), {{}, {{}, slopes.data(), heads}, window}};
  using flashmma::test::Layout;
  const AttentionCase c =
      flashmma::test::make_case(2, 133, 200, heads, 2, TestType::kHeadDim, false, Layout::kBSHD);
  flashmma::test::check_policy<TestType>(c, all, host_all);
  using AlibiCausal = Combined<AlibiBias, CausalMask>;
  const AttentionCase tall =
      flashmma::test::make_case(2, 200, 133, heads, 1, TestType::kHeadDim, false, Layout::kBSHD);
  flashmma::test::check_policy<TestType>(tall, AlibiCausal{{}, {{}, device_slopes.get(), 0}, {}},
                         AlibiCausal{{}, {{}, slopes.data(), 0}, {}});
}

TEST_CASE("the sm_90a kernel refuses strides TMA cannot describe, and writes nothing",
          "[gpu][forward][sm90]") {
  using Config = Sm90TileConfig<__nv_bfloat16, 128, 128>;
  const AttentionCase c = flashmma::test::make_case(2, 64, 64, 2, 1, 128, false,
                                                    flashmma::test::Layout::kBSHD);
  flashmma::test::CaseTensors<__nv_bfloat16> t =
      flashmma::test::make_case_tensors<__nv_bfloat16>(c);
  flashmma::ForwardParams p = t.params;
  p.k = static_cast<const __nv_bfloat16*>(p.k) + (c.seqlen_k - 1) * p.k_strides.row;
  p.k_strides.row = -p.k_strides.row;  // K read backwards: fine for cp.async, not for TMA
  const std::vector<__nv_bfloat16> o_before = t.o.to_host();
  const flashmma::Status status = flashmma::forward<Config>(p);
  INFO(status.message());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<__nv_bfloat16> o_after = t.o.to_host();
  CHECK(std::memcmp(o_before.data(), o_after.data(), o_before.size() * sizeof(__nv_bfloat16)) ==
        0);
  REQUIRE(status.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(status.message().find("k_strides.row is -") != std::string::npos);
  CHECK(status.message().find("positive strides") != std::string::npos);
}

namespace {

// A case run by a persistent config one block per tile (no workspace: the bits every walk must
// give), and the same params with a workspace holding the tile counter, whose blocks walk.
template <class Config>
struct WalkCheck {
  using Element = typename Config::element_type;
  flashmma::test::CaseTensors<Element> t;
  std::vector<Element> one_per_tile;
  std::vector<float> one_per_tile_lse;
  flashmma::ForwardParams walked;

  WalkCheck(const AttentionCase& c, DeviceBuffer<unsigned char>& workspace)
      : t(flashmma::test::make_case_tensors<Element>(c)) {
    REQUIRE(flashmma::test::forward_case_policy<Config>(t.params).ok());
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    one_per_tile = t.o.to_host();
    one_per_tile_lse = t.lse.to_host();
    walked = t.params;
    walked.workspace = workspace.get();
    walked.workspace_bytes = workspace.bytes();
  }
  void poison_outputs() {
    flashmma::test::poison(t.o);
    flashmma::test::poison(t.lse);
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());  // before a launch on another stream, too
  }
  void check_outputs() {
    CHECK(same_bits(t.o.to_host(), one_per_tile));
    CHECK(same_bits(t.lse.to_host(), one_per_tile_lse));
  }
  // A walked call through forward<Config>, checked.
  void check_call() {
    poison_outputs();
    REQUIRE(flashmma::test::forward_case_policy<Config>(walked).ok());
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    check_outputs();
  }
  // The walked call captured in a CUDA graph once, replayed `replays` times, each checked.
  void check_graph_replays(int replays) {
    cudaStream_t stream;
    FLASHMMA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
    cudaGraph_t graph;
    FLASHMMA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
    flashmma::ForwardParams p = walked;
    p.mask = flashmma::MaskKind::kNone;  // the policy carries it
    const flashmma::Status captured =
        walked.mask == flashmma::MaskKind::kCausal
            ? flashmma::forward<Config>(p, flashmma::CausalMask{}, stream)
            : flashmma::forward<Config>(p, flashmma::FullAttention{}, stream);
    FLASHMMA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
    REQUIRE(captured.ok());
    cudaGraphExec_t exec;
    FLASHMMA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));
    for (int replay = 0; replay < replays; ++replay) {
      INFO("replay " << replay);
      poison_outputs();
      FLASHMMA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
      FLASHMMA_CUDA_CHECK(cudaStreamSynchronize(stream));
      check_outputs();
    }
    FLASHMMA_CUDA_CHECK(cudaGraphExecDestroy(exec));
    FLASHMMA_CUDA_CHECK(cudaGraphDestroy(graph));
    FLASHMMA_CUDA_CHECK(cudaStreamDestroy(stream));
  }
};

}  // namespace

// The smallest walks (a few tiles past the SMs' 132, a partial query tile, GQA), for the
// sanitizers (tests/run_gpu_suite.sh's persistent step): the Q and O barriers, the tile slot.
TEMPLATE_LIST_TEST_CASE("persistent walk: small shapes", "[gpu][forward][sm90][persistent]",
                        PersistentConfigs) {
  using flashmma::test::Layout;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(flashmma::kTileCounterBytes));
  flashmma::test::poison(workspace);
  for (const bool causal : {false, true}) {
    const AttentionCase c =
        flashmma::test::make_case(3, 1000, 700, 8, 2, TestType::kHeadDim, causal, Layout::kBSHD);
    INFO("case: " << c.describe());
    WalkCheck<TestType>(c, workspace).check_call();
  }
}

// Without a workspace a persistent config runs one block per tile (the case matrix above checks
// it against the reference); with one, its blocks walk the tiles, taking each next one from the
// counter in the workspace: the same bits, whatever the counter held before, call after call,
// and replayed from a CUDA graph. Every shape has more tiles than an H200 has SMs, and keys within
// the walk's limits (the config's Sm90WalkLimits: kMaskedKeyTiles with the causal mask, kKeyTiles
// without; the last two at exactly those).
TEMPLATE_LIST_TEST_CASE("a persistent config's blocks walk the tiles with the same results",
                        "[gpu][forward][sm90][persistent]", PersistentConfigs) {
  static_assert(TestType::kPersistent, "");
  using flashmma::test::Layout;
  constexpr int64_t d = TestType::kHeadDim;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(flashmma::kTileCounterBytes));
  flashmma::test::poison(workspace);  // needs no initialization
  using Limits = flashmma::Sm90WalkLimits<TestType>;
  const int64_t key_limit = TestType::kBlockN * Limits::kKeyTiles;
  const int64_t masked_key_limit = TestType::kBlockN * Limits::kMaskedKeyTiles;
  for (const AttentionCase& c :
       {flashmma::test::make_case(3, 1000, 1000, 12, 4, d, true, Layout::kBSHD),
        flashmma::test::make_case(2, 1536, 700, 16, 16, d, false, Layout::kBHSD),
        flashmma::test::make_case(4, 333, masked_key_limit, 24, 3, d, true, Layout::kBSHD),
        flashmma::test::make_case(1, 1100, key_limit, 40, 8, d, false, Layout::kBSHD)}) {
    INFO("case: " << c.describe());
    WalkCheck<TestType> check(c, workspace);
    for (int call = 0; call < 3; ++call) {
      INFO("call " << call);
      check.check_call();
    }
    check.check_graph_replays(2);
  }
}
