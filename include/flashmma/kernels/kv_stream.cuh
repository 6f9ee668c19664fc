// SPDX-License-Identifier: Apache-2.0
// The K and V tiles of one (batch, kv head), streamed through the shared-memory stages.
//
// Tile j lives in stage j % Stages of the K ring and of the V ring. The copies are only issued
// here; which group they close, and when the block waits for them, is the schedule's business
// (mainloop.cuh).
#pragma once

#include <cstdint>

#include "flashmma/kernels/tile_io.cuh"
#include "flashmma/macros.hpp"

namespace flashmma {
namespace detail {

template <class Config>
class KVStream {
  using Element = typename Config::element_type;

 public:
  FLASHMMA_DEVICE KVStream(Element* k_stages, Element* v_stages, const Element* k_head,
                           const Element* v_head, int64_t k_row_stride, int64_t v_row_stride,
                           int head_dim, int64_t seqlen_k, int num_tiles)
      : k_stages_(k_stages),
        v_stages_(v_stages),
        k_head_(k_head),
        v_head_(v_head),
        k_copy_(k_row_stride, head_dim),
        v_copy_(v_row_stride, head_dim),
        seqlen_k_(seqlen_k),
        num_tiles_(num_tiles) {}

  FLASHMMA_DEVICE int num_tiles() const { return num_tiles_; }

  FLASHMMA_DEVICE const Element* k_tile(int tile) const { return k_stages_ + offset(tile); }
  FLASHMMA_DEVICE const Element* v_tile(int tile) const { return v_stages_ + offset(tile); }

  // Issue the copies of K (or V) of `tile` into its stage; a tile past the last one issues
  // nothing (the caller still commits, so group counts stay uniform).
  FLASHMMA_DEVICE void issue_k(int tile) const {
    if (tile < num_tiles_) issue(k_copy_, k_stages_, k_head_, tile);
  }
  FLASHMMA_DEVICE void issue_v(int tile) const {
    if (tile < num_tiles_) issue(v_copy_, v_stages_, v_head_, tile);
  }

 private:
  static FLASHMMA_DEVICE int offset(int tile) {
    return (tile % Config::kStages) * Config::kKVTileElements;
  }

  FLASHMMA_DEVICE void issue(const TileCopy<Config, Config::kBlockN>& copy, Element* stages,
                             const Element* head, int tile) const {
    const int64_t first_key = static_cast<int64_t>(tile) * Config::kBlockN;
    copy.issue(stages + offset(tile), head, first_key, seqlen_k_ - first_key);
  }

  Element* k_stages_;
  Element* v_stages_;
  const Element* k_head_;
  const Element* v_head_;
  TileCopy<Config, Config::kBlockN> k_copy_;
  TileCopy<Config, Config::kBlockN> v_copy_;
  int64_t seqlen_k_;
  int num_tiles_;
};

}  // namespace detail
}  // namespace flashmma
