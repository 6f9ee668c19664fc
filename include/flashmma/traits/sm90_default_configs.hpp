// SPDX-License-Identifier: Apache-2.0
// The Hopper kernel's defaults: which Sm90TileConfig forward(params) runs for a kernel head dim
// on a compute capability 9.0 GPU (launch_plan.hpp says when it runs one at all).
//
// Only the head dims where the Hopper kernel was measured faster than the portable default have
// one (H200, bf16, 1k-16k keys, with and without the causal mask; docs/tuning-log.md step 26):
//   64   128 keys per tile, 2 stages, 2 consumer warpgroups   225-439 TFLOP/s against 226-336
//                                                             (even only at causal N = 1k)
//   128  the same with ping-pong                              355-652 against 262-390
//   256  80 keys per tile                                     411-769 against 248-344
// The other kernel head dims (32, 96, 160, 192, 224) run the portable default until they are
// measured: a head dim below a multiple of 64 is padded to it in shared memory, which costs the
// Hopper kernel up to a third of its products.
#pragma once

#include "flashmma/traits/sm90_tile_config.hpp"

namespace flashmma {

// The kernel head dims (traits/default_configs.hpp) that have a Hopper default.
constexpr bool has_sm90_default(int kernel_head_dim) {
  return kernel_head_dim == 64 || kernel_head_dim == 128 || kernel_head_dim == 256;
}

// Sm90DefaultConfig<Element, HeadDim>::type is the Hopper default of a kernel head dim that has
// one; kAvailable says whether it does.
template <class Element, int HeadDim, bool kHasDefault = has_sm90_default(HeadDim)>
struct Sm90DefaultConfig {
  static constexpr bool kAvailable = false;
};

template <class Element>
struct Sm90DefaultConfig<Element, 64, true> {
  static constexpr bool kAvailable = true;
  using type = Sm90TileConfig<Element, 64, /*BlockN=*/128>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 128, true> {
  static constexpr bool kAvailable = true;
  // Ping-pong: 0-2% over the plain overlapped schedule from 4k to 8k keys and 6% at 1k; 176 keys
  // per tile won at 16k unmasked (679 against 601) but lost at 1k and with the causal mask.
  using type = Sm90TileConfig<Element, 128, /*BlockN=*/128, 2, 2, 24, 240,
                              Sm90Schedule::kOverlapSoftmax, /*PingPong=*/true>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 256, true> {
  static constexpr bool kAvailable = true;
  using type = Sm90TileConfig<Element, 256, /*BlockN=*/80>;
};

}  // namespace flashmma
