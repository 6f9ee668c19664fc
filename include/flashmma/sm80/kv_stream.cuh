// SPDX-License-Identifier: Apache-2.0
// The K and V tiles of one (batch, kv head), streamed through the shared-memory stages.
//
// The stream visits the key tiles of a TileRange (key_range.hpp); tile j of the stream (the
// range's tile first + j) lives in stage j % Stages of the K ring and of the V ring. With Pages =
// KVPages, K and V are read through the sequence's block table (a paged KV cache,
// attention/kv_pages.hpp); with NoKVPages, as contiguous rows. The copies are only issued here;
// which group they close, and when the block waits for them, is the schedule's business
// (mainloop.cuh).
//
// A paged cache's rows are resolved one tile ahead: issue_v(j) ends by storing the K and V
// address of each row of tile j + 1 in a ring of kPageSlots shared-memory slots, so that the
// copies of a tile read addresses that are already there instead of waiting for the table and
// dividing by the page size per copy (which, per 16-byte copy, about doubled the instructions of
// a tile at pages of 16 keys). The table entries those addresses come from were loaded into
// registers one tile earlier still (fetch_pages), so that no thread waits for the table either:
// waiting for it in every tile cost pages of 16 keys 7-9% of their decoding speed on an H200.
// Whole addresses, not offsets from the head: a copy then adds its column to one loaded pointer
// (offsets cost pages of 16 keys another 5-8%), and every page size takes the same path (a tile
// inside one page, read as evenly spaced rows, was no faster).
// Every schedule puts a block-wide barrier between issue_v(j) and the first copy of tile j + 1,
// and between the last copy of a tile and the next write of its slot, given kPageSlots and the
// tiles prepare() resolves first.
#pragma once

#include <cstddef>
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
  // Row addresses of a paged cache: the schedules issue up to Stages - 1 tiles back to back before
  // their first barrier (mainloop.cuh), so prepare() resolves those, and the ring holds one more.
  static constexpr int kPreparedTiles = Config::kStages > 1 ? Config::kStages - 1 : 1;
  static constexpr int kPageSlots = kPreparedTiles + 1;

 public:
  using config = Config;
  // Shared memory a paged stream needs beyond the config's: kPageSlots x (K, V) x BlockN row
  // addresses.
  static constexpr std::size_t kPageSmemBytes =
      kPageable ? sizeof(const Element*) * kPageSlots * 2 * Config::kBlockN : 0;

  // The K/V head of `seq` (a SequenceInfo whose pages are of type Pages).
  // `page_rows`: kPageSmemBytes of shared memory (unused without pages).
  template <class Sequence>
  FLASHMMA_DEVICE KVStream(Element* k_stages, Element* v_stages, const Sequence& seq,
                           int head_dim, const TileRange& tiles, void* page_rows = nullptr)
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
        v_row_stride_(seq.v_row_stride),
        row_addresses_(static_cast<const Element**>(page_rows)) {}

  // Before the schedule's first copy, by every thread: a paged stream resolves the rows of the
  // tiles its schedule issues before its first barrier. Nothing without pages.
  FLASHMMA_DEVICE void prepare() {
    if constexpr (kPageable) {
#pragma unroll
      for (int tile = 0; tile < kPreparedTiles; ++tile) {
        fetch_pages(tile);
        store_rows(tile);
      }
      fetch_pages(kPreparedTiles);
      __syncthreads();
    }
  }

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
      issue_paged(k_copy_, k_stages_, tile, /*v=*/0);
    } else {
      issue(k_copy_, k_stages_, k_rows_, tile);
    }
  }
  FLASHMMA_DEVICE void issue_v(int tile) {
    if (tile >= num_tiles_) return;
    if constexpr (kPageable) {
      issue_paged(v_copy_, v_stages_, tile, /*v=*/1);
      if (tile + 1 >= kPreparedTiles) {  // ahead of its first copy
        store_rows(tile + 1);
        fetch_pages(tile + 2);
      }
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

  // The K (v = 0) and V (v = 1) row addresses of tile `tile` in its slot of the ring.
  FLASHMMA_DEVICE const Element** row_addresses(int tile, int v) const {
    return row_addresses_ + ((tile % kPageSlots) * 2 + v) * Config::kBlockN;
  }

  // A paged cache: the rows of tile `tile` from their addresses.
  FLASHMMA_DEVICE void issue_paged(const TileCopy<Config, Config::kBlockN>& copy,
                                   Element* stages, int tile, int v) const {
    const int64_t row = static_cast<int64_t>(tile) * Config::kBlockN;
    const Element* const* const addresses = row_addresses(tile, v);
    copy.issue_gathered(stages + offset(tile), [&](int r) { return addresses[r]; },
                        keys_left_ - row);
  }

  // Resolving a tile's rows takes two steps, a tile apart, so that the table's latency is not
  // waited for: fetch_pages(tile) loads the table entries of the rows this thread resolves into
  // registers (KVPages::locate), store_rows(tile) (a tile later) turns them into each row's K
  // and V address (KVPages::page_row_offset) and stores them in the tile's slot. Rows past the
  // keys get the head's address (their copies are zero-fills, and read no table entry). Keys
  // are below 2^30.
  FLASHMMA_DEVICE void fetch_pages(int tile) {
    const int64_t row = static_cast<int64_t>(tile) * Config::kBlockN;
#pragma unroll
    for (int i = 0; i < kResolvedRows; ++i) {
      const int r = static_cast<int>(threadIdx.x) + i * Config::kThreads;
      page_row_[i] = -1;
      if (tile < num_tiles_ && r < Config::kBlockN && row + r < keys_left_) {
        const KVPages::KeySlot slot = pages_.locate(static_cast<int32_t>(first_key_ + row + r));
        page_row_[i] = slot.row;
        page_[i] = pages_.table[slot.entry];
      }
    }
  }
  FLASHMMA_DEVICE void store_rows(int tile) const {
    if (tile >= num_tiles_) return;
    const Element** const k_addresses = row_addresses(tile, 0);
    const Element** const v_addresses = row_addresses(tile, 1);
#pragma unroll
    for (int i = 0; i < kResolvedRows; ++i) {
      const int r = static_cast<int>(threadIdx.x) + i * Config::kThreads;
      if (r >= Config::kBlockN) break;
      const Element* k_address = k_head_;
      const Element* v_address = v_head_;
      if (page_row_[i] >= 0) {
        k_address +=
            pages_.page_row_offset(page_[i], page_row_[i], pages_.k_page_stride, k_row_stride_);
        v_address +=
            pages_.page_row_offset(page_[i], page_row_[i], pages_.v_page_stride, v_row_stride_);
      }
      k_addresses[r] = k_address;
      v_addresses[r] = v_address;
    }
  }

  // The rows of a tile that this thread resolves: threadIdx.x, + kThreads, ...
  static constexpr int kResolvedRows = (Config::kBlockN + Config::kThreads - 1) / Config::kThreads;
  int32_t page_[kResolvedRows] = {};      // fetch_pages' table entries
  int32_t page_row_[kResolvedRows] = {};  // and the keys' rows in their pages (-1: no key)

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
  const Element** row_addresses_;  // a paged stream's ring of row addresses in shared memory
};

}  // namespace sm80
}  // namespace flashmma
