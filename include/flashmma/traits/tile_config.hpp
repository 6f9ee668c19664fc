// SPDX-License-Identifier: Apache-2.0
// The knobs of a forward kernel, and every constant that follows from them.
//
//   using MyConfig = flashmma::TileConfig<__half, /*HeadDim=*/128, /*BlockM=*/128,
//                                         /*BlockN=*/64, /*Warps=*/8, /*Stages=*/2,
//                                         flashmma::SmemLayout::kXorSwizzle>;
//   flashmma::forward<MyConfig>(params, stream);
//
// A block computes BlockM query rows of one (batch, head); each of its warps owns 16 of those
// rows ("split Q") and walks all keys in tiles of BlockN, so softmax statistics never leave a
// warp. Stages is how many K/V tile pairs are resident in shared memory: with 1, V of the current
// tile loads while Q K^T runs; with S > 1, the next S - 1 tile pairs load while this one computes.
#pragma once

#include <cstddef>

#include "flashmma/traits/arch.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/smem_layout.hpp"

namespace flashmma {

inline constexpr int kMmaM = 16;  // mma.sync.m16n8k16
inline constexpr int kMmaN = 8;
inline constexpr int kMmaK = 16;
inline constexpr int kMaxHeadDim = 256;

template <class Element, int HeadDim, int BlockM, int BlockN, int Warps, int Stages,
          SmemLayout Layout, class Arch = arch::Sm80>
struct TileConfig {
  static_assert(IsSupportedElement<Element>::value,
                "Element must be __half or __nv_bfloat16");
  static_assert(HeadDim > 0 && HeadDim % kMmaK == 0,
                "HeadDim must be a positive multiple of 16: Q K^T consumes it in k16 steps "
                "(head dims that are only multiples of 8 run on the next larger config)");
  static_assert(HeadDim <= kMaxHeadDim, "HeadDim must be at most 256");
  static_assert(Warps >= 1 && Warps <= 16, "Warps must be between 1 and 16 (512 threads)");
  static_assert(BlockM == kMmaM * Warps,
                "BlockM must equal 16 * Warps: each warp owns 16 query rows");
  static_assert(BlockN > 0 && BlockN % kMmaK == 0,
                "BlockN must be a positive multiple of 16: P V consumes keys in k16 steps");
  static_assert(Stages >= 1 && Stages <= 4, "Stages must be between 1 and 4");

  using element_type = Element;
  using arch_tag = Arch;
  using layout = TileLayout<Layout, HeadDim>;

  static constexpr ScalarType kScalarType = ElementTraits<Element>::kScalarType;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;
  static constexpr int kBlockN = BlockN;
  static constexpr int kWarps = Warps;
  static constexpr int kStages = Stages;
  static constexpr SmemLayout kSmemLayout = Layout;

  static constexpr int kThreads = Warps * 32;
  // Fragments per warp: Q K^T steps over the head dim in k16 slices and produces BlockN / 8
  // accumulator tiles; P V steps over the keys in k16 slices and produces HeadDim / 8 tiles.
  static constexpr int kHeadDimSlices = HeadDim / kMmaK;
  static constexpr int kScoreTiles = BlockN / kMmaN;
  static constexpr int kKeySlices = BlockN / kMmaK;
  static constexpr int kOutputTiles = HeadDim / kMmaN;
  // fp32 registers a thread keeps live across the main loop: the O accumulator and one S tile.
  static constexpr int kAccumulatorRegisters = 4 * (kOutputTiles + kScoreTiles);
  // Keeping Q's fragments in registers saves one ldmatrix per k16 slice per K tile; it costs
  // 2 * HeadDim registers, affordable up to HeadDim 128.
  static constexpr bool kQInRegisters = HeadDim <= 128;

  // 16-byte chunks per tile row, and how many of them each thread copies per tile.
  static constexpr int kChunksPerRow = HeadDim / kElementsPerChunk;
  static constexpr int kRowStride = layout::kRowStride;

  // Shared memory: one Q tile, then Stages K tiles, then Stages V tiles.
  static constexpr int kQTileElements = BlockM * kRowStride;
  static constexpr int kKVTileElements = BlockN * kRowStride;
  static constexpr std::size_t kSmemBytes =
      sizeof(Element) * (static_cast<std::size_t>(kQTileElements) +
                         2 * static_cast<std::size_t>(Stages) * kKVTileElements);

  static_assert(kAccumulatorRegisters <= 192,
                "O (HeadDim / 2) plus S (BlockN / 2) accumulators exceed 192 fp32 registers per "
                "thread; lower BlockN for this HeadDim");
  static_assert(kSmemBytes <= 227 * 1024,
                "shared memory (BlockM + 2 * Stages * BlockN) * row bytes exceeds 227 KiB, the "
                "largest any supported GPU offers; lower BlockN, BlockM or Stages");
};

// True for any instantiation of TileConfig (used to give a clear error for other types).
template <class T>
struct IsTileConfig {
  static constexpr bool value = false;
};
template <class E, int D, int M, int N, int W, int S, SmemLayout L, class A>
struct IsTileConfig<TileConfig<E, D, M, N, W, S, L, A>> {
  static constexpr bool value = true;
};

}  // namespace flashmma
