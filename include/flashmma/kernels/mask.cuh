// SPDX-License-Identifier: Apache-2.0
// Which scores a query may see: the sequence bound and the causal mask, in one place for every
// kernel. Positions are absolute (query row in [0, seqlen_q), key in [0, seqlen_k)).
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {
namespace detail {

struct AttentionMask {
  int64_t seqlen_q;
  int64_t seqlen_k;
  bool causal;

  // Causal is aligned to the bottom-right corner: query i sees keys j <= i + (seqlen_k - seqlen_q).
  FLASHMMA_HOST_DEVICE int64_t causal_offset() const { return seqlen_k - seqlen_q; }

  FLASHMMA_HOST_DEVICE bool visible(int64_t query, int64_t key) const {
    return key < seqlen_k && (!causal || key <= query + causal_offset());
  }

  // Keys [0, end) hold every key that some query in [first_query, first_query + rows) may see.
  // May be <= 0 under the causal mask: then no key is visible to any of those queries.
  FLASHMMA_HOST_DEVICE int64_t key_end_for_queries(int64_t first_query, int64_t rows) const {
    if (!causal) return seqlen_k;
    const int64_t last_visible = first_query + rows - 1 + causal_offset();
    return last_visible + 1 < seqlen_k ? last_visible + 1 : seqlen_k;
  }

  // True when some score of the tile [first_query, +rows) x [first_key, +cols) is hidden, i.e.
  // when the tile must be masked element by element. Interior tiles skip that work.
  FLASHMMA_HOST_DEVICE bool tile_needs_mask(int64_t first_query, int64_t first_key,
                                            int64_t cols) const {
    const int64_t last_key = first_key + cols - 1;
    if (last_key >= seqlen_k) return true;
    return causal && last_key > first_query + causal_offset();
  }
};

}  // namespace detail
}  // namespace flashmma
