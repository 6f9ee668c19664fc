// SPDX-License-Identifier: Apache-2.0
// Host side of TMA: encoding the CUtensorMap that describes a global tensor and the box one TMA
// instruction moves, without linking libcuda.
//
// cuTensorMapEncodeTiled is a driver function. flashmma is header-only and links only the CUDA
// runtime, so it asks the runtime for the driver's entry point
// (cudaGetDriverEntryPointByVersion, by the CUDA 12.0 ABI of the function) and calls it through
// the typed pointer of <cudaTypedefs.h>; <cuda.h> is included for its types only. Every argument
// is checked first against the driver's documented limits, so a mistake comes back as a Status
// that names it instead of a bare CUDA_ERROR_INVALID_VALUE.
//
// The maps made here are the ones the Hopper path uses: tiled, element strides 1, no interleave,
// out-of-bounds elements of a load filled with zeros (and dropped by a store).
//
// Using a map: pass it to the kernel by value as `const __grid_constant__ CUtensorMap map` and
// hand `&map` to the tma.cuh functions; never copy it into a local variable on the device. A
// host-side CUtensorMap must stay 64-byte aligned (the type is alignas(64)); the encoder refuses
// one that is not.
#pragma once

#include <cuda.h>
#include <cudaTypedefs.h>
#include <cuda_runtime_api.h>

#include <cstdint>
#include <string>

#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/status.hpp"

namespace flashmma {
namespace ptx {
namespace sm90 {

inline constexpr int kMaxTensorMapRank = 5;
inline constexpr uint32_t kMaxTensorMapBox = 256;          // elements per box dimension
inline constexpr uint64_t kTensorMapAddressAlignment = 16;  // global address, strides, box row
inline constexpr uint64_t kTensorMapObjectAlignment = 64;   // the CUtensorMap itself
inline constexpr uint64_t kMaxTensorMapDim = uint64_t{1} << 32;
inline constexpr uint64_t kMaxTensorMapStride = uint64_t{1} << 40;

// A global tensor and the box one TMA instruction moves. Dimensions go innermost first
// (dims[0] is the contiguous one): a row-major [rows, cols] matrix is dims {cols, rows} and
// strides_bytes {cols * element bytes}; a [B, S, H, D] tensor is dims {D, S, H, B} and strides
// {S-stride, H-stride, B-stride} in bytes, which need not increase.
struct TensorTile {
  CUtensorMapDataType data_type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  int rank = 2;
  const void* global_address = nullptr;
  uint64_t dims[kMaxTensorMapRank] = {};
  uint64_t strides_bytes[kMaxTensorMapRank - 1] = {};  // of dims 1 .. rank - 1
  uint32_t box[kMaxTensorMapRank] = {};
  // The shared-memory layout TMA writes and reads: the box's inner dimension (box[0] elements)
  // must fit in the swizzle span (32, 64 or 128 bytes; with 2-byte elements, 16, 32 or 64).
  Swizzle swizzle = Swizzle::k128B;
  CUtensorMapL2promotion l2_promotion = CU_TENSOR_MAP_L2_PROMOTION_L2_128B;
};

// Bytes per element of the data types a TensorTile accepts; 0 for the others (the packed sub-byte
// types, which have rules of their own).
inline uint32_t tensor_map_element_bytes(CUtensorMapDataType type) {
  switch (type) {
    case CU_TENSOR_MAP_DATA_TYPE_UINT8: return 1;
    case CU_TENSOR_MAP_DATA_TYPE_UINT16:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT16:
    case CU_TENSOR_MAP_DATA_TYPE_BFLOAT16: return 2;
    case CU_TENSOR_MAP_DATA_TYPE_UINT32:
    case CU_TENSOR_MAP_DATA_TYPE_INT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT32_FTZ:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32:
    case CU_TENSOR_MAP_DATA_TYPE_TFLOAT32_FTZ: return 4;
    case CU_TENSOR_MAP_DATA_TYPE_UINT64:
    case CU_TENSOR_MAP_DATA_TYPE_INT64:
    case CU_TENSOR_MAP_DATA_TYPE_FLOAT64: return 8;
    default: return 0;
  }
}

inline CUtensorMapSwizzle tensor_map_swizzle(Swizzle swizzle) {
  switch (swizzle) {
    case Swizzle::k32B: return CU_TENSOR_MAP_SWIZZLE_32B;
    case Swizzle::k64B: return CU_TENSOR_MAP_SWIZZLE_64B;
    case Swizzle::k128B: return CU_TENSOR_MAP_SWIZZLE_128B;
    default: return CU_TENSOR_MAP_SWIZZLE_NONE;
  }
}

// Bytes one box occupies in shared memory: what a load that fills it adds to its mbarrier's
// transaction count (out-of-bounds parts included).
inline uint64_t tensor_tile_box_bytes(const TensorTile& tile) {
  uint64_t bytes = tensor_map_element_bytes(tile.data_type);
  for (int i = 0; i < tile.rank && i < kMaxTensorMapRank; ++i) bytes *= tile.box[i];
  return bytes;
}

// The driver's rules for a tiled map (cuda.h, cuTensorMapEncodeTiled), checked on the host.
[[nodiscard]] inline Status check_tensor_tile(const TensorTile& tile) {
  const auto invalid = [](const std::string& what) {
    return Status::error(ErrorCode::kInvalidArgument, "tensor map: " + what);
  };
  const uint32_t element_bytes = tensor_map_element_bytes(tile.data_type);
  if (element_bytes == 0) {
    return invalid("data type " + std::to_string(static_cast<int>(tile.data_type)) +
                   " is not supported (integer and floating-point types of 1 to 8 bytes are)");
  }
  if (tile.rank < 1 || tile.rank > kMaxTensorMapRank) {
    return invalid("rank is " + std::to_string(tile.rank) + "; it must be 1 to 5");
  }
  const auto address = reinterpret_cast<uintptr_t>(tile.global_address);
  if (address == 0 || address % kTensorMapAddressAlignment != 0) {
    return invalid("global address " + std::to_string(address) +
                   " must be non-null and 16-byte aligned");
  }
  for (int i = 0; i < tile.rank; ++i) {
    const std::string dim = "dimension " + std::to_string(i);
    if (tile.dims[i] == 0 || tile.dims[i] > kMaxTensorMapDim) {
      return invalid(dim + " has size " + std::to_string(tile.dims[i]) +
                     "; it must be 1 to 2^32 elements");
    }
    if (tile.box[i] == 0 || tile.box[i] > kMaxTensorMapBox) {
      return invalid(dim + " has box size " + std::to_string(tile.box[i]) +
                     "; it must be 1 to 256 elements");
    }
    if (i > 0) {
      const uint64_t stride = tile.strides_bytes[i - 1];
      if (stride % kTensorMapAddressAlignment != 0 || stride >= kMaxTensorMapStride) {
        return invalid(dim + " has stride " + std::to_string(stride) +
                       " bytes; it must be a multiple of 16 and below 2^40");
      }
    }
  }
  const uint64_t inner_box_bytes = uint64_t{tile.box[0]} * element_bytes;
  if (inner_box_bytes % kTensorMapAddressAlignment != 0) {
    return invalid("the box's inner dimension is " + std::to_string(inner_box_bytes) +
                   " bytes; it must be a multiple of 16");
  }
  if (tile.swizzle != Swizzle::kNone && inner_box_bytes > swizzle_span_bytes(tile.swizzle)) {
    return invalid("the box's inner dimension is " + std::to_string(inner_box_bytes) +
                   " bytes, more than the swizzle span of " +
                   std::to_string(swizzle_span_bytes(tile.swizzle)) + " bytes");
  }
  return Status::success();
}

namespace detail {

// The driver functions, looked up once per process.
struct TensorMapDriver {
  PFN_cuTensorMapEncodeTiled_v12000 encode_tiled = nullptr;
  PFN_cuGetErrorName_v6000 error_name = nullptr;
  cudaError_t lookup_error = cudaSuccess;
  cudaDriverEntryPointQueryResult lookup_status = cudaDriverEntryPointSuccess;
};

inline TensorMapDriver find_tensor_map_driver() {
  constexpr unsigned kEncodeTiledAbi = 12000;  // the CUDA version whose signature we call
  constexpr unsigned kErrorNameAbi = 6000;
  TensorMapDriver driver;
  void* function = nullptr;
  driver.lookup_error = cudaGetDriverEntryPointByVersion(
      "cuTensorMapEncodeTiled", &function, kEncodeTiledAbi, cudaEnableDefault,
      &driver.lookup_status);
  if (driver.lookup_error == cudaSuccess && driver.lookup_status == cudaDriverEntryPointSuccess) {
    driver.encode_tiled = reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }
  function = nullptr;
  cudaDriverEntryPointQueryResult name_status = cudaDriverEntryPointSymbolNotFound;
  if (cudaGetDriverEntryPointByVersion("cuGetErrorName", &function, kErrorNameAbi,
                                       cudaEnableDefault, &name_status) == cudaSuccess &&
      name_status == cudaDriverEntryPointSuccess) {
    driver.error_name = reinterpret_cast<PFN_cuGetErrorName_v6000>(function);
  }
  return driver;
}

inline const TensorMapDriver& tensor_map_driver() {
  static const TensorMapDriver driver = find_tensor_map_driver();
  return driver;
}

inline std::string driver_error_name(const TensorMapDriver& driver, CUresult result) {
  const char* name = nullptr;
  if (driver.error_name != nullptr && driver.error_name(result, &name) == CUDA_SUCCESS &&
      name != nullptr) {
    return std::string(name) + " (" + std::to_string(static_cast<int>(result)) + ")";
  }
  return "CUresult " + std::to_string(static_cast<int>(result));
}

}  // namespace detail

// Encodes `tile` into `*map`: zero fill out of bounds, element strides 1, no interleave.
[[nodiscard]] inline Status encode_tensor_map(const TensorTile& tile, CUtensorMap* map) {
  if (map == nullptr || reinterpret_cast<uintptr_t>(map) % kTensorMapObjectAlignment != 0) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "tensor map: the CUtensorMap to fill must be non-null and 64-byte "
                         "aligned");
  }
  if (Status status = check_tensor_tile(tile); !status) return status;

  const detail::TensorMapDriver& driver = detail::tensor_map_driver();
  if (driver.encode_tiled == nullptr) {
    return Status::error(
        ErrorCode::kUnsupportedDevice,
        "tensor map: the CUDA driver provides no cuTensorMapEncodeTiled (TMA needs a CUDA 12.0 "
        "or newer driver): cudaGetDriverEntryPointByVersion returned " +
            std::string(cudaGetErrorName(driver.lookup_error)) + ", query result " +
            std::to_string(static_cast<int>(driver.lookup_status)));
  }
  cuuint64_t dims[kMaxTensorMapRank] = {};
  cuuint64_t strides[kMaxTensorMapRank - 1] = {};
  cuuint32_t box[kMaxTensorMapRank] = {};
  cuuint32_t element_strides[kMaxTensorMapRank] = {};
  for (int i = 0; i < tile.rank; ++i) {
    dims[i] = tile.dims[i];
    box[i] = tile.box[i];
    element_strides[i] = 1;
    if (i > 0) strides[i - 1] = tile.strides_bytes[i - 1];
  }
  const CUresult result = driver.encode_tiled(
      map, tile.data_type, static_cast<cuuint32_t>(tile.rank),
      const_cast<void*>(tile.global_address), dims, strides, box, element_strides,
      CU_TENSOR_MAP_INTERLEAVE_NONE, tensor_map_swizzle(tile.swizzle), tile.l2_promotion,
      CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (result != CUDA_SUCCESS) {
    return Status::error(ErrorCode::kCudaError,
                         "tensor map: cuTensorMapEncodeTiled returned " +
                             detail::driver_error_name(driver, result) + " for a rank-" +
                             std::to_string(tile.rank) + " tile");
  }
  return Status::success();
}

}  // namespace sm90
}  // namespace ptx
}  // namespace flashmma
