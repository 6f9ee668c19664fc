// SPDX-License-Identifier: Apache-2.0
// A paged KV cache's addressing (attention/kv_pages.hpp): locate and page_row_offset, the two
// steps the K/V stream takes a tile apart, compose to row_offset, and they place every key of a
// sequence at its page's row in FlashAttention's [pages, page_size, heads, d] pool.
#include "support/catch.hpp"

#include <flashmma/attention/kv_pages.hpp>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <set>
#include <vector>

TEST_CASE("KVPages: a key's entry and row, and its row's offset in the pool", "[kv_pages]") {
  for (int32_t page_size : {1, 3, 16, 64, 256}) {
    CAPTURE(page_size);
    const int32_t keys = 1000;
    const int32_t pages = (keys + page_size - 1) / page_size;
    // Distinct pages in a shuffled order, in a pool with room for more.
    std::vector<int32_t> table(pages);
    std::iota(table.begin(), table.end(), 5);
    std::shuffle(table.begin(), table.end(), std::mt19937(page_size));
    const int64_t heads = 8, head_dim = 128;
    const int64_t row_stride = heads * head_dim;          // [pages, page_size, heads, d]
    const int64_t page_stride = page_size * row_stride;
    flashmma::KVPages paged;
    paged.table = table.data();
    paged.page_size = page_size;
    paged.num_pages = pages + 5;
    paged.k_page_stride = page_stride;
    paged.v_page_stride = page_stride;

    std::set<int64_t> offsets;
    for (int32_t key = 0; key < keys; ++key) {
      const flashmma::KVPages::KeySlot slot = paged.locate(key);
      REQUIRE(slot.entry == key / page_size);
      REQUIRE(slot.row == key % page_size);
      REQUIRE(slot.row >= 0);
      REQUIRE(slot.row < page_size);
      const int64_t expected = table[key / page_size] * page_stride + (key % page_size) * row_stride;
      REQUIRE(paged.page_row_offset(table[slot.entry], slot.row, page_stride, row_stride) ==
              expected);
      REQUIRE(paged.row_offset(key, page_stride, row_stride) == expected);
      offsets.insert(expected);
    }
    CHECK(offsets.size() == static_cast<std::size_t>(keys));  // no two keys share a row
  }
}
