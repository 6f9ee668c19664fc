// SPDX-License-Identifier: Apache-2.0
// A half-open range of positions [begin, end), and the range of tiles that covers it.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {

struct IndexRange {
  int64_t begin = 0;
  int64_t end = 0;  // begin >= end: empty

  FLASHMMA_HOST_DEVICE bool empty() const { return begin >= end; }
  FLASHMMA_HOST_DEVICE int64_t size() const { return empty() ? 0 : end - begin; }
  FLASHMMA_HOST_DEVICE bool contains(int64_t i) const { return begin <= i && i < end; }

  // The intersection with [lo, hi).
  FLASHMMA_HOST_DEVICE IndexRange clamp(int64_t lo, int64_t hi) const {
    return {begin > lo ? begin : lo, end < hi ? end : hi};
  }
  FLASHMMA_HOST_DEVICE IndexRange intersect(const IndexRange& other) const {
    return clamp(other.begin, other.end);
  }
};

// The tiles of `tile_size` positions that hold the positions of `range`: [first, last + 1).
FLASHMMA_HOST_DEVICE IndexRange covering_tiles(const IndexRange& range, int64_t tile_size) {
  if (range.empty()) return {0, 0};
  return {range.begin / tile_size, (range.end + tile_size - 1) / tile_size};
}

}  // namespace flashmma
