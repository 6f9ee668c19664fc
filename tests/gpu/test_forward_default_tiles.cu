// SPDX-License-Identifier: Apache-2.0
// forward<Config> for the causal and compact defaults that differ from the general ones (fp16
// and bf16), over the case matrix and routed head dims; and forward() itself choosing among a
// head dim's defaults on this device, the Hopper one included. forward(params) is the one of
// flashmma::kernels, which this test links (tests/CMakeLists.txt), so that the file compiles the
// kernels of its forward<Config, Policy> calls only, not the default dispatch again.
#include "support/catch.hpp"

#include <string>
#include <vector>

#include "flashmma/launch_plan.hpp"
#include "support/forward_case.cuh"
#include "support/test_configs.hpp"

TEMPLATE_LIST_TEST_CASE("forward<Config> matches the reference for the causal and compact defaults",
                        "[gpu][forward][default-tiles]", flashmma::test::DefaultAlternateConfigs) {
  flashmma::test::check_config_case_matrix<TestType>();
}

namespace {

using flashmma::DefaultTile;
using flashmma::ForwardParams;
using flashmma::Status;
using flashmma::test::AttentionCase;

// The config forward<...> runs as the expectation of check_dispatch: Portable, or the Hopper
// default of the head dim where the dispatch's rules (launch_plan.hpp) pick it on this device.
template <class Element, int HeadDim, class Portable>
Status forward_as_dispatched(const ForwardParams& params, const flashmma::DeviceInfo& device) {
  using Hopper = flashmma::Sm90DefaultConfig<Element, HeadDim>;
  if constexpr (Hopper::kAvailable) {
    if (flashmma::detail::runs_sm90_default<typename Hopper::type>(
            params, device, flashmma::sm90a_code_loaded())) {
      UNSCOPED_INFO("expected: the Hopper default");
      return flashmma::test::forward_case_policy<typename Hopper::type>(params);
    }
  }
  UNSCOPED_INFO("expected: the portable default");
  return flashmma::test::forward_case_policy<Portable>(params);
}

// Runs forward(params) (forward_default_config<Element, HeadDim> for these head dims) and
// forward<the config the dispatch picks for this device> (default_tile's portable tile, or the
// Hopper default) on the same inputs; both are deterministic, so the outputs must be equal bit
// for bit.
template <class Element, int HeadDim>
void check_dispatch(bool causal) {
  using Defaults = flashmma::DefaultConfig<Element, HeadDim>;
  const AttentionCase c =
      flashmma::test::make_case(2, 300, 300, 4, 2, HeadDim, causal, flashmma::test::Layout::kBSHD);
  INFO("case: " << c.describe());
  flashmma::test::CaseTensors<Element> t = flashmma::test::make_case_tensors<Element>(c);

  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  Status expected_status;
  switch (flashmma::default_tile<Element, HeadDim>(causal, device.smem_per_block_optin)) {
    case DefaultTile::kGeneral:
      expected_status =
          forward_as_dispatched<Element, HeadDim, typename Defaults::type>(t.params, device);
      break;
    case DefaultTile::kCausal:
      expected_status =
          forward_as_dispatched<Element, HeadDim, typename Defaults::causal>(t.params, device);
      break;
    case DefaultTile::kCompact:
      expected_status =
          forward_as_dispatched<Element, HeadDim, typename Defaults::compact>(t.params, device);
      break;
  }
  REQUIRE(expected_status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Element> expected = t.o.to_host();

  flashmma::test::poison(t.o);
  const Status status = flashmma::forward(t.params);
  INFO("forward returned: " << status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(flashmma::test::same_bytes(t.o.to_host(), expected));
  flashmma::test::require_matches_reference(t);
}

// A decoding call (one query over GQA heads) runs on the split kernel of SplitKernelConfig,
// packed, as forward<SplitKernelConfig, Policy> runs it: the same bits, and the reference's
// values.
template <class Element, int HeadDim>
void check_decoding_dispatch(bool causal) {
  const AttentionCase c =
      flashmma::test::make_case(3, 1, 1000, 8, 2, HeadDim, causal, flashmma::test::Layout::kBSHD);
  INFO("case: " << c.describe());
  flashmma::test::CaseTensors<Element> t = flashmma::test::make_case_tensors<Element>(c);
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  std::string kernel;
  REQUIRE(flashmma::describe_default_kernel(t.params, device, flashmma::sm90a_code_loaded(), kernel)
              .ok());
  INFO(kernel);
  CHECK(kernel.find("SplitScheduler> in 1 split, packed GQA") != std::string::npos);

  REQUIRE(flashmma::test::forward_case_policy<flashmma::SplitKernelConfigT<Element, HeadDim>>(t.params)
              .ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const std::vector<Element> expected = t.o.to_host();
  flashmma::test::poison(t.o);
  REQUIRE(flashmma::forward(t.params).ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(flashmma::test::same_bytes(t.o.to_host(), expected));
  flashmma::test::require_matches_reference(t);
}

}  // namespace

TEST_CASE("forward(params) runs decoding calls on the split kernel, packed",
          "[gpu][forward][default-tiles][dispatch]") {
  SECTION("d = 128") { check_decoding_dispatch<__half, 128>(false); }
  SECTION("d = 64, causal, bf16") { check_decoding_dispatch<__nv_bfloat16, 64>(true); }
}

TEST_CASE("forward(params) runs the tile default_tile names for this device",
          "[gpu][forward][default-tiles][dispatch]") {
  SECTION("d = 128, no mask") { check_dispatch<__half, 128>(false); }
  SECTION("d = 128, causal") { check_dispatch<__half, 128>(true); }
  SECTION("d = 256, causal, bf16") { check_dispatch<__nv_bfloat16, 256>(true); }
  SECTION("d = 160, bf16") { check_dispatch<__nv_bfloat16, 160>(false); }
}
