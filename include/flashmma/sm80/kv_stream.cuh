// SPDX-License-Identifier: Apache-2.0
// The K and V tiles of one (batch, kv head), streamed through the shared-memory stages.
//
// The stream visits the key tiles of a TileRange (key_range.hpp); tile j of the stream (the
// range's tile first + j) lives in stage j % Stages of the K ring and of the V ring. The copies are only issued
// here; which group they close, and when the block waits for them, is the schedule's business
// (mainloop.cuh).
#pragma once

#include <cstdint>

#include "flashmma/attention/key_range.hpp"
#include "flashmma/sm80/tile_io.cuh"
#include "flashmma/macros.hpp"

namespace flashmma {
namespace sm80 {

template <class Config>
class KVStream {
  using Element = typename Config::element_type;

 public:
  FLASHMMA_DEVICE KVStream(Element* k_stages, Element* v_stages, const Element* k_head,
                           const Element* v_head, int64_t k_row_stride, int64_t v_row_stride,
                           int head_dim, int64_t seqlen_k, const TileRange& tiles)
      : k_stages_(k_stages),
        v_stages_(v_stages),
        k_head_(k_head),
        v_head_(v_head),
        k_copy_(k_row_stride, head_dim),
        v_copy_(v_row_stride, head_dim),
        seqlen_k_(seqlen_k),
        tiles_(tiles) {}

  FLASHMMA_DEVICE int num_tiles() const { return tiles_.count; }
  // The key of tile `tile`'s first column.
  FLASHMMA_DEVICE int64_t first_key(int tile) const {
    return tiles_.absolute(tile) * Config::kBlockN;
  }

  FLASHMMA_DEVICE const Element* k_tile(int tile) const { return k_stages_ + offset(tile); }
  FLASHMMA_DEVICE const Element* v_tile(int tile) const { return v_stages_ + offset(tile); }

  // Issue the copies of K (or V) of `tile` into its stage; a tile past the last one issues
  // nothing (the caller still commits, so group counts stay uniform).
  FLASHMMA_DEVICE void issue_k(int tile) const {
    if (tile < tiles_.count) issue(k_copy_, k_stages_, k_head_, tile);
  }
  FLASHMMA_DEVICE void issue_v(int tile) const {
    if (tile < tiles_.count) issue(v_copy_, v_stages_, v_head_, tile);
  }

 private:
  static FLASHMMA_DEVICE int offset(int tile) {
    return (tile % Config::kStages) * Config::kKVTileElements;
  }

  FLASHMMA_DEVICE void issue(const TileCopy<Config, Config::kBlockN>& copy, Element* stages,
                             const Element* head, int tile) const {
    const int64_t key = first_key(tile);
    copy.issue(stages + offset(tile), head, key, seqlen_k_ - key);
  }

  Element* k_stages_;
  Element* v_stages_;
  const Element* k_head_;
  const Element* v_head_;
  TileCopy<Config, Config::kBlockN> k_copy_;
  TileCopy<Config, Config::kBlockN> v_copy_;
  int64_t seqlen_k_;
  TileRange tiles_;
};

}  // namespace sm80
}  // namespace flashmma
