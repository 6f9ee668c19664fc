// SPDX-License-Identifier: Apache-2.0
// Architecture tags. A config names the architecture its kernel is written for explicitly; traits
// never look at __CUDA_ARCH__, so host and device agree on every derived constant.
#pragma once

namespace flashmma {
namespace arch {

// Ampere and later: mma.sync.m16n8k16, ldmatrix, cp.async. Runs on sm_80, sm_86, sm_89, sm_90...
struct Sm80 {
  static constexpr int kMinComputeCapability = 80;
  static constexpr bool kArchSpecific = false;  // the code runs on every later architecture
  static constexpr const char* kName = "sm_80";
};

// Hopper's architecture-specific features: wgmma, setmaxnreg. They exist only in code compiled
// for sm_90a (FLASHMMA_SM90A_ENABLED), not for sm_90, and such code runs on compute capability
// 9.0 alone.
struct Sm90a {
  static constexpr int kMinComputeCapability = 90;
  static constexpr bool kArchSpecific = true;
  static constexpr const char* kName = "sm_90a";
};

}  // namespace arch
}  // namespace flashmma
