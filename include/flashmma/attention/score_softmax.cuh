// SPDX-License-Identifier: Apache-2.0
// What every forward kernel does to a tile of raw scores once a GEMM has produced them, whatever
// the GEMM (mma.sync on sm80, wgmma on sm90): the score policy's transform, its mask and the end
// of the keys, then the online softmax that turns the scores into probabilities and rescales O.
//
// The scores are the accumulators of one warp: kRowTiles tiles of 16 rows, each kScoreTiles
// m16n8 C fragments wide (attention/accumulator_walk.cuh); wgmma's m64nN accumulators are the
// same fragments, 16 rows per warp. Columns are numbered from the tile's first key; row r of a
// warp is (head, query) = origin's plus r times the steps of `rows` (sequence_info.hpp's
// QueryRows: query origin.query + r of one head; PackableRows: also the heads of a GQA group).
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "flashmma/attention/accumulator_walk.cuh"
#include "flashmma/attention/dropout.cuh"
#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/attention/online_softmax.cuh"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/attention/sequence_info.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {

// Dropout (attention/dropout.hpp): NoDropout, or PhiloxDropout, which drops probabilities once
// the row sums have them (the sums, hence the LSE, are those before dropout); O is scaled by
// output_scale() when the rows are finalized.
template <class Policy, int kBlockN, bool kRescaleBeforeExp, class Rows = QueryRows,
          class Dropout = NoDropout>
struct ScoreSoftmax {
  Policy policy;
  ScoreCoord origin;        // batch, head, and the query of the warp's first row (key unused)
  Rows rows;                // how the head and query step from row to row
  SequenceLengths lengths;
  IndexRange queries;       // the queries that exist of the rows that share the mask decision: a
                            // block's (sm80), a warpgroup's (sm90)
  float softmax_scale;
  // What the exponentials multiply raw scores by: softmax_scale * log2(e), or log2(e) alone
  // when the policy transforms scores (they are scaled before the transform).
  float exp2_scale;
  int lane;
  // The mask of the warp's (batch, query head), with kernels compiled with dropout; rows are
  // queries of one head there (no packed GQA, launch_plan.hpp's packs_gqa).
  std::conditional_t<Dropout::kEnabled, WarpDropout, NoDropout> dropout;

  FLASHMMA_DEVICE void set_scales(float scale, float scale_log2) {
    softmax_scale = scale;
    exp2_scale = Policy::kTransformsScores ? kLog2e : scale_log2;
  }

  // The scale of the row maxima in the LSE: scores are in softmax units unless transformed.
  FLASHMMA_DEVICE float lse_scale() const {
    return Policy::kTransformsScores ? 1.f : softmax_scale;
  }

  // What O is multiplied by once normalized: the scale of kept probabilities, or 1.
  FLASHMMA_DEVICE float output_scale() const {
    if constexpr (Dropout::kEnabled) {
      return dropout.args.scale;
    } else {
      return 1.f;
    }
  }

  // Scores of the K/V tile whose first key is `first_key` to unnormalized probabilities, in
  // place; `output` (O) and `stats` follow the new row maxima.
  template <int kRowTiles, int kScoreTiles, int kOutputTiles>
  FLASHMMA_DEVICE void operator()(float (&s)[kRowTiles][kScoreTiles][4],
                                  float (&output)[kRowTiles][kOutputTiles][4],
                                  OnlineSoftmax (&stats)[kRowTiles], int64_t first_key) const {
    policy_and_mask(s, first_key);
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      stats[rt].template update<kRescaleBeforeExp>(s[rt], output[rt], exp2_scale);
    }
    drop(s, first_key);
  }

  // The same for a kernel whose O is still being written by an asynchronous P V: the scores
  // become probabilities now, and O is rescaled later by OnlineSoftmax::rescale_output with
  // `correction` and `max_changed`.
  template <int kRowTiles, int kScoreTiles>
  FLASHMMA_DEVICE void probabilities(float (&s)[kRowTiles][kScoreTiles][4],
                                     OnlineSoftmax (&stats)[kRowTiles], int64_t first_key,
                                     float (&correction)[kRowTiles][kRowsPerThread],
                                     bool (&max_changed)[kRowTiles]) const {
    policy_and_mask(s, first_key);
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
      stats[rt].update_scores(s[rt], exp2_scale, correction[rt], max_changed[rt]);
    }
    drop(s, first_key);
  }

 private:
  template <int kRowTiles, int kScoreTiles>
  FLASHMMA_DEVICE void drop(float (&p)[kRowTiles][kScoreTiles][4], int64_t first_key) const {
    if constexpr (Dropout::kEnabled) {
      dropout.drop_rows_are_queries(p, origin.query, static_cast<int>(first_key));
    }
  }

  template <int kRowTiles, int kScoreTiles>
  FLASHMMA_DEVICE void policy_and_mask(float (&s)[kRowTiles][kScoreTiles][4],
                                       int64_t first_key) const {
    if constexpr (Policy::kTransformsScores) transform(s, first_key);
    if (tile_needs_mask(policy, lengths, queries, first_key, kBlockN)) apply_mask(s, first_key);
  }

  // Positions are at most 2^30 (score_policy.hpp), so the tile's first key fits in an int too.
  FLASHMMA_DEVICE ScoreCoord coord(int row, int key) const {
    return {origin.batch, rows.head(origin.head, row), origin.query + row * rows.query_step(),
            key};
  }

  // Scaled scores to the policy's logits.
  template <int kRowTiles, int kScoreTiles>
  FLASHMMA_DEVICE void transform(float (&s)[kRowTiles][kScoreTiles][4], int64_t first_key) const {
    const int first = static_cast<int>(first_key);
    for_each_accumulator(s, lane, [&](int row, int column, float& score) {
      score = policy.transform(score * softmax_scale, coord(row, first + column), lengths);
    });
  }

  // Sets the scores of hidden (query, key) pairs, and of keys past the end, to -inf. The end
  // of the sequence is a column bound, compared in 32 bits; the key of a score is formed only for
  // a policy that masks score by score. (A 64-bit key formed for every score let ptxas fold the
  // tile index into per-score address arithmetic and move the loop counter off the uniform
  // datapath, which cost the register-bound d = 128 tiles about 3% even on tiles that never take
  // this branch.)
  template <int kRowTiles, int kScoreTiles>
  FLASHMMA_DEVICE void apply_mask(float (&s)[kRowTiles][kScoreTiles][4], int64_t first_key) const {
    if constexpr (Policy::kKeyIntervalMask) {
      // One interval of keys per row (a window): its ends, as columns of this tile, are worked
      // out once per row; a score costs two comparisons with its column. The ends are narrowed
      // to 32 bits: the clamp keeps begin >= 0 and end <= seqlen_k, and a window's other ends are
      // positions plus its sides, which the clamp also bounds (begin below seqlen_k plus a tile,
      // end above -2^30), as the contract asks of every kKeyIntervalMask policy; a row that sees
      // no key has begin >= end, which hides every column.
      // (visible() per score, in the window's 64-bit arithmetic, made the Hopper window kernels
      // 44% longer than the causal ones, and spilled.)
      const int first = static_cast<int>(first_key);
      for_each_accumulator(s, lane, [&](int row, int column, float& score) {
        const IndexRange keys =
            policy_row_keys(policy, origin.query + row * rows.query_step(), lengths);
        const int lo = static_cast<int>(keys.begin) - first;
        const int hi = static_cast<int>(keys.end) - first;
        if ((column < lo) | (column >= hi)) score = -INFINITY;
      });
    } else {
      const int64_t keys_left = lengths.seqlen_k - first_key;
      const int keys_in_tile = keys_left < kBlockN ? static_cast<int>(keys_left) : kBlockN;
      const int first = static_cast<int>(first_key);
      for_each_accumulator(s, lane, [&](int row, int column, float& score) {
        bool hidden = column >= keys_in_tile;
        if constexpr (Policy::kMasks) {
          // | rather than ||: a branch per score costs more than the test it would skip.
          hidden = hidden | !policy.visible(coord(row, first + column), lengths);
        }
        if (hidden) score = -INFINITY;
      });
    }
  }
};

}  // namespace flashmma
