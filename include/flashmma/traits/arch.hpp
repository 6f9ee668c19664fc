// SPDX-License-Identifier: Apache-2.0
// Architecture tags. A config names the architecture its kernel is written for explicitly; traits
// never look at __CUDA_ARCH__, so host and device agree on every derived constant.
#pragma once

namespace flashmma {
namespace arch {

// Ampere and later: mma.sync.m16n8k16, ldmatrix, cp.async. Runs on sm_80, sm_86, sm_89, sm_90...
struct Sm80 {
  static constexpr int kMinComputeCapability = 80;
  static constexpr const char* kName = "sm_80";
};

}  // namespace arch
}  // namespace flashmma
