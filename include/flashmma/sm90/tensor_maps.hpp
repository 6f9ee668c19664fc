// SPDX-License-Identifier: Apache-2.0
// The host side of the Hopper kernel's TMA: the four tensor maps of a call (Q, K, V, O), each a
// rank-4 view {head dim, rows, heads, batch} of a [batch, seqlen, heads, head_dim] tensor through
// the call's strides, with boxes of 64 head-dim columns (128 bytes, the 128B swizzle span).
// Out-of-bounds elements load as zeros (rows past the sequence, columns past the head dim) and
// are not stored. A packed tensor (cu_seqlens_q for Q and O, cu_seqlens_k for K and V) is one
// batch entry of all its rows (total_q, total_k): the kernel addresses a sequence's rows from
// its first, and rows of the next sequence that a box takes in are masked (keys) or not stored
// (queries; sm90/forward_kernel.cuh's write_output). The backward kernel loads Q, K, V and dO
// through the same views (dense batches).
#pragma once

#include <cuda.h>

#include <cstdint>
#include <string>

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/ptx/sm90/tensor_map.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/sm90_backward_config.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"

namespace flashmma {
namespace sm90 {
namespace detail {

// One tensor's tile description: dims {head_dim, rows, heads, batch} through `strides`, boxes of
// 64 columns by `box_rows` rows, 128B swizzle. A stride must be positive for TMA; that of a
// dimension of size 1 is never stepped, so a valid value stands in for it there.
inline Status forward_tensor_tile(const char* name, const void* data, ScalarType dtype,
                                  int64_t head_dim, int64_t rows, int64_t heads, int64_t batch,
                                  const TensorStrides& strides, uint32_t box_rows,
                                  ptx::sm90::TensorTile& tile) {
  tile = ptx::sm90::TensorTile{};
  tile.data_type = dtype == ScalarType::kBFloat16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16
                                                  : CU_TENSOR_MAP_DATA_TYPE_FLOAT16;
  tile.rank = 4;
  tile.global_address = data;
  const int64_t extents[3] = {rows, heads, batch};
  const int64_t element_strides[3] = {strides.row, strides.head, strides.batch};
  const char* stride_names[3] = {"row", "head", "batch"};
  tile.dims[0] = static_cast<uint64_t>(head_dim);
  for (int i = 0; i < 3; ++i) {
    tile.dims[i + 1] = static_cast<uint64_t>(extents[i]);
    int64_t stride = element_strides[i];
    if (extents[i] == 1) {
      stride = 8;  // never stepped; any value TMA accepts (16 bytes) stands in for PyTorch's
    } else if (stride <= 0) {
      return Status::error(
          ErrorCode::kInvalidArgument,
          std::string(name) + "_strides." + stride_names[i] + " is " + std::to_string(stride) +
              ": the sm_90a kernel reads and writes through TMA, which needs positive strides "
              "(use a TileConfig, the portable kernel, for this layout)");
    }
    tile.strides_bytes[i] = static_cast<uint64_t>(stride) * 2;
  }
  tile.box[0] = kSm90SubTileElements;
  tile.box[1] = box_rows;
  tile.box[2] = 1;
  tile.box[3] = 1;
  tile.swizzle = ptx::sm90::Swizzle::k128B;
  return Status::success();
}

inline Status encode_forward_map(const char* name, const void* data, ScalarType dtype,
                                 int64_t head_dim, int64_t rows, int64_t heads, int64_t batch,
                                 const TensorStrides& strides, uint32_t box_rows,
                                 CUtensorMap* map) {
  ptx::sm90::TensorTile tile;
  if (Status s = forward_tensor_tile(name, data, dtype, head_dim, rows, heads, batch, strides,
                                     box_rows, tile);
      !s)
    return s;
  if (Status s = ptx::sm90::encode_tensor_map(tile, map); !s) {
    return Status::error(s.code(), std::string(name) + ": " + s.message());
  }
  return Status::success();
}

// The rows and batch entries of the tensors as their maps see them: dense [batch, seqlen, ...],
// or packed [total, ...] as one entry. total_k may be unknown (0): the maps cannot be made then.
struct MapExtent {
  int64_t rows;
  int64_t batch;
};
inline MapExtent query_extent(const ForwardParams& p) {
  return p.cu_seqlens_q != nullptr ? MapExtent{p.total_q, 1} : MapExtent{p.seqlen_q, p.batch};
}
inline MapExtent key_extent(const ForwardParams& p) {
  return p.cu_seqlens_k != nullptr ? MapExtent{p.total_k, 1} : MapExtent{p.seqlen_k, p.batch};
}
// One tensor as check_tma_layout and check_backward_tma_layout see it.
struct MappedTensor {
  const char* name;
  const void* data;
  MapExtent extent;
  int64_t heads;
  const TensorStrides& strides;
};

// Ok when TMA can describe every tensor of `tensors` (boxes of 64 rows), else the error of the
// first that cannot be, naming it.
template <int kCount>
Status check_mapped_tensors(const MappedTensor (&tensors)[kCount], ScalarType dtype,
                            int64_t head_dim) {
  for (const MappedTensor& t : tensors) {
    ptx::sm90::TensorTile tile;
    if (Status s = forward_tensor_tile(t.name, t.data, dtype, head_dim, t.extent.rows, t.heads,
                                       t.extent.batch, t.strides, ptx::sm90::kWgmmaM, tile);
        !s)
      return s;
    if (Status s = ptx::sm90::check_tensor_tile(tile); !s) {
      return Status::error(s.code(), std::string(t.name) + ": " + s.message());
    }
  }
  return Status::success();
}

inline Status check_key_rows_known(const ForwardParams& p) {
  if (p.cu_seqlens_k != nullptr && p.total_k == 0) {
    return Status::error(ErrorCode::kInvalidArgument,
                         "flashmma: packed keys (cu_seqlens_k) on the sm_90a kernel need "
                         "total_k, the rows of packed K and V, for its TMA tensor maps (set "
                         "params.total_k, or use a TileConfig)");
  }
  return Status::success();
}

}  // namespace detail

// Ok when TMA can describe q, k, v and o of validated params as the Hopper kernel reads and
// writes them (strides positive and multiples of 16 bytes, base addresses 16-byte aligned, sizes
// within the driver's limits); else the error of the first tensor that cannot be, naming it.
// Host code that encodes nothing: the default dispatch asks it to choose between the kernels.
[[nodiscard]] inline Status check_tma_layout(const ForwardParams& p) {
  if (Status s = detail::check_key_rows_known(p); !s) return s;
  const detail::MapExtent queries = detail::query_extent(p);
  const detail::MapExtent keys = detail::key_extent(p);
  const detail::MappedTensor tensors[4] = {{"q", p.q, queries, p.heads_q, p.q_strides},
                                           {"k", p.k, keys, p.heads_kv, p.k_strides},
                                           {"v", p.v, keys, p.heads_kv, p.v_strides},
                                           {"o", p.o, queries, p.heads_q, p.o_strides}};
  return detail::check_mapped_tensors(tensors, p.dtype, p.head_dim);
}

// Fills `maps` (q, k, v, o) for Config from validated params.
template <class Config, class Maps>
Status make_forward_tensor_maps(const ForwardParams& p, Maps& maps) {
  static_assert(IsSm90TileConfig<Config>::value, "Config must be a flashmma::Sm90TileConfig<...>");
  if (Status s = detail::check_key_rows_known(p); !s) return s;
  const detail::MapExtent queries = detail::query_extent(p);
  const detail::MapExtent keys = detail::key_extent(p);
  if (Status s = detail::encode_forward_map("q", p.q, p.dtype, p.head_dim, queries.rows,
                                            p.heads_q, queries.batch, p.q_strides,
                                            Config::kBlockM, &maps.q);
      !s)
    return s;
  if (Status s = detail::encode_forward_map("k", p.k, p.dtype, p.head_dim, keys.rows, p.heads_kv,
                                            keys.batch, p.k_strides, Config::kBlockN, &maps.k);
      !s)
    return s;
  if (Status s = detail::encode_forward_map("v", p.v, p.dtype, p.head_dim, keys.rows, p.heads_kv,
                                            keys.batch, p.v_strides, Config::kBlockN, &maps.v);
      !s)
    return s;
  return detail::encode_forward_map("o", p.o, p.dtype, p.head_dim, queries.rows, p.heads_q,
                                    queries.batch, p.o_strides, Config::kRowsPerWarpgroup,
                                    &maps.o);
}

// The backward kernel's loads (sm90/backward_kernel.cuh): Q, K, V and dO of a dense batch, the
// same rank-4 views as the forward's. Ok when TMA can describe all four, else the error of the
// first that cannot be, naming it; the default backward dispatch asks it to choose between the
// kernels.
[[nodiscard]] inline Status check_backward_tma_layout(const BackwardParams& p) {
  const detail::MapExtent queries{p.seqlen_q, p.batch};
  const detail::MapExtent keys{p.seqlen_k, p.batch};
  const detail::MappedTensor tensors[4] = {{"q", p.q, queries, p.heads_q, p.q_strides},
                                           {"k", p.k, keys, p.heads_kv, p.k_strides},
                                           {"v", p.v, keys, p.heads_kv, p.v_strides},
                                           {"d_o", p.d_o, queries, p.heads_q, p.do_strides}};
  return detail::check_mapped_tensors(tensors, p.dtype, p.head_dim);
}

// Fills `maps` (q, k, v, d_o) for an Sm90BackwardTileConfig from validated params (dense).
template <class Config, class Maps>
Status make_backward_tensor_maps(const BackwardParams& p, Maps& maps) {
  static_assert(IsSm90BackwardTileConfig<Config>::value,
                "Config must be a flashmma::Sm90BackwardTileConfig<...>");
  if (Status s = detail::encode_forward_map("q", p.q, p.dtype, p.head_dim, p.seqlen_q, p.heads_q,
                                            p.batch, p.q_strides, Config::kBlockM, &maps.q);
      !s)
    return s;
  if (Status s = detail::encode_forward_map("k", p.k, p.dtype, p.head_dim, p.seqlen_k,
                                            p.heads_kv, p.batch, p.k_strides, Config::kBlockN,
                                            &maps.k);
      !s)
    return s;
  if (Status s = detail::encode_forward_map("v", p.v, p.dtype, p.head_dim, p.seqlen_k,
                                            p.heads_kv, p.batch, p.v_strides, Config::kBlockN,
                                            &maps.v);
      !s)
    return s;
  return detail::encode_forward_map("d_o", p.d_o, p.dtype, p.head_dim, p.seqlen_q, p.heads_q,
                                    p.batch, p.do_strides, Config::kBlockM, &maps.d_o);
}

}  // namespace sm90
}  // namespace flashmma
