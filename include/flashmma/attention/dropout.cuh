// SPDX-License-Identifier: Apache-2.0
// Dropout on a warp's probability fragments, forward and backward, either architecture: the mask
// of attention/philox.hpp drawn for the m16n8 accumulator tiles of one (batch, query head).
//
// philox.hpp groups the pairs so that one Philox call covers queries {q, q + 8} x keys
// {k, k + 1, k + 8, k + 9} (q, k multiples of 16 plus what a lane holds). A lane (group g =
// lane / 4, t = lane % 4) of an m16n8 C fragment holds rows g, g + 8 and columns 2t, 2t + 1, so
// of two adjacent 8-column tiles (a 16 x 16 block):
//   queries as rows (the forward's S): queries {g, g + 8} x keys {2t, 2t + 1, 8 + 2t, 9 + 2t},
//     exactly one call, every bit of it used;
//   keys as rows (the backward's S^T): keys {g, g + 8} x queries {2t, 2t + 1, 8 + 2t, 9 + 2t},
//     half of the calls of queries 2t and 2t + 1: each lane draws the call whose query parity is
//     its key parity and swaps the other half with the lane of the other key parity (lane ^ 4).
// Tiles start at multiples of 16 queries and keys (a warp's rows, a tile's columns), which the
// grouping needs.
#pragma once

#include <cstdint>

#include "flashmma/attention/dropout.hpp"
#include "flashmma/macros.hpp"
#include "flashmma/ptx/shuffle.cuh"

namespace flashmma {

// Which elements of a lane's [kTiles][4] fragments are kept: bit 4 t + reg.
template <int kTiles>
struct KeepBits {
  static constexpr int kWords = (4 * kTiles + 31) / 32;
  uint32_t words[kWords];
  FLASHMMA_DEVICE bool kept(int tile, int reg) const {
    const int bit = 4 * tile + reg;
    return (words[bit / 32] >> (bit % 32)) & 1u;
  }
};

// A mask as BackwardScores::probabilities_and_gradients takes it: the kept elements of a
// lane's fragments and the scale 1 / (1 - p).
template <int kTiles>
struct KeptScores {
  static constexpr bool kEnabled = true;
  const KeepBits<kTiles>& bits;
  float scale;
  FLASHMMA_DEVICE bool kept(int tile, int reg) const { return bits.kept(tile, reg); }
};

// The mask of one (batch, query head); `stream` is batch * heads_q + head.
struct WarpDropout {
  DropoutArgs args;
  uint32_t stream;
  int lane;

  FLASHMMA_DEVICE PhiloxWords draw(int32_t query, int32_t key) const {
    return philox4x32_10(PhiloxWords{{static_cast<uint32_t>(key), static_cast<uint32_t>(query),
                                      stream, args.offset}},
                         static_cast<uint32_t>(args.seed), static_cast<uint32_t>(args.seed >> 32));
  }

  // Queries as rows: zeroes the dropped probabilities of p (row tile rt: queries first_query +
  // 16 rt + [0, 16); tile t: keys first_key + 8 t + [0, 8)). The kept ones are scaled later
  // (the epilogue multiplies O by args.scale).
  template <int kRowTiles, int kTiles>
  FLASHMMA_DEVICE void drop_rows_are_queries(float (&p)[kRowTiles][kTiles][4], int first_query,
                                             int first_key) const {
    static_assert(kTiles % 2 == 0, "dropout draws 16 columns at a time");
    const int g = lane / 4, t = lane % 4;
#pragma unroll
    for (int rt = 0; rt < kRowTiles; ++rt) {
#pragma unroll
      for (int pair = 0; pair < kTiles / 2; ++pair) {
        const PhiloxWords w = draw(first_query + 16 * rt + g, first_key + 16 * pair + 2 * t);
#pragma unroll
        for (int half = 0; half < 2; ++half) {  // key bit 3: the tile of the pair
#pragma unroll
          for (int reg = 0; reg < 4; ++reg) {  // query bit 3: reg / 2; key bit 0: reg % 2
            const uint32_t word = w.x[2 * (reg % 2) + reg / 2];
            const uint32_t bits = half == 0 ? word & 0xFFFFu : word >> 16;
            if (bits < args.threshold) p[rt][2 * pair + half][reg] = 0.f;
          }
        }
      }
    }
  }

  // Keys as rows (one row tile: keys first_key + [0, 16); tile t: queries first_query + 8 t +
  // [0, 8)): which elements are kept. Every lane of the warp takes part (shuffles).
  template <int kTiles>
  FLASHMMA_DEVICE KeepBits<kTiles> keep_rows_are_keys(int first_key, int first_query) const {
    static_assert(kTiles % 2 == 0, "dropout draws 16 columns at a time");
    const int g = lane / 4, t = lane % 4;
    const int parity = g % 2;  // the lane's key parity: the query parity of the call it draws
    KeepBits<kTiles> keep;
#pragma unroll
    for (int i = 0; i < KeepBits<kTiles>::kWords; ++i) keep.words[i] = 0u;
#pragma unroll
    for (int pair = 0; pair < kTiles / 2; ++pair) {
      const PhiloxWords w =
          draw(first_query + 16 * pair + 2 * t + parity, first_key + (g & ~1));
      // The words of key parity `parity` (2 parity + query bit 3): kept from this call, and
      // the other lane's call's ones received; the other key parity's words are sent.
      const uint32_t mine[2] = {parity ? w.x[2] : w.x[0], parity ? w.x[3] : w.x[1]};
      const uint32_t sent[2] = {parity ? w.x[0] : w.x[2], parity ? w.x[1] : w.x[3]};
      uint32_t theirs[2];
#pragma unroll
      for (int j = 0; j < 2; ++j) {
        theirs[j] = __shfl_xor_sync(0xFFFFFFFFu, sent[j], 4);
      }
#pragma unroll
      for (int half = 0; half < 2; ++half) {  // query bit 3: the tile of the pair
#pragma unroll
        for (int reg = 0; reg < 4; ++reg) {  // key bit 3: reg / 2; query bit 0: reg % 2
          const uint32_t word = (reg % 2) == parity ? mine[half] : theirs[half];
          const uint32_t bits = reg / 2 == 0 ? word & 0xFFFFu : word >> 16;
          const int bit = 4 * (2 * pair + half) + reg;
          keep.words[bit / 32] |= (bits >= args.threshold ? 1u : 0u) << (bit % 32);
        }
      }
    }
    return keep;
  }

  // x = kept ? x * scale : 0 over fragments shaped [kTiles][4]; scale 1 leaves kept values.
  template <int kTiles>
  static FLASHMMA_DEVICE void apply(float (&x)[kTiles][4], const KeepBits<kTiles>& keep,
                                    float scale) {
#pragma unroll
    for (int t = 0; t < kTiles; ++t) {
#pragma unroll
      for (int reg = 0; reg < 4; ++reg) x[t][reg] = keep.kept(t, reg) ? x[t][reg] * scale : 0.f;
    }
  }
};

}  // namespace flashmma
