// SPDX-License-Identifier: Apache-2.0
// The kernel configurations flashmma_bench can run, by name, defined once.
//
//   "default"                  what flashmma::forward(params) runs for the head dim: its general,
//                              causal or compact default (flashmma::forward_default_config);
//   "d128_m128_n64_w4_s2_swz"  a TileShape below: HeadDim, BlockM, BlockN, Warps, Stages, the
//                              shared-memory layout ("swz" XOR swizzle, "pad" padded rows) and,
//                              when above 1, MinBlocksPerSm ("_b2");
//   "alibi-policy"             ALiBi as flashmma::AlibiBias through forward<Config, Policy>, and
//   "alibi-user"               the same bias written as a user's own policy (bench_kernels.cuh),
//                              both on the d = 128 tile the default dispatch runs for the row.
//
// Every entry compiles one kernel per element type, so the list stays short. To try another tile,
// add one TileShape line to NamedShapes and rebuild.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/traits/smem_layout.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma_bench {

// One tile shape, instantiable for either element type.
template <int HeadDim, int BlockM, int BlockN, int Warps, int Stages, flashmma::SmemLayout Layout,
          int MinBlocksPerSm = 1>
struct TileShape {
  template <class Element>
  using Config = flashmma::TileConfig<Element, HeadDim, BlockM, BlockN, Warps, Stages, Layout,
                                      MinBlocksPerSm>;

  static std::string name() {
    return "d" + std::to_string(HeadDim) + "_m" + std::to_string(BlockM) + "_n" +
           std::to_string(BlockN) + "_w" + std::to_string(Warps) + "_s" +
           std::to_string(Stages) + (Layout == flashmma::SmemLayout::kXorSwizzle ? "_swz" : "_pad") +
           (MinBlocksPerSm > 1 ? "_b" + std::to_string(MinBlocksPerSm) : std::string());
  }
};

// The TileShape name of a TileConfig.
template <class Config>
std::string shape_name() {
  return TileShape<Config::kHeadDim, Config::kBlockM, Config::kBlockN, Config::kWarps,
                   Config::kStages, Config::kSmemLayout, Config::kMinBlocksPerSm>::name();
}

inline constexpr flashmma::SmemLayout kSwizzle = flashmma::SmemLayout::kXorSwizzle;

// The named configurations (besides "default"): the ring-schedule (Stages = 2) tiles that were
// the defaults before the split schedule, the 64 x 64 d = 128 tile that was the causal default
// until the heaviest-first causal order, the overlapped schedule, the compact d = 256 tile on its
// own, and the d = 256 default of before the split schedule.
using NamedShapes = std::tuple<TileShape<64, 128, 64, 4, 2, kSwizzle>,
                               TileShape<128, 128, 64, 4, 2, kSwizzle>,
                               TileShape<128, 64, 64, 4, 1, kSwizzle>,
                               TileShape<128, 128, 64, 8, 3, kSwizzle>,
                               TileShape<256, 64, 64, 4, 1, kSwizzle>,
                               TileShape<256, 64, 32, 4, 2, kSwizzle, 2>>;

// A tile of the Hopper kernel (Sm90TileConfig): "sm90_d128_n128_s2_c2" is HeadDim, BlockN, Stages
// and consumer warpgroups; "_r32x240" follows when the register split is not 24/240, "_seq" for
// the sequential schedule, "_ovp" for kOverlapProducts and "_pp" for ping-pong. These entries
// run on a compute capability 9.0 GPU from a binary with sm_90a code only; elsewhere the call
// returns kUnsupportedDevice.
template <int HeadDim, int BlockN, int Stages, int Consumers, int ProducerRegisters = 24,
          int ConsumerRegisters = 240,
          flashmma::Sm90Schedule Schedule = flashmma::Sm90Schedule::kOverlapSoftmax,
          bool PingPong = false>
struct Sm90Shape {
  static constexpr int kHeadDim = HeadDim;
  template <class Element>
  using Config = flashmma::Sm90TileConfig<Element, HeadDim, BlockN, Stages, Consumers,
                                          ProducerRegisters, ConsumerRegisters, Schedule,
                                          PingPong>;

  static std::string name() {
    return "sm90_d" + std::to_string(HeadDim) + "_n" + std::to_string(BlockN) + "_s" +
           std::to_string(Stages) + "_c" + std::to_string(Consumers) +
           (ProducerRegisters != 24 || ConsumerRegisters != 240
                ? "_r" + std::to_string(ProducerRegisters) + "x" +
                      std::to_string(ConsumerRegisters)
                : std::string()) +
           (Schedule == flashmma::Sm90Schedule::kSequential        ? "_seq"
            : Schedule == flashmma::Sm90Schedule::kOverlapProducts ? "_ovp"
                                                                   : "") +
           (PingPong ? "_pp" : "");
  }
};

// The Hopper tiles: 128 keys at d = 64 and 128, FlashAttention-3's 176 at d = 128 and 80 at
// d = 256; and at d = 128, the sequential schedule and ping-pong (what each of the two gains).
// d = 64 with three consumer warpgroups (BlockM 192, 160 registers each) and with 192 keys. The
// head dims that are not multiples of 64 compute as the next one in shared memory: d = 96 as
// 128 (the d = 128 default's tile, and without ping-pong), d = 160 and 192 as 192 with
// FlashAttention-3's 112 keys (the largest tile whose two K/V stages fit 227 KiB beside Q),
// d = 224 as 256 with d = 256's 80.
using Sm90Shapes =
    std::tuple<Sm90Shape<64, 128, 2, 2>, Sm90Shape<128, 128, 2, 2>, Sm90Shape<128, 176, 2, 2>,
               Sm90Shape<256, 80, 2, 2>,
               Sm90Shape<128, 128, 2, 2, 24, 240, flashmma::Sm90Schedule::kSequential>,
               Sm90Shape<128, 128, 2, 2, 24, 240, flashmma::Sm90Schedule::kOverlapSoftmax, true>,
               Sm90Shape<64, 128, 2, 3, 24, 160>, Sm90Shape<64, 192, 2, 2>,
               Sm90Shape<96, 128, 2, 2>,
               Sm90Shape<96, 128, 2, 2, 24, 240, flashmma::Sm90Schedule::kOverlapSoftmax, true>,
               Sm90Shape<160, 112, 2, 2>, Sm90Shape<192, 112, 2, 2>, Sm90Shape<224, 80, 2, 2>>;

// ALiBi as a score policy, for the comparison of the built-in ALiBi (params.alibi_slopes through
// the default dispatch) with the same bias as a policy type: the library's AlibiBias, or a user's
// functor. One entry per policy and d = 128 default tile, so that a row runs the tile the default
// dispatch picks for it (flashmma_bench.cu, dispatch_tile_entry) and the times compare kernels
// that differ only in their policy.
enum class AlibiSource { kLibrary, kUser };

template <AlibiSource Source, flashmma::DefaultTile Tile, bool Hopper = false>
struct AlibiPolicyEntry {
  static constexpr AlibiSource kSource = Source;
  static constexpr flashmma::DefaultTile kTile = Tile;
  static constexpr bool kHopper = Hopper;  // on d = 128's Hopper default, whatever the mask
  static const char* name() {
    return Source == AlibiSource::kLibrary ? "alibi-policy" : "alibi-user";
  }
};

inline constexpr int kAlibiPolicyHeadDim = 128;
// d = 128's compact tile is its causal one, so these two tiles cover every device; on an H100 or
// H200 the dispatch runs d = 128's Hopper default (one config for both masks), the third.
using AlibiPolicyEntries =
    std::tuple<AlibiPolicyEntry<AlibiSource::kLibrary, flashmma::DefaultTile::kGeneral>,
               AlibiPolicyEntry<AlibiSource::kLibrary, flashmma::DefaultTile::kCausal>,
               AlibiPolicyEntry<AlibiSource::kLibrary, flashmma::DefaultTile::kGeneral, true>,
               AlibiPolicyEntry<AlibiSource::kUser, flashmma::DefaultTile::kGeneral>,
               AlibiPolicyEntry<AlibiSource::kUser, flashmma::DefaultTile::kCausal>,
               AlibiPolicyEntry<AlibiSource::kUser, flashmma::DefaultTile::kGeneral, true>>;

inline constexpr std::size_t kDefaultCount = std::size(flashmma::kSupportedHeadDims);
inline constexpr std::size_t kNamedCount = std::tuple_size_v<NamedShapes>;
inline constexpr std::size_t kAlibiPolicyCount = std::tuple_size_v<AlibiPolicyEntries>;
inline constexpr std::size_t kSm90Count = std::tuple_size_v<Sm90Shapes>;

// The names of the Hopper tiles of one head dim, in Sm90Shapes' order.
template <std::size_t... Indices>
std::vector<std::string> sm90_shape_names(int head_dim, std::index_sequence<Indices...>) {
  std::vector<std::string> names;
  ((std::tuple_element_t<Indices, Sm90Shapes>::kHeadDim == head_dim
        ? names.push_back(std::tuple_element_t<Indices, Sm90Shapes>::name())
        : void()),
   ...);
  return names;
}
inline std::vector<std::string> sm90_shape_names(int head_dim) {
  return sm90_shape_names(head_dim, std::make_index_sequence<kSm90Count>{});
}
// Entries per element type: one default per supported head dim, the named shapes, the ALiBi
// policies, then the Hopper tiles.
inline constexpr std::size_t kEntryCount =
    kDefaultCount + kNamedCount + kAlibiPolicyCount + kSm90Count;

// FLASHMMA_BENCH_VARIANTS_ONLY=1 builds only what `--preset variants` runs (the target
// flashmma_bench_variants, bench/CMakeLists.txt): the defaults of d = 64 and 128 and the ALiBi
// policies, so that a run of the variant rows alone does not wait for every other kernel.
#ifndef FLASHMMA_BENCH_VARIANTS_ONLY
#define FLASHMMA_BENCH_VARIANTS_ONLY 0
#endif

constexpr bool entry_is_built(std::size_t index) {
  if (!FLASHMMA_BENCH_VARIANTS_ONLY) return true;
  if (index < kDefaultCount) {
    return flashmma::kSupportedHeadDims[index] == 64 || flashmma::kSupportedHeadDims[index] == 128;
  }
  return index >= kDefaultCount + kNamedCount &&
         index < kDefaultCount + kNamedCount + kAlibiPolicyCount;
}

inline constexpr const char* kDefaultName = "default";

using LaunchFn = flashmma::Status (*)(const flashmma::ForwardParams&, cudaStream_t);

// One compiled kernel the benchmark can launch.
struct ConfigEntry {
  std::string name;  // kDefaultName or TileShape::name()
  flashmma::ScalarType dtype = flashmma::ScalarType::kFloat16;
  int head_dim = 0;  // the kernel's HeadDim: serves any head dim up to it
  int block_m = 0;
  int block_n = 0;
  int warps = 0;
  int stages = 0;
  int min_blocks_per_sm = 0;
  std::size_t smem_bytes = 0;   // of the general config, for "default"
  std::string shape;            // the tile, e.g. "d128_m128_n64_w4_s1"; for "default" also the
                                // causal and compact tiles where they differ
  // flashmma::describe_config<Config>() (of the general config, for "default"): the ALiBi policy
  // entries are matched by it against the kernel the default dispatch names.
  std::string config_description;
  // Several entries share this one's name, one per tile: a row runs the one whose tile the default
  // dispatch would run for it.
  bool follows_dispatch = false;
  flashmma::DefaultTile tile = flashmma::DefaultTile::kGeneral;  // of a follows_dispatch entry
  LaunchFn launch = nullptr;    // flashmma::forward<Config>, forward_default_config, or a policy
};

// The entries with index % Shards == Shard for one element type. Defined in bench_kernels.cuh
// and instantiated by one generated translation unit per (element type, shard), so that a
// parallel build compiles the kernels side by side (bench/CMakeLists.txt).
template <class Element, int Shard, int Shards>
std::vector<ConfigEntry> config_shard();

}  // namespace flashmma_bench
