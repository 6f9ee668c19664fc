// SPDX-License-Identifier: Apache-2.0
// The knobs of a backward kernel, and every constant that follows from them.
//
//   using MyBackward = flashmma::BackwardTileConfig<__half, /*HeadDim=*/128, /*BlockM=*/64,
//                                                   /*Warps=*/8>;
//   flashmma::backward<MyBackward>(params, stream);
//
// (optional after Warps: ColumnSplit = 1, Layout = padded rows, MinBlocksPerSm = 1, Arch)
//
// A block owns BlockN keys of one (batch, K/V head) and walks the query tiles of BlockM rows
// that see them, over every query head of the head's group, so dK and dV stay in registers and
// are written once. Each warp owns 16 keys (an m16 row tile of the transposed scores S^T = K Q^T
// and of dK, dV); ColumnSplit warps share those 16 keys, each computing S^T and dP^T whole and
// accumulating its 1 / ColumnSplit of dK's and dV's head-dim columns, which halves their
// registers at large head dims for the price of recomputing S^T and dP^T. So BlockN =
// 16 * Warps / ColumnSplit. dQ of a query tile is formed from dS in shared memory by all warps
// (16 query rows by HeadDim / (Warps / (BlockM / 16)) columns each) and added to an fp32
// accumulator with atomics. Q, dO and their two per-row values (LSE, D) stream through two
// stages.
#pragma once

#include <cstddef>

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/traits/arch.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/smem_layout.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// Padded rows: their ldmatrix addresses are one base per lane (the XOR swizzle keeps four, and
// with dK, dV, S^T and dP^T in registers those few registers made the d = 128 tile spill 40
// bytes a step; tuning log step 37).
template <int HeadDim>
inline constexpr SmemLayout kDefaultBackwardLayout = SmemLayout::kPaddedRows;

template <class Element, int HeadDim, int BlockM, int Warps, int ColumnSplit = 1,
          SmemLayout Layout = kDefaultBackwardLayout<HeadDim>, int MinBlocksPerSm = 1,
          class Arch = arch::Sm80>
struct BackwardTileConfig {
  static_assert(IsSupportedElement<Element>::value,
                "Element must be __half or __nv_bfloat16");
  static_assert(HeadDim > 0 && HeadDim % kMmaK == 0 && HeadDim <= kMaxHeadDim,
                "HeadDim must be a multiple of 16 up to 256");
  static_assert(Warps >= 1 && Warps <= 16, "Warps must be between 1 and 16");
  static_assert(ColumnSplit >= 1 && Warps % ColumnSplit == 0,
                "ColumnSplit must divide Warps: ColumnSplit warps share each 16 keys");
  static_assert(HeadDim % (16 * ColumnSplit) == 0,
                "HeadDim / ColumnSplit must be a multiple of 16: each warp's dK and dV columns "
                "are loaded in pairs of n8 tiles");
  static_assert(BlockM > 0 && BlockM % kMmaM == 0 && kBackwardRowPadding % BlockM == 0,
                "BlockM must be 16, 32, 64 or 128 (a divisor of the workspace's row padding)");
  static_assert(Warps % (BlockM / kMmaM) == 0,
                "Warps must be a multiple of BlockM / 16: dQ's query rows are shared out to the "
                "warps in m16 tiles");

  using element_type = Element;
  using arch_tag = Arch;
  using layout = TileLayout<Layout, HeadDim>;

  static constexpr ScalarType kScalarType = ElementTraits<Element>::kScalarType;
  static constexpr int kHeadDim = HeadDim;
  static constexpr int kBlockM = BlockM;
  static constexpr int kWarps = Warps;
  static constexpr int kColumnSplit = ColumnSplit;
  static constexpr int kBlockN = kMmaM * Warps / ColumnSplit;
  static constexpr SmemLayout kSmemLayout = Layout;
  static constexpr int kMinBlocksPerSm = MinBlocksPerSm;
  static constexpr int kThreads = Warps * 32;
  static constexpr int kStages = 2;  // Q / dO tiles in flight

  // Per warp: S^T and dP^T are 16 keys x BlockM queries (BlockM / 8 C fragments each); dK and
  // dV are 16 keys x HeadDim / ColumnSplit columns.
  static constexpr int kQueryTiles = BlockM / kMmaN;
  static constexpr int kQuerySlices = BlockM / kMmaK;
  static constexpr int kHeadDimSlices = HeadDim / kMmaK;
  static constexpr int kGradColumns = HeadDim / ColumnSplit;
  static constexpr int kGradTiles = kGradColumns / kMmaN;
  // dQ: BlockM / 16 row tiles shared by the warps; the warps of one row tile split the columns.
  static constexpr int kDqRowTiles = BlockM / kMmaM;
  static constexpr int kDqColumnGroups = Warps / kDqRowTiles;
  static constexpr int kDqColumns = HeadDim / kDqColumnGroups;
  static constexpr int kDqTiles = kDqColumns / kMmaN;
  static constexpr int kKeySlices = kBlockN / kMmaK;
  static_assert(kDqColumns % 16 == 0,
                "HeadDim / (Warps / (BlockM / 16)) must be a multiple of 16: each warp's dQ "
                "columns are loaded in pairs of n8 tiles");

  static constexpr int kAccumulatorRegisters = 4 * (2 * kGradTiles + 2 * kQueryTiles);
  static_assert(kAccumulatorRegisters <= 192,
                "dK and dV (HeadDim / ColumnSplit / 4 each) plus S^T and dP^T (BlockM / 4 each) "
                "exceed 192 fp32 registers per thread: raise ColumnSplit or lower BlockM");

  // Tiles move in 16-byte chunks (sm80/tile_io.cuh's TileCopy reads these names).
  static constexpr int kChunksPerRow = HeadDim / kElementsPerChunk;
  static constexpr int kRowStride = layout::kRowStride;

  // Shared memory: K, V (BlockN rows each, loaded once); Stages x (Q, dO) tiles of BlockM rows;
  // two dS^T (BlockN x BlockM, padded rows: tile t's is read for dQ while tile t + 1's is
  // written); Stages x (LSE * log2(e), D) of BlockM floats.
  static constexpr int kKVTileElements = kBlockN * kRowStride;
  static constexpr int kQTileElements = BlockM * kRowStride;
  static constexpr int kDsRowStride = BlockM + kPaddingElements;
  static constexpr int kDsElements = kBlockN * kDsRowStride;
  // Byte offsets of each part, in that order (each a multiple of 16 bytes), and the total.
  static constexpr std::size_t kKOffset = 0;
  static constexpr std::size_t kVOffset = kKOffset + sizeof(Element) * kKVTileElements;
  static constexpr std::size_t kQOffset = kVOffset + sizeof(Element) * kKVTileElements;
  static constexpr std::size_t kDoOffset =
      kQOffset + sizeof(Element) * static_cast<std::size_t>(kStages) * kQTileElements;
  static constexpr std::size_t kDsOffset =
      kDoOffset + sizeof(Element) * static_cast<std::size_t>(kStages) * kQTileElements;
  static constexpr std::size_t kLseOffset = kDsOffset + sizeof(Element) * 2 * kDsElements;
  static constexpr std::size_t kDeltaOffset = kLseOffset + sizeof(float) * kStages * BlockM;
  static constexpr std::size_t kSmemBytes = kDeltaOffset + sizeof(float) * kStages * BlockM;
  static_assert(kSmemBytes <= 227 * 1024,
                "shared memory exceeds 227 KiB: lower BlockM or Warps, or raise ColumnSplit");
};

template <class T>
struct IsBackwardTileConfig {
  static constexpr bool value = false;
};
template <class E, int D, int M, int W, int C, SmemLayout L, int B, class A>
struct IsBackwardTileConfig<BackwardTileConfig<E, D, M, W, C, L, B, A>> {
  static constexpr bool value = true;
};

// The default backward tile of a kernel head dim (64, 128 or 256; backward(params) runs a head
// dim on the smallest that holds it, zero-filling the rest).
template <class Element, int HeadDim>
struct DefaultBackwardConfig;
template <class Element>
struct DefaultBackwardConfig<Element, 64> {
  using type = BackwardTileConfig<Element, 64, 64, 8>;
};
template <class Element>
struct DefaultBackwardConfig<Element, 128> {
  using type = BackwardTileConfig<Element, 128, 64, 8>;
};
template <class Element>
struct DefaultBackwardConfig<Element, 256> {
  using type = BackwardTileConfig<Element, 256, 32, 8, 2>;
};
template <class Element, int HeadDim>
using DefaultBackwardConfigT = typename DefaultBackwardConfig<Element, HeadDim>::type;

// The backward kernel head dim that serves `head_dim` (0 when none does).
inline constexpr int backward_kernel_head_dim_for(int64_t head_dim) {
  return head_dim <= 0 ? 0 : head_dim <= 64 ? 64 : head_dim <= 128 ? 128 : head_dim <= 256 ? 256 : 0;
}

}  // namespace flashmma
