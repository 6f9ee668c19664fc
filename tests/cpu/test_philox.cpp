// SPDX-License-Identifier: Apache-2.0
// Dropout's generator (attention/philox.hpp): Philox4x32-10 against Random123's published
// known-answer vectors, and the dropout mask drawn from it: the keep rate, p = 0, the words
// grouped for the m16n8 fragments (8 pairs a call), the thresholds, and masks that differ with the seed, the offset and the head.
#include "support/catch.hpp"

#include <flashmma/attention/philox.hpp>

#include <cmath>
#include <cstdint>

namespace {

using flashmma::PhiloxWords;

void check_known_answer(PhiloxWords counter, uint32_t key0, uint32_t key1, PhiloxWords expected) {
  const PhiloxWords out = flashmma::philox4x32_10(counter, key0, key1);
  for (int i = 0; i < 4; ++i) {
    INFO("word " << i);
    CHECK(out.x[i] == expected.x[i]);
  }
}

TEST_CASE("Philox4x32-10 gives Random123's known answers", "[philox]") {
  check_known_answer({{0, 0, 0, 0}}, 0, 0, {{0x6627e8d5u, 0xe169c58du, 0xbc57ac4cu, 0x9b00dbd8u}});
  check_known_answer({{0xffffffffu, 0xffffffffu, 0xffffffffu, 0xffffffffu}}, 0xffffffffu,
                     0xffffffffu, {{0x408f276du, 0x41c83b0eu, 0xa20bc7c6u, 0x6d5451fdu}});
  check_known_answer({{0x243f6a88u, 0x85a308d3u, 0x13198a2eu, 0x03707344u}}, 0xa4093822u,
                     0x299f31d0u, {{0xd16cfe09u, 0x94fdccebu, 0x5001e420u, 0x24126ea1u}});
}

// Kept pairs of a 64 x 256 block of (batch 1, head 3) out of 16 heads.
int64_t kept(uint64_t seed, uint32_t offset, int64_t head, float p) {
  const uint32_t threshold = flashmma::dropout_threshold(p);
  int64_t count = 0;
  for (int32_t i = 0; i < 64; ++i) {
    for (int32_t j = 0; j < 256; ++j) {
      count += flashmma::dropout_keep(seed, offset, 1, 16, head, i, j, threshold) ? 1 : 0;
    }
  }
  return count;
}

TEST_CASE("dropout keeps each pair with probability 1 - p", "[philox][dropout]") {
  constexpr double kPairs = 64 * 256;
  for (const float p : {0.1f, 0.5f, 0.9f}) {
    const double expected = (1.0 - p) * kPairs;
    const double sigma = std::sqrt(kPairs * p * (1.0 - p));
    INFO("p = " << p);
    CHECK(std::fabs(static_cast<double>(kept(0x1234567890abcdefull, 7, 3, p)) - expected) <
          5 * sigma);
  }
  CHECK(kept(42, 0, 3, 0.f) == 64 * 256);  // p = 0 drops nothing
  CHECK(flashmma::dropout_threshold(0.f) == 0u);
}

TEST_CASE("one Philox call covers queries {q, q + 8} x keys {k, k + 1, k + 8, k + 9}; seed, "
          "offset and head change the mask",
          "[philox][dropout]") {
  // Every pair of a 16 x 16 block takes its draw from the call of its group, and the 8 pairs of
  // a group take 8 different halves of that call's words.
  for (int32_t query = 16; query < 32; ++query) {
    for (int32_t key = 32; key < 48; ++key) {
      const int32_t q0 = query & ~8, k0 = key & ~9;
      const PhiloxWords a = flashmma::dropout_words(99, 1, 0, 8, 2, query, key);
      const PhiloxWords b = flashmma::dropout_words(99, 1, 0, 8, 2, q0, k0);
      for (int w = 0; w < 4; ++w) CHECK(a.x[w] == b.x[w]);
      const uint32_t word = a.x[2 * (key & 1) + ((query >> 3) & 1)];
      CHECK(flashmma::dropout_draw(a, query, key) == ((key & 8) ? word >> 16 : word & 0xFFFFu));
    }
  }
  uint32_t seen = 0;  // which of the 8 halves the group's pairs use
  for (const int32_t query : {16, 24}) {
    for (const int32_t key : {32, 33, 40, 41}) {
      const int half = 2 * (2 * (key & 1) + ((query >> 3) & 1)) + ((key >> 3) & 1);
      seen |= 1u << half;
    }
  }
  CHECK(seen == 0xFFu);
  // Thresholds: round(p 2^16), and the scale is the inverse keep rate.
  CHECK(flashmma::dropout_threshold(0.5f) == 32768u);
  CHECK(flashmma::dropout_threshold(0.1f) == 6554u);
  CHECK(flashmma::dropout_threshold(0.99999999f) == 65535u);
  CHECK(flashmma::dropout_scale(0u) == 1.f);
  CHECK(flashmma::dropout_scale(32768u) == 2.f);
  // Two independent masks at p = 0.5 agree on about half the pairs.
  const uint32_t half = flashmma::dropout_threshold(0.5f);
  auto agreement = [&](uint64_t seed2, uint32_t offset2, int64_t head2) {
    int64_t same = 0;
    for (int32_t i = 0; i < 64; ++i) {
      for (int32_t j = 0; j < 64; ++j) {
        same += flashmma::dropout_keep(5, 0, 0, 4, 1, i, j, half) ==
                        flashmma::dropout_keep(seed2, offset2, 0, 4, head2, i, j, half)
                    ? 1
                    : 0;
      }
    }
    return static_cast<double>(same) / (64 * 64);
  };
  CHECK(agreement(5, 0, 1) == 1.0);  // the same mask, regenerated
  CHECK(std::fabs(agreement(6, 0, 1) - 0.5) < 0.05);
  CHECK(std::fabs(agreement(5, 1, 1) - 0.5) < 0.05);
  CHECK(std::fabs(agreement(5, 0, 2) - 0.5) < 0.05);
  CHECK(std::fabs(agreement(uint64_t{5} | (uint64_t{1} << 40), 0, 1) - 0.5) < 0.05);  // seed's high word
}

}  // namespace
