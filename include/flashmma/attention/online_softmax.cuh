// SPDX-License-Identifier: Apache-2.0
// Online softmax over the key tiles, for the rows one thread holds in mma C fragments.
//
// Per m16 row tile a thread holds two query rows (rows group and group + 8 of the tile, see
// traits/fragment_map.hpp): registers 0,1 of every accumulator tile belong to the first, 2,3 to
// the second. Each row keeps a running max m (of raw scores) and a running sum l of
// exp(scale * (s - m)); when a tile raises m, the sum and the O accumulator are rescaled by
// exp(scale * (m_old - m_new)). Everything is computed in base 2 with scale * log2(e) folded into
// one FMA: exp(scale * (s - m)) = 2^(s * scale_log2 - m * scale_log2).
//
// Fully masked rows: scores are -inf, so m stays -inf; the reference point is then taken as 0
// (never -inf - -inf = NaN), every probability is 2^-inf = 0 and l stays 0. The epilogue turns
// l = 0 into O = 0 and LSE = -inf.
#pragma once

#include <cmath>

#include "flashmma/macros.hpp"
#include "flashmma/ptx/math.cuh"
#include "flashmma/ptx/shuffle.cuh"

namespace flashmma {

inline constexpr float kLog2e = 1.4426950408889634f;
inline constexpr float kLn2 = 0.6931471805599453f;
inline constexpr int kRowsPerThread = 2;  // rows group and group + 8 of an m16 row tile

struct OnlineSoftmax {
  float row_max[kRowsPerThread];
  float row_sum[kRowsPerThread];  // this lane's partial sum; the quad is summed at the end

  FLASHMMA_DEVICE void init() {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      row_max[r] = -INFINITY;
      row_sum[r] = 0.f;
    }
  }

  // Turns one tile of raw scores into unnormalized probabilities, in place, and rescales the
  // output accumulator to the new row maxima: before the exponentials when kRescaleFirst, after
  // them otherwise (TileConfig::kRescaleBeforeExp says which is faster for a config).
  template <bool kRescaleFirst, int kScoreTiles, int kOutputTiles>
  FLASHMMA_DEVICE void update(float (&scores)[kScoreTiles][4], float (&output)[kOutputTiles][4],
                              float scale_log2) {
    float reference[kRowsPerThread];
    float correction[kRowsPerThread];
    const bool max_changed = new_maxima(scores, scale_log2, reference, correction);
    if constexpr (kRescaleFirst) rescale(output, correction, max_changed);
    exponentiate(scores, scale_log2, reference, correction);
    if constexpr (!kRescaleFirst) rescale(output, correction, max_changed);
  }

  // The same, in two parts, for a kernel whose O accumulator is still being written by an
  // asynchronous P V (wgmma) when the scores are ready: update_scores leaves O alone and returns
  // what rescale_output, called once O may be touched, multiplies it by.
  template <int kScoreTiles>
  FLASHMMA_DEVICE void update_scores(float (&scores)[kScoreTiles][4], float scale_log2,
                                     float (&correction)[kRowsPerThread], bool& max_changed) {
    float reference[kRowsPerThread];
    max_changed = new_maxima(scores, scale_log2, reference, correction);
    exponentiate(scores, scale_log2, reference, correction);
  }

  // Once the maxima settle (after the first few tiles of a long row) no row of the warp moves
  // and the O rescale (HeadDim / 2 multiplies per row tile) is skipped; the vote keeps the
  // branch warp-uniform.
  template <int kOutputTiles>
  static FLASHMMA_DEVICE void rescale_output(float (&output)[kOutputTiles][4],
                                             const float (&correction)[kRowsPerThread],
                                             bool max_changed) {
    rescale(output, correction, max_changed);
  }

  // Completes the rows: sums the quad's partial sums, divides O by them (and multiplies it by
  // output_scale: dropout's scale of kept probabilities), and returns the natural log-sum-exp
  // of each row (-inf for a row that saw no key, whose O becomes 0).
  template <int kOutputTiles>
  FLASHMMA_DEVICE void finalize(float (&output)[kOutputTiles][4], float softmax_scale,
                                float (&lse)[kRowsPerThread], float output_scale = 1.f) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      const float sum = ptx::quad_sum(row_sum[r]);
      const bool empty = !(sum > 0.f);
      const float inverse = (empty ? 0.f : 1.f / sum) * output_scale;
      lse[r] = empty ? -INFINITY : row_max[r] * softmax_scale + logf(sum);
#pragma unroll
      for (int t = 0; t < kOutputTiles; ++t) {
        output[t][2 * r] *= inverse;
        output[t][2 * r + 1] *= inverse;
      }
    }
  }

 private:
  // The new row maxima of a tile: each row's reference point (the new maximum times scale_log2,
  // 0 for a row that has seen only -inf) and the factor that moves the old sum and O to it.
  template <int kScoreTiles>
  FLASHMMA_DEVICE bool new_maxima(const float (&scores)[kScoreTiles][4], float scale_log2,
                                  float (&reference)[kRowsPerThread],
                                  float (&correction)[kRowsPerThread]) {
    bool max_changed = false;
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      float tile_max = -INFINITY;
#pragma unroll
      for (int t = 0; t < kScoreTiles; ++t) {
        tile_max = fmaxf(tile_max, fmaxf(scores[t][2 * r], scores[t][2 * r + 1]));
      }
      tile_max = ptx::quad_max(tile_max);
      const float new_max = fmaxf(row_max[r], tile_max);
      max_changed |= new_max != row_max[r];
      reference[r] = new_max == -INFINITY ? 0.f : new_max * scale_log2;
      // row_max = -inf (nothing seen yet) gives 2^-inf = 0: the empty sum and O stay 0. An
      // unchanged maximum gives exactly 2^0 = 1 because the product is rounded as reference's
      // was (__fmul_rn): contracted into one fma it would leave reference's rounding error,
      // every tile would nudge the sum by an ulp, and skipping a hidden tile or not would
      // change the result.
      correction[r] = ptx::ex2_approx(__fmul_rn(row_max[r], scale_log2) - reference[r]);
      row_max[r] = new_max;
    }
    return max_changed;
  }

  // Scores to probabilities 2^(s * scale_log2 - reference), in place, and the running sums.
  template <int kScoreTiles>
  FLASHMMA_DEVICE void exponentiate(float (&scores)[kScoreTiles][4], float scale_log2,
                                    const float (&reference)[kRowsPerThread],
                                    const float (&correction)[kRowsPerThread]) {
#pragma unroll
    for (int r = 0; r < kRowsPerThread; ++r) {
      float tile_sum = 0.f;
#pragma unroll
      for (int t = 0; t < kScoreTiles; ++t) {
#pragma unroll
        for (int c = 0; c < 2; ++c) {
          const float p = ptx::ex2_approx(fmaf(scores[t][2 * r + c], scale_log2, -reference[r]));
          scores[t][2 * r + c] = p;
          tile_sum += p;
        }
      }
      row_sum[r] = fmaf(row_sum[r], correction[r], tile_sum);
    }
  }

  template <int kOutputTiles>
  static FLASHMMA_DEVICE void rescale(float (&output)[kOutputTiles][4],
                                      const float (&correction)[kRowsPerThread],
                                      bool max_changed) {
    if (__any_sync(ptx::kFullWarpMask, max_changed)) {
#pragma unroll
      for (int t = 0; t < kOutputTiles; ++t) {
#pragma unroll
        for (int i = 0; i < 4; ++i) output[t][i] *= correction[i / 2];
      }
    }
  }
};

}  // namespace flashmma
