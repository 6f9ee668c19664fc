// SPDX-License-Identifier: Apache-2.0
// A score policy must derive from ScorePolicyBase: a lookalike with a visible() of its own is
// refused where a kernel would be instantiated for it, with the rule it breaks.
// expected-error: a score policy must derive from flashmma::ScorePolicyBase
#include <flashmma/flashmma.cuh>

struct LooksLikeAPolicy {
  static constexpr bool kMasks = true;
  static constexpr bool kTransformsScores = false;
  __host__ __device__ bool visible(const flashmma::ScoreCoord& c,
                                   const flashmma::SequenceLengths&) const {
    return c.key <= c.query;
  }
};

using Config = flashmma::TileConfig<__half, 64, 64, 64, 4, 1, flashmma::SmemLayout::kXorSwizzle>;

flashmma::Status run(const flashmma::ForwardParams& params) {
  return flashmma::forward<Config>(params, LooksLikeAPolicy{});
}
