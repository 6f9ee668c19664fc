// SPDX-License-Identifier: Apache-2.0
// A score policy of one's own: document masking for packed sequences. Several documents are
// concatenated into one sequence of a batch entry (self-attention, seqlen_q == seqlen_k), and a
// token attends only to the tokens of its own document. Not part of the library: an example of
// what a user writes against attention/score_policy.hpp, used by document_mask.cu and by
// tests/gpu/test_document_mask.cu.
//
// Documents are contiguous, so a token's document is the range [document_begin, document_end)
// of positions around it. The policy reads those two per-token tables rather than document ids:
// visible() then reads two values that depend on the query row alone, and key_range() is the
// query tile's first token's document begin to its last token's document end.
//
// Causal within a document is Combined<DocumentMask, CausalMask> (CausalDocumentMask below), not a
// flag: with seqlen_q == seqlen_k the built-in causal mask is key <= query, and "same document
// and key <= query" is exactly the conjunction Combined computes. Combined intersects the key
// ranges and ANDs all_visible(), so the composition keeps the tile skipping of both, and
// DocumentMask carries no per-element branch for a choice made once per launch.
//
// What the contract cannot express: key_range(), query_range() and all_visible() are not told the
// batch entry (they take ranges and SequenceLengths, no ScoreCoord, and the kernel calls them
// with the one policy every block of the grid shares). With one layout per batch entry they must
// answer for every entry at once. The tables therefore also hold, per token, the union of
// its documents over the batch (any_begin / any_end: key and query ranges) and their intersection
// (every_begin / every_end: all_visible). With one layout, or batch 1, both are the document
// itself and the skipping is exact; with layouts that differ, a tile is skipped only where it is
// hidden in every batch entry.
#pragma once

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>
#include <utility>
#include <vector>

#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"

namespace example {

struct DocumentMask : flashmma::ScorePolicyBase {
  static constexpr bool kMasks = true;

  // Token t of batch entry b at [b * batch_stride + t]: the first token of t's document, and one
  // past its last. batch_stride 0 shares one layout among every batch entry.
  const int32_t* document_begin = nullptr;
  const int32_t* document_end = nullptr;
  int64_t batch_stride = 0;
  // Token t at [t], over every batch entry: the smallest document_begin and the largest
  // document_end (the union of t's documents), the largest begin and the smallest end (their
  // intersection). For the hooks that are not told the batch entry.
  const int32_t* any_begin = nullptr;
  const int32_t* any_end = nullptr;
  const int32_t* every_begin = nullptr;
  const int32_t* every_end = nullptr;

  FLASHMMA_HOST_DEVICE bool visible(const flashmma::ScoreCoord& c,
                                    const flashmma::SequenceLengths&) const {
    const int64_t at = c.batch * batch_stride + c.query;
    return c.key >= document_begin[at] && c.key < document_end[at];
  }

  // Both tables grow with the token (documents are contiguous and in order), so the first query's
  // begin and the last query's end bound the documents of every query between them.
  FLASHMMA_HOST_DEVICE flashmma::IndexRange key_range(const flashmma::IndexRange& queries,
                                                      const flashmma::SequenceLengths&) const {
    if (queries.empty()) return {0, 0};
    return {any_begin[queries.begin], any_end[queries.end - 1]};
  }

  // Same-document is symmetric and both sides index the same sequence.
  FLASHMMA_HOST_DEVICE flashmma::IndexRange query_range(const flashmma::IndexRange& keys,
                                                        const flashmma::SequenceLengths&) const {
    if (keys.empty()) return {0, 0};
    return {any_begin[keys.begin], any_end[keys.end - 1]};
  }

  // Every pair is visible in every batch entry iff all the queries and keys lie in the first
  // query's document of every entry, i.e. in the intersection of those documents.
  FLASHMMA_HOST_DEVICE bool all_visible(const flashmma::IndexRange& queries,
                                        const flashmma::IndexRange& keys,
                                        const flashmma::SequenceLengths&) const {
    if (queries.empty() || keys.empty()) return true;
    const int64_t begin = every_begin[queries.begin];
    const int64_t end = every_end[queries.begin];
    return queries.end <= end && keys.begin >= begin && keys.end <= end;
  }
};

using CausalDocumentMask = flashmma::Combined<DocumentMask, flashmma::CausalMask>;

inline CausalDocumentMask causal(const DocumentMask& documents) {
  return CausalDocumentMask{{}, documents, {}};
}

// Segment ids of documents of the given lengths packed one after the other: 0 for the first
// document's tokens, 1 for the second's, and so on.
inline std::vector<int32_t> segment_ids_of(const std::vector<int64_t>& document_lengths) {
  std::vector<int32_t> ids;
  for (std::size_t d = 0; d < document_lengths.size(); ++d) {
    ids.insert(ids.end(), static_cast<std::size_t>(document_lengths[d]),
               static_cast<int32_t>(d));
  }
  return ids;
}

// The tables a DocumentMask reads, built on the host. `values` is one allocation: copy it to the
// device and call policy() with the copy (or with values.data() for a host reference).
struct DocumentTables {
  int64_t batch = 0;   // batch entries described; 1 serves a batch of any size
  int64_t seqlen = 0;  // tokens per batch entry
  // document_begin [batch][seqlen], document_end [batch][seqlen], then any_begin, any_end,
  // every_begin, every_end [seqlen] each.
  std::vector<int32_t> values;

  DocumentMask policy(const int32_t* base) const {
    const int64_t rows = batch * seqlen;
    DocumentMask mask;
    mask.document_begin = base;
    mask.document_end = base + rows;
    mask.batch_stride = batch == 1 ? 0 : seqlen;
    mask.any_begin = base + 2 * rows;
    mask.any_end = mask.any_begin + seqlen;
    mask.every_begin = mask.any_end + seqlen;
    mask.every_end = mask.every_begin + seqlen;
    return mask;
  }

  // The policy reads [batch][seqlen] tables: the call must be self-attention over seqlen tokens,
  // on the batch the tables describe (or any batch, for one shared layout).
  flashmma::Status check(const flashmma::ProblemShape& shape) const {
    if (shape.seqlen_q != seqlen || shape.seqlen_k != seqlen) {
      return flashmma::Status::error(
          flashmma::ErrorCode::kInvalidArgument,
          "document mask: seqlen_q and seqlen_k must both be the tables' " +
              std::to_string(seqlen) + " tokens");
    }
    if (batch != 1 && shape.batch != batch) {
      return flashmma::Status::error(
          flashmma::ErrorCode::kInvalidArgument,
          "document mask: batch must be the tables' " + std::to_string(batch) +
              " (or the tables one shared layout)");
    }
    return flashmma::Status::success();
  }
};

// Builds the tables from one vector of segment ids per batch entry (one vector: a layout shared
// by every entry). The ids of an entry must be non-decreasing, which makes every document one
// contiguous run; every entry must have the same, non-zero, number of tokens.
inline flashmma::Status build_document_tables(
    const std::vector<std::vector<int32_t>>& segment_ids, DocumentTables& tables) {
  auto invalid = [](const std::string& message) {
    return flashmma::Status::error(flashmma::ErrorCode::kInvalidArgument,
                                   "document mask: " + message);
  };
  if (segment_ids.empty()) return invalid("no batch entry");
  const int64_t batch = static_cast<int64_t>(segment_ids.size());
  const int64_t seqlen = static_cast<int64_t>(segment_ids[0].size());
  if (seqlen == 0) return invalid("no token");
  if (seqlen > std::numeric_limits<int32_t>::max()) {
    return invalid("more tokens than int32 positions hold");
  }
  for (int64_t b = 0; b < batch; ++b) {
    const std::vector<int32_t>& ids = segment_ids[static_cast<std::size_t>(b)];
    if (static_cast<int64_t>(ids.size()) != seqlen) {
      return invalid("batch entry " + std::to_string(b) + " has " + std::to_string(ids.size()) +
                     " tokens, entry 0 has " + std::to_string(seqlen));
    }
    for (int64_t t = 1; t < seqlen; ++t) {
      if (ids[t] < ids[t - 1]) {
        return invalid("segment ids decrease in batch entry " + std::to_string(b) +
                       " at token " + std::to_string(t) + " (" + std::to_string(ids[t - 1]) +
                       " then " + std::to_string(ids[t]) + ")");
      }
    }
  }

  const std::size_t rows = static_cast<std::size_t>(batch * seqlen);
  const std::size_t n = static_cast<std::size_t>(seqlen);
  std::vector<int32_t> values(2 * rows + 4 * n);
  int32_t* const begin = values.data();
  int32_t* const end = begin + rows;
  int32_t* const any_begin = end + rows;
  int32_t* const any_end = any_begin + n;
  int32_t* const every_begin = any_end + n;
  int32_t* const every_end = every_begin + n;
  for (std::size_t t = 0; t < n; ++t) {
    any_begin[t] = std::numeric_limits<int32_t>::max();
    any_end[t] = 0;
    every_begin[t] = 0;
    every_end[t] = std::numeric_limits<int32_t>::max();
  }
  for (std::size_t b = 0; b < static_cast<std::size_t>(batch); ++b) {
    const std::vector<int32_t>& ids = segment_ids[b];
    int32_t* const row_begin = begin + b * n;
    int32_t* const row_end = end + b * n;
    // Forward for the begins, backward for the ends: each run's first and last token.
    for (std::size_t t = 0; t < n; ++t) {
      row_begin[t] = t > 0 && ids[t] == ids[t - 1] ? row_begin[t - 1] : static_cast<int32_t>(t);
    }
    for (std::size_t t = n; t-- > 0;) {
      row_end[t] = t + 1 < n && ids[t] == ids[t + 1] ? row_end[t + 1]
                                                       : static_cast<int32_t>(t + 1);
    }
    for (std::size_t t = 0; t < n; ++t) {
      any_begin[t] = std::min(any_begin[t], row_begin[t]);
      any_end[t] = std::max(any_end[t], row_end[t]);
      every_begin[t] = std::max(every_begin[t], row_begin[t]);
      every_end[t] = std::min(every_end[t], row_end[t]);
    }
  }
  tables.batch = batch;
  tables.seqlen = seqlen;
  tables.values = std::move(values);
  return flashmma::Status::success();
}

}  // namespace example
