// SPDX-License-Identifier: Apache-2.0
// Split-KV through forward<Config> (params.num_splits, params.workspace): decoding-sized calls
// (one to a few query rows over long keys, GQA packed and not, causal rows that see no key) split 2 to 128 ways
// and automatically, against the reference; a score policy split the same way; and the refusals
// (a split without its workspace, a count out of range, a misaligned workspace) that launch
// nothing.
#include "support/catch.hpp"

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_reference.cuh"

namespace {

using flashmma::test::AttentionCase;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;

using SplitConfigs =
    std::tuple<flashmma::DefaultConfigT<__half, 64>,
               flashmma::TileConfig<__nv_bfloat16, 128, 64, 32, 4, 3,
                                    flashmma::SmemLayout::kXorSwizzle>>;

std::vector<AttentionCase> split_cases(int64_t head_dim) {
  using flashmma::test::make_case;
  return {make_case(4, 1, 4097, 8, 2, head_dim, false, Layout::kBSHD),
          make_case(2, 7, 1000, 4, 4, head_dim, true, Layout::kBHSD),
          make_case(1, 65, 300, 2, 1, head_dim, false, Layout::kPaddedBSHD),
          make_case(3, 1, 1, 4, 1, head_dim, false, Layout::kBSHD),
          make_case(1, 130, 64, 2, 2, head_dim, true, Layout::kBSHD),  // rows with no key
          // One query over GQA groups of 16 and of 8: packed, a group's heads in one work tile.
          make_case(2, 1, 1500, 16, 1, head_dim, false, Layout::kBHSD),
          make_case(2, 1, 999, 16, 2, head_dim, true, Layout::kPaddedBSHD)};
}

// forward<Config> with `num_splits` and a workspace of the size forward_workspace_bytes names.
template <class Config>
flashmma::Status split_forward(const flashmma::ForwardParams& params, int num_splits) {
  flashmma::ForwardParams p = params;
  p.num_splits = num_splits;
  std::size_t bytes = 0;
  if (flashmma::Status s = flashmma::forward_workspace_bytes<Config>(p, bytes); !s) return s;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(bytes > 0 ? bytes : 1));
  flashmma::test::poison(workspace);  // partials never written would show as NaN
  p.workspace = workspace.get();
  p.workspace_bytes = bytes;
  const flashmma::Status status = flashmma::forward<Config>(p);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());  // before the workspace is freed
  return status;
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("split-KV matches the reference for every split count",
                        "[gpu][forward][split_kv]", SplitConfigs) {
  for (const AttentionCase& c : split_cases(TestType::kHeadDim)) {
    for (const int splits : {0, 2, 3, 16, 128}) {
      DYNAMIC_SECTION(c.describe() << " num_splits " << splits) {
        flashmma::test::check_forward_case<typename TestType::element_type>(
            c, [&](const flashmma::ForwardParams& p) {
              return split_forward<TestType>(p, splits);
            });
      }
    }
  }
}

TEST_CASE("split-KV applies a score policy in every split", "[gpu][forward][split_kv]") {
  using Config = flashmma::DefaultConfigT<__half, 64>;
  const AttentionCase c = flashmma::test::make_case(2, 3, 2000, 4, 2, 64, false, Layout::kBSHD);
  const flashmma::SlidingWindow window{{}, 300, 0};
  for (const int splits : {2, 7}) {
    INFO("num_splits " << splits);
    flashmma::test::CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
    flashmma::ForwardParams p = t.params;
    p.num_splits = splits;
    std::size_t bytes = 0;
    REQUIRE(flashmma::forward_workspace_bytes<Config>(p, bytes).ok());
    REQUIRE(bytes > 0);
    DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(bytes));
    p.workspace = workspace.get();
    p.workspace_bytes = bytes;
    const flashmma::Status status = flashmma::forward<Config>(p, window);
    INFO(status.message());
    REQUIRE(status.ok());
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    flashmma::test::check_against_policy_reference(t, window);
  }
}

TEST_CASE("split-KV refuses what it cannot run, and writes nothing", "[gpu][forward][split_kv]") {
  using Config = flashmma::DefaultConfigT<__half, 64>;
  const AttentionCase c = flashmma::test::make_case(2, 1, 4097, 4, 1, 64, false, Layout::kBSHD);
  flashmma::test::CaseTensors<__half> t = flashmma::test::make_case_tensors<__half>(c);
  const std::vector<__half> o_before = t.o.to_host();
  const auto o_untouched = [&] {
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    return flashmma::test::same_bytes(o_before, t.o.to_host());
  };

  flashmma::ForwardParams p = t.params;
  p.num_splits = 4;  // and no workspace
  flashmma::Status s = flashmma::forward<Config>(p);
  CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(s.message().find("num_splits = 4 needs a workspace of") != std::string::npos);
  CHECK(o_untouched());

  DeviceBuffer<unsigned char> small(256);
  p.workspace = small.get();
  p.workspace_bytes = 256;
  s = flashmma::forward<Config>(p);
  CHECK(s.message().find("got 256 bytes") != std::string::npos);
  CHECK(o_untouched());

  p.workspace = small.get() + 16;
  s = flashmma::forward<Config>(p);
  CHECK(s.message().find("workspace must be 256-byte aligned") != std::string::npos);

  p = t.params;
  p.num_splits = 129;
  s = flashmma::forward<Config>(p);
  CHECK(s.message().find("num_splits must be 0 (automatic), 1 (no split) or 2 to 128") !=
        std::string::npos);
  CHECK(o_untouched());

  // Automatic without a workspace: no split, a correct result.
  p = t.params;
  REQUIRE(flashmma::forward<Config>(p).ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  flashmma::test::require_matches_reference(t);
}
