// SPDX-License-Identifier: Apache-2.0
// Dropout as kernels see it: a compile-time choice (NoDropout compiles none of it, so p = 0
// costs nothing; PhiloxDropout applies attention/philox.hpp's mask) and the call's values.
#pragma once

#include <cstdint>

#include "flashmma/attention/philox.hpp"

namespace flashmma {

// The call's dropout: seed and offset of the mask, the 16-bit threshold and the scale of kept
// probabilities (philox.hpp). threshold 0 keeps every pair.
struct DropoutArgs {
  uint64_t seed = 0;
  uint32_t offset = 0;
  uint32_t threshold = 0;
  float scale = 1.f;
};

inline DropoutArgs make_dropout_args(float p, uint64_t seed, uint32_t offset) {
  DropoutArgs args;
  args.seed = seed;
  args.offset = offset;
  args.threshold = dropout_threshold(p);
  args.scale = dropout_scale(args.threshold);
  return args;
}

// A kernel's dropout: none (the default of every kernel) ...
struct NoDropout {
  static constexpr bool kEnabled = false;
};
// ... or the Philox mask of DropoutArgs.
struct PhiloxDropout {
  static constexpr bool kEnabled = true;
};

}  // namespace flashmma
