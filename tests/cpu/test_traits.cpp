// SPDX-License-Identifier: Apache-2.0
// TileConfig's derived constants, the default configurations and the head-dim dispatch rule.
#include "support/catch.hpp"

#include <flashmma/traits/default_configs.hpp>
#include <flashmma/traits/tile_config.hpp>

#include "support/test_configs.hpp"

#include <cstddef>
#include <iterator>
#include <tuple>
#include <type_traits>

namespace {

using flashmma::SmemLayout;
using flashmma::TileConfig;

// Opt-in shared memory per block of an sm_80 GPU (A100).
constexpr std::size_t kSm80SmemBytes = 163 * 1024;

// The shared-memory formula written out independently of the traits: a Q tile of BlockM rows and
// Stages tiles each of K and V of BlockN rows, every row HeadDim 16-bit elements plus 8 of
// padding for kPaddedRows.
template <class Config>
constexpr std::size_t expected_smem_bytes() {
  const int row_elements =
      Config::kHeadDim + (Config::kSmemLayout == SmemLayout::kPaddedRows ? 8 : 0);
  const int rows = Config::kBlockM + 2 * Config::kStages * Config::kBlockN;
  return std::size_t{2} * rows * row_elements;
}

// Every config the tests instantiate: the defaults and the custom shapes.
using TestedConfigs = decltype(std::tuple_cat(flashmma::test::DefaultFp16Configs{},
                                              flashmma::test::DefaultBf16Configs{},
                                              flashmma::test::DefaultAlternateConfigs{},
                                              flashmma::test::CustomConfigs{}));

// Whether a std::tuple of types holds T.
template <class T, class Tuple>
struct TupleHolds;
template <class T, class... Types>
struct TupleHolds<T, std::tuple<Types...>>
    : std::bool_constant<(std::is_same<T, Types>::value || ...)> {};

// Opt-in shared memory per block of sm_86 / sm_89 GPUs and of sm_90 (H100, H200).
constexpr std::size_t kSm86SmemBytes = 99 * 1024;
constexpr std::size_t kSm90SmemBytes = 227 * 1024;

}  // namespace

TEST_CASE("TileConfig derives its constants from the knobs", "[traits]") {
  using Config = TileConfig<__half, 128, 128, 64, 8, 2, SmemLayout::kXorSwizzle>;
  STATIC_REQUIRE(Config::kScalarType == flashmma::ScalarType::kFloat16);
  STATIC_REQUIRE(Config::kThreads == 256);
  STATIC_REQUIRE(Config::kRowsPerWarp == 16);
  STATIC_REQUIRE(Config::kRowTiles == 1);
  STATIC_REQUIRE(Config::kMinBlocksPerSm == 1);
  STATIC_REQUIRE(Config::kHeadDimSlices == 8);
  STATIC_REQUIRE(Config::kScoreTiles == 8);
  STATIC_REQUIRE(Config::kKeySlices == 4);
  STATIC_REQUIRE(Config::kOutputTiles == 16);
  STATIC_REQUIRE(Config::kAccumulatorRegisters == 96);
  STATIC_REQUIRE(Config::kQInRegisters);
  STATIC_REQUIRE(Config::kChunksPerRow == 16);
  STATIC_REQUIRE(Config::kRowStride == 128);
  STATIC_REQUIRE(Config::kQTileElements == 128 * 128);
  STATIC_REQUIRE(Config::kKVTileElements == 64 * 128);
  STATIC_REQUIRE(Config::kSmemBytes == 2 * (128 + 2 * 2 * 64) * 128);
  STATIC_REQUIRE(Config::kSmemBytes == 96 * 1024);
}

TEST_CASE("TileConfig with padded rows, one stage and bf16", "[traits]") {
  using Config = TileConfig<__nv_bfloat16, 96, 64, 32, 4, 1, SmemLayout::kPaddedRows>;
  STATIC_REQUIRE(Config::kScalarType == flashmma::ScalarType::kBFloat16);
  STATIC_REQUIRE(Config::kThreads == 128);
  STATIC_REQUIRE(Config::kHeadDimSlices == 6);
  STATIC_REQUIRE(Config::kScoreTiles == 4);
  STATIC_REQUIRE(Config::kKeySlices == 2);
  STATIC_REQUIRE(Config::kOutputTiles == 12);
  STATIC_REQUIRE(Config::kAccumulatorRegisters == 64);
  STATIC_REQUIRE(Config::kChunksPerRow == 12);
  STATIC_REQUIRE(Config::kRowStride == 104);
  STATIC_REQUIRE(Config::kSmemBytes == 2 * (64 + 2 * 32) * 104);
}

TEST_CASE("TileConfig with two m16 row tiles per warp", "[traits]") {
  using Config = TileConfig<__half, 64, 128, 64, 4, 2, SmemLayout::kXorSwizzle, 2>;
  STATIC_REQUIRE(Config::kThreads == 128);
  STATIC_REQUIRE(Config::kRowsPerWarp == 32);
  STATIC_REQUIRE(Config::kRowTiles == 2);
  STATIC_REQUIRE(Config::kMinBlocksPerSm == 2);
  STATIC_REQUIRE(Config::kAccumulatorRegisters == 4 * 2 * (8 + 8));
  STATIC_REQUIRE(Config::kQInRegisters);  // 2 row tiles x HeadDim 64
  // Shared memory depends on BlockM, not on how the rows are split among warps.
  STATIC_REQUIRE(Config::kSmemBytes == 2 * (128 + 2 * 2 * 64) * 64);
}

TEST_CASE("TileConfig rescales O before the exponentials unless told otherwise", "[traits]") {
  using flashmma::RescaleOrder;
  using Default = TileConfig<__half, 128, 128, 64, 4, 1, SmemLayout::kXorSwizzle>;
  STATIC_REQUIRE(Default::kRescaleOrder == RescaleOrder::kBeforeExp);
  STATIC_REQUIRE(Default::kRescaleBeforeExp);
  using After =
      TileConfig<__half, 128, 128, 64, 4, 1, SmemLayout::kXorSwizzle, 1, RescaleOrder::kAfterExp>;
  STATIC_REQUIRE(!After::kRescaleBeforeExp);
  STATIC_REQUIRE(flashmma::IsTileConfig<After>::value);
}

TEST_CASE("TileConfig keeps Q in registers up to 128 columns of row tiles", "[traits]") {
  STATIC_REQUIRE(TileConfig<__half, 16, 16, 16, 1, 1, SmemLayout::kPaddedRows>::kQInRegisters);
  STATIC_REQUIRE(TileConfig<__half, 128, 64, 64, 4, 2, SmemLayout::kXorSwizzle>::kQInRegisters);
  STATIC_REQUIRE_FALSE(
      TileConfig<__half, 144, 64, 64, 4, 2, SmemLayout::kPaddedRows>::kQInRegisters);
  STATIC_REQUIRE_FALSE(
      TileConfig<__half, 256, 64, 32, 4, 2, SmemLayout::kXorSwizzle>::kQInRegisters);
  STATIC_REQUIRE_FALSE(
      TileConfig<__half, 96, 64, 32, 2, 2, SmemLayout::kPaddedRows>::kQInRegisters);
}

TEST_CASE("TileConfig accepts the extremes of each knob", "[traits]") {
  using Smallest = TileConfig<__half, 16, 16, 16, 1, 1, SmemLayout::kPaddedRows>;
  STATIC_REQUIRE(Smallest::kThreads == 32);
  STATIC_REQUIRE(Smallest::kSmemBytes == 2 * (16 + 2 * 16) * 24);

  using Widest = TileConfig<__half, 64, 256, 64, 16, 4, SmemLayout::kXorSwizzle>;
  STATIC_REQUIRE(Widest::kThreads == 512);
  STATIC_REQUIRE(Widest::kSmemBytes == 2 * (256 + 2 * 4 * 64) * 64);
}

TEMPLATE_LIST_TEST_CASE("Tested configs derive consistent constants", "[traits]",
                        TestedConfigs) {
  using Config = TestType;
  STATIC_REQUIRE(flashmma::IsTileConfig<Config>::value);
  STATIC_REQUIRE(Config::kThreads == 32 * Config::kWarps);
  STATIC_REQUIRE(Config::kRowsPerWarp * Config::kWarps == Config::kBlockM);
  STATIC_REQUIRE(Config::kRowTiles * 16 == Config::kRowsPerWarp);
  STATIC_REQUIRE(Config::kHeadDimSlices * 16 == Config::kHeadDim);
  STATIC_REQUIRE(Config::kOutputTiles * 8 == Config::kHeadDim);
  STATIC_REQUIRE(Config::kScoreTiles * 8 == Config::kBlockN);
  STATIC_REQUIRE(Config::kKeySlices * 16 == Config::kBlockN);
  STATIC_REQUIRE(Config::kChunksPerRow * 8 == Config::kHeadDim);
  STATIC_REQUIRE(Config::kAccumulatorRegisters ==
                 4 * Config::kRowTiles * (Config::kHeadDim / 8 + Config::kBlockN / 8));
  STATIC_REQUIRE(Config::kQInRegisters == (Config::kRowTiles * Config::kHeadDim <= 128));
  STATIC_REQUIRE(Config::kRescaleBeforeExp ==
                 (Config::kRescaleOrder == flashmma::RescaleOrder::kBeforeExp));
  STATIC_REQUIRE(Config::kSmemBytes == expected_smem_bytes<Config>());
  STATIC_REQUIRE(Config::kSmemBytes <= kSm80SmemBytes);
  STATIC_REQUIRE(std::is_same<typename Config::arch_tag, flashmma::arch::Sm80>::value);
}

TEMPLATE_LIST_TEST_CASE("Default configs swizzle wherever the swizzle applies",
                        "[traits][defaults]", flashmma::test::DefaultFp16Configs) {
  // The XOR swizzle for whole groups of 64 elements, padded rows elsewhere.
  STATIC_REQUIRE((TestType::kSmemLayout == SmemLayout::kXorSwizzle) ==
                 (TestType::kHeadDim % 64 == 0));
}

TEST_CASE("Default configs: one per supported head dim, for both element types",
          "[traits][defaults]") {
  STATIC_REQUIRE(std::tuple_size<flashmma::DefaultConfigsFor<__half>>::value ==
                 std::size(flashmma::kSupportedHeadDims));
  STATIC_REQUIRE(std::is_same<flashmma::DefaultConfigT<__half, 64>::element_type, __half>::value);
  STATIC_REQUIRE(std::is_same<flashmma::DefaultConfigT<__nv_bfloat16, 64>::element_type,
                              __nv_bfloat16>::value);
  STATIC_REQUIRE(flashmma::DefaultConfigT<__nv_bfloat16, 256>::kScalarType ==
                 flashmma::ScalarType::kBFloat16);

}

TEST_CASE("Default configs: every head dim is the kernel's own", "[traits][defaults]") {
  std::apply(
      [](auto... config) {
        const int head_dims[] = {decltype(config)::kHeadDim...};
        for (std::size_t i = 0; i < std::size(head_dims); ++i) {
          CHECK(head_dims[i] == flashmma::kSupportedHeadDims[i]);
        }
      },
      flashmma::DefaultConfigsFor<__half>{});
}

template <int HeadDim>
void check_default_family() {
  using Defaults = flashmma::DefaultConfig<__half, HeadDim>;
  STATIC_REQUIRE(Defaults::type::kHeadDim == HeadDim);
  STATIC_REQUIRE(Defaults::causal::kHeadDim == HeadDim);
  STATIC_REQUIRE(Defaults::compact::kHeadDim == HeadDim);
  // DefaultAlternateConfigsFor (the list the GPU tests run) is written by hand: it must hold every
  // causal and compact config that differs from the general one.
  using Alternates = flashmma::DefaultAlternateConfigsFor<__half>;
  STATIC_REQUIRE((std::is_same<typename Defaults::causal, typename Defaults::type>::value ||
                  TupleHolds<typename Defaults::causal, Alternates>::value));
  STATIC_REQUIRE((std::is_same<typename Defaults::compact, typename Defaults::type>::value ||
                  TupleHolds<typename Defaults::compact, Alternates>::value));
  // The general and causal defaults run on every sm_80+ GPU but 8.6 / 8.9, the compact ones
  // there too.
  STATIC_REQUIRE(Defaults::type::kSmemBytes <= kSm80SmemBytes);
  STATIC_REQUIRE(Defaults::causal::kSmemBytes <= kSm80SmemBytes);
  STATIC_REQUIRE(Defaults::compact::kSmemBytes <= kSm86SmemBytes);
  STATIC_REQUIRE(Defaults::compact::kSmemBytes <= flashmma::kCompactSmemBytes);
  // With enough shared memory the mask picks general or causal; without, the compact config.
  constexpr auto general = flashmma::default_tile<__half, HeadDim>(false, kSm90SmemBytes);
  constexpr auto causal = flashmma::default_tile<__half, HeadDim>(true, kSm90SmemBytes);
  STATIC_REQUIRE(general == flashmma::DefaultTile::kGeneral);
  STATIC_REQUIRE(causal == flashmma::DefaultTile::kCausal);
  const auto on_sm86 = flashmma::default_tile<__half, HeadDim>(false, kSm86SmemBytes);
  const auto causal_on_sm86 = flashmma::default_tile<__half, HeadDim>(true, kSm86SmemBytes);
  CHECK(on_sm86 == (Defaults::type::kSmemBytes <= kSm86SmemBytes
                        ? flashmma::DefaultTile::kGeneral
                        : flashmma::DefaultTile::kCompact));
  CHECK(causal_on_sm86 == (Defaults::causal::kSmemBytes <= kSm86SmemBytes
                               ? flashmma::DefaultTile::kCausal
                               : flashmma::DefaultTile::kCompact));
}

TEST_CASE("Default configs: general, causal and compact per head dim, and which one runs",
          "[traits][defaults][dispatch]") {
  check_default_family<32>();
  check_default_family<64>();
  check_default_family<96>();
  check_default_family<128>();
  check_default_family<160>();
  check_default_family<192>();
  check_default_family<224>();
  check_default_family<256>();
  // The 8-warp d = 224 and d = 256 tiles need more than 99 KB: sm_86 / sm_89 run the compact
  // ones.
  CHECK(flashmma::default_tile<__half, 256>(false, kSm86SmemBytes) ==
        flashmma::DefaultTile::kCompact);
  CHECK(flashmma::default_tile<__nv_bfloat16, 224>(true, kSm86SmemBytes) ==
        flashmma::DefaultTile::kCompact);
  CHECK(flashmma::default_tile<__half, 256>(false, kSm80SmemBytes) ==
        flashmma::DefaultTile::kGeneral);
  // Too little shared memory for any of them still names the compact config, whose launch then
  // reports the device as unsupported.
  CHECK(flashmma::default_tile<__half, 64>(false, 1024) == flashmma::DefaultTile::kCompact);
}

TEST_CASE("kernel_head_dim_for picks the smallest kernel that fits", "[traits][dispatch]") {
  CHECK(flashmma::kernel_head_dim_for(8) == 32);
  CHECK(flashmma::kernel_head_dim_for(32) == 32);
  CHECK(flashmma::kernel_head_dim_for(40) == 64);
  CHECK(flashmma::kernel_head_dim_for(80) == 96);
  CHECK(flashmma::kernel_head_dim_for(128) == 128);
  CHECK(flashmma::kernel_head_dim_for(136) == 160);
  CHECK(flashmma::kernel_head_dim_for(200) == 224);
  CHECK(flashmma::kernel_head_dim_for(256) == 256);

  for (int head_dim = 8; head_dim <= 256; head_dim += 8) {
    CAPTURE(head_dim);
    const int kernel = flashmma::kernel_head_dim_for(head_dim);
    int smallest_fit = 0;
    for (int supported : flashmma::kSupportedHeadDims) {
      if (supported >= head_dim && (smallest_fit == 0 || supported < smallest_fit)) {
        smallest_fit = supported;
      }
    }
    CHECK(kernel == smallest_fit);
  }
}

TEST_CASE("kernel_head_dim_for has no kernel above 256", "[traits][dispatch]") {
  CHECK(flashmma::kernel_head_dim_for(257) == 0);
  CHECK(flashmma::kernel_head_dim_for(264) == 0);
  CHECK(flashmma::kernel_head_dim_for(512) == 0);
  STATIC_REQUIRE(flashmma::kernel_head_dim_for(264) == 0);  // usable in constant expressions
}
