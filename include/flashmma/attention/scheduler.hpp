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

#include <atomic>
#include <cstddef>
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
  int64_t concurrent_blocks = 0;  // blocks the GPU runs at once (persistent grids); 0: unknown
};

// The work tiles of a launch: m_blocks x heads x batch.
struct TileCounts {
  int64_t m_blocks;
  int64_t heads;
  int64_t batch;

  FLASHMMA_HOST_DEVICE int64_t tiles() const { return m_blocks * heads * batch; }
};

#if defined(__CUDACC__)
// The grid's own counts and this block's linear index in it (x fastest).
FLASHMMA_DEVICE TileCounts grid_tile_counts() { return {gridDim.x, gridDim.y, gridDim.z}; }
FLASHMMA_DEVICE int64_t linear_block_index() {
  return blockIdx.x +
         static_cast<int64_t>(gridDim.x) * (blockIdx.y + static_cast<int64_t>(gridDim.y) * blockIdx.z);
}
#endif

struct PlainScheduler {
  static constexpr const char* kName = "PlainScheduler";  // in kernel descriptions
  static constexpr bool kSplitsKeys = false;  // a block covers every key of its query tile
  struct Params {};

  static Params make_params(const SchedulerInputs&) { return {}; }
  static GridShape grid(const SchedulerInputs& in) {
    return {static_cast<unsigned>(in.m_blocks), static_cast<unsigned>(in.heads),
            static_cast<unsigned>(in.batch)};
  }
  // Tile `linear` of the order: query tile fastest, then head, then batch.
  static FLASHMMA_HOST_DEVICE WorkTile tile_of(const Params&, int64_t linear,
                                               const TileCounts& counts) {
    return {static_cast<unsigned>(linear % counts.m_blocks),
            static_cast<unsigned>(linear / counts.m_blocks % counts.heads),
            static_cast<unsigned>(linear / counts.m_blocks / counts.heads)};
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
  static FLASHMMA_HOST_DEVICE WorkTile tile_of(const Params& params, int64_t linear,
                                               const TileCounts& counts) {
    return detail::causal_block_coord(linear, counts.m_blocks, counts.heads, counts.batch,
                                      params.groups);
  }
#if defined(__CUDACC__)
  static FLASHMMA_DEVICE WorkTile work_tile(const Params& params) {
    return tile_of(params, linear_block_index(), grid_tile_counts());
  }
#endif
};

// A persistent launch's tile counter (PersistentScheduler): one 64-bit word of the caller's
// workspace holding the launch's `epoch` (high half, never 0) and its next ticket (low half).
// A block takes a ticket with one atomic add; a word of another epoch (zero, as every launch
// leaves it, or whatever the workspace held) is claimed for this launch by the first block that
// sees it (compare-and-swap to "ticket 0 taken"), the others then adding to the claimed word, so
// the counter needs no initialization. A launch takes exactly `tiles` tickets (the tiles after
// the grid's first ones, and one past the end per block), so the last one, `tiles` - 1, is its
// last use of the word, and leaves it zero: a replay of the same launch (a CUDA graph's, with
// its epoch) starts fresh as well. (Only a garbage word that already holds this epoch, one chance
// in 2^32 on a workspace's first use, would be taken as this launch's.)
// `Word` is the atomics: CUDA's on the device (DeviceTicketWord), std::atomic in the CPU test.
#if defined(__CUDACC__)
#pragma nv_exec_check_disable
#endif
template <class Word>
FLASHMMA_HOST_DEVICE uint32_t take_ticket(Word& word, uint32_t epoch, int64_t tiles) {
  const uint64_t claimed = (uint64_t{epoch} << 32) | 1u;  // ticket 0 taken
  uint32_t ticket = 0;
  for (;;) {
    const uint64_t old = word.fetch_add(1);
    if (static_cast<uint32_t>(old >> 32) == epoch) {
      ticket = static_cast<uint32_t>(old);
      break;
    }
    // Another launch's word: claim it, unless another block has just done so (then add again).
    uint64_t expected = old + 1;
    bool claimed_here = false;
    for (;;) {
      const uint64_t seen = word.compare_exchange(expected, claimed);
      if (seen == expected) {
        claimed_here = true;
        break;
      }
      if (static_cast<uint32_t>(seen >> 32) == epoch) break;
      expected = seen;
    }
    if (claimed_here) break;  // ticket 0
  }
  if (static_cast<int64_t>(ticket) + 1 >= tiles) word.exchange(0);
  return ticket;
}

#if defined(__CUDACC__)
// The device's atomics on the counter's word, for take_ticket.
struct DeviceTicketWord {
  unsigned long long* address;
  FLASHMMA_DEVICE uint64_t fetch_add(uint64_t value) { return atomicAdd(address, value); }
  // The value seen; `desired` stored if it was `expected`.
  FLASHMMA_DEVICE uint64_t compare_exchange(uint64_t expected, uint64_t desired) {
    return atomicCAS(address, expected, desired);
  }
  FLASHMMA_DEVICE void exchange(uint64_t value) { atomicExch(address, value); }
};
#endif

// A persistent grid over Order's tiles (PlainScheduler or HeaviestFirstScheduler), for kernels
// that loop over their tiles (Sm90TileConfig's Persistent): block b takes tile b of the order
// first, then the next one the launch's tile counter hands out (gridDim.x + its ticket; a ticket
// past the last tile ends the block's walk), when its producer has issued the current tile's
// loads; so a block busy with a heavy tile does not hold the next one, and the order's
// heaviest-first balance holds as with one block per tile. Without a counter, block b walks a
// fixed snake: tiles b, 2 gridDim.x - 1 - b, 2 gridDim.x + b, ... Every warp of a block walks the
// tiles its producer passes on, and a tile's results do not depend on which block computes it.
// The counter is one 64-bit word of the caller's workspace (take_ticket); launches that share it
// must not run at once, like any workspace.
template <class Order>
struct PersistentScheduler {
  static constexpr const char* kName = Order::kName;
  static constexpr bool kSplitsKeys = false;
  struct Params {
    typename Order::Params order;
    TileCounts counts;
    unsigned long long* tile_counter = nullptr;  // nullptr: the fixed snake
    uint32_t epoch = 0;                          // this launch's, never 0 (next_launch_epoch)
  };

  static Params make_params(const SchedulerInputs& in, unsigned long long* tile_counter = nullptr,
                            uint32_t epoch = 0) {
    return {Order::make_params(in), TileCounts{in.m_blocks, in.heads, in.batch}, tile_counter,
            epoch};
  }
  // in.concurrent_blocks blocks (persistent_blocks below), or one per tile where that is 0.
  static GridShape grid(const SchedulerInputs& in) {
    const int64_t tiles = TileCounts{in.m_blocks, in.heads, in.batch}.tiles();
    const int64_t slots = in.concurrent_blocks > 0 ? in.concurrent_blocks : tiles;
    return {static_cast<unsigned>(tiles < slots ? tiles : slots), 1u, 1u};
  }
  static FLASHMMA_HOST_DEVICE WorkTile tile_of(const Params& params, int64_t linear) {
    return Order::tile_of(params.order, linear, params.counts);
  }
#if defined(__CUDACC__)
  // The `round`-th tile of this block's walk (round >= 1).
  static FLASHMMA_DEVICE int64_t next_tile(const Params& params, int64_t round) {
    if (params.tile_counter != nullptr) {
      DeviceTicketWord word{params.tile_counter};
      return gridDim.x +
             static_cast<int64_t>(take_ticket(word, params.epoch, params.counts.tiles()));
    }
    const int64_t start = round * gridDim.x;
    return start + ((round & 1) != 0 ? gridDim.x - 1 - blockIdx.x : blockIdx.x);
  }
#endif
};

// A launch epoch for a persistent launch's tile counter: distinct for 2^32 - 1 launches of the
// process, never 0.
inline uint32_t next_launch_epoch() {
  static std::atomic<uint32_t> launches{0};
  uint32_t epoch = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  while (epoch == 0) epoch = launches.fetch_add(1, std::memory_order_relaxed) + 1;
  return epoch;
}

// The bytes of workspace a persistent walk's tile counter takes (one 64-bit word, in a unit of
// the workspace's 256-byte alignment).
constexpr std::size_t kTileCounterBytes = 256;
// How many blocks walk a persistent kernel's tiles (SchedulerInputs::concurrent_blocks): the
// `slots` the GPU runs at once where walking measured faster (more tiles than slots, at most
// `max_key_tiles` key tiles of `block_n` keys each: the config's Sm90WalkLimits, and a tile
// counter to balance the blocks: a fixed snake lost up to 20% on long causal rows), else 0, one
// block per tile. Beyond the grid's 2^31 - 1 blocks the tiles are walked whatever their length,
// on the snake if there is no counter.
inline int64_t persistent_blocks(const SchedulerInputs& in, int64_t block_n,
                                 int64_t max_key_tiles, int64_t slots, bool has_tile_counter) {
  const int64_t tiles = TileCounts{in.m_blocks, in.heads, in.batch}.tiles();
  constexpr int64_t kMaxGrid = 2147483647;
  if (tiles > kMaxGrid) return slots;
  const int64_t key_tiles = (in.seqlen_k + block_n - 1) / block_n;
  return has_tile_counter && tiles > slots && key_tiles <= max_key_tiles ? slots : 0;
}

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
