// SPDX-License-Identifier: Apache-2.0
// The K and V tiles of one (batch, kv head), streamed through the shared-memory stages.
//
// The stream visits the key tiles of a TileRange (key_range.hpp); tile j of the stream (the
// range's tile first + j) lives in stage j % Stages of the K ring and of the V ring. The copies
// are only issued here; which group they close, and when the block waits for them, is the
// schedule's business (mainloop.cuh).
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
        first_key_(tiles.first * Config::kBlockN),
        k_rows_(k_head + first_key_ * k_row_stride),
        v_rows_(v_head + first_key_ * v_row_stride),
        k_copy_(k_row_stride, head_dim),
        v_copy_(v_row_stride, head_dim),
        keys_left_(seqlen_k - first_key_),
        num_tiles_(tiles.count) {}

  FLASHMMA_DEVICE int num_tiles() const { return num_tiles_; }
  // The key of tile `tile`'s first column.
  FLASHMMA_DEVICE int64_t first_key(int tile) const {
    return first_key_ + static_cast<int64_t>(tile) * Config::kBlockN;
  }

  FLASHMMA_DEVICE const Element* k_tile(int tile) const { return k_stages_ + offset(tile); }
  FLASHMMA_DEVICE const Element* v_tile(int tile) const { return v_stages_ + offset(tile); }

  // Issue the copies of K (or V) of `tile` into its stage; a tile past the last one issues
  // nothing (the caller still commits, so group counts stay uniform).
  FLASHMMA_DEVICE void issue_k(int tile) const {
    if (tile < num_tiles_) issue(k_copy_, k_stages_, k_rows_, tile);
  }
  FLASHMMA_DEVICE void issue_v(int tile) const {
    if (tile < num_tiles_) issue(v_copy_, v_stages_, v_rows_, tile);
  }

 private:
  static FLASHMMA_DEVICE int offset(int tile) {
    return (tile % Config::kStages) * Config::kKVTileElements;
  }

  // Copies address the range's keys from its first one: stream tile j starts at row
  // j * BlockN of `rows`, whatever the range's first tile is. (Adding the range's first tile to
  // every copy's row instead cost the register-bound 256 x 64 d = 128 tile 4-5% on an H200.)
  FLASHMMA_DEVICE void issue(const TileCopy<Config, Config::kBlockN>& copy, Element* stages,
                             const Element* rows, int tile) const {
    const int64_t row = static_cast<int64_t>(tile) * Config::kBlockN;
    copy.issue(stages + offset(tile), rows, row, keys_left_ - row);
  }

  Element* k_stages_;
  Element* v_stages_;
  int64_t first_key_;      // the range's first key
  const Element* k_rows_;  // K and V from the range's first key on
  const Element* v_rows_;
  TileCopy<Config, Config::kBlockN> k_copy_;
  TileCopy<Config, Config::kBlockN> v_copy_;
  int64_t keys_left_;      // keys from the range's first to the end of the sequence
  int num_tiles_;
};

}  // namespace sm80
}  // namespace flashmma
