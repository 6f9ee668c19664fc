// SPDX-License-Identifier: Apache-2.0
// A user's score policy for the backward tests of every kernel: a mask and a transform with its
// gradient, reading a device array of its own.
#pragma once

#include <cstdint>

#include "flashmma/attention/score_policy.hpp"

namespace flashmma {
namespace test {

// Keys and queries in the same chunk of `chunk` positions see each other, and each query head's
// scores are multiplied by its temperature (d logit / d score = temperature).
struct ChunkedTemperature : ScorePolicyBase {
  static constexpr bool kMasks = true;
  static constexpr bool kTransformsScores = true;
  int32_t chunk = 16;
  const float* temperatures = nullptr;  // [heads_q]

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord& c, const SequenceLengths&) const {
    return c.query / chunk == c.key / chunk;
  }
  FLASHMMA_HOST_DEVICE float transform(float score, const ScoreCoord& c,
                                       const SequenceLengths&) const {
    return score * temperatures[c.head];
  }
  FLASHMMA_HOST_DEVICE float transform_gradient(float, float, const ScoreCoord& c,
                                                const SequenceLengths&) const {
    return temperatures[c.head];
  }
};

}  // namespace test
}  // namespace flashmma
