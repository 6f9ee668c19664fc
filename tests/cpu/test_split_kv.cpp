// SPDX-License-Identifier: Apache-2.0
// Split-KV's arithmetic (attention/split_kv.hpp, SplitScheduler): the parts of a key range
// partition it, the split count follows the occupancy rule, the workspace layout holds every
// partial once, and the split grid names every (query tile, split) once; the rows of a packed
// GQA work tile (SequenceInfo's PackableRows).
#include "support/catch.hpp"

#include <cuda_fp16.h>

#include <flashmma/attention/forward_args.hpp>
#include <flashmma/attention/scheduler.hpp>
#include <flashmma/attention/sequence_info.hpp>
#include <flashmma/attention/split_kv.hpp>
#include <flashmma/params.hpp>

#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

using flashmma::SplitInputs;
using flashmma::TileRange;

TEST_CASE("split_key_tiles partitions a key range into consecutive parts", "[split_kv]") {
  for (const TileRange all : {TileRange{0, 1}, TileRange{3, 10}, TileRange{5, 128},
                              TileRange{0, 1000}, TileRange{7, 0}}) {
    for (unsigned splits : {1u, 2u, 3u, 7u, 16u, 128u}) {
      CAPTURE(all.first, all.count, splits);
      int64_t next = all.first;
      int longest = 0;
      int shortest_nonempty = all.count;
      for (unsigned s = 0; s < splits; ++s) {
        const TileRange part = flashmma::split_key_tiles(all, s, splits);
        REQUIRE(part.count >= 0);
        if (part.count > 0) {
          CHECK(part.first == next);  // consecutive, in order, no overlap
          next += part.count;
          longest = std::max(longest, part.count);
          shortest_nonempty = std::min(shortest_nonempty, part.count);
        }
      }
      CHECK(next == all.first + all.count);  // every tile covered
      // Every part but the last non-empty one has ceil(count / splits) tiles.
      CHECK(longest == (all.count + static_cast<int>(splits) - 1) / static_cast<int>(splits));
    }
  }
}

TEST_CASE("choose_split_count: splits only grids that leave the GPU idle", "[split_kv]") {
  const int64_t concurrent = 132 * 2;  // an H200 with two blocks per SM
  // Prefill-sized grids: never split.
  CHECK(flashmma::choose_split_count({16 * 32 * 8, 64, concurrent}) == 1);
  CHECK(flashmma::choose_split_count({concurrent * 4 / 5, 1000, concurrent}) == 1);
  // Nothing to split.
  CHECK(flashmma::choose_split_count({1, 1, concurrent}) == 1);
  CHECK(flashmma::choose_split_count({0, 100, concurrent}) == 1);
  // Decoding, one query tile per (batch, head): 8 sequences x 32 heads = 256 blocks, 97% of a
  // wave already: no split.
  CHECK(flashmma::choose_split_count({256, 128, concurrent}) == 1);
  // 1 x 8 heads over a 128k cache (1024 tiles of 128 keys): 8 blocks. 33 splits fill the
  // wave exactly (264 blocks).
  CHECK(flashmma::choose_split_count({8, 1024, concurrent}) == 33);
  // 8 sequences x 8 heads: 4 splits make 256 blocks (97%); 5 would start a second wave.
  CHECK(flashmma::choose_split_count({64, 1024, concurrent}) == 4);
  // Never more splits than key tiles, nor than kMaxSplits.
  CHECK(flashmma::choose_split_count({1, 3, concurrent}) == 3);
  CHECK(flashmma::choose_split_count({1, 100000, 100000}) == flashmma::kMaxSplits);
  // The rule, checked over a range of grids: the result is at least 1 and at most the cap, its
  // wave efficiency is the best any count up to the cap reaches, and no smaller count reaches
  // it.
  const auto efficiency = [&](int64_t work, int64_t s) {
    const int64_t blocks = work * s;
    const int64_t waves = (blocks + concurrent - 1) / concurrent;
    return static_cast<double>(blocks) / static_cast<double>(waves * concurrent);
  };
  for (int64_t work = 1; work < concurrent; work += 7) {
    for (int64_t tiles : {2, 9, 64, 1024}) {
      CAPTURE(work, tiles);
      const int s = flashmma::choose_split_count({work, tiles, concurrent});
      REQUIRE(s >= 1);
      REQUIRE(s <= tiles);
      const int64_t cap = std::min<int64_t>(
          std::min<int64_t>(tiles, flashmma::kMaxSplits), (concurrent + work - 1) / work);
      REQUIRE(s <= cap);
      if (work * 5 < concurrent * 4) {
        double best = 0;
        for (int64_t c = 1; c <= cap; ++c) best = std::max(best, efficiency(work, c));
        CHECK(efficiency(work, s) == Approx(best));
        for (int64_t c = 1; c < s; ++c) CHECK(efficiency(work, c) < best * (1 - 1e-12));
      } else {
        CHECK(s == 1);
      }
    }
  }
}

TEST_CASE("split_workspace: one partial O row and one LSE per (split, row)", "[split_kv]") {
  const flashmma::SplitWorkspace none = flashmma::split_workspace(1, 2 * 8 * 1, 128);
  CHECK(none.bytes == 0);

  const flashmma::SplitWorkspace w = flashmma::split_workspace(5, 3 * 4 * 7, 96);
  CHECK(w.rows == 3 * 4 * 7);
  CHECK(w.o_offset == 0);
  CHECK(w.lse_offset % flashmma::kWorkspaceAlignment == 0);
  CHECK(w.lse_offset >= 5u * 84u * 96u * sizeof(float));
  CHECK(w.bytes == w.lse_offset + 5u * 84u * sizeof(float));
  // Indices are distinct and inside their arrays.
  std::set<int64_t> o_seen;
  std::set<int64_t> lse_seen;
  for (int64_t s = 0; s < 5; ++s) {
    for (int64_t row = 0; row < w.rows; ++row) {
      lse_seen.insert(w.lse_index(s, row));
      for (int64_t c : {int64_t{0}, int64_t{95}}) o_seen.insert(w.o_index(s, row, c));
    }
  }
  CHECK(lse_seen.size() == 5u * 84u);
  CHECK(*lse_seen.rbegin() == 5 * 84 - 1);
  CHECK(o_seen.size() == 2u * 5u * 84u);
  CHECK(*o_seen.rbegin() == 5 * 84 * 96 - 1);
}

TEST_CASE("SplitScheduler: every (query tile, split, head, batch) once", "[split_kv]") {
  flashmma::SchedulerInputs in{};
  in.m_blocks = 3;
  in.heads = 2;
  in.batch = 2;
  const int splits = 5;
  const flashmma::GridShape grid = flashmma::SplitScheduler::grid(in, splits);
  CHECK(grid.x == 15u);
  CHECK(grid.y == 2u);
  CHECK(grid.z == 2u);
  const flashmma::SplitScheduler::Params params = flashmma::SplitScheduler::make_params(in, splits);
  std::set<std::tuple<unsigned, unsigned, unsigned, unsigned>> seen;
  for (unsigned z = 0; z < grid.z; ++z) {
    for (unsigned y = 0; y < grid.y; ++y) {
      for (unsigned x = 0; x < grid.x; ++x) {
        const flashmma::WorkTile t = flashmma::SplitScheduler::work_tile_of(params, x, y, z);
        CHECK(t.m_block < 3u);
        CHECK(t.split < 5u);
        seen.insert({t.m_block, t.split, t.head, t.batch});
      }
    }
  }
  CHECK(seen.size() == 3u * 5u * 2u * 2u);
  // The splits of a query tile are neighbours in x.
  CHECK(flashmma::SplitScheduler::work_tile_of(params, 5, 0, 0).m_block == 1u);
  CHECK(flashmma::SplitScheduler::work_tile_of(params, 5, 0, 0).split == 0u);
  CHECK(flashmma::SplitScheduler::work_tile_of(params, 9, 0, 0).split == 4u);
}

TEST_CASE("packed GQA: a work tile's rows are the query heads of one K/V group", "[split_kv]") {
  // 12 query heads over 3 K/V heads (groups of 4), one query, d = 64, bshd; LSE [batch, heads, 1].
  flashmma::ForwardArgs<__half> args{};
  static __half q[2 * 12 * 64], o[2 * 12 * 64], kv[2 * 100 * 3 * 64];
  static float lse[2 * 12];
  args.q = q;
  args.o = o;
  args.k = args.v = kv;
  args.lse = lse;
  args.seqlen_q = 1;
  args.seqlen_k = 100;
  args.heads_q = 12;
  args.group_size = 4;
  args.head_dim = 64;
  args.q_strides = args.o_strides = flashmma::bshd_strides(1, 12, 64);
  args.k_strides = args.v_strides = flashmma::bshd_strides(100, 3, 64);
  args.lse_batch_stride = 12;
  args.lse_head_stride = 1;
  args.pack_gqa = true;
  const flashmma::WorkTile tile{0, /*K/V head*/ 2, /*batch*/ 1, 0};
  const flashmma::SequenceInfo<__half> seq(args, tile);
  CHECK(seq.kv_head == 2);
  CHECK(seq.head == 8);
  CHECK(seq.rows == 4);
  CHECK(seq.q_row_stride == 64);  // rows step over heads
  CHECK(seq.q == q + 12 * 64 + 8 * 64);
  CHECK(seq.row_tile(0, 64).begin == 0);
  CHECK(seq.row_tile(0, 64).end == 4);
  CHECK(seq.queries_of(seq.row_tile(0, 64)).begin == 0);  // every row is query 0
  CHECK(seq.queries_of(seq.row_tile(0, 64)).end == 1);
  for (int row = 0; row < 4; ++row) {
    const flashmma::ScoreCoord c = seq.row_coord(row);
    CHECK(c.head == 8 + row);
    CHECK(c.query == 0);
    CHECK(seq.row_of(c) == row);
    CHECK(seq.row_output_index(row) == 12 + 8 + row);
    CHECK(seq.row_map.head(8, row) == 8 + row);
  }
  // Padding rows (past the group) keep the group's last head in the policy's coordinates.
  CHECK(seq.row_map.head(8, 4) == 11);
  CHECK(seq.row_map.head(8 + 16, 5) == 11);
  CHECK(seq.row_of(seq.row_coord(20)) == 20);  // a padding warp's origin is not clamped

  // Not packed: rows are queries of the work tile's head.
  args.pack_gqa = false;
  args.seqlen_q = 7;
  const flashmma::SequenceInfo<__half> plain(args, flashmma::WorkTile{0, 5, 1, 0});
  CHECK(plain.rows == 7);
  CHECK(plain.kv_head == 1);
  CHECK(plain.row_coord(3).head == 5);
  CHECK(plain.row_coord(3).query == 3);
  CHECK(plain.row_map.head(5, 3) == 5);
  CHECK(plain.row_of(plain.row_coord(3)) == 3);
  CHECK(plain.queries_of(plain.row_tile(0, 4)).end == 4);
}
