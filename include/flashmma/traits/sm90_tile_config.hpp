// SPDX-License-Identifier: Apache-2.0
// The knobs of the Hopper (sm_90a) forward kernel, and every constant that follows from them.
//
//   using MyConfig = flashmma::Sm90TileConfig<__nv_bfloat16, /*HeadDim=*/128, /*BlockN=*/128>;
//   flashmma::forward<MyConfig>(params, stream);
//
// (optional after BlockN: Stages = 2, ConsumerWarpgroups = 2, ProducerRegisters = 24,
//  ConsumerRegisters = 240, Schedule = Sm90Schedule::kOverlapSoftmax, PingPong = false,
//  Persistent = false)
//
// A block is one producer warpgroup and ConsumerWarpgroups consumer warpgroups. The producer
// (one elected thread) loads the Q tile once and streams K and V tiles of BlockN keys through a
// ring of Stages slots with TMA; each consumer warpgroup owns 64 query rows (BlockM = 64 x
// consumers), computes S = Q K^T and O += P V with wgmma (P from registers) and runs the online
// softmax on its own rows. setmaxnreg moves registers from the producer (ProducerRegisters per
// thread) to the consumers (ConsumerRegisters).
//
// Operands live in shared memory in the 128-byte-swizzled layouts that TMA writes and wgmma
// reads, cut along the head dim into sub-tiles of 64 elements: the head dim is padded to a
// multiple of 64 in shared memory (TMA fills the padding with zeros), so HeadDim 96 computes as
// 128.
//
// Schedule is the order of a consumer warpgroup's work per K/V tile. kSequential: S = Q K^T, wait,
// softmax, O += P V, wait. kOverlapSoftmax: S_j = Q K_j^T and O += P_(j-1) V_(j-1) are issued
// together, and the softmax of S_j runs while the tensor cores compute P_(j-1) V_(j-1); O is
// rescaled once that product has landed. kOverlapProducts: the two products are issued together
// as in kOverlapSoftmax, but the softmax of S_j starts once both have landed: P V's registers
// (O and P) are then free during the softmax, for a config short of registers (d = 64's walking
// twin spills 16 bytes more under kOverlapSoftmax and runs 2-4% slower; docs/tuning-log.md,
// step 52). Same arithmetic, same results.
//
// PingPong (two consumer warpgroups only): the warpgroups take turns issuing their products,
// through two named barriers, so that one's softmax runs while the other's products run instead
// of both contending for the tensor cores and then both idling them.
//
// Persistent: the kernel loops over work tiles (attention/scheduler.hpp's PersistentScheduler).
// Given a tile counter (params.workspace) and few key tiles, a block per SM walks the tiles,
// its producer loading the next tile's Q (into the second of two Q slots) and first K/V while
// the consumers finish the current one, whose O is stored from a staging tile of its own during
// the next; otherwise one block per tile (launch_plan.hpp's persistent_walk).
#pragma once

#include <cstddef>
#include <cstdint>
#include <type_traits>

#include "flashmma/ptx/sm90/operand_tile.hpp"
#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/ptx/sm90/wgmma_layout.hpp"
#include "flashmma/traits/arch.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/tile_config.hpp"

namespace flashmma {

inline constexpr int kSm90MaxSmemBytes = 227 * 1024;  // per block, opt-in, on sm_90
inline constexpr int kSm90RegistersPerSm = 65536;
inline constexpr int kSm90SubTileElements = 64;       // 128 bytes of 16-bit elements: a swizzle row

enum class Sm90Schedule : int { kSequential, kOverlapSoftmax, kOverlapProducts };

template <class Element, int HeadDim, int BlockN, int Stages = 2, int ConsumerWarpgroups = 2,
          int ProducerRegisters = 24, int ConsumerRegisters = 240,
          Sm90Schedule Schedule = Sm90Schedule::kOverlapSoftmax, bool PingPong = false,
          bool Persistent = false>
struct Sm90TileConfig {
  static_assert(IsSupportedElement<Element>::value,
                "Element must be __half or __nv_bfloat16");
  static_assert(HeadDim > 0 && HeadDim % 8 == 0 && HeadDim <= kMaxHeadDim,
                "HeadDim must be a multiple of 8 from 8 to 256");
  static_assert(BlockN >= 16 && BlockN <= 256 && BlockN % 16 == 0,
                "BlockN must be a multiple of 16 from 16 to 256 (the N of one wgmma, the rows "
                "of one TMA box)");
  static_assert(Stages >= 1 && Stages <= 4, "Stages must be between 1 and 4");
  static_assert(ConsumerWarpgroups >= 1 && ConsumerWarpgroups <= 3,
                "ConsumerWarpgroups must be 1, 2 or 3 (BlockM = 64, 128 or 192 rows)");
  static_assert(ProducerRegisters >= 24 && ProducerRegisters <= 256 && ProducerRegisters % 8 == 0,
                "ProducerRegisters must be a multiple of 8 from 24 to 256 (setmaxnreg)");
  static_assert(ConsumerRegisters >= 24 && ConsumerRegisters <= 256 && ConsumerRegisters % 8 == 0,
                "ConsumerRegisters must be a multiple of 8 from 24 to 256 (setmaxnreg)");
  static_assert(!PingPong || ConsumerWarpgroups == 2,
                "PingPong alternates two consumer warpgroups: set ConsumerWarpgroups to 2");

  using element_type = Element;
  using arch_tag = arch::Sm90a;
  static constexpr ScalarType kScalarType = ElementTraits<Element>::kScalarType;

  static constexpr int kHeadDim = HeadDim;  // the largest runtime head dim the kernel accepts
  static constexpr int kHeadDimPadded =
      (HeadDim + kSm90SubTileElements - 1) / kSm90SubTileElements * kSm90SubTileElements;
  static constexpr int kHeadDimSubTiles = kHeadDimPadded / kSm90SubTileElements;
  static constexpr int kConsumerWarpgroups = ConsumerWarpgroups;
  static constexpr int kRowsPerWarpgroup = ptx::sm90::kWgmmaM;  // 64
  static constexpr int kBlockM = kRowsPerWarpgroup * ConsumerWarpgroups;
  static constexpr int kBlockN = BlockN;
  static constexpr int kStages = Stages;
  static constexpr int kWarpgroupThreads = ptx::sm90::kWarpgroupThreads;
  static constexpr int kThreads = kWarpgroupThreads * (1 + ConsumerWarpgroups);
  static constexpr int kMinBlocksPerSm = 1;  // setmaxnreg needs both launch bounds
  static constexpr Sm90Schedule kSchedule = Schedule;
  // S_j and P_(j-1) V_(j-1) issued together (Sm90Schedule::kOverlapSoftmax or kOverlapProducts),
  // and whether the softmax of S_j runs before the wait for the second (kOverlapSoftmax).
  static constexpr bool kIssuesProductsTogether = Schedule != Sm90Schedule::kSequential;
  static constexpr bool kOverlapSoftmax = Schedule == Sm90Schedule::kOverlapSoftmax;
  static constexpr bool kPingPong = PingPong;
  // One block per SM walking work tiles (PersistentScheduler): the producer loads the next
  // tile's Q and K/V while the consumers finish the current one, whose O goes out through a
  // staging tile of its own.
  static constexpr bool kPersistent = Persistent;
  static constexpr int kProducerRegisters = ProducerRegisters;
  static constexpr int kConsumerRegisters = ConsumerRegisters;
  // What each thread starts with: __launch_bounds__(kThreads, 1) divides the register file,
  // rounded down to a multiple of 8.
  static constexpr int kLaunchRegisters =
      (kSm90RegistersPerSm / kThreads / 8 * 8) < 255 ? kSm90RegistersPerSm / kThreads / 8 * 8 : 255;

  // The operand tiles (ptx/sm90/operand_tile.hpp): Q and K with the head dim contiguous
  // (K-major for both GEMMs' reductions over it), V with the head dim contiguous as the B of
  // P V, whose reduction runs over keys (MN-major).
  using QTile = ptx::sm90::OperandTile<ptx::sm90::Major::kK, ptx::sm90::Swizzle::k128B, kBlockM,
                                       kHeadDimPadded>;
  using KTile = ptx::sm90::OperandTile<ptx::sm90::Major::kK, ptx::sm90::Swizzle::k128B, BlockN,
                                       kHeadDimPadded>;
  using VTile = ptx::sm90::OperandTile<ptx::sm90::Major::kMN, ptx::sm90::Swizzle::k128B,
                                       kHeadDimPadded, BlockN>;
  static constexpr uint32_t kQBytes = QTile::kBytes;
  static constexpr uint32_t kKVTileBytes = KTile::kBytes;
  static_assert(VTile::kBytes == KTile::kBytes, "K and V tiles are the same TMA boxes");

  // Q slots: persistent, two, so that the producer loads the next tile's Q while the consumers
  // still compute the current one (with one slot that load could start only once every
  // consumer was done with the tile's products, and its latency fell between two tiles).
  static constexpr int kQSlots = Persistent ? 2 : 1;

  // Shared memory, each tile on a 1024-byte boundary (the swizzle atom): the Q slots, the K
  // ring, the V ring, O's staging tile (persistent: Q's layout; otherwise O goes through Q),
  // then the barriers; plus 1 KiB to align the dynamic base.
  static constexpr std::size_t kQOffset = 0;
  static constexpr std::size_t kKOffset = kQOffset + std::size_t{kQSlots} * kQBytes;
  static constexpr std::size_t kVOffset = kKOffset + std::size_t{Stages} * kKVTileBytes;
  static constexpr std::size_t kOOffset = kVOffset + std::size_t{Stages} * kKVTileBytes;
  static constexpr std::size_t kBarrierOffset = kOOffset + (Persistent ? kQBytes : 0);
  // Q full per Q slot (and, persistent, Q empty and the 8-byte slot of the tile index per Q
  // slot); K/V full and empty per stage.
  static constexpr int kBarriers = kQSlots * (Persistent ? 3 : 1) + 4 * Stages;
  static constexpr std::size_t kSmemBytes =
      ptx::sm90::kSwizzleAlignment + kBarrierOffset + sizeof(uint64_t) * kBarriers;

  // Per consumer thread: S (BlockN / 2 fp32), P (BlockN / 4 packed pairs), O (padded head dim / 2).
  static constexpr int kAccumulatorRegisters = BlockN / 2 + BlockN / 4 + kHeadDimPadded / 2;

  static_assert(kSmemBytes <= kSm90MaxSmemBytes,
                "shared memory (Q + 2 * Stages * BlockN rows of the head dim padded to 64; when "
                "Persistent, a second Q slot and O's staging tile; plus barriers) exceeds 227 "
                "KiB: lower BlockN or Stages");
  static_assert(kWarpgroupThreads * (ProducerRegisters + ConsumerWarpgroups * ConsumerRegisters) <=
                    kSm90RegistersPerSm,
                "128 * (ProducerRegisters + ConsumerWarpgroups * ConsumerRegisters) exceeds the "
                "65536 registers of an SM: lower ConsumerRegisters or ProducerRegisters");
  static_assert(ProducerRegisters <= kLaunchRegisters && ConsumerRegisters >= kLaunchRegisters,
                "setmaxnreg can only lower the producer's and raise the consumers' registers from "
                "65536 / threads (kLaunchRegisters)");
  static_assert(kAccumulatorRegisters + 32 <= ConsumerRegisters,
                "S, P and O (BlockN / 2 + BlockN / 4 + padded HeadDim / 2 registers) leave fewer "
                "than 32 of ConsumerRegisters for the rest: lower BlockN");
};

// True for any instantiation of Sm90TileConfig.
template <class T>
struct IsSm90TileConfig : std::false_type {};
template <class E, int D, int N, int S, int C, int P, int R, Sm90Schedule K, bool G, bool T>
struct IsSm90TileConfig<Sm90TileConfig<E, D, N, S, C, P, R, K, G, T>> : std::true_type {};

// The longest key range, in key tiles of Config::kBlockN keys, over which a persistent Config's
// blocks walk the tiles (launch_plan.hpp's persistent_walk), without a mask (kKeyTiles) and with
// one (kMaskedKeyTiles); longer ranges run one block per tile. A walking block hides a tile's
// start and end (Q and the first K/V loaded during the previous tile, O stored during the next)
// behind its own products, which matters less as a tile's products grow. These defaults are
// the d = 128 default's twin's, measured (bf16, B * N = 16k, H * d = 2048; docs/tuning-log.md,
// steps 51 and 53): walking against one block per tile, +2-5.5% at 32 causal key tiles (H200)
// and +3-7% (H100), 0-1% at 64 (H200), -1-2% at 128 (H200). A config of one's own may specialize
// this trait with its own measurements (traits/sm90_default_configs.hpp does for d = 64's twin).
template <class Config>
struct Sm90WalkLimits {
  static constexpr int64_t kKeyTiles = 32;
  static constexpr int64_t kMaskedKeyTiles = 32;
};

// Every config forward<Config> accepts: the portable TileConfig and the Hopper one.
template <class T>
struct IsForwardConfig
    : std::integral_constant<bool, IsTileConfig<T>::value || IsSm90TileConfig<T>::value> {};

}  // namespace flashmma
