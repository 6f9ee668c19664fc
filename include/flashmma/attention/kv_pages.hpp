// SPDX-License-Identifier: Apache-2.0
// A paged KV cache as one sequence's kernels see it (params.hpp): the sequence's row of the block
// table, and where a key's row lives in the page pools of K and V. Built by SequenceInfo; read
// by the key/value loads of the kernels that take paged caches (sm80/kv_stream.cuh).
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {

// A page number the call's params did not allow for: stops the kernel (the launch's stream then
// reports an error), since reading it would read outside K and V.
FLASHMMA_HOST_DEVICE void report_bad_page(int32_t page, int32_t num_pages) {
#if defined(__CUDA_ARCH__)
  if (page < 0 || page >= num_pages) __trap();
#else
  (void)page;
  (void)num_pages;
#endif
}

struct KVPages {
  const int32_t* table = nullptr;  // this sequence's row of the block table; nullptr: not paged
  int32_t page_size = 0;           // keys per page
  int32_t num_pages = 0;           // pages in each pool
  int64_t k_page_stride = 0;       // elements from one page of K to the next
  int64_t v_page_stride = 0;

  // Where key `key` is: the block table entry that holds its page, and its row in the page.
  struct KeySlot {
    int32_t entry;
    int32_t row;
  };
  FLASHMMA_HOST_DEVICE KeySlot locate(int32_t key) const {
    const int32_t entry = key / page_size;
    return {entry, key - entry * page_size};
  }

  // The offset of row `row` of page `page` from its head's row 0 of page 0, in a pool whose
  // pages are `page_stride` elements apart and rows `row_stride` apart. A page number outside
  // the pool stops the kernel.
  FLASHMMA_HOST_DEVICE int64_t page_row_offset(int32_t page, int32_t row, int64_t page_stride,
                                               int64_t row_stride) const {
    report_bad_page(page, num_pages);
    return page * page_stride + row * row_stride;
  }

  // Both steps at once: the offset of key `key`'s row. The key must exist (its table entry is
  // read). The K/V stream takes the steps a tile apart, so that no thread waits for the table.
  FLASHMMA_HOST_DEVICE int64_t row_offset(int32_t key, int64_t page_stride,
                                          int64_t row_stride) const {
    const KeySlot slot = locate(key);
    return page_row_offset(table[slot.entry], slot.row, page_stride, row_stride);
  }
};

// The stand-in of kernels that take contiguous K and V only.
struct NoKVPages {};

}  // namespace flashmma
