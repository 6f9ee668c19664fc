// SPDX-License-Identifier: Apache-2.0
// The causal block order (attention/scheduler.hpp): every block of the grid computes a different
// (query tile, head, batch), each group of (head, batch) pairs is walked heaviest tile first, and
// the groups are as even as they can be and as few as keep their K/V within the L2 share.
#include "support/catch.hpp"

#include <flashmma/attention/scheduler.hpp>

#include <algorithm>
#include <cstdint>
#include <set>
#include <tuple>
#include <vector>

namespace {

using flashmma::WorkTile;
using flashmma::detail::causal_block_coord;
using flashmma::detail::causal_group_count;

constexpr int64_t kMiB = 1024 * 1024;
constexpr int64_t kElementBytes = 2;  // fp16 and bf16

struct Grid {
  int64_t m_blocks;
  int64_t heads;
  int64_t batch;
};

std::vector<WorkTile> walk(const Grid& grid, int64_t groups) {
  std::vector<WorkTile> order;
  const int64_t blocks = grid.m_blocks * grid.heads * grid.batch;
  for (int64_t linear = 0; linear < blocks; ++linear) {
    order.push_back(causal_block_coord(linear, grid.m_blocks, grid.heads, grid.batch, groups));
  }
  return order;
}

int64_t pair_of(const WorkTile& c, const Grid& grid) { return c.batch * grid.heads + c.head; }

}  // namespace

TEST_CASE("causal_block_coord visits every block of the grid once", "[block_order]") {
  for (int64_t m_blocks : {1, 2, 7, 16}) {
    for (int64_t heads : {1, 3, 8}) {
      for (int64_t batch : {1, 2, 5}) {
        const Grid grid{m_blocks, heads, batch};
        for (int64_t groups = 1; groups <= heads * batch; ++groups) {
          CAPTURE(m_blocks, heads, batch, groups);
          std::set<std::tuple<unsigned, unsigned, unsigned>> seen;
          for (const WorkTile& c : walk(grid, groups)) {
            REQUIRE(c.m_block < m_blocks);
            REQUIRE(c.head < heads);
            REQUIRE(c.batch < batch);
            seen.insert({c.m_block, c.head, c.batch});
          }
          CHECK(static_cast<int64_t>(seen.size()) == m_blocks * heads * batch);
        }
      }
    }
  }
}

TEST_CASE("causal_block_coord walks each group heaviest query tile first", "[block_order]") {
  const Grid grid{8, 6, 3};  // 18 pairs
  for (int64_t groups : {1, 4, 5, 18}) {
    CAPTURE(groups);
    const std::vector<WorkTile> order = walk(grid, groups);
    // Pairs of one group are consecutive and the group sizes differ by at most one.
    std::vector<int64_t> group_sizes;
    std::set<int64_t> group_pairs;
    size_t i = 0;
    while (i < order.size()) {
      // A group starts at its heaviest tile: every pair of it at m_blocks - 1, heads fastest.
      REQUIRE(order[i].m_block == grid.m_blocks - 1);
      int64_t size = 0;
      while (i + size < order.size() && order[i + size].m_block == grid.m_blocks - 1) ++size;
      group_sizes.push_back(size);
      const int64_t first = pair_of(order[i], grid);
      for (int64_t level = 0; level < grid.m_blocks; ++level) {
        for (int64_t p = 0; p < size; ++p) {
          const WorkTile& c = order[i + level * size + p];
          CHECK(c.m_block == grid.m_blocks - 1 - level);
          CHECK(pair_of(c, grid) == first + p);
        }
      }
      i += size * grid.m_blocks;
    }
    CHECK(static_cast<int64_t>(group_sizes.size()) == groups);
    const auto [smallest, largest] = std::minmax_element(group_sizes.begin(), group_sizes.end());
    CHECK(*largest - *smallest <= 1);
  }
}

TEST_CASE("causal_group_count keeps each group's K/V within the L2 share", "[block_order]") {
  const int64_t l2 = 60 * kMiB;
  // d = 256, 1k keys: 1 MiB of K and V per pair; BlockM = 128 uses half of L2, 30 pairs a group.
  CHECK(causal_group_count(128, 1024, 256, 1, kElementBytes, 128, l2) == 5);
  // BlockM = 64 blocks use a quarter: 15 pairs a group.
  CHECK(causal_group_count(128, 1024, 256, 1, kElementBytes, 64, l2) == 9);
  // Query heads of one GQA group share their K/V head: 8 of them count as one.
  CHECK(causal_group_count(128, 1024, 256, 8, kElementBytes, 128, l2) == 1);
  // K/V larger than the share: one pair a group, each head's tiles in turn.
  CHECK(causal_group_count(8, 16384, 256, 1, kElementBytes, 128, l2) == 8);
  // No L2 reported: still one pair a group, never zero groups.
  CHECK(causal_group_count(8, 1024, 64, 1, kElementBytes, 128, 0) == 8);
  CHECK(causal_group_count(1, 1, 8, 1, kElementBytes, 128, l2) == 1);
}
