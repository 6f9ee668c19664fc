// SPDX-License-Identifier: Apache-2.0
// The K and V tiles of one (batch, kv head), streamed through the shared-memory stages.
//
// The stream visits the key tiles of a TileRange (key_range.hpp); tile j of the stream (the
// range's tile first + j) lives in stage j % Stages of the K ring and of the V ring. With Pages =
// KVPages, K and V are read through the sequence's block table (a paged KV cache,
// attention/kv_pages.hpp), one key row at a time; with NoKVPages, as contiguous rows. The copies
// are only issued here; which group they close, and when the block waits for them, is the
// schedule's business (mainloop.cuh).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/kv_pages.hpp"
#include "flashmma/sm80/tile_io.cuh"
#include "flashmma/macros.hpp"

namespace flashmma {
namespace sm80 {

template <class Config, class Pages = NoKVPages>
class KVStream {
  using Element = typename Config::element_type;
  static constexpr bool kPageable = std::is_same<Pages, KVPages>::value;

 public:
  using config = Config;

  // The K/V head of `seq` (a SequenceInfo whose pages are of type Pages).
  template <class Sequence>
  FLASHMMA_DEVICE KVStream(Element* k_stages, Element* v_stages, const Sequence& seq,
                           int head_dim, const TileRange& tiles)
      : k_stages_(k_stages),
        v_stages_(v_stages),
        first_key_(tiles.first * Config::kBlockN),
        k_head_(seq.k),
        v_head_(seq.v),
        k_rows_(seq.k + first_key_ * seq.k_row_stride),
        v_rows_(seq.v + first_key_ * seq.v_row_stride),
        k_copy_(seq.k_row_stride, head_dim),
        v_copy_(seq.v_row_stride, head_dim),
        keys_left_(seq.lengths.seqlen_k - first_key_),
        num_tiles_(tiles.count),
        pages_(seq.pages),
        k_row_stride_(seq.k_row_stride),
        v_row_stride_(seq.v_row_stride) {}

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
    if (tile >= num_tiles_) return;
    if constexpr (kPageable) {
      issue_paged(k_copy_, k_stages_, k_head_, tile, pages_.k_page_stride, k_row_stride_);
    } else {
      issue(k_copy_, k_stages_, k_rows_, tile);
    }
  }
  FLASHMMA_DEVICE void issue_v(int tile) const {
    if (tile >= num_tiles_) return;
    if constexpr (kPageable) {
      issue_paged(v_copy_, v_stages_, v_head_, tile, pages_.v_page_stride, v_row_stride_);
    } else {
      issue(v_copy_, v_stages_, v_rows_, tile);
    }
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

  // A paged cache: each key's row found through the block table. Keys are below 2^30. Tiles
  // start at multiples of BlockN, so with pages of a multiple of BlockN keys a tile lies in one
  // page: one table entry, then the rows are evenly spaced as in a contiguous cache.
  FLASHMMA_DEVICE void issue_paged(const TileCopy<Config, Config::kBlockN>& copy,
                                   Element* stages, const Element* head, int tile,
                                   int64_t page_stride, int64_t row_stride) const {
    const int64_t row = static_cast<int64_t>(tile) * Config::kBlockN;
    const int32_t first = static_cast<int32_t>(first_key_ + row);
    if (pages_.page_size % Config::kBlockN == 0) {
      copy.issue(stages + offset(tile), head + pages_.row_offset(first, page_stride, row_stride),
                 0, keys_left_ - row);
      return;
    }
    copy.issue_gathered(
        stages + offset(tile), head,
        [&](int r) { return pages_.row_offset(first + r, page_stride, row_stride); },
        keys_left_ - row);
  }

  Element* k_stages_;
  Element* v_stages_;
  int64_t first_key_;      // the range's first key
  const Element* k_head_;  // K and V of the head: key 0 (row 0 of page 0 when paged)
  const Element* v_head_;
  const Element* k_rows_;  // contiguous K and V from the range's first key on
  const Element* v_rows_;
  TileCopy<Config, Config::kBlockN> k_copy_;
  TileCopy<Config, Config::kBlockN> v_copy_;
  int64_t keys_left_;      // keys from the range's first to the end of the sequence
  int num_tiles_;
  Pages pages_;
  int64_t k_row_stride_;
  int64_t v_row_stride_;
};

}  // namespace sm80
}  // namespace flashmma
