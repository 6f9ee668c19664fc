// SPDX-License-Identifier: Apache-2.0
// The KV-cache reference (support/kvcache_reference.hpp): rotary embedding keeps scores a
// function of relative position in both pairings; a paged cache with shuffled pages of any size
// gives the contiguous cache's results bit for bit; the append writes rotated keys and raw values
// exactly at the cached length; cache_batch_idx reads the named entries; and the attention
// agrees with the dense reference (support/backward_reference.hpp) on the gathered keys.
#include "support/catch.hpp"

#include <flashmma/attention/builtin_policies.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "support/backward_reference.hpp"
#include "support/kvcache_reference.hpp"
#include "support/random_values.hpp"

namespace {

using flashmma::CausalMask;
using flashmma::FullAttention;
using flashmma::test::KVCache;
using flashmma::test::normal_values;
using flashmma::test::KVCacheCall;
using flashmma::test::RotaryStyle;
using flashmma::test::RotaryTable;

double dot(const std::vector<double>& a, const std::vector<double>& b) {
  return std::inner_product(a.begin(), a.end(), b.begin(), 0.0);
}

TEST_CASE("rotary embedding makes q . k a function of relative position", "[kvcache][rotary]") {
  for (const RotaryStyle style : {RotaryStyle::kInterleaved, RotaryStyle::kHalves}) {
    for (const int64_t rotary_dim : {int64_t{16}, int64_t{8}}) {  // all columns, and half of them
      const RotaryTable table = RotaryTable::standard(rotary_dim, 64, style);
      const std::vector<double> q = normal_values(16, 1), k = normal_values(16, 2);
      auto rotated_dot = [&](int64_t m, int64_t n) {
        std::vector<double> a = q, b = k;
        table.rotate(a.data(), m);
        table.rotate(b.data(), n);
        return dot(a, b);
      };
      INFO("interleaved " << (style == RotaryStyle::kInterleaved) << ", rotary_dim " << rotary_dim);
      CHECK(std::fabs(rotated_dot(5, 2) - rotated_dot(40, 37)) < 1e-9);
      CHECK(std::fabs(rotated_dot(0, 9) - rotated_dot(20, 29)) < 1e-9);
      CHECK(std::fabs(rotated_dot(3, 3) - rotated_dot(0, 0)) < 1e-9);
      CHECK(std::fabs(rotated_dot(7, 2) - rotated_dot(2, 7)) > 1e-6);  // not symmetric
      std::vector<double> moved = q;
      table.rotate(moved.data(), 11);
      for (int64_t x = rotary_dim; x < 16; ++x) CHECK(moved[x] == q[x]);  // passed through
    }
  }
}

constexpr int64_t kBatch = 3, kHeadsQ = 4, kHeadsKv = 2, kHeadDim = 8, kCapacity = 48;

// A decoding step: 2 new tokens per sequence appended after different cached lengths, 2 queries.
KVCacheCall make_call(RotaryStyle style) {
  KVCacheCall call;
  call.batch = kBatch;
  call.seqlen_q = 2;
  call.heads_q = kHeadsQ;
  call.head_dim = kHeadDim;
  call.q = normal_values(kBatch * 2 * kHeadsQ * kHeadDim, 3);
  call.cache_seqlens = {17, 0, 40};
  call.seqlen_new = 2;
  call.k_new = normal_values(kBatch * 2 * kHeadsKv * kHeadDim, 4);
  call.v_new = normal_values(kBatch * 2 * kHeadsKv * kHeadDim, 5);
  call.rotary = RotaryTable::standard(kHeadDim, kCapacity, style);
  call.rotate_queries_per_row = true;
  call.scale = 0.35;
  return call;
}

KVCache contiguous_cache() {
  KVCache cache;
  cache.heads = kHeadsKv;
  cache.head_dim = kHeadDim;
  cache.capacity = kCapacity;
  cache.k = normal_values(kBatch * kCapacity * kHeadsKv * kHeadDim, 6);
  cache.v = normal_values(kBatch * kCapacity * kHeadsKv * kHeadDim, 7);
  return cache;
}

// The same logical contents in pages of `page_size`, the physical pages shuffled.
KVCache paged_copy(const KVCache& dense, int64_t page_size, unsigned seed) {
  KVCache paged;
  paged.heads = dense.heads;
  paged.head_dim = dense.head_dim;
  paged.capacity = dense.capacity;
  paged.page_size = page_size;
  const int64_t per_sequence = dense.capacity / page_size;
  std::vector<int32_t> pages(static_cast<std::size_t>(kBatch * per_sequence));
  std::iota(pages.begin(), pages.end(), 0);
  std::shuffle(pages.begin(), pages.end(), std::mt19937(seed));
  paged.block_table = pages;
  paged.k.assign(dense.k.size(), 0.0);
  paged.v.assign(dense.v.size(), 0.0);
  for (int64_t e = 0; e < kBatch; ++e) {
    for (int64_t s = 0; s < dense.capacity; ++s) {
      for (int64_t h = 0; h < dense.heads; ++h) {
        for (int64_t x = 0; x < dense.head_dim; ++x) {
          paged.k[paged.offset(e, s, h) + x] = dense.k[dense.offset(e, s, h) + x];
          paged.v[paged.offset(e, s, h) + x] = dense.v[dense.offset(e, s, h) + x];
        }
      }
    }
  }
  return paged;
}

TEST_CASE("a paged cache gives the contiguous cache's results, any page size",
          "[kvcache][paged]") {
  const KVCacheCall call = make_call(RotaryStyle::kInterleaved);
  KVCache dense = contiguous_cache();
  const KVCache before = dense;
  const auto expected = flashmma::test::kvcache_reference(call, dense, CausalMask{});
  for (const int64_t page_size : {int64_t{1}, int64_t{3}, int64_t{16}, int64_t{48}}) {
    INFO("page size " << page_size);
    KVCache paged = paged_copy(before, page_size, static_cast<unsigned>(page_size));
    const auto result = flashmma::test::kvcache_reference(call, paged, CausalMask{});
    CHECK(result.o == expected.o);
    CHECK(result.lse == expected.lse);
    const KVCache paged_after = paged;
    bool same_contents = true;  // the append landed in the same logical slots
    for (int64_t e = 0; e < kBatch; ++e) {
      for (int64_t s = 0; s < kCapacity; ++s) {
        for (int64_t x = 0; x < kHeadDim; ++x) {
          same_contents = same_contents &&
                          paged_after.k[paged_after.offset(e, s, 1) + x] ==
                              dense.k[dense.offset(e, s, 1) + x] &&
                          paged_after.v[paged_after.offset(e, s, 0) + x] ==
                              dense.v[dense.offset(e, s, 0) + x];
        }
      }
    }
    CHECK(same_contents);
  }
}

TEST_CASE("the append writes rotated keys and raw values at the cached length",
          "[kvcache][append]") {
  for (const RotaryStyle style : {RotaryStyle::kInterleaved, RotaryStyle::kHalves}) {
    const KVCacheCall call = make_call(style);
    KVCache cache = contiguous_cache();
    const KVCache before = cache;
    (void)flashmma::test::kvcache_reference(call, cache, FullAttention{});
    for (int64_t b = 0; b < kBatch; ++b) {
      const int64_t first = call.cache_seqlens[b];
      for (int64_t s = 0; s < kCapacity; ++s) {
        for (int64_t h = 0; h < kHeadsKv; ++h) {
          const int64_t at = cache.offset(b, s, h);
          std::vector<double> expected_k(before.k.begin() + at, before.k.begin() + at + kHeadDim);
          std::vector<double> expected_v(before.v.begin() + at, before.v.begin() + at + kHeadDim);
          if (s >= first && s < first + call.seqlen_new) {
            const int64_t from = ((b * call.seqlen_new + (s - first)) * kHeadsKv + h) * kHeadDim;
            expected_k.assign(call.k_new.begin() + from, call.k_new.begin() + from + kHeadDim);
            call.rotary.rotate(expected_k.data(), s);
            expected_v.assign(call.v_new.begin() + from, call.v_new.begin() + from + kHeadDim);
          }
          INFO("sequence " << b << ", slot " << s << ", head " << h);
          CHECK(std::equal(expected_k.begin(), expected_k.end(), cache.k.begin() + at));
          CHECK(std::equal(expected_v.begin(), expected_v.end(), cache.v.begin() + at));
        }
      }
    }
  }
}

TEST_CASE("cache_batch_idx reads the named entries", "[kvcache]") {
  KVCacheCall call = make_call(RotaryStyle::kHalves);
  call.seqlen_new = 0;  // reading only
  call.cache_seqlens = {30, 30, 30};
  KVCache cache = contiguous_cache();
  const auto straight = flashmma::test::kvcache_reference(call, cache, CausalMask{});
  // Entries reversed in memory, and the rows told where each went.
  KVCache reversed = cache;
  const int64_t per_entry = kCapacity * kHeadsKv * kHeadDim;
  for (int64_t e = 0; e < kBatch; ++e) {
    std::copy(cache.k.begin() + e * per_entry, cache.k.begin() + (e + 1) * per_entry,
              reversed.k.begin() + (kBatch - 1 - e) * per_entry);
    std::copy(cache.v.begin() + e * per_entry, cache.v.begin() + (e + 1) * per_entry,
              reversed.v.begin() + (kBatch - 1 - e) * per_entry);
  }
  call.cache_batch_idx = {2, 1, 0};
  const auto indexed = flashmma::test::kvcache_reference(call, reversed, CausalMask{});
  CHECK(indexed.o == straight.o);
  CHECK(indexed.lse == straight.lse);
}

TEST_CASE("the cache's attention is the dense reference's on the gathered keys",
          "[kvcache][reference]") {
  KVCacheCall call = make_call(RotaryStyle::kInterleaved);
  call.cache_seqlens = {21, 21, 21};  // one key length, so that the dense shape holds the batch
  KVCache cache = contiguous_cache();
  const auto result = flashmma::test::kvcache_reference(call, cache, CausalMask{});
  const int64_t keys = 21 + call.seqlen_new;
  const flashmma::ProblemShape shape =
      flashmma::make_problem_shape(kBatch, call.seqlen_q, keys, kHeadsQ, kHeadsKv, kHeadDim);
  std::vector<double> q = call.q, k, v;
  for (int64_t b = 0; b < kBatch; ++b) {
    for (int64_t i = 0; i < call.seqlen_q; ++i) {
      for (int64_t h = 0; h < kHeadsQ; ++h) {
        call.rotary.rotate(&q[((b * call.seqlen_q + i) * kHeadsQ + h) * kHeadDim], 21 + i);
      }
    }
    for (int64_t s = 0; s < keys; ++s) {
      for (int64_t h = 0; h < kHeadsKv; ++h) {
        const int64_t at = cache.offset(b, s, h);
        k.insert(k.end(), cache.k.begin() + at, cache.k.begin() + at + kHeadDim);
        v.insert(v.end(), cache.v.begin() + at, cache.v.begin() + at + kHeadDim);
      }
    }
  }
  const std::vector<double> no_gradient(q.size(), 0.0);
  const auto dense = flashmma::test::backward_reference(shape, call.scale, CausalMask{}, q, k, v,
                                                        no_gradient);
  double worst = 0;
  for (std::size_t x = 0; x < dense.o.size(); ++x) {
    worst = std::max(worst, std::fabs(dense.o[x] - result.o[x]));
  }
  for (std::size_t x = 0; x < dense.lse.size(); ++x) {
    worst = std::max(worst, std::fabs(dense.lse[x] - result.lse[x]));
  }
  CHECK(worst < 1e-12);
}

}  // namespace
