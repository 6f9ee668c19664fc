// SPDX-License-Identifier: Apache-2.0
// Instantiates the kernels of bench_configs.hpp. Included only by the generated shard translation
// units (bench/CMakeLists.txt), each of which instantiates config_shard<Element, Shard, Shards>.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench_configs.hpp"
#include "flashmma/default_dispatch.hpp"
#include "flashmma/forward.cuh"

namespace flashmma_bench {

// ALiBi as a user would write it against the score-policy contract, knowing nothing of the
// library's AlibiBias: the scaled score of (i, j) gets -slope * |i + sk - sq - j|. The
// "alibi-user" rows time it against the built-in ALiBi. The distance keeps the contract's 32-bit
// type: as int64_t, each conversion to float is an I2F.S64, and the functor ran 1.03-1.06x the
// built-in's time (docs/tuning-log.md, steps 25 and 28).
struct UserAlibi : flashmma::ScorePolicyBase {
  static constexpr bool kTransformsScores = true;

  const float* slopes = nullptr;  // fp32 device pointer, slopes[batch * batch_stride + head]
  int64_t batch_stride = 0;

  __host__ __device__ float transform(float scaled_score, const flashmma::ScoreCoord& c,
                                      const flashmma::SequenceLengths& lengths) const {
    const float slope = slopes[c.batch * batch_stride + c.head];
    const auto distance = c.query + lengths.seqlen_k - lengths.seqlen_q - c.key;
    return scaled_score - slope * static_cast<float>(distance < 0 ? -distance : distance);
  }
};

// An entry's description of Config, without its launch function: taking the address of a
// function template instantiates its kernels, so each entry names only the function it runs.
// (For "default", forward<Config> of its general tile would add the three masked policies' kernels,
// which the dispatch runs on its masked tile where that is another; for the ALiBi policies, four
// built-in kernels per tile that they never launch.)
template <class Config>
ConfigEntry describe_entry(std::string name) {
  ConfigEntry entry;
  entry.name = std::move(name);
  entry.dtype = Config::kScalarType;
  entry.head_dim = Config::kHeadDim;
  entry.block_m = Config::kBlockM;
  entry.block_n = Config::kBlockN;
  entry.warps = Config::kThreads / 32;
  entry.stages = Config::kStages;
  entry.min_blocks_per_sm = Config::kMinBlocksPerSm;
  entry.smem_bytes = Config::kSmemBytes;
  if constexpr (flashmma::IsSm90TileConfig<Config>::value) {
    entry.shape = entry.name;  // the Sm90Shape name
  } else {
    entry.shape = shape_name<Config>();
  }
  entry.config_description = flashmma::describe_config<Config>();
  return entry;
}

template <class Config>
ConfigEntry make_entry(std::string name) {
  ConfigEntry entry = describe_entry<Config>(std::move(name));
  entry.launch = &flashmma::forward<Config>;
  return entry;
}

// "default" for one head dim: launches what flashmma::forward() would; described by the general
// config, with the causal and compact tiles named where they differ.
template <class Element, int HeadDim>
ConfigEntry make_default_entry() {
  using Defaults = flashmma::DefaultConfig<Element, HeadDim>;
  ConfigEntry entry = describe_entry<typename Defaults::type>(kDefaultName);
  if (!std::is_same_v<typename Defaults::causal, typename Defaults::type>) {
    entry.shape += " causal:" + shape_name<typename Defaults::causal>();
  }
  if (!std::is_same_v<typename Defaults::compact, typename Defaults::type>) {
    entry.shape += " compact:" + shape_name<typename Defaults::compact>();
  }
  entry.launch = &flashmma::forward_default_config<Element, HeadDim>;
  return entry;
}

// Runs params' ALiBi (with or without its causal mask) as the policy Alibi on Config.
// forward<Config, Policy> takes the mask from the policy alone, so the causal mask moves into it;
// the variant fields are cleared, since the policy now carries them.
template <class Config, class Alibi>
flashmma::Status forward_alibi_policy(const flashmma::ForwardParams& params,
                                      cudaStream_t stream) {
  if (params.alibi_slopes == nullptr || params.window_left >= 0 || params.window_right >= 0 ||
      params.softcap != 0.f) {
    return flashmma::Status::error(flashmma::ErrorCode::kInvalidArgument,
                                   "the ALiBi policy entries run ALiBi alone (alibi=1, no window, "
                                   "no softcap), with or without the causal mask");
  }
  const Alibi alibi{{}, params.alibi_slopes, params.alibi_batch_stride};
  flashmma::ForwardParams p = params;
  p.mask = flashmma::MaskKind::kNone;
  p.alibi_slopes = nullptr;
  p.alibi_batch_stride = 0;
  if (params.mask == flashmma::MaskKind::kCausal) {
    using Causal = flashmma::Combined<Alibi, flashmma::CausalMask>;
    return flashmma::forward<Config>(p, Causal{{}, alibi, {}}, stream);
  }
  return flashmma::forward<Config>(p, alibi, stream);
}

template <class Element, class Entry>
ConfigEntry make_alibi_policy_entry() {
  using Defaults = flashmma::DefaultConfig<Element, kAlibiPolicyHeadDim>;
  static_assert(std::is_same_v<typename Defaults::compact, typename Defaults::causal>,
                "the ALiBi policy entries cover the general and causal tiles only");
  using Portable = std::conditional_t<Entry::kTile == flashmma::DefaultTile::kCausal,
                                      typename Defaults::causal, typename Defaults::type>;
  using Config =
      std::conditional_t<Entry::kHopper,
                         typename flashmma::Sm90DefaultConfig<Element, kAlibiPolicyHeadDim>::type,
                         Portable>;
  using Alibi = std::conditional_t<Entry::kSource == AlibiSource::kLibrary, flashmma::AlibiBias,
                                   UserAlibi>;
  ConfigEntry entry = describe_entry<Config>(Entry::name());
  entry.follows_dispatch = true;
  entry.tile = Entry::kTile;
  entry.launch = &forward_alibi_policy<Config, Alibi>;
  return entry;
}

// Entry `Index` of the list for one element type: the defaults first, then the named shapes, the
// ALiBi policies, and the Hopper tiles.
template <class Element, std::size_t Index>
ConfigEntry entry_at() {
  if constexpr (Index < kDefaultCount) {
    constexpr int kHeadDim = flashmma::kSupportedHeadDims[Index];
    return make_default_entry<Element, kHeadDim>();
  } else if constexpr (Index < kDefaultCount + kNamedCount) {
    using Shape = std::tuple_element_t<Index - kDefaultCount, NamedShapes>;
    return make_entry<typename Shape::template Config<Element>>(Shape::name());
  } else if constexpr (Index < kDefaultCount + kNamedCount + kAlibiPolicyCount) {
    using Entry = std::tuple_element_t<Index - kDefaultCount - kNamedCount, AlibiPolicyEntries>;
    return make_alibi_policy_entry<Element, Entry>();
  } else {
    using Shape =
        std::tuple_element_t<Index - kDefaultCount - kNamedCount - kAlibiPolicyCount, Sm90Shapes>;
    return make_entry<typename Shape::template Config<Element>>(Shape::name());
  }
}

template <class Element, int Shard, int Shards, std::size_t Index>
void append_if_in_shard(std::vector<ConfigEntry>& entries) {
  if constexpr (Index % Shards == Shard && entry_is_built(Index)) {
    entries.push_back(entry_at<Element, Index>());
  }
}

template <class Element, int Shard, int Shards, std::size_t... Indices>
void append_shard(std::vector<ConfigEntry>& entries, std::index_sequence<Indices...>) {
  (append_if_in_shard<Element, Shard, Shards, Indices>(entries), ...);
}

template <class Element, int Shard, int Shards>
std::vector<ConfigEntry> config_shard() {
  static_assert(Shard >= 0 && Shard < Shards, "Shard must lie in [0, Shards)");
  std::vector<ConfigEntry> entries;
  append_shard<Element, Shard, Shards>(entries, std::make_index_sequence<kEntryCount>{});
  return entries;
}

}  // namespace flashmma_bench
