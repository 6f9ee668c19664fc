// SPDX-License-Identifier: Apache-2.0
// Split-KV: the key range of one work tile (query tile, head, batch) cut into `splits` parts that
// separate blocks compute, each writing an fp32 partial O and LSE to the caller's workspace; a
// combine step (split_combine.cuh) then merges the partials with merge_softmax. This file holds
// the host-and-device arithmetic of it: how many splits, which key tiles a split visits, and where
// the partials live in the workspace.
//
// Why split: decoding has one to a few query rows per sequence, so batch x heads x query tiles is
// often smaller than the number of blocks the GPU runs at once, and each block streams a whole
// long K/V cache alone. Splitting the keys multiplies the blocks without adding reads of K/V.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashmma/attention/key_range.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

inline constexpr int kMaxSplits = 128;

// Split `split` of `splits` of a key-tile range: consecutive parts of ceil(count / splits)
// tiles; the last ones may be short or empty (count 0), and every tile is in exactly one part.
// Splitting the range the policy left (not the whole sequence) keeps the parts of a causal or
// windowed row as even as those of a full one.
FLASHMMA_HOST_DEVICE TileRange split_key_tiles(const TileRange& all, unsigned split,
                                               unsigned splits) {
  const int per_split = (all.count + static_cast<int>(splits) - 1) / static_cast<int>(splits);
  const int begin = per_split * static_cast<int>(split);
  const int end = begin + per_split < all.count ? begin + per_split : all.count;
  return {all.first + begin, end > begin ? end - begin : 0};
}

// What the split count is chosen from.
struct SplitInputs {
  int64_t work_tiles;       // batch x heads x query tiles: blocks without splitting
  int64_t key_tiles;        // key tiles of the longest row (the most a split could take)
  int64_t concurrent_blocks;  // blocks the GPU runs at once: SMs x blocks per SM
};

// The split count for a launch, 1 when splitting would not help. With `work_tiles` blocks the
// GPU runs ceil(work_tiles / concurrent_blocks) waves, the last one `work_tiles %
// concurrent_blocks` blocks full; splitting into s parts makes s times the blocks. Grids that
// already fill 80% of a wave are left alone; otherwise the count with the best wave efficiency
// (blocks / (waves x concurrent_blocks)), the smallest of equals. Decoding is bound by memory,
// and every block of the last wave adds reads in flight: on an H200 (132 SMs, 2 blocks each)
// one sequence of 8 KV heads ran 1.4% (128k keys) and 3.7% (32k) faster at 33 splits (264
// blocks, the whole wave) than at 29, where taking the smallest count within 85% of the best
// had stopped (docs/tuning-log.md, step 45).
// s never exceeds the key tiles (a split of no tile does nothing) nor kMaxSplits.
FLASHMMA_HOST_DEVICE int choose_split_count(const SplitInputs& in) {
  if (in.work_tiles <= 0 || in.key_tiles <= 1 || in.concurrent_blocks <= 0) return 1;
  if (in.work_tiles * 5 >= in.concurrent_blocks * 4) return 1;  // >= 80% of a wave
  int64_t max_splits = in.key_tiles < kMaxSplits ? in.key_tiles : kMaxSplits;
  // More splits than fill the GPU once only adds partials.
  const int64_t filling = (in.concurrent_blocks + in.work_tiles - 1) / in.work_tiles;
  if (max_splits > filling) max_splits = filling;
  // Compared as blocks x best_waves vs best_blocks x waves: exact, no rounding.
  int64_t best = 1;
  int64_t best_blocks = in.work_tiles;
  int64_t best_waves = (best_blocks + in.concurrent_blocks - 1) / in.concurrent_blocks;
  for (int64_t s = 2; s <= max_splits; ++s) {
    const int64_t blocks = in.work_tiles * s;
    const int64_t waves = (blocks + in.concurrent_blocks - 1) / in.concurrent_blocks;
    if (blocks * best_waves > best_blocks * waves) {
      best = s;
      best_blocks = blocks;
      best_waves = waves;
    }
  }
  return static_cast<int>(best);
}

// Where the partials of a split launch live in the workspace (byte offsets from its start):
//   O:   fp32 [splits, rows, head_dim], each row normalized over its split's keys (0 for a split
//        that saw none);
//   LSE: fp32 [splits, rows], natural log, -inf for a split that saw none;
// rows in the LSE's order (params.hpp): [batch, heads_q, seqlen_q], or [heads_q, total_q] for
// packed queries.
// The LSE array starts on a 256-byte boundary.
struct SplitWorkspace {
  int64_t splits = 1;
  int64_t rows = 0;  // the LSE's rows: rows per split
  int64_t head_dim = 0;
  std::size_t o_offset = 0;
  std::size_t lse_offset = 0;
  std::size_t bytes = 0;  // the whole workspace

  // Element (row, column) of split s's partial O, and split s's LSE of a row, as indices into
  // the fp32 arrays at o_offset and lse_offset.
  FLASHMMA_HOST_DEVICE int64_t o_index(int64_t split, int64_t row, int64_t column) const {
    return (split * rows + row) * head_dim + column;
  }
  FLASHMMA_HOST_DEVICE int64_t lse_index(int64_t split, int64_t row) const {
    return split * rows + row;
  }
};

inline constexpr std::size_t kWorkspaceAlignment = 256;

FLASHMMA_HOST_DEVICE SplitWorkspace split_workspace(int64_t splits, int64_t rows,
                                                    int64_t head_dim) {
  SplitWorkspace w;
  w.splits = splits;
  w.rows = rows;
  w.head_dim = head_dim;
  if (splits <= 1) return w;  // nothing to merge: no workspace
  const std::size_t o_bytes =
      static_cast<std::size_t>(splits * w.rows * head_dim) * sizeof(float);
  w.o_offset = 0;
  w.lse_offset = (o_bytes + kWorkspaceAlignment - 1) / kWorkspaceAlignment * kWorkspaceAlignment;
  w.bytes = w.lse_offset + static_cast<std::size_t>(splits * w.rows) * sizeof(float);
  return w;
}

// Where a split launch's kernel writes its partials (workspace + layout offsets), and the
// empty stand-in of kernels that write O directly.
struct SplitOutput {
  float* partial_o;
  float* partial_lse;
  SplitWorkspace layout;
};
struct NoSplitOutput {};

template <class Scheduler>
using SplitOutputFor =
    std::conditional_t<Scheduler::kSplitsKeys, SplitOutput, NoSplitOutput>;

}  // namespace flashmma
