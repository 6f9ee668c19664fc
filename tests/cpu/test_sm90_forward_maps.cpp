// SPDX-License-Identifier: Apache-2.0
// The tiles the Hopper kernel's tensor maps describe (sm90/tensor_maps.hpp), checked without a
// driver: dims and strides of a [batch, seqlen, heads, head_dim] tensor, the box, the stride
// that stands in for a dimension of size 1, and the refusal of strides TMA cannot take.
#include "support/catch.hpp"

#include <cstdint>
#include <string>

#include "flashmma/params.hpp"
#include "flashmma/sm90/tensor_maps.hpp"

using flashmma::ScalarType;
using flashmma::TensorStrides;
using flashmma::ptx::sm90::TensorTile;
using flashmma::sm90::detail::forward_tensor_tile;

namespace {
alignas(16) unsigned char fake_tensor[16];
}

TEST_CASE("forward tensor tiles: a BSHD tensor", "[sm90][tensor_map]") {
  // batch 3, seqlen 100, heads 4, head_dim 96 (padded to two 64-column boxes in shared memory).
  const TensorStrides strides = flashmma::bshd_strides(100, 4, 96);
  TensorTile tile;
  REQUIRE(forward_tensor_tile("q", fake_tensor, ScalarType::kBFloat16, 96, 100, 4, 3, strides,
                              128, tile)
              .ok());
  CHECK(tile.data_type == CU_TENSOR_MAP_DATA_TYPE_BFLOAT16);
  CHECK(tile.rank == 4);
  CHECK(tile.dims[0] == 96);
  CHECK(tile.dims[1] == 100);
  CHECK(tile.dims[2] == 4);
  CHECK(tile.dims[3] == 3);
  CHECK(tile.strides_bytes[0] == 4 * 96 * 2);        // row
  CHECK(tile.strides_bytes[1] == 96 * 2);            // head
  CHECK(tile.strides_bytes[2] == 100 * 4 * 96 * 2);  // batch
  CHECK(tile.box[0] == 64);
  CHECK(tile.box[1] == 128);
  CHECK(tile.box[2] == 1);
  CHECK(tile.box[3] == 1);
  CHECK(tile.swizzle == flashmma::ptx::sm90::Swizzle::k128B);
  CHECK(flashmma::ptx::sm90::check_tensor_tile(tile).ok());
}

TEST_CASE("forward tensor tiles: dimensions of size 1 take any stride", "[sm90][tensor_map]") {
  TensorStrides strides = flashmma::bhsd_strides(64, 1, 128);
  strides.head = 3;  // PyTorch gives a size-1 dimension any stride
  strides.batch = -5;
  TensorTile tile;
  REQUIRE(forward_tensor_tile("k", fake_tensor, ScalarType::kFloat16, 128, 64, 1, 1, strides, 80,
                              tile)
              .ok());
  CHECK(tile.data_type == CU_TENSOR_MAP_DATA_TYPE_FLOAT16);
  CHECK(tile.strides_bytes[0] == 128 * 2);
  CHECK(tile.strides_bytes[1] == 16);
  CHECK(tile.strides_bytes[2] == 16);
  CHECK(flashmma::ptx::sm90::check_tensor_tile(tile).ok());
}

TEST_CASE("forward tensor tiles: non-positive strides are refused by name",
          "[sm90][tensor_map]") {
  TensorStrides strides = flashmma::bshd_strides(64, 2, 64);
  strides.row = -strides.row;
  TensorTile tile;
  const flashmma::Status s = forward_tensor_tile("v", fake_tensor, ScalarType::kFloat16, 64, 64,
                                                 2, 2, strides, 128, tile);
  REQUIRE_FALSE(s.ok());
  CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(s.message().find("v_strides.row is -128") != std::string::npos);
  strides = flashmma::bshd_strides(64, 2, 64);
  strides.head = 0;
  const flashmma::Status zero = forward_tensor_tile("o", fake_tensor, ScalarType::kFloat16, 64,
                                                    64, 2, 2, strides, 64, tile);
  CHECK(zero.message().find("o_strides.head is 0") != std::string::npos);
}
