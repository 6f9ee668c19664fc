// SPDX-License-Identifier: Apache-2.0
// The knobs of the Hopper (sm_90a) backward kernel, and every constant that follows from them.
//
//   using MyBackward = flashmma::Sm90BackwardTileConfig<__nv_bfloat16, /*HeadDim=*/128,
//                                                       /*BlockM=*/64>;
//   flashmma::backward<MyBackward>(params, stream);
//
// (optional after BlockM: Stages = 2 up to 128 head-dim columns and 1 above, ProducerRegisters =
// 24, ConsumerRegisters = 240)
//
// A block owns BlockN keys of one (batch, K/V head) and walks the query tiles of BlockM rows that
// see them, over every query head of the head's group (as the portable backward does). One
// producer warpgroup (one elected thread) loads K and V once and streams Q, dO and their rows'
// LSE and D through a ring of Stages slots with TMA; two consumer warpgroups share the work in
// one of two ways, fixed by the head dim:
//
// Up to 128 (padded) head-dim columns, BlockN = 128: each consumer owns 64 keys.
//   S^T  = K_c Q^T,  dP^T = V_c dO^T    wgmma SS (64 keys x BlockM queries), both K-major
//   P^T, dS^T                            attention/backward_scores.cuh, in registers
//   dV  += P^T dO,   dK  += dS^T Q      wgmma RS: P^T and dS^T straight from the accumulators
//                                        (the RS fragment identity), Q and dO MN-major
//   dS^T -> shared memory, both warpgroups meet
//   dQ   = dS K                          wgmma SS, A = dS^T read MN-major, B = K MN-major; the
//                                        two warpgroups split it (BlockM = 128: 64 query rows
//                                        each; BlockM = 64: half the head dim each) and add it to
//                                        the fp32 accumulator with vector reductions
//
// Above 128 (kSplitsHeadDim; BlockM = 64), BlockN = 64: dK and dV of 64 keys at d = 256 would
// take all of a thread's registers, so the consumers share the keys and split the head dim.
//   S^T, dP^T for half of the queries each (64 keys x 32 queries), P^T and dS^T in registers,
//   then both to shared memory; both warpgroups meet
//   dV += P^T dO, dK += dS^T Q, dQ = dS K for half of the head-dim columns each, all three wgmma
//   SS from shared memory (P^T and dS^T K-major as A of dV and dK, dS^T MN-major as A of dQ)
//   dQ -> shared memory (a staging tile), then added to the fp32 accumulator with one bulk
//   reduction per row (kStagesDq; sm90/dq_staging.cuh)
//
// Every tile keeps one shared-memory image for both of its roles: Q (and dO) is the K-major B of
// S^T (N = queries) and the MN-major B of dK (N = head dim), K the K-major A of S^T and the
// MN-major B of dQ, dS^T the K-major A of dK and the MN-major A of dQ; with the 128B swizzle those
// layouts are the same bytes (operand_tile.hpp). The head dim is padded to a multiple of 64 in
// shared memory, as in the forward.
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
#include "flashmma/traits/arch.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

// Stages' default: 2, and 1 above 128 head-dim columns (K, V, two dS^T, two P^T and dQ's
// staging tile leave room for one).
template <class Element, int HeadDim, int BlockM, int Stages = (HeadDim > 128 ? 1 : 2),
          int ProducerRegisters = 24, int ConsumerRegisters = 240>
struct Sm90BackwardTileConfig {
  static_assert(IsSupportedElement<Element>::value,
                "Element must be __half or __nv_bfloat16");
  static_assert(HeadDim > 0 && HeadDim % 8 == 0 && HeadDim <= kMaxHeadDim,
                "HeadDim must be a multiple of 8 from 8 to 256");
  static_assert(BlockM == 64 || BlockM == 128,
                "BlockM must be 64 or 128 (the N of S^T's wgmma, the M of dQ's one or two)");
  static_assert(Stages >= 1 && Stages <= 4, "Stages must be between 1 and 4");
  static_assert(ProducerRegisters >= 24 && ProducerRegisters <= 256 && ProducerRegisters % 8 == 0,
                "ProducerRegisters must be a multiple of 8 from 24 to 256 (setmaxnreg)");
  static_assert(ConsumerRegisters >= 24 && ConsumerRegisters <= 256 && ConsumerRegisters % 8 == 0,
                "ConsumerRegisters must be a multiple of 8 from 24 to 256 (setmaxnreg)");

  using element_type = Element;
  using arch_tag = arch::Sm90a;
  static constexpr ScalarType kScalarType = ElementTraits<Element>::kScalarType;

  static constexpr int kHeadDim = HeadDim;  // the largest runtime head dim the kernel accepts
  static constexpr int kHeadDimPadded =
      (HeadDim + kSm90SubTileElements - 1) / kSm90SubTileElements * kSm90SubTileElements;
  static constexpr int kHeadDimSubTiles = kHeadDimPadded / kSm90SubTileElements;
  static constexpr int kConsumerWarpgroups = 2;
  // Above 128 columns the consumers share the block's keys and split the head dim (see above).
  static constexpr bool kSplitsHeadDim = kHeadDimPadded > 128;
  static_assert(!kSplitsHeadDim || (BlockM == 64 && kHeadDimPadded % 128 == 0),
                "above 128 head-dim columns the consumer warpgroups split the head dim in whole "
                "64-column sub-tiles, with BlockM = 64: HeadDim must be 193-256 (padded to 256) "
                "and BlockM 64");
  static constexpr int kKeysPerWarpgroup = ptx::sm90::kWgmmaM;  // 64: the M of S^T's wgmma
  static constexpr int kBlockN = kSplitsHeadDim ? kKeysPerWarpgroup
                                                : kKeysPerWarpgroup * kConsumerWarpgroups;
  static constexpr int kBlockM = BlockM;
  // Each consumer's share: S^T's queries (its N), dK's and dV's head-dim columns.
  static constexpr int kScoreQueries = kSplitsHeadDim ? BlockM / kConsumerWarpgroups : BlockM;
  static constexpr int kGradColumns =
      kSplitsHeadDim ? kHeadDimPadded / kConsumerWarpgroups : kHeadDimPadded;
  static constexpr int kStages = Stages;
  static constexpr int kWarpgroupThreads = ptx::sm90::kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads * (1 + kConsumerWarpgroups);
  static constexpr int kMinBlocksPerSm = 1;
  static constexpr int kProducerRegisters = ProducerRegisters;
  static constexpr int kConsumerRegisters = ConsumerRegisters;
  static constexpr int kLaunchRegisters =
      (kSm90RegistersPerSm / kThreads / 8 * 8) < 255 ? kSm90RegistersPerSm / kThreads / 8 * 8 : 255;

  // dQ = dS K, shared by the two consumer warpgroups: by query rows when there are two wgmma M
  // tiles of them, else by head-dim columns (whole 64-column sub-tiles of K).
  static constexpr bool kDqSplitsRows = BlockM == 2 * ptx::sm90::kWgmmaM;
  static constexpr int kDqColumns = kDqSplitsRows ? kHeadDimPadded : kHeadDimPadded / 2;
  static_assert(kDqSplitsRows || kDqColumns % kSm90SubTileElements == 0,
                "BlockM = 64 gives each consumer warpgroup half of dQ's head-dim columns, whole "
                "sub-tiles of 64: HeadDim must be above 64 (or BlockM 128)");

  // The operand tiles (ptx/sm90/operand_tile.hpp), each with the view that its second role
  // reads (the same bytes).
  using QTile = ptx::sm90::OperandTile<ptx::sm90::Major::kK, ptx::sm90::Swizzle::k128B, BlockM,
                                       kHeadDimPadded>;
  using QTileByColumns = ptx::sm90::OperandTile<ptx::sm90::Major::kMN, ptx::sm90::Swizzle::k128B,
                                                kHeadDimPadded, BlockM>;
  using KTile = ptx::sm90::OperandTile<ptx::sm90::Major::kK, ptx::sm90::Swizzle::k128B, kBlockN,
                                       kHeadDimPadded>;
  using KTileByColumns = ptx::sm90::OperandTile<ptx::sm90::Major::kMN,
                                                ptx::sm90::Swizzle::k128B, kHeadDimPadded, kBlockN>;
  // dS^T (and, when the head dim is split, P^T): written by keys (rows) and query pairs; read as
  // dQ's A with the queries contiguous (DsTile) and as dK's and dV's A (ScoreTile, K-major).
  using DsTile = ptx::sm90::OperandTile<ptx::sm90::Major::kMN, ptx::sm90::Swizzle::k128B, BlockM,
                                        kBlockN>;
  using ScoreTile = ptx::sm90::OperandTile<ptx::sm90::Major::kK, ptx::sm90::Swizzle::k128B,
                                           kBlockN, BlockM>;
  static_assert(DsTile::kBytes == ScoreTile::kBytes, "dS^T's two views must be the same bytes");
  static constexpr uint32_t kQBytes = QTile::kBytes;   // and dO
  static constexpr uint32_t kKVBytes = KTile::kBytes;  // K, and V
  static constexpr uint32_t kDsBytes = DsTile::kBytes;
  static constexpr uint32_t kRowValueBytes = sizeof(float) * BlockM;  // LSE or D of a tile

  // How dQ reaches the fp32 accumulator: through a staging tile in shared memory and a bulk
  // reduction per row above 128 head-dim columns, else with each thread's vector reductions. On
  // the H200 (tuning log step 43) the staging tile took d = 256 from 273-286 to 299-310 TFLOP/s
  // and cost d = 64 and 128 4-15% (its stores and the warpgroup's meeting, where the sums are
  // half the bytes per FLOP).
  static constexpr bool kStagesDq = kSplitsHeadDim;
  // The staging tile: BlockM rows of the padded head dim in fp32, rows kDqStagePitch floats
  // apart (4 more than the columns: a warp's fragment stores then take the fewest wavefronts).
  static constexpr int kDqStagePitch = kHeadDimPadded + 4;
  static constexpr uint32_t kDqStageBytes =
      kStagesDq ? sizeof(float) * BlockM * kDqStagePitch : 0;

  // Shared memory, the tiles on 1024-byte boundaries: K, V, Stages x (Q, dO), two dS^T (tile t's
  // is read for dQ while t + 1's is written) and, when the head dim is split, two P^T and dQ's
  // staging tile, Stages x (LSE, D), the barriers; plus 1 KiB to align the dynamic base.
  static constexpr std::size_t kKOffset = 0;
  static constexpr std::size_t kVOffset = kKOffset + kKVBytes;
  static constexpr std::size_t kQOffset = kVOffset + kKVBytes;
  static constexpr std::size_t kDoOffset = kQOffset + std::size_t{Stages} * kQBytes;
  static constexpr std::size_t kDsOffset = kDoOffset + std::size_t{Stages} * kQBytes;
  static constexpr std::size_t kPOffset = kDsOffset + 2 * std::size_t{kDsBytes};
  static constexpr std::size_t kDqStageOffset =
      kPOffset + (kSplitsHeadDim ? 2 * std::size_t{kDsBytes} : 0);
  static constexpr std::size_t kLseOffset = kDqStageOffset + kDqStageBytes;
  static constexpr std::size_t kDeltaOffset = kLseOffset + std::size_t{Stages} * kRowValueBytes;
  static constexpr std::size_t kBarrierOffset =
      kDeltaOffset + std::size_t{Stages} * kRowValueBytes;
  static constexpr int kBarriers = 1 + 2 * Stages;  // K/V full; Q/dO full and empty per stage
  static constexpr std::size_t kSmemBytes =
      ptx::sm90::kSwizzleAlignment + kBarrierOffset + sizeof(uint64_t) * kBarriers;

  // Per consumer thread: dK and dV (kGradColumns / 2 each), S^T and dP^T (kScoreQueries / 2
  // each).
  static constexpr int kAccumulatorRegisters = kGradColumns + kScoreQueries;

  static_assert(kSmemBytes <= kSm90MaxSmemBytes,
                "shared memory (K, V, Stages x (Q, dO), two dS^T; two P^T and dQ's staging tile "
                "above 128 columns) exceeds 227 KiB: lower Stages or BlockM");
  static_assert(kWarpgroupThreads * (ProducerRegisters + kConsumerWarpgroups * ConsumerRegisters) <=
                    kSm90RegistersPerSm,
                "128 * (ProducerRegisters + 2 * ConsumerRegisters) exceeds the 65536 registers of "
                "an SM: lower ConsumerRegisters or ProducerRegisters");
  static_assert(ProducerRegisters <= kLaunchRegisters && ConsumerRegisters >= kLaunchRegisters,
                "setmaxnreg can only lower the producer's and raise the consumers' registers from "
                "65536 / threads (kLaunchRegisters)");
  static_assert(kAccumulatorRegisters + 32 <= ConsumerRegisters,
                "dK, dV, S^T and dP^T (kGradColumns + kScoreQueries registers) leave fewer than 32 "
                "of ConsumerRegisters for the rest: lower BlockM");
};

template <class T>
struct IsSm90BackwardTileConfig : std::false_type {};
template <class E, int D, int M, int S, int P, int R>
struct IsSm90BackwardTileConfig<Sm90BackwardTileConfig<E, D, M, S, P, R>> : std::true_type {};

// The Hopper backward default of a kernel head dim (64, 128 or 256; backward(params) runs a head
// dim on the smallest that holds it, TMA zero-filling the rest).
template <class Element, int HeadDim>
struct Sm90DefaultBackwardConfig;
template <class Element>
struct Sm90DefaultBackwardConfig<Element, 64> {
  using type = Sm90BackwardTileConfig<Element, 64, /*BlockM=*/128>;
};
template <class Element>
struct Sm90DefaultBackwardConfig<Element, 128> {
  using type = Sm90BackwardTileConfig<Element, 128, /*BlockM=*/64>;
};
template <class Element>
struct Sm90DefaultBackwardConfig<Element, 256> {
  using type = Sm90BackwardTileConfig<Element, 256, /*BlockM=*/64>;
};
template <class Element, int HeadDim>
using Sm90DefaultBackwardConfigT = typename Sm90DefaultBackwardConfig<Element, HeadDim>::type;

}  // namespace flashmma
