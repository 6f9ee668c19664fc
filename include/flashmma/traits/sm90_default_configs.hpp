// SPDX-License-Identifier: Apache-2.0
// The Hopper kernel's defaults: which Sm90TileConfig forward(params) runs for a kernel head dim
// on a compute capability 9.0 GPU (launch_plan.hpp says when it runs one at all).
//
// Every kernel head dim but 32 has one, each measured faster than what it replaced on an H200
// (bf16, B * N = 16384, H * d = 2048, N = 1k-16k, with and without the causal mask,
// `flashmma_bench --preset sm90`; TFLOP/s, docs/tuning-log.md steps 26 and 32):
//   64   3 consumer warpgroups (BlockM 192), 128 keys   212-496; two warpgroups 224-439, the
//                                                       portable tile 226-336 (loses only at
//                                                       causal N = 1k, by 5%)
//   96   as 128 in shared memory, d = 128's tile        274-508; portable 234-331
//   128  128 keys, 2 stages, ping-pong                  355-675; portable 262-390 (step 26)
//   160  as 192, 112 keys                               322-633; portable 194-240
//   192  112 keys                                       370-746; portable 225-315
//   224  as 256, 80 keys                                372-652; portable 204-275
//   256  80 keys                                        415-781; portable 248-344 (step 26)
// A head dim below a multiple of 64 is padded to it in shared memory (TMA fills the padding with
// zeros): products are wasted, and the Hopper tile still wins by 1.2-2.7x. 32 keeps the portable
// default: padded to 64 it would compute twice its products, and it was not measured.
#pragma once

#include "flashmma/traits/sm90_tile_config.hpp"

namespace flashmma {

// The kernel head dims (traits/default_configs.hpp) that have a Hopper default.
constexpr bool has_sm90_default(int kernel_head_dim) {
  return kernel_head_dim >= 64 && kernel_head_dim <= kMaxHeadDim && kernel_head_dim % 32 == 0;
}

// d = 64's walking twin. It waits for P V before the softmax: with 160 registers it spills 16
// bytes more and ran 2-4% slower with the softmax overlapped (docs/tuning-log.md, step 52). Three
// K/V stages (172 KB of shared memory with its two Q slots): on an H100, walking, against one
// block per tile, 1.211x at causal N = 1k where two stages gave 1.138x, 1.118x at 2k (1.074x),
// 0.983x at 4k (1.006x), and 1.165x at N = 1k without the mask (1.167x) (step 54).
template <class Element>
using Sm90WalkingTwin64 =
    Sm90TileConfig<Element, 64, 128, /*Stages=*/3, 3, 24, 160, Sm90Schedule::kOverlapProducts,
                   /*PingPong=*/false, /*Persistent=*/true>;

// Its products are half the d = 128 twin's, so walking pays longer: forced to walk, the two-stage
// twin measured +3-6% over one block per tile at 64 and 128 unmasked key tiles (H200, step 51;
// H100 +3.5-5% at 64 and 128, step 53); under the causal mask +5-6% at 32 key tiles (H200,
// step 51) but -2.5 to -3% at 64 (H100, step 53). The three-stage twin keeps these limits (at 32
// causal key tiles, on the H100, 0.98x one block per tile, the two-stage twin 1.01x; step 54).
template <class Element>
struct Sm90WalkLimits<Sm90WalkingTwin64<Element>> {
  static constexpr int64_t kKeyTiles = 128;
  static constexpr int64_t kMaskedKeyTiles = 32;
};

// Sm90DefaultConfig<Element, HeadDim>::type is the Hopper default of a kernel head dim that has
// one; kAvailable says whether it does. Where kWalks, `walking` is the same tile persistent
// (Sm90TileConfig's Persistent; d = 64's with a schedule and three stages of its own):
// forward(params) runs it instead, without a mask or with the causal one (dense batches and packed
// sequences), on a call whose blocks walk the tiles (launch_plan.hpp's persistent_walk: a workspace
// for the tile counter, more tiles than SMs, and key tiles within the twin's Sm90WalkLimits).
// Measured on an H200 (bf16, B * N = 16k, H * d = 2048, the two-Q-slot kernels of
// docs/tuning-log.md step 51), walking against one block per tile, N = 1k / 2k / 4k: d = 128
// 1.124 / 1.05 / 1.011, causal 1.263 / 1.04-1.12 (and 1.02-1.055 forced at 4k, which walks since
// step 53); d = 64 1.22 / 1.15 / 1.09, causal 1.18 / 1.137 (and 1.05-1.06 forced at 4k, walked
// since step 53). Where it does not walk, the twin run one block per tile measured 0.92-0.98x
// `type` at d = 128 and 0.98-1.03x at d = 64, so `type` stays the one-tile default.
template <class Element, int HeadDim, bool kHasDefault = has_sm90_default(HeadDim)>
struct Sm90DefaultConfig {
  static constexpr bool kAvailable = false;
  static constexpr bool kWalks = false;
};

template <class Element>
struct Sm90DefaultConfig<Element, 64, true> {
  static constexpr bool kAvailable = true;
  // Three consumer warpgroups of 160 registers: +9-19% over two at N >= 4k (the softmax, half of
  // d = 64's work per product, runs on three warpgroups), -5% at causal N = 1k.
  using type = Sm90TileConfig<Element, 64, /*BlockN=*/128, 2, /*ConsumerWarpgroups=*/3, 24, 160>;
  static constexpr bool kWalks = true;
  using walking = Sm90WalkingTwin64<Element>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 96, true> {
  static constexpr bool kAvailable = true;
  static constexpr bool kWalks = false;
  using type = Sm90TileConfig<Element, 96, /*BlockN=*/128, 2, 2, 24, 240,
                              Sm90Schedule::kOverlapSoftmax, /*PingPong=*/true>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 128, true> {
  static constexpr bool kAvailable = true;
  // Ping-pong: 0-2% over the plain overlapped schedule from 4k to 8k keys and 6% at 1k; 176 keys
  // per tile won at 16k unmasked (679 against 601) but lost at 1k and with the causal mask.
  using type = Sm90TileConfig<Element, 128, /*BlockN=*/128, 2, 2, 24, 240,
                              Sm90Schedule::kOverlapSoftmax, /*PingPong=*/true>;
  static constexpr bool kWalks = true;
  using walking = Sm90TileConfig<Element, 128, 128, 2, 2, 24, 240, Sm90Schedule::kOverlapSoftmax,
                                 /*PingPong=*/true, /*Persistent=*/true>;
};

// 112 keys: the largest tile whose two K/V stages fit 227 KiB beside a Q of 128 x 192.
template <class Element>
struct Sm90DefaultConfig<Element, 160, true> {
  static constexpr bool kAvailable = true;
  static constexpr bool kWalks = false;
  using type = Sm90TileConfig<Element, 160, /*BlockN=*/112>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 192, true> {
  static constexpr bool kAvailable = true;
  static constexpr bool kWalks = false;
  using type = Sm90TileConfig<Element, 192, /*BlockN=*/112>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 224, true> {
  static constexpr bool kAvailable = true;
  static constexpr bool kWalks = false;
  using type = Sm90TileConfig<Element, 224, /*BlockN=*/80>;
};

template <class Element>
struct Sm90DefaultConfig<Element, 256, true> {
  static constexpr bool kAvailable = true;
  static constexpr bool kWalks = false;
  using type = Sm90TileConfig<Element, 256, /*BlockN=*/80>;
};

}  // namespace flashmma
