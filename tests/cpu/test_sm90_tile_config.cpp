// SPDX-License-Identifier: Apache-2.0
// Sm90TileConfig's derived constants: the block shape, the padded head dim, the shared-memory
// layout (every tile on the 1024-byte swizzle atom, inside 227 KiB) and the register split.
#include "support/catch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include "flashmma/traits/sm90_tile_config.hpp"

using flashmma::Sm90TileConfig;

TEST_CASE("Sm90TileConfig: block shape, padding and threads", "[sm90][config]") {
  using C = Sm90TileConfig<__nv_bfloat16, 128, 176>;  // FlashAttention-3's d = 128 tile
  STATIC_REQUIRE(C::kBlockM == 128);
  STATIC_REQUIRE(C::kThreads == 384);
  STATIC_REQUIRE(C::kLaunchRegisters == 168);  // 65536 / 384 rounded down to a multiple of 8
  STATIC_REQUIRE(C::kHeadDimPadded == 128);
  STATIC_REQUIRE(C::kHeadDimSubTiles == 2);
  STATIC_REQUIRE(C::kQBytes == 128 * 128 * 2);
  STATIC_REQUIRE(C::kKVTileBytes == 176 * 128 * 2);
  // Q 32 KiB + 2 x 2 x 44 KiB + 1 KiB of alignment + 9 barriers: FlashAttention-3's 208 KiB.
  STATIC_REQUIRE(C::kSmemBytes == 1024 + 32768 + 4 * 45056 + 9 * 8);

  using Padded = Sm90TileConfig<__half, 96, 64, 2, 1, 24, 256>;
  STATIC_REQUIRE(Padded::kHeadDimPadded == 128);  // TMA zero-fills columns 96..127
  STATIC_REQUIRE(Padded::kBlockM == 64);
  STATIC_REQUIRE(Padded::kThreads == 256);

  using Wide = Sm90TileConfig<__nv_bfloat16, 256, 80>;
  STATIC_REQUIRE(Wide::kSmemBytes <= flashmma::kSm90MaxSmemBytes);
  STATIC_REQUIRE(Wide::kAccumulatorRegisters == 40 + 20 + 128);
}

TEST_CASE("Sm90TileConfig: every tile starts on a 1024-byte boundary", "[sm90][config]") {
  using C = Sm90TileConfig<__half, 64, 128, 3>;
  STATIC_REQUIRE(C::kKOffset % 1024 == 0);
  STATIC_REQUIRE(C::kVOffset % 1024 == 0);
  STATIC_REQUIRE(C::kKVTileBytes % 1024 == 0);
  STATIC_REQUIRE(C::kBarrierOffset % 8 == 0);
  // The Q rows of consumer warpgroup c start 64 rows into each sub-tile: 8 KiB, aligned too.
  STATIC_REQUIRE(C::QTile::byte_offset(64, 0) == 64 * 128);
}
