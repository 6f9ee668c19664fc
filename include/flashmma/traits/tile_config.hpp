// SPDX-License-Identifier: Apache-2.0
// The knobs of a forward kernel, and every constant that follows from them.
//
//   using MyConfig = flashmma::TileConfig<__half, /*HeadDim=*/128, /*BlockM=*/128,
//                                         /*BlockN=*/64, /*Warps=*/8, /*Stages=*/2,
//                                         flashmma::SmemLayout::kXorSwizzle>;
//   flashmma::forward<MyConfig>(params, stream);
//
// (optional after Layout: MinBlocksPerSm = 1, Rescale = RescaleOrder::kBeforeExp, Arch)
//
// A block computes BlockM query rows of one (batch, head); each of its warps owns BlockM / Warps
// of those rows ("split Q", in m16 tiles) and walks all keys in tiles of BlockN, so softmax
// statistics never leave a warp. Stages is how many K/V tile pairs are resident in shared
// memory: with 1, V of the current tile loads while Q K^T runs and the next K while the softmax
// and P V run; with S > 1, the next S - 1 tile pairs load while this one computes.
// MinBlocksPerSm trades registers for resident warps. Rescale is where the online softmax
// rescales O when a row maximum moves (a scheduling choice; the results are the same).
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

// Where the online softmax rescales the O accumulator when a row maximum moves: before the
// exponentials (so that they and the P V mma after them form one branch-free stretch the
// compiler can interleave) or after them. Same arithmetic, different instruction schedule.
enum class RescaleOrder : int { kBeforeExp, kAfterExp };

template <class Element, int HeadDim, int BlockM, int BlockN, int Warps, int Stages,
          SmemLayout Layout, int MinBlocksPerSm = 1,
          RescaleOrder Rescale = RescaleOrder::kBeforeExp, class Arch = arch::Sm80>
struct TileConfig {
  static_assert(IsSupportedElement<Element>::value,
                "Element must be __half or __nv_bfloat16");
  static_assert(HeadDim > 0 && HeadDim % kMmaK == 0,
                "HeadDim must be a positive multiple of 16: Q K^T consumes it in k16 steps "
                "(head dims that are only multiples of 8 run on the next larger config)");
  static_assert(HeadDim <= kMaxHeadDim, "HeadDim must be at most 256");
  static_assert(Warps >= 1 && Warps <= 16, "Warps must be between 1 and 16 (512 threads)");
  static_assert(BlockM > 0 && BlockM % (kMmaM * Warps) == 0,
                "BlockM must be a multiple of 16 * Warps: each warp owns BlockM / Warps query "
                "rows, in whole m16 tiles");
  static_assert(BlockN > 0 && BlockN % kMmaK == 0,
                "BlockN must be a positive multiple of 16: P V consumes keys in k16 steps");
  static_assert(Stages >= 1 && Stages <= 4, "Stages must be between 1 and 4");
  static_assert(MinBlocksPerSm >= 1 && MinBlocksPerSm * Warps <= 64,
                "MinBlocksPerSm must be >= 1, and MinBlocksPerSm * Warps at most 64 "
                "(warps per SM)");

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
  // Passed to __launch_bounds__: asks the compiler to fit this many blocks on one SM, i.e. to
  // use at most 65536 / (MinBlocksPerSm * kThreads) registers per thread (more warps to hide
  // latency, possibly fewer registers than the tile wants).
  static constexpr int kMinBlocksPerSm = MinBlocksPerSm;
  static constexpr RescaleOrder kRescaleOrder = Rescale;

  static constexpr int kThreads = Warps * 32;
  // Each warp owns kRowsPerWarp query rows as kRowTiles m16 tiles. Every K or V fragment a warp
  // loads from shared memory feeds one mma per row tile, so two row tiles halve the
  // shared-memory traffic per FLOP (at the price of twice the accumulator registers).
  static constexpr int kRowsPerWarp = BlockM / Warps;
  static constexpr int kRowTiles = kRowsPerWarp / kMmaM;
  // Fragments per row tile: Q K^T steps over the head dim in k16 slices and produces BlockN / 8
  // accumulator tiles; P V steps over the keys in k16 slices and produces HeadDim / 8 tiles.
  static constexpr int kHeadDimSlices = HeadDim / kMmaK;
  static constexpr int kScoreTiles = BlockN / kMmaN;
  static constexpr int kKeySlices = BlockN / kMmaK;
  static constexpr int kOutputTiles = HeadDim / kMmaN;
  // fp32 registers a thread keeps live across the main loop: the O accumulator and one S tile
  // for each row tile.
  static constexpr int kAccumulatorRegisters = 4 * kRowTiles * (kOutputTiles + kScoreTiles);
  // Keeping Q's fragments in registers saves one ldmatrix per k16 slice per K tile; it costs
  // HeadDim / 4 32-bit registers per thread per row tile, affordable up to 32 of them.
  static constexpr bool kQInRegisters = kRowTiles * HeadDim <= 128;
  // Measured on an H200 (docs/tuning-log.md, step 13): before the exponentials is 1-7% faster for
  // most configs, after them 1-6% faster for 128x64 tiles on 4 warps at d = 128 and 64x64 on 4
  // warps at d = 192; the defaults say which they use.
  static constexpr bool kRescaleBeforeExp = Rescale == RescaleOrder::kBeforeExp;

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
                "O (HeadDim / 2) plus S (BlockN / 2) accumulators per row tile exceed 192 fp32 "
                "registers per thread; lower BlockN, or BlockM / Warps, for this HeadDim");
  static_assert(kSmemBytes <= 227 * 1024,
                "shared memory (BlockM + 2 * Stages * BlockN) * row bytes exceeds 227 KiB, the "
                "largest any supported GPU offers; lower BlockN, BlockM or Stages");
};

// True for any instantiation of TileConfig (used to give a clear error for other types).
template <class T>
struct IsTileConfig {
  static constexpr bool value = false;
};
template <class E, int D, int M, int N, int W, int S, SmemLayout L, int B, RescaleOrder R,
          class A>
struct IsTileConfig<TileConfig<E, D, M, N, W, S, L, B, R, A>> {
  static constexpr bool value = true;
};

}  // namespace flashmma
