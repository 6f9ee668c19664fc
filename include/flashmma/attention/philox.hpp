// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based generator of dropout: 128 random bits from a 128-bit counter and a
// 64-bit key, with no state, so that the forward and the backward pass regenerate the same
// numbers for the same logical coordinates instead of storing a mask.
//
// dropout_keep() fixes which (batch, head, query, key) pairs a dropout of probability p keeps
// for a (seed, offset): from logical coordinates only, like a score policy, so that every kernel
// and tile shape, forward or backward, and the host reference draw the same mask. Each pair gets
// 16 random bits, and one Philox call covers the 8 pairs
//   queries {q, q + 8} x keys {k, k + 1, k + 8, k + 9}   (q with bit 3 clear, k with bits 0, 3 clear)
// with counter = {k, q, batch * heads + head, offset} and key = {seed low, seed high}: pair
// (query, key) takes half (key >> 3) & 1 of word 2 (key & 1) + ((query >> 3) & 1).
// Why that grouping: it is what one lane holds of an m16n8 accumulator tile pair with queries
// as rows (the forward's S, either architecture: rows g, g + 8, columns 2t, 2t + 1 of two
// adjacent 8-column tiles), so a forward lane uses every bit of its calls; with keys as rows (the
// backward's S^T) a lane holds half of two calls, and the lane beside it the other halves
// (attention/dropout.cuh). A pair is dropped when its 16 bits are below the threshold
// round(p 2^16); kept pairs are scaled by 2^16 / (2^16 - threshold), the inverse of the keep
// rate actually drawn, so that dropout leaves the expected output unchanged.
#pragma once

#include <cstdint>

#include "flashmma/macros.hpp"

namespace flashmma {

struct PhiloxWords {
  uint32_t x[4];
};

namespace detail {

inline constexpr uint32_t kPhiloxM0 = 0xD2511F53u;  // the round multipliers
inline constexpr uint32_t kPhiloxM1 = 0xCD9E8D57u;
inline constexpr uint32_t kPhiloxW0 = 0x9E3779B9u;  // the key schedule's increments
inline constexpr uint32_t kPhiloxW1 = 0xBB67AE85u;

FLASHMMA_HOST_DEVICE uint32_t mul_high(uint32_t a, uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __umulhi(a, b);
#else
  return static_cast<uint32_t>((static_cast<uint64_t>(a) * b) >> 32);
#endif
}

}  // namespace detail

// Philox4x32 with ten rounds: Random123's philox4x32_10(counter, key).
FLASHMMA_HOST_DEVICE PhiloxWords philox4x32_10(PhiloxWords counter, uint32_t key0,
                                               uint32_t key1) {
  for (int round = 0; round < 10; ++round) {
    if (round > 0) {
      key0 += detail::kPhiloxW0;
      key1 += detail::kPhiloxW1;
    }
    const uint32_t high0 = detail::mul_high(detail::kPhiloxM0, counter.x[0]);
    const uint32_t low0 = detail::kPhiloxM0 * counter.x[0];
    const uint32_t high1 = detail::mul_high(detail::kPhiloxM1, counter.x[2]);
    const uint32_t low1 = detail::kPhiloxM1 * counter.x[2];
    counter = PhiloxWords{{high1 ^ counter.x[1] ^ key0, low1, high0 ^ counter.x[3] ^ key1, low0}};
  }
  return counter;
}

// A dropout probability p in [0, 1) as the threshold the 16-bit draws are compared with: a pair
// is dropped when its draw is below it, so it is kept with probability 1 - threshold / 2^16,
// which is 1 - p to 2^-17.
FLASHMMA_HOST_DEVICE uint32_t dropout_threshold(float p) {
  if (!(p > 0.f)) return 0u;
  const double scaled = static_cast<double>(p) * 65536.0 + 0.5;  // round(p * 2^16)
  return scaled >= 65535.0 ? 65535u : static_cast<uint32_t>(scaled);
}

// What a kept pair's probability is multiplied by: the inverse of the keep rate (1 for p = 0).
FLASHMMA_HOST_DEVICE float dropout_scale(uint32_t threshold) {
  return 65536.f / static_cast<float>(65536u - threshold);
}

// The Philox call of the pairs of (batch, head) grouped with (query, key) (see the top).
FLASHMMA_HOST_DEVICE PhiloxWords dropout_words(uint64_t seed, uint32_t offset, int64_t batch,
                                               int64_t heads, int64_t head, int32_t query,
                                               int32_t key) {
  const PhiloxWords counter{{static_cast<uint32_t>(key) & ~9u, static_cast<uint32_t>(query) & ~8u,
                             static_cast<uint32_t>(batch * heads + head), offset}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// The 16 bits of (query, key) in its call's words.
FLASHMMA_HOST_DEVICE uint32_t dropout_draw(const PhiloxWords& words, int32_t query, int32_t key) {
  const uint32_t word = words.x[2 * (key & 1) + ((query >> 3) & 1)];
  return (key & 8) != 0 ? word >> 16 : word & 0xFFFFu;
}

// True when a dropout with `threshold` (dropout_threshold(p)) keeps the pair.
FLASHMMA_HOST_DEVICE bool dropout_keep(uint64_t seed, uint32_t offset, int64_t batch,
                                       int64_t heads, int64_t head, int32_t query, int32_t key,
                                       uint32_t threshold) {
  const PhiloxWords words = dropout_words(seed, offset, batch, heads, head, query, key);
  return dropout_draw(words, query, key) >= threshold;
}

}  // namespace flashmma
