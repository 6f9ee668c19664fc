// SPDX-License-Identifier: Apache-2.0
// A user's score policy for the policy tests of every kernel: written against the contract
// alone (attention/score_policy.hpp), with a key range so that kernels skip the tiles it hides.
#pragma once

#include <cstdint>

#include "flashmma/attention/index_range.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/macros.hpp"

namespace flashmma {
namespace test {

// A user's policy: a prefix-LM mask. The first `prefix` keys are visible to every query (the
// prompt, attended bidirectionally); after them, causal (aligned bottom-right).
struct PrefixLM : flashmma::ScorePolicyBase {
  static constexpr bool kMasks = true;
  int64_t prefix = 0;

  FLASHMMA_HOST_DEVICE bool visible(const flashmma::ScoreCoord& c,
                                    const flashmma::SequenceLengths& lengths) const {
    return c.key < prefix || c.key <= c.query + lengths.diagonal();
  }
  FLASHMMA_HOST_DEVICE flashmma::IndexRange key_range(
      const flashmma::IndexRange& queries, const flashmma::SequenceLengths& lengths) const {
    const int64_t causal_end = queries.end - 1 + lengths.diagonal() + 1;
    return {0, causal_end > prefix ? causal_end : prefix};
  }
};

}  // namespace test
}  // namespace flashmma
