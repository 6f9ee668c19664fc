// SPDX-License-Identifier: Apache-2.0
// The causal block order (attention/scheduler.hpp): every block of the grid computes a different
// (query tile, head, batch), each group of (head, batch) pairs is walked heaviest tile first, and
// the groups are as even as they can be and as few as keep their K/V within the L2 share; and
// the persistent walk of an order (PersistentScheduler): its tile counter and its fixed snake.
#include "support/catch.hpp"

#include <flashmma/attention/scheduler.hpp>

#include <algorithm>
#include <atomic>
#include <cstddef>
#include <random>
#include <thread>
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

namespace {

// take_ticket's atomics on the host; now and then a thread yields between two of them, so that
// the blocks' operations interleave in more ways.
struct HostTicketWord {
  std::atomic<uint64_t>& value;
  std::minstd_rand rng;
  void maybe_yield() {
    if (rng() % 4 == 0) std::this_thread::yield();
  }
  uint64_t fetch_add(uint64_t v) {
    maybe_yield();
    return value.fetch_add(v);
  }
  uint64_t compare_exchange(uint64_t expected, uint64_t desired) {
    maybe_yield();
    value.compare_exchange_strong(expected, desired);
    return expected;  // the value seen
  }
  void exchange(uint64_t v) { value.exchange(v); }
};

// A persistent launch as sm90::ForwardKernel's producers walk it (PersistentScheduler): a thread
// per block, all started at once; block b computes tile b, then tile gridDim + ticket for each
// ticket it takes, until one lands past the last tile. Returns how many times each tile was
// computed; `word` is left as the launch leaves it.
std::vector<int> walk_with_counter(int64_t tiles, int64_t blocks, uint32_t epoch,
                                   std::atomic<uint64_t>& word) {
  std::vector<std::atomic<int>> computed(static_cast<std::size_t>(tiles));
  for (auto& c : computed) c = 0;
  std::atomic<bool> go{false};
  std::vector<std::thread> threads;
  for (int64_t b = 0; b < blocks; ++b) {
    threads.emplace_back([&, b] {
      HostTicketWord counter{word, std::minstd_rand(static_cast<unsigned>(b + 1))};
      while (!go.load()) std::this_thread::yield();
      ++computed[static_cast<std::size_t>(b)];
      for (;;) {
        const int64_t next = blocks + flashmma::take_ticket(counter, epoch, tiles);
        if (next >= tiles) break;
        ++computed[static_cast<std::size_t>(next)];
      }
    });
  }
  go = true;
  for (std::thread& t : threads) t.join();
  std::vector<int> counts;
  for (auto& c : computed) counts.push_back(c.load());
  return counts;
}

}  // namespace

TEST_CASE("A persistent launch's tile counter hands out every tile once, from any start",
          "[block_order][persistent]") {
  std::mt19937 rng(7);
  // Launches of different sizes follow each other on one word that the caller never zeroes;
  // now and then it holds garbage (an uninitialized workspace), and some launches are replayed
  // with their epoch (a CUDA graph's).
  std::atomic<uint64_t> word{0xdeadbeefcafef00dull};
  uint32_t epoch = 0;
  for (int launch = 0; launch < 120; ++launch) {
    const int64_t blocks = 1 + static_cast<int64_t>(rng() % 133);
    const int64_t tiles = blocks + static_cast<int64_t>(rng() % 600);
    if (launch % 20 == 10) word = (uint64_t{rng()} << 32) | rng();  // anything at all
    if (launch % 3 != 0 || epoch == 0) epoch = epoch + 1 == 0 ? 1 : epoch + 1;  // else a replay
    CAPTURE(launch, blocks, tiles, epoch);
    const std::vector<int> computed = walk_with_counter(tiles, blocks, epoch, word);
    CHECK(std::all_of(computed.begin(), computed.end(), [](int n) { return n == 1; }));
    CHECK(word.load() == 0);  // left fresh for the next launch
  }
}

TEST_CASE("PersistentScheduler's snake walks every tile once, and maps tiles as its order",
          "[block_order][persistent]") {
  using Walk = flashmma::PersistentScheduler<flashmma::HeaviestFirstScheduler>;
  flashmma::SchedulerInputs in{};
  in.m_blocks = 9;
  in.heads = 6;
  in.batch = 3;
  in.seqlen_k = 1152;
  in.group_size = 2;
  in.head_dim = 128;
  in.element_bytes = 2;
  in.block_m = 128;
  in.l2_bytes = 50 << 20;
  in.concurrent_blocks = 20;
  const Walk::Params params = Walk::make_params(in);
  CHECK(Walk::grid(in).x == 20u);
  const int64_t tiles = params.counts.tiles();
  std::set<std::tuple<unsigned, unsigned, unsigned>> seen;
  for (int64_t b = 0; b < 20; ++b) {
    for (int64_t round = 0;; ++round) {
      const int64_t linear = round * 20 + ((round & 1) != 0 ? 20 - 1 - b : b);
      if (linear >= tiles) break;
      const flashmma::WorkTile t = Walk::tile_of(params, linear);
      const flashmma::WorkTile expected = flashmma::HeaviestFirstScheduler::tile_of(
          params.order, linear, flashmma::TileCounts{9, 6, 3});
      CHECK(std::make_tuple(t.m_block, t.head, t.batch) ==
            std::make_tuple(expected.m_block, expected.head, expected.batch));
      CHECK(seen.insert({t.m_block, t.head, t.batch}).second);
    }
  }
  CHECK(static_cast<int64_t>(seen.size()) == tiles);
  in.concurrent_blocks = 0;  // one block per tile
  CHECK(Walk::grid(in).x == static_cast<unsigned>(tiles));
}

TEST_CASE("persistent_blocks walks short key ranges with a counter, one block per tile else",
          "[block_order][persistent]") {
  flashmma::SchedulerInputs in{};
  in.m_blocks = 8;
  in.heads = 16;
  in.batch = 16;
  in.seqlen_k = 1024;
  const int64_t slots = 132;
  for (const int64_t limit : {16, 32, 128}) {
    CAPTURE(limit);
    in.seqlen_k = 1024;
    CHECK(flashmma::persistent_blocks(in, 128, limit, slots, true) == slots);
    CHECK(flashmma::persistent_blocks(in, 128, limit, slots, false) == 0);  // no counter
    in.seqlen_k = 128 * limit;
    CHECK(flashmma::persistent_blocks(in, 128, limit, slots, true) == slots);
    CHECK(flashmma::persistent_blocks(in, 64, limit, slots, true) == 0);  // twice the key tiles
    in.seqlen_k += 1;  // one key tile more
    CHECK(flashmma::persistent_blocks(in, 128, limit, slots, true) == 0);
  }
  in.seqlen_k = 1024;
  in.batch = 1;  // 128 tiles: fewer than the slots
  CHECK(flashmma::persistent_blocks(in, 128, 32, slots, true) == 0);
  in.m_blocks = 1 << 20;  // past the grid's limit: walked, on the snake without a counter
  in.heads = 1 << 12;
  in.seqlen_k = 1 << 20;
  CHECK(flashmma::persistent_blocks(in, 128, 32, slots, false) == slots);
}
