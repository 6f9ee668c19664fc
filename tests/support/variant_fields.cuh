// SPDX-License-Identifier: Apache-2.0
// FlashAttention-2's variant fields of ForwardParams (window_left / window_right, softcap,
// alibi_slopes) for the tests that call forward(params) with them, and the reference policy that
// reads the fields' definition in params.hpp, not the dispatch's own translation
// (default_dispatch.hpp), so that a wrong translation shows.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "flashmma/attention/builtin_policies.hpp"
#include "flashmma/attention/score_policy.hpp"
#include "flashmma/params.hpp"
#include "support/gpu_helpers.cuh"

namespace flashmma {
namespace test {

// The variant fields of one call.
struct Variant {
  const char* what;
  bool causal = false;
  int64_t window_left = -1;
  int64_t window_right = -1;
  float softcap = 0.f;
  bool alibi = false;
  bool alibi_per_batch = false;
};

// Slopes for up to 8 batch entries x 8 heads, on the device and on the host.
struct Slopes {
  std::vector<float> host;
  DeviceBuffer<float> device;

  Slopes() {
    for (int i = 0; i < 64; ++i) {
      host.push_back(std::exp2(-0.5f * static_cast<float>(i % 16 + 1)) *
                     (1.f + 0.25f * static_cast<float>(i / 16)));
    }
    device = DeviceBuffer<float>(static_cast<int64_t>(host.size()));
    FLASHMMA_CUDA_CHECK(cudaMemcpy(device.get(), host.data(), device.bytes(),
                                   cudaMemcpyHostToDevice));
  }
};

inline void apply(const Variant& v, const Slopes& slopes, ForwardParams& p) {
  p.mask = v.causal ? MaskKind::kCausal : MaskKind::kNone;
  p.window_left = v.window_left;
  p.window_right = v.window_right;
  p.softcap = v.softcap;
  if (v.alibi) {
    p.alibi_slopes = slopes.device.get();
    p.alibi_batch_stride = v.alibi_per_batch ? p.heads_q : 0;
  }
}

// params.hpp's definition, written here from the fields alone: the window as given (causal
// forces its right side to 0), the softcap, then ALiBi, each only when asked for. Host memory.
struct FieldsReference : flashmma::ScorePolicyBase {
  static constexpr bool kMasks = true;
  static constexpr bool kTransformsScores = true;
  flashmma::SlidingWindow window;
  float softcap = 0.f;
  const float* slopes = nullptr;
  int64_t batch_stride = 0;

  FLASHMMA_HOST_DEVICE bool visible(const flashmma::ScoreCoord& c,
                                    const flashmma::SequenceLengths& lengths) const {
    const int64_t offset = c.key - (c.query + lengths.seqlen_k - lengths.seqlen_q);
    return (window.left < 0 || offset >= -window.left) &&
           (window.right < 0 || offset <= window.right);
  }
  FLASHMMA_HOST_DEVICE float transform(float score, const flashmma::ScoreCoord& c,
                                       const flashmma::SequenceLengths& lengths) const {
    double s = score;
    if (softcap > 0.f) s = softcap * std::tanh(s / softcap);
    if (slopes != nullptr) {
      const double distance =
          std::fabs(static_cast<double>(c.query + lengths.seqlen_k - lengths.seqlen_q - c.key));
      s -= slopes[c.batch * batch_stride + c.head] * distance;
    }
    return static_cast<float>(s);
  }
};

inline FieldsReference reference_policy(const Variant& v, const Slopes& slopes,
                                       const ForwardParams& p) {
  FieldsReference policy;
  policy.window = {{}, v.window_left, v.causal ? 0 : v.window_right};
  policy.softcap = v.softcap;
  if (v.alibi) {
    policy.slopes = slopes.host.data();
    policy.batch_stride = v.alibi_per_batch ? p.heads_q : 0;
  }
  return policy;
}

}  // namespace test
}  // namespace flashmma
