// SPDX-License-Identifier: Apache-2.0
// Instantiates the kernels of bench_configs.hpp. Included only by the generated shard translation
// units (bench/CMakeLists.txt), each of which instantiates config_shard<Element, Shard, Shards>.
#pragma once

#include <cstddef>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "bench_configs.hpp"
#include "flashmma/forward.cuh"

namespace flashmma_bench {

// An entry's description of Config, without its launch function: taking the address of a
// function template instantiates its kernels, so each entry names only the function it runs.
// (For "default", forward<Config> of its general tile would add the three masked policies' kernels,
// which the dispatch runs on its masked tile where that is another.)
template <class Config>
ConfigEntry describe_entry(std::string name) {
  ConfigEntry entry;
  entry.name = std::move(name);
  entry.dtype = Config::kScalarType;
  entry.head_dim = Config::kHeadDim;
  entry.block_m = Config::kBlockM;
  entry.block_n = Config::kBlockN;
  entry.warps = Config::kWarps;
  entry.stages = Config::kStages;
  entry.min_blocks_per_sm = Config::kMinBlocksPerSm;
  entry.smem_bytes = Config::kSmemBytes;
  entry.shape = shape_name<Config>();
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

// Entry `Index` of the list for one element type: the defaults first, then the named shapes.
template <class Element, std::size_t Index>
ConfigEntry entry_at() {
  if constexpr (Index < kDefaultCount) {
    constexpr int kHeadDim = flashmma::kSupportedHeadDims[Index];
    return make_default_entry<Element, kHeadDim>();
  } else {
    using Shape = std::tuple_element_t<Index - kDefaultCount, NamedShapes>;
    return make_entry<typename Shape::template Config<Element>>(Shape::name());
  }
}

template <class Element, int Shard, int Shards, std::size_t Index>
void append_if_in_shard(std::vector<ConfigEntry>& entries) {
  if constexpr (Index % Shards == Shard) entries.push_back(entry_at<Element, Index>());
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
