// SPDX-License-Identifier: Apache-2.0
// The TMA tensor-map encoder's argument checks, on the CPU: each broken driver rule comes back as
// kInvalidArgument with a message that names it, before the driver is asked for anything (the
// encoding itself runs in tests/gpu/test_sm90_tma.cu).
#include "support/catch.hpp"

#include <flashmma/ptx/sm90/tensor_map.hpp>

#include <cstdint>
#include <string>

namespace {

namespace sm90 = flashmma::ptx::sm90;
using flashmma::ErrorCode;
using flashmma::Status;
using sm90::Swizzle;
using sm90::TensorTile;

alignas(256) unsigned char fake_tensor[256];  // never read: only its address is checked

// A valid [B = 2, S = 300, H = 3, D = 128] bf16 tile of 64 x 64, 128B-swizzled, as the forward
// kernel would load K.
TensorTile bshd_tile() {
  TensorTile tile;
  tile.data_type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  tile.rank = 4;
  tile.global_address = fake_tensor;
  const uint64_t dims[4] = {128, 300, 3, 2};
  const uint64_t strides[3] = {3 * 128 * 2, 128 * 2, 300 * 3 * 128 * 2};
  const uint32_t box[4] = {64, 64, 1, 1};
  for (int i = 0; i < 4; ++i) tile.dims[i] = dims[i];
  for (int i = 0; i < 3; ++i) tile.strides_bytes[i] = strides[i];
  for (int i = 0; i < 4; ++i) tile.box[i] = box[i];
  tile.swizzle = Swizzle::k128B;
  return tile;
}

void require_invalid(const TensorTile& tile, const std::string& message_part) {
  const Status status = sm90::check_tensor_tile(tile);
  INFO(status.message());
  REQUIRE(status.code() == ErrorCode::kInvalidArgument);
  REQUIRE_THAT(status.message(), Catch::Contains(message_part));
}

}  // namespace

TEST_CASE("check_tensor_tile accepts the forward kernel's tiles", "[sm90][tensor_map]") {
  CHECK(sm90::check_tensor_tile(bshd_tile()).ok());
  TensorTile matrix = bshd_tile();
  matrix.rank = 2;
  matrix.dims[0] = 100;  // the tensor need not be a whole number of boxes
  matrix.dims[1] = 37;
  matrix.strides_bytes[0] = 208;
  matrix.swizzle = Swizzle::kNone;
  matrix.box[0] = 256;  // unswizzled, the inner box may exceed 128 bytes
  CHECK(sm90::check_tensor_tile(matrix).ok());
  CHECK(sm90::tensor_tile_box_bytes(bshd_tile()) == 64 * 64 * 2);
  CHECK(sm90::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT16) == 2);
  CHECK(sm90::tensor_map_element_bytes(CU_TENSOR_MAP_DATA_TYPE_FLOAT32) == 4);
  CHECK(sm90::tensor_map_swizzle(Swizzle::k64B) == CU_TENSOR_MAP_SWIZZLE_64B);
}

TEST_CASE("check_tensor_tile names each broken rule", "[sm90][tensor_map]") {
  TensorTile tile = bshd_tile();
  SECTION("rank") {
    tile.rank = 6;
    require_invalid(tile, "rank is 6");
  }
  SECTION("data type") {
    tile.data_type = CU_TENSOR_MAP_DATA_TYPE_16U4_ALIGN8B;
    require_invalid(tile, "data type");
  }
  SECTION("null address") {
    tile.global_address = nullptr;
    require_invalid(tile, "global address");
  }
  SECTION("misaligned address") {
    tile.global_address = fake_tensor + 8;
    require_invalid(tile, "16-byte aligned");
  }
  SECTION("empty dimension") {
    tile.dims[2] = 0;
    require_invalid(tile, "dimension 2 has size 0");
  }
  SECTION("dimension over 2^32") {
    tile.dims[1] = (uint64_t{1} << 32) + 1;
    require_invalid(tile, "dimension 1 has size");
  }
  SECTION("stride not a multiple of 16") {
    tile.strides_bytes[1] = 200;
    require_invalid(tile, "dimension 2 has stride 200 bytes");
  }
  SECTION("stride of 2^40") {
    tile.strides_bytes[2] = uint64_t{1} << 40;
    require_invalid(tile, "dimension 3 has stride");
  }
  SECTION("box over 256") {
    tile.box[1] = 257;
    require_invalid(tile, "dimension 1 has box size 257");
  }
  SECTION("empty box") {
    tile.box[3] = 0;
    require_invalid(tile, "dimension 3 has box size 0");
  }
  SECTION("inner box not a multiple of 16 bytes") {
    tile.swizzle = Swizzle::kNone;
    tile.box[0] = 12;
    require_invalid(tile, "inner dimension is 24 bytes; it must be a multiple of 16");
  }
  SECTION("inner box wider than the swizzle span") {
    tile.swizzle = Swizzle::k64B;
    require_invalid(tile, "more than the swizzle span of 64 bytes");
  }
}

TEST_CASE("encode_tensor_map refuses a misaligned map or tile before calling the driver",
          "[sm90][tensor_map]") {
  alignas(128) unsigned char storage[2 * sizeof(CUtensorMap)];
  auto* misaligned = reinterpret_cast<CUtensorMap*>(storage + 16);
  Status status = sm90::encode_tensor_map(bshd_tile(), misaligned);
  CHECK(status.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("64-byte aligned"));

  status = sm90::encode_tensor_map(bshd_tile(), nullptr);
  CHECK(status.code() == ErrorCode::kInvalidArgument);

  CUtensorMap map;
  TensorTile tile = bshd_tile();
  tile.box[0] = 0;
  status = sm90::encode_tensor_map(tile, &map);
  CHECK(status.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(status.message(), Catch::Contains("box size 0"));
}
