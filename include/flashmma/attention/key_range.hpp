// SPDX-License-Identifier: Apache-2.0
// The K/V tiles a query tile visits, from the score policy's key range: main loops iterate
// [first, first + count) instead of every tile, so that tiles a mask hides are never loaded. The
// same for the backward's query tiles of a key tile (query_tiles).
//
// Within the range, a tile needs the per-element mask when it runs past the end of the keys or
// when the policy hides some pair of it; the others (the interior of a causal triangle or of a
// window's band) skip that work. The decision is per tile and warp-uniform.
#pragma once

#include <cstdint>

#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

struct TileRange {
  int64_t first = 0;  // absolute index of the first tile
  int count = 0;      // 0: nothing to visit
};

// The key tiles of `block_n` keys that hold every key some query of `queries` may see.
template <class Policy>
FLASHMMA_HOST_DEVICE TileRange key_tiles(const Policy& policy, const SequenceLengths& lengths,
                                         const IndexRange& queries, int64_t block_n) {
  const IndexRange tiles = covering_tiles(policy_key_range(policy, queries, lengths), block_n);
  return {tiles.begin, static_cast<int>(tiles.size())};
}

// The tiles of `block` (the key tiles of a query tile) that `rows`, some of that tile's queries,
// need: a warpgroup that owns part of a tile's rows visits only these, so the tiles of a window's
// left edge or of the causal diagonal that none of its rows sees are passed over. No rows (past
// the end of the queries): no tiles. Intersected with `block`, which holds every key the tile's
// queries see, so that a policy whose ranges are not monotone in the queries stays correct.
template <class Policy>
FLASHMMA_HOST_DEVICE TileRange key_tiles_within(const Policy& policy,
                                                const SequenceLengths& lengths,
                                                const IndexRange& rows, const TileRange& block,
                                                int64_t block_n) {
  if (rows.empty()) return {block.first, 0};
  const TileRange own = key_tiles(policy, lengths, rows, block_n);
  const int64_t first = own.first > block.first ? own.first : block.first;
  const int64_t own_end = own.first + own.count;
  const int64_t block_end = block.first + block.count;
  const int64_t end = own_end < block_end ? own_end : block_end;
  return {first, end > first ? static_cast<int>(end - first) : 0};
}

// The query tiles of `block_m` queries that hold every query that sees some key of `keys`.
template <class Policy>
FLASHMMA_HOST_DEVICE TileRange query_tiles(const Policy& policy, const SequenceLengths& lengths,
                                           const IndexRange& keys, int64_t block_m) {
  const IndexRange tiles = covering_tiles(policy_query_range(policy, keys, lengths), block_m);
  return {tiles.begin, static_cast<int>(tiles.size())};
}

// The last key tile before `key_tile` (of `block_n` keys) whose query tiles (query_tiles, of
// `block_m` queries) hold query tile `query_tile`; -1 when none does. The backward pass's
// deterministic order adds the dQ of a query tile key tile by key tile with it: each waits for
// this one, which visits the query tile too, so the wait always ends.
template <class Policy>
FLASHMMA_HOST_DEVICE int64_t previous_key_tile_seeing(const Policy& policy,
                                                      const SequenceLengths& lengths,
                                                      int64_t key_tile, int64_t query_tile,
                                                      int64_t block_n, int64_t block_m) {
  for (int64_t n = key_tile - 1; n >= 0; --n) {
    const int64_t first = n * block_n;
    const int64_t last = first + block_n < lengths.seqlen_k ? first + block_n : lengths.seqlen_k;
    if (first >= last) continue;  // past the sequence's keys: no block adds for it
    const TileRange tiles = query_tiles(policy, lengths, IndexRange{first, last}, block_m);
    if (tiles.first <= query_tile && query_tile < tiles.first + tiles.count) return n;
  }
  return -1;
}

// True when some score of queries x [first_key, first_key + block_n) is hidden: by the end of
// the keys, or by the policy.
template <class Policy>
FLASHMMA_HOST_DEVICE bool tile_needs_mask(const Policy& policy, const SequenceLengths& lengths,
                                          const IndexRange& queries, int64_t first_key,
                                          int64_t block_n) {
  const int64_t last_key = first_key + block_n - 1;
  if (last_key >= lengths.seqlen_k) return true;
  return !policy_all_visible(policy, queries, IndexRange{first_key, first_key + block_n},
                             lengths);
}

}  // namespace flashmma
