// SPDX-License-Identifier: Apache-2.0
// Which (query tile, head, batch) each block of the grid computes.
//
// Blocks start roughly in the order of their linear index (x fastest).
//
// Without a mask every block does the same work: a head's query tiles are numbered next to each
// other, so that they run together and share the head's K/V tiles in L2.
//
// Under the causal mask a query tile's work grows with its index (tile m sees about m + 1 K/V
// tiles). Walking each head's tiles in turn would start some head's longest tile near the end of
// the grid, to run alone while the other SMs idle. So the (head, batch) pairs are cut into groups
// whose K/V fit in a share of L2, and each group is walked heaviest first: the last query tile of
// every pair of the group, then the one before, and so on (a longest-processing-time-first
// order). The blocks that start last are the shortest and fill the tail of the grid, and the
// blocks running together read the K/V of one group, which L2 holds.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {
namespace detail {

// Unsigned 32-bit, like blockIdx (validate.hpp keeps the grid within it): the compiler then
// knows every index is non-negative and below 2^32, as it did when they were blockIdx itself.
struct BlockCoord {
  unsigned m_block;  // query tile: rows [m_block * BlockM, +BlockM)
  unsigned head;     // query head
  unsigned batch;
};

// How many groups the causal order cuts the heads * batch (head, batch) pairs into: as few as
// keep the K and V that each group reads within a share of the L2 cache. A block does BlockM
// FLOPs per byte of K/V it streams, so blocks of 64 query rows need twice the L2 hits of blocks
// of 128 to stay off the memory bound: the share is half of L2 for BlockM = 128 and scales with
// BlockM. The query heads of a GQA group read one K/V head, so each counts for
// 1 / group_size of it.
FLASHMMA_HOST_DEVICE int64_t causal_group_count(int64_t pairs, int64_t seqlen_k, int64_t head_dim,
                                               int64_t group_size, int64_t element_bytes,
                                               int64_t block_m, int64_t l2_bytes) {
  const int64_t budget = l2_bytes / 2 * block_m / 128;
  const int64_t kv_bytes_per_pair = 2 * seqlen_k * head_dim * element_bytes / group_size;
  const int64_t fitting = kv_bytes_per_pair > 0 ? budget / kv_bytes_per_pair : pairs;
  const int64_t pairs_per_group = fitting > 1 ? fitting : 1;
  return (pairs + pairs_per_group - 1) / pairs_per_group;
}

// The coordinates of the block with linear index `linear` in the causal grid of m_blocks x
// heads x batch blocks (the kernel's gridDim). The pairs are cut into `groups` groups of
// consecutive pairs whose sizes differ by at most one (so that the last group, whose order makes
// the tail, is as long as the others). Within a group, heads vary fastest among the blocks of one
// query tile, so that the query heads of a GQA group, which read the same K/V head, start
// together. (Without the mask, block (x, y, z) computes query tile x of head y in batch z.)
FLASHMMA_HOST_DEVICE BlockCoord causal_block_coord(int64_t linear, int64_t m_blocks,
                                                   int64_t heads, int64_t batch, int64_t groups) {
  const int64_t pairs = heads * batch;
  const int64_t small_size = pairs / groups;        // pairs in a small group
  const int64_t large_groups = pairs % groups;      // the first groups have one pair more
  const int64_t large_blocks = large_groups * (small_size + 1) * m_blocks;
  int64_t group_size, first_pair, in_group;
  if (linear < large_blocks) {
    group_size = small_size + 1;
    const int64_t group = linear / (group_size * m_blocks);
    first_pair = group * group_size;
    in_group = linear % (group_size * m_blocks);
  } else {
    group_size = small_size;
    const int64_t rest = linear - large_blocks;
    first_pair = large_groups * (small_size + 1) + rest / (group_size * m_blocks) * group_size;
    in_group = rest % (group_size * m_blocks);
  }
  const int64_t pair = first_pair + in_group % group_size;
  return {static_cast<unsigned>(m_blocks - 1 - in_group / group_size),
          static_cast<unsigned>(pair % heads), static_cast<unsigned>(pair / heads)};
}

}  // namespace detail
}  // namespace flashmma
