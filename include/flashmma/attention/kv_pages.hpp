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

  // The offset of key `key`'s row from its head's row 0 of page 0, in a pool whose pages are
  // `page_stride` elements apart and rows `row_stride` apart. The key must exist (its table
  // entry is read).
  FLASHMMA_HOST_DEVICE int64_t row_offset(int32_t key, int64_t page_stride,
                                          int64_t row_stride) const {
    const int32_t page = table[key / page_size];
    report_bad_page(page, num_pages);
    return page * page_stride + (key % page_size) * row_stride;
  }
};

// The stand-in of kernels that take contiguous K and V only.
struct NoKVPages {};

}  // namespace flashmma
