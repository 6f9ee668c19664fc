// SPDX-License-Identifier: Apache-2.0
// Philox4x32-10 (Salmon, Moraes, Dror and Shaw, "Parallel random numbers: as easy as 1, 2, 3",
// SC 2011), the counter-based generator of dropout: 128 random bits from a 128-bit counter and a
// 64-bit key, with no state, so that the forward and the backward pass regenerate the same
// numbers for the same logical coordinates instead of storing a mask.
//
// dropout_keep() fixes which (batch, head, query, key) pairs a dropout of probability p keeps
// for a (seed, offset): from logical coordinates only, like a score policy, so that every kernel
// and tile shape, forward or backward, and the host reference draw the same mask. One Philox call
// covers four consecutive keys of a query row:
//   counter = {key / 4, query, batch * heads + head, offset},  key = {seed low, seed high}
// and key j keeps its pair when word j % 4, as a fraction of 2^32, is at least p.
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

// A dropout probability p in [0, 1) as the threshold the 32-bit words are compared with: a pair
// is dropped when its word is below it, so it is kept with probability 1 - p (to 2^-32).
FLASHMMA_HOST_DEVICE uint32_t dropout_threshold(float p) {
  const double scaled = static_cast<double>(p) * 4294967296.0;  // p * 2^32
  return scaled >= 4294967295.0 ? 0xFFFFFFFFu : static_cast<uint32_t>(scaled);
}

// The four random words of keys [4 * (key / 4), + 4) of query `query` of (batch, head).
FLASHMMA_HOST_DEVICE PhiloxWords dropout_words(uint64_t seed, uint32_t offset, int64_t batch,
                                               int64_t heads, int64_t head, int32_t query,
                                               int32_t key) {
  const PhiloxWords counter{{static_cast<uint32_t>(key) / 4u, static_cast<uint32_t>(query),
                             static_cast<uint32_t>(batch * heads + head), offset}};
  return philox4x32_10(counter, static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32));
}

// True when a dropout with `threshold` (dropout_threshold(p)) keeps the pair.
FLASHMMA_HOST_DEVICE bool dropout_keep(uint64_t seed, uint32_t offset, int64_t batch,
                                       int64_t heads, int64_t head, int32_t query, int32_t key,
                                       uint32_t threshold) {
  const PhiloxWords words = dropout_words(seed, offset, batch, heads, head, query, key);
  return words.x[key % 4] >= threshold;
}

}  // namespace flashmma
