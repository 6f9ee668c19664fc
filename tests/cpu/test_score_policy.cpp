// SPDX-License-Identifier: Apache-2.0
// The score-policy contract (attention/score_policy.hpp) and the built-in policies: the ranges
// and the all_visible() shortcut of every built-in mask agree with its visible() on every pair,
// the transforms follow FlashAttention-2's formulas, and the contract's checks accept them.
#include "support/catch.hpp"

#include <flashmma/attention/builtin_policies.hpp>
#include <flashmma/attention/key_range.hpp>
#include <flashmma/attention/score_policy.hpp>

#include <cmath>
#include <cstdint>
#include <vector>

namespace {

using flashmma::AlibiBias;
using flashmma::CausalMask;
using flashmma::Combined;
using flashmma::FullAttention;
using flashmma::IndexRange;
using flashmma::ScoreCoord;
using flashmma::SequenceLengths;
using flashmma::SlidingWindow;
using flashmma::Softcap;

static_assert(flashmma::check_score_policy<FullAttention>());
static_assert(flashmma::check_score_policy<SlidingWindow>());
static_assert(flashmma::check_score_policy<CausalMask>());
static_assert(flashmma::check_score_policy<AlibiBias>());
static_assert(flashmma::check_score_policy<Softcap>());
static_assert(flashmma::check_score_policy<Combined<Softcap, Combined<AlibiBias, SlidingWindow>>>());
static_assert(!FullAttention::kMasks && !FullAttention::kTransformsScores);
static_assert(SlidingWindow::kMasks && !SlidingWindow::kTransformsScores);
static_assert(Combined<AlibiBias, SlidingWindow>::kMasks &&
              Combined<AlibiBias, SlidingWindow>::kTransformsScores);
// Which masks the kernels apply as one key interval per row: the window, and any combination
// whose masks all are intervals (a transform adds no mask).
static_assert(SlidingWindow::kKeyIntervalMask && !FullAttention::kKeyIntervalMask);
static_assert(Combined<AlibiBias, SlidingWindow>::kKeyIntervalMask &&
              Combined<Softcap, Combined<AlibiBias, SlidingWindow>>::kKeyIntervalMask);
static_assert(Combined<SlidingWindow, SlidingWindow>::kKeyIntervalMask);
static_assert(!Combined<SlidingWindow, CausalMask>::kKeyIntervalMask);  // CausalMask keeps visible()
static_assert(!Combined<Softcap, AlibiBias>::kKeyIntervalMask);

// Every visible pair of the block lies in both ranges, and in the key and query tiles that cover
// them; all_visible() is true exactly when every pair is visible (the built-in windows are exact,
// not just safe).
template <class Policy>
void check_block(const Policy& policy, const SequenceLengths& lengths, const IndexRange& queries,
                 const IndexRange& keys) {
  const IndexRange key_range = flashmma::policy_key_range(policy, queries, lengths);
  const IndexRange query_range = flashmma::policy_query_range(policy, keys, lengths);
  constexpr int64_t kTileKeys = 4, kTileQueries = 3;
  const flashmma::TileRange key_tiles = flashmma::key_tiles(policy, lengths, queries, kTileKeys);
  const flashmma::TileRange query_tiles =
      flashmma::query_tiles(policy, lengths, keys, kTileQueries);
  bool every_pair = true;
  for (int64_t q = queries.begin; q < queries.end; ++q) {
    for (int64_t k = keys.begin; k < keys.end; ++k) {
      const bool visible =
          flashmma::policy_visible(policy, flashmma::score_coord(0, 0, q, k), lengths);
      every_pair = every_pair && visible;
      if (visible) {
        INFO("query " << q << ", key " << k);
        REQUIRE(key_range.contains(k));
        REQUIRE(query_range.contains(q));
        REQUIRE(IndexRange{key_tiles.first, key_tiles.first + key_tiles.count}.contains(
            k / kTileKeys));
        REQUIRE(IndexRange{query_tiles.first, query_tiles.first + query_tiles.count}.contains(
            q / kTileQueries));
      }
    }
  }
  REQUIRE(flashmma::policy_all_visible(policy, queries, keys, lengths) == every_pair);
}

// The key range of one query is exactly its visible keys (a window has no holes): what
// kKeyIntervalMask promises, and what the kernels' per-row mask (policy_row_keys) relies on.
template <class Policy>
void check_rows_exact(const Policy& policy, const SequenceLengths& lengths) {
  for (int64_t q = 0; q < lengths.seqlen_q; ++q) {
    const IndexRange range = flashmma::policy_key_range(policy, IndexRange{q, q + 1}, lengths);
    if constexpr (Policy::kKeyIntervalMask) {
      const IndexRange row = flashmma::policy_row_keys(policy, q, lengths);
      REQUIRE(row.begin == range.begin);
      REQUIRE(row.end == range.end);
    }
    for (int64_t k = 0; k < lengths.seqlen_k; ++k) {
      const bool visible =
          flashmma::policy_visible(policy, flashmma::score_coord(0, 0, q, k), lengths);
      INFO("query " << q << ", key " << k);
      REQUIRE(range.contains(k) == visible);
    }
  }
}

TEST_CASE("sliding windows: ranges and all_visible agree with visible()", "[policy]") {
  const std::vector<SequenceLengths> lengths = {{1, 1}, {7, 7}, {5, 13}, {13, 5}, {16, 16},
                                                {9, 1}, {1, 9}};
  const std::vector<int64_t> sides = {-1, 0, 1, 2, 5, 40};
  for (const SequenceLengths& len : lengths) {
    for (const int64_t left : sides) {
      for (const int64_t right : sides) {
        const SlidingWindow window{{}, left, right};
        INFO("seqlen_q " << len.seqlen_q << ", seqlen_k " << len.seqlen_k << ", window (" << left
                         << ", " << right << ")");
        check_rows_exact(window, len);
        check_rows_exact(CausalMask{}, len);
        check_rows_exact(Combined<SlidingWindow, SlidingWindow>{{}, window, SlidingWindow{{}, 2, 1}},
                         len);
        check_rows_exact(Combined<AlibiBias, SlidingWindow>{{}, AlibiBias{}, window}, len);
        for (int64_t rows : {1, 2, 4}) {
          for (int64_t cols : {1, 3, 4}) {
            for (int64_t q0 = 0; q0 < len.seqlen_q; q0 += rows) {
              for (int64_t k0 = 0; k0 < len.seqlen_k; k0 += cols) {
                const IndexRange queries{q0, std::min<int64_t>(q0 + rows, len.seqlen_q)};
                const IndexRange keys{k0, std::min<int64_t>(k0 + cols, len.seqlen_k)};
                check_block(window, len, queries, keys);
                check_block(Combined<SlidingWindow, CausalMask>{{}, window, CausalMask{}}, len,
                            queries, keys);
                if (left == -1 && right == 0) check_block(CausalMask{}, len, queries, keys);
              }
            }
          }
        }
      }
    }
  }
}

// A warpgroup's tiles (key_tiles_within): a sub-range of the block's tiles that still holds every
// key its rows see, empty for rows past the end; at a window's edges it leaves tiles out.
template <class Policy>
void check_rows_within(const Policy& policy, const SequenceLengths& lengths, int64_t block_m,
                       int64_t rows_per_part, int64_t block_n) {
  for (int64_t q0 = 0; q0 < lengths.seqlen_q; q0 += block_m) {
    const IndexRange queries{q0, std::min<int64_t>(q0 + block_m, lengths.seqlen_q)};
    const flashmma::TileRange block = flashmma::key_tiles(policy, lengths, queries, block_n);
    for (int64_t r0 = q0; r0 < q0 + block_m; r0 += rows_per_part) {
      const IndexRange rows = IndexRange{r0, r0 + rows_per_part}.intersect(queries);
      const flashmma::TileRange own =
          flashmma::key_tiles_within(policy, lengths, rows, block, block_n);
      INFO("queries [" << queries.begin << ", " << queries.end << "), rows [" << rows.begin
                       << ", " << rows.end << "): tiles " << own.first << " + " << own.count
                       << " of " << block.first << " + " << block.count);
      REQUIRE(own.count >= 0);
      if (own.count > 0) {
        REQUIRE(own.first >= block.first);
        REQUIRE(own.first + own.count <= block.first + block.count);
      }
      if (rows.empty()) REQUIRE(own.count == 0);
      for (int64_t q = rows.begin; q < rows.end; ++q) {
        for (int64_t k = 0; k < lengths.seqlen_k; ++k) {
          if (flashmma::policy_visible(policy, flashmma::score_coord(0, 0, q, k), lengths)) {
            INFO("query " << q << ", key " << k);
            REQUIRE(IndexRange{own.first, own.first + own.count}.contains(k / block_n));
          }
        }
      }
    }
  }
}

TEST_CASE("a warpgroup's key tiles hold its rows' keys and leave a window's edges out",
          "[policy]") {
  for (const SequenceLengths len : {SequenceLengths{1000, 1000}, SequenceLengths{300, 1000},
                                    SequenceLengths{1000, 300}, SequenceLengths{130, 130}}) {
    INFO("seqlen_q " << len.seqlen_q << ", seqlen_k " << len.seqlen_k);
    check_rows_within(FullAttention{}, len, 192, 64, 128);
    check_rows_within(CausalMask{}, len, 192, 64, 128);
    check_rows_within(CausalMask{}, len, 128, 64, 80);
    check_rows_within(SlidingWindow{{}, 256, 0}, len, 192, 64, 128);
    check_rows_within(SlidingWindow{{}, 100, 37}, len, 128, 64, 112);
    check_rows_within(Combined<AlibiBias, SlidingWindow>{{}, AlibiBias{}, SlidingWindow{{}, 5, 5}},
                      len, 192, 64, 128);
  }
  // The window (4096, 0) at N = 16384 on the d = 64 Hopper tile (192 queries, 128 keys): the
  // block at query 192 * 30 = 5760 spans keys [1664, 5952), tiles 13..46; its first warpgroup
  // (queries 5760..5823, keys [1664, 5824)) needs 13..45, its last (5888..5951, keys
  // [1792, 5952)) 14..46.
  const SequenceLengths n16k{16384, 16384};
  const SlidingWindow window{{}, 4096, 0};
  const flashmma::TileRange block =
      flashmma::key_tiles(window, n16k, IndexRange{5760, 5952}, 128);
  REQUIRE(block.first == 13);
  REQUIRE(block.count == 34);
  const flashmma::TileRange first =
      flashmma::key_tiles_within(window, n16k, IndexRange{5760, 5824}, block, 128);
  const flashmma::TileRange last =
      flashmma::key_tiles_within(window, n16k, IndexRange{5888, 5952}, block, 128);
  REQUIRE(first.first == 13);
  REQUIRE(first.count == 33);
  REQUIRE(last.first == 14);
  REQUIRE(last.count == 33);
  // No rows: no tiles.
  REQUIRE(flashmma::key_tiles_within(window, n16k, IndexRange{16384, 16384}, block, 128).count ==
          0);
}

TEST_CASE("causal is the window (-1, 0), aligned bottom-right", "[policy]") {
  const SlidingWindow causal = SlidingWindow::causal();
  // seqlen_q = 3, seqlen_k = 5: query 0 sees keys 0..2, query 2 sees all five.
  const SequenceLengths wide{3, 5};
  CHECK(causal.visible({0, 0, 0, 2}, wide));
  CHECK_FALSE(causal.visible({0, 0, 0, 3}, wide));
  CHECK(causal.visible({0, 0, 2, 4}, wide));
  // seqlen_q = 5, seqlen_k = 3: queries 0 and 1 see no key.
  const SequenceLengths tall{5, 3};
  CHECK(flashmma::policy_key_range(causal, IndexRange{0, 2}, tall).empty());
  CHECK(flashmma::policy_key_range(causal, IndexRange{2, 3}, tall).size() == 1);
  // Window 0 on both sides: the diagonal key only.
  const SlidingWindow diagonal{{}, 0, 0};
  const IndexRange only = flashmma::policy_key_range(diagonal, IndexRange{1, 2}, wide);
  CHECK(only.begin == 3);
  CHECK(only.end == 4);
}

TEST_CASE("ALiBi adds -slope * |i + seqlen_k - seqlen_q - j|", "[policy]") {
  const float slopes[] = {0.5f, 0.25f, 2.f, 4.f};  // [batch 2, heads 2]
  const AlibiBias alibi{{}, slopes, 2};
  const SequenceLengths lengths{4, 6};  // diagonal 2
  CHECK(alibi.transform(1.f, {0, 0, 1, 3}, lengths) == 1.f);                 // on the diagonal
  CHECK(alibi.transform(1.f, {0, 1, 1, 0}, lengths) == 1.f - 0.25f * 3.f);  // 3 before it
  CHECK(alibi.transform(0.f, {1, 0, 0, 5}, lengths) == -2.f * 3.f);         // 3 after it
  const AlibiBias shared{{}, slopes, 0};                                      // per head only
  CHECK(shared.transform(0.f, {1, 1, 0, 0}, lengths) == -0.25f * 2.f);
}

TEST_CASE("softcap is cap * tanh(score / cap), then the bias", "[policy]") {
  const Softcap softcap = Softcap::with_cap(5.f);
  CHECK(softcap.transform(2.f, {}, {1, 1}) == Approx(5.f * std::tanh(0.4f)));
  CHECK(softcap.transform(1e6f, {}, {1, 1}) == Approx(5.f));
  const float slope[] = {1.f};
  const Combined<Softcap, AlibiBias> both{{}, softcap, AlibiBias{{}, slope, 0}};
  // Key 0 of query 2 (seqlen 3 x 3) is 2 before the diagonal.
  CHECK(both.transform(2.f, {0, 0, 2, 0}, {3, 3}) == Approx(5.f * std::tanh(0.4f) - 2.f));
}

}  // namespace
