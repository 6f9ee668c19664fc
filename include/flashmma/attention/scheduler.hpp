// SPDX-License-Identifier: Apache-2.0
// Schedulers: which work tile (query tile, head, batch, split) each block of the grid computes,
// and the grid that covers them. Every kernel, forward or backward, sm80 or sm90, takes one as a
// template parameter; each owns its parameters, filled on the host by make_params().
//
//   PlainScheduler          block (x, y, z) computes query tile x of head y in batch z: a head's
//                           query tiles run side by side and share its K/V tiles in L2. For
//                           grids whose blocks all do about the same work.
//   HeaviestFirstScheduler  for the causal mask and windows, where a query tile's work grows
//                           with its index (tile m sees about m + 1 K/V tiles). Walking each
//                           head's tiles in turn would start some head's longest tile near the
//                           end of the grid, to run alone while the other SMs idle. So the
//                           (head, batch) pairs are cut into groups whose K/V fit in a share of
//                           L2, and each group is walked heaviest first: the last query tile of
//                           every pair of the group, then the one before, and so on (a
//                           longest-processing-time-first order). The blocks that start last are
//                           the shortest and fill the tail of the grid, and the blocks running
//                           together read the K/V of one group, which L2 holds.
//   SplitScheduler          split-KV: several blocks per query tile, each a part of its keys
//                           (attention/split_kv.hpp); the split index fastest.
//   KeyTileWalk             the backward pass's (sm80 and sm90): block (x, y, z) owns key tile
//                           x of K/V head y in batch z and walks the query tiles that see its
//                           keys over every query head of the head's group.
//
// Blocks start roughly in the order of their linear index (x fastest).
#pragma once

#include <cstdint>
#include <type_traits>

#include "flashmma/attention/key_range.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/problem_shape.hpp"

namespace flashmma {

// One block's share of the problem. Unsigned 32-bit, like blockIdx (validate.hpp keeps the grid
// within it): the compiler then knows every index is non-negative and below 2^32, as it did when
// they were blockIdx itself.
struct WorkTile {
  unsigned m_block;  // query tile: rows [m_block * BlockM, +BlockM)
  unsigned head;     // query head
  unsigned batch;
  unsigned split = 0;  // key split (split-KV); 0 while a block covers every key
};

// The grid of one launch, in blocks; the host turns it into a dim3.
struct GridShape {
  unsigned x, y, z;
};

// What a scheduler's make_params() reads of the problem.
struct SchedulerInputs {
  int64_t m_blocks;       // query tiles per (head, batch)
  int64_t heads;          // query heads
  int64_t batch;
  int64_t seqlen_k;
  int64_t head_dim;
  int64_t group_size;     // query heads per K/V head
  int64_t element_bytes;
  int64_t block_m;
  int64_t l2_bytes;
};

struct PlainScheduler {
  static constexpr const char* kName = "PlainScheduler";  // in kernel descriptions
  static constexpr bool kSplitsKeys = false;  // a block covers every key of its query tile
  struct Params {};

  static Params make_params(const SchedulerInputs&) { return {}; }
  static GridShape grid(const SchedulerInputs& in) {
    return {static_cast<unsigned>(in.m_blocks), static_cast<unsigned>(in.heads),
            static_cast<unsigned>(in.batch)};
  }
#if defined(__CUDACC__)
  static FLASHMMA_DEVICE WorkTile work_tile(const Params&) {
    return {blockIdx.x, blockIdx.y, blockIdx.z};
  }
#endif
};

namespace detail {

// How many groups the heaviest-first order cuts the heads * batch (head, batch) pairs into: as
// few as keep the K and V that each group reads within a share of the L2 cache. A block does
// BlockM FLOPs per byte of K/V it streams, so blocks of 64 query rows need twice the L2 hits of
// blocks of 128 to stay off the memory bound: the share is half of L2 for BlockM = 128 and
// scales with BlockM. The query heads of a GQA group read one K/V head, so each counts for
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

// The work tile of the block with linear index `linear` in the grid of m_blocks x heads x batch
// blocks. The pairs are cut into `groups` groups of consecutive pairs whose sizes differ by at
// most one (so that the last group, whose order makes the tail, is as long as the others).
// Within a group, heads vary fastest among the blocks of one query tile, so that the query heads
// of a GQA group, which read the same K/V head, start together.
FLASHMMA_HOST_DEVICE WorkTile causal_block_coord(int64_t linear, int64_t m_blocks, int64_t heads,
                                                 int64_t batch, int64_t groups) {
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

struct HeaviestFirstScheduler {
  static constexpr const char* kName = "HeaviestFirstScheduler";
  static constexpr bool kSplitsKeys = false;
  struct Params {
    int64_t groups;  // (head, batch) pair groups, detail::causal_group_count
  };

  static Params make_params(const SchedulerInputs& in) {
    return {detail::causal_group_count(in.heads * in.batch, in.seqlen_k, in.head_dim,
                                       in.group_size, in.element_bytes, in.block_m,
                                       in.l2_bytes)};
  }
  // The same grid as the plain order: only the meaning of a block index changes.
  static GridShape grid(const SchedulerInputs& in) { return PlainScheduler::grid(in); }
#if defined(__CUDACC__)
  static FLASHMMA_DEVICE WorkTile work_tile(const Params& params) {
    const int64_t linear =
        blockIdx.x + static_cast<int64_t>(gridDim.x) *
                         (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
    return detail::causal_block_coord(linear, gridDim.x, gridDim.y, gridDim.z, params.groups);
  }
#endif
};

// Split-KV (attention/split_kv.hpp): block x of the grid is split x % splits of query tile
// x / splits, so that the splits of one tile, which read the same Q rows, start together; y and z
// are head and batch as in the plain order.
struct SplitScheduler {
  static constexpr const char* kName = "SplitScheduler";
  static constexpr bool kSplitsKeys = true;  // a block covers its split's part of the keys
  struct Params {
    unsigned splits;
  };

  static Params make_params(const SchedulerInputs&, int splits) {
    return {static_cast<unsigned>(splits)};
  }
  static GridShape grid(const SchedulerInputs& in, int splits) {
    return {static_cast<unsigned>(in.m_blocks * splits), static_cast<unsigned>(in.heads),
            static_cast<unsigned>(in.batch)};
  }
  // The work tile of block (x, y, z): the same arithmetic on host (tests) and device.
  static FLASHMMA_HOST_DEVICE WorkTile work_tile_of(const Params& params, unsigned x, unsigned y,
                                                    unsigned z) {
    return {x / params.splits, y, z, x % params.splits};
  }
#if defined(__CUDACC__)
  static FLASHMMA_DEVICE WorkTile work_tile(const Params& params) {
    return work_tile_of(params, blockIdx.x, blockIdx.y, blockIdx.z);
  }
#endif
};

// The block order a policy's grid wants: heaviest query tile first where masks make the work of
// a query tile grow with its index, the plain order where every tile does the same work.
template <class Policy>
using SchedulerFor =
    std::conditional_t<Policy::kMasks, HeaviestFirstScheduler, PlainScheduler>;

// The backward pass's blocks: one per (key tile of block_n keys, K/V head, batch). A block walks
// the query tiles that see its keys (query_tiles) for every query head of the K/V head's group:
// step t is group member t / count (query head first_head + t / count) and query tile
// first + t % count, so a member's tiles run in order, as the deterministic order of dQ's sums
// expects (attention/backward_gradients.cuh).
struct KeyTileWalk {
  TileRange q_tiles;
  int group = 1;

  static GridShape grid(const ProblemShape& shape, int block_n) {
    return {static_cast<unsigned>((shape.seqlen_k + block_n - 1) / block_n),
            static_cast<unsigned>(shape.heads_kv), static_cast<unsigned>(shape.batch)};
  }

  FLASHMMA_HOST_DEVICE int steps() const { return q_tiles.count * group; }
  FLASHMMA_HOST_DEVICE int member(int step) const { return step / q_tiles.count; }
  FLASHMMA_HOST_DEVICE int first_query(int step, int block_m) const {
    return static_cast<int>((q_tiles.first + step % q_tiles.count) * block_m);
  }
};

}  // namespace flashmma
