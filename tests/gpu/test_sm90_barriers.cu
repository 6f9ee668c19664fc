// SPDX-License-Identifier: Apache-2.0
// The synchronization primitives of the warp-specialized kernel:
//   - mbarrier phases: a fresh barrier passes parity 1 and not 0, each completed phase flips
//     which parity passes, and a two-stage producer/consumer ring reuses its barriers over
//     hundreds of phases (with random delays) without losing or repeating a stage;
//   - elect.sync picks exactly one lane of the member mask, the same one every time;
//   - setmaxnreg moves registers from a producer warpgroup to two consumer warpgroups, which
//     then take turns strictly through named barriers (bar.sync / bar.arrive).
// Every wait is bounded (wait_or_trap), so a broken phase fails the test instead of hanging it.
#include <cuda_runtime.h>

#include <cstdint>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/sm90/elect.cuh"
#include "flashmma/ptx/sm90/mbarrier.cuh"
#include "flashmma/ptx/sm90/named_barrier.cuh"
#include "flashmma/ptx/sm90/setmaxnreg.cuh"
#include "test_sm90_support.cuh"

namespace {

namespace sm90 = flashmma::ptx::sm90;
using flashmma::test::DeviceBuffer;
using namespace flashmma::test::sm90_support;

constexpr int kWarpSize = 32;

// ---- mbarrier parity ----------------------------------------------------------------------

// What try_wait answers for parities 0 and 1: fresh, after one completed phase, after two.
constexpr int kParityProbes = 6;

__global__ void mbarrier_parity_kernel(int* passed) {
  __shared__ uint64_t barrier;
  if (threadIdx.x != 0) return;
  sm90::mbarrier_init(&barrier, 1);
  sm90::fence_mbarrier_init();
  passed[0] = sm90::mbarrier_try_wait_parity(&barrier, 0);
  passed[1] = sm90::mbarrier_try_wait_parity(&barrier, 1);
  sm90::mbarrier_arrive(&barrier);  // the one arrival completes phase 0
  passed[2] = sm90::mbarrier_try_wait_parity(&barrier, 0);
  passed[3] = sm90::mbarrier_try_wait_parity(&barrier, 1);
  sm90::mbarrier_arrive(&barrier);  // completes phase 1
  passed[4] = sm90::mbarrier_try_wait_parity(&barrier, 0);
  passed[5] = sm90::mbarrier_try_wait_parity(&barrier, 1);
}

// ---- mbarrier producer / consumer ring ------------------------------------------------------

constexpr int kStages = 2;
constexpr int kRounds = 500;

// Warp 0 lane 0 produces the values 0, 1, 2, ... into a ring of kStages slots; all 32 lanes of
// warp 1 consume them. full[s] (1 arrival: the producer) says slot s holds a new value;
// empty[s] (1 arrival: consumer lane 0, after __syncwarp, since an arrive releases only its own
// thread's reads) says the consumers are done with it. The producer starts at parity 1 (a fresh
// barrier's "previous phase" counts as completed: every slot starts empty), the consumers at 0.
__global__ void mbarrier_ring_kernel(int* wrong_values, uint64_t seed) {
  __shared__ uint64_t full[kStages];
  __shared__ uint64_t empty[kStages];
  __shared__ int slots[kStages];
  const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
  const int lane = static_cast<int>(threadIdx.x) % kWarpSize;
  if (threadIdx.x == 0) {
    for (int stage = 0; stage < kStages; ++stage) {
      sm90::mbarrier_init(&full[stage], 1);
      sm90::mbarrier_init(&empty[stage], 1);
    }
    sm90::fence_mbarrier_init();
  }
  __syncthreads();

  int stage = 0;
  if (warp == 0) {
    if (lane != 0) return;
    uint32_t parity = 1;
    for (int round = 0; round < kRounds; ++round) {
      wait_or_trap(&empty[stage], parity, "ring: slot empty");
      if (flashmma::test::mix64(seed ^ static_cast<uint64_t>(round)) % 4 == 0) __nanosleep(500);
      slots[stage] = round;
      sm90::mbarrier_arrive(&full[stage]);
      if (++stage == kStages) {
        stage = 0;
        parity ^= 1;
      }
    }
  } else {
    uint32_t parity = 0;
    int wrong = 0;
    for (int round = 0; round < kRounds; ++round) {
      wait_or_trap(&full[stage], parity, "ring: slot full");
      if (slots[stage] != round) ++wrong;
      if (flashmma::test::mix64(~seed ^ static_cast<uint64_t>(round)) % 4 == 0) __nanosleep(700);
      __syncwarp();
      if (lane == 0) sm90::mbarrier_arrive(&empty[stage]);
      if (++stage == kStages) {
        stage = 0;
        parity ^= 1;
      }
    }
    atomicAdd(wrong_values, wrong);
  }
}

// ---- elect.sync -----------------------------------------------------------------------------

// elected[call][thread]: 1 where elect_one_sync returned true. Call 0: whole warps; calls 1 and
// 2: only the lanes of kPartialMask, twice (the same lane must win both times).
constexpr uint32_t kPartialMask = 0x5A5A0F00u;
constexpr int kElectWarps = 4;
constexpr int kElectCalls = 3;

__global__ void elect_kernel(int* elected) {
  const int thread = static_cast<int>(threadIdx.x);
  const int threads = static_cast<int>(blockDim.x);
  const int lane = thread % kWarpSize;
  elected[thread] = sm90::elect_one_sync() ? 1 : 0;
  int first = 0;
  int second = 0;
  if ((kPartialMask >> lane) & 1u) {
    first = sm90::elect_one_sync(kPartialMask) ? 1 : 0;
    second = sm90::elect_one_sync(kPartialMask) ? 1 : 0;
  }
  elected[threads + thread] = first;
  elected[2 * threads + thread] = second;
}

// ---- setmaxnreg and named-barrier ping-pong ---------------------------------------------------

constexpr int kPingPongThreads = 3 * kWarpgroupThreads;
constexpr int kPingPongRounds = 200;
constexpr int kLogLength = 2 * kPingPongRounds;

// The barrier ids of the kernel (0 is __syncthreads').
enum class PingPongBarrier : uint32_t {
  kFirstConsumerTurn = 1,
  kSecondConsumerTurn = 2,
  kDone = 3,
};

__device__ uint32_t id(PingPongBarrier barrier) { return static_cast<uint32_t>(barrier); }

// Warpgroup 0 gives registers away (24) and exits; warpgroups 1 and 2 take them (240) and take
// turns: warpgroup g waits for its turn (bar.sync on its id, 256 threads: its own 128 plus the
// other's 128 arrivals), appends g to the log, and hands the turn over (bar.arrive on the other's
// id). Warpgroup 2 arrives on warpgroup 1's id first, so warpgroup 1 starts.
__global__ void __launch_bounds__(kPingPongThreads, 1) ping_pong_kernel(int* log_out) {
  __shared__ int log[kLogLength];
  __shared__ int length;
  const int warpgroup = static_cast<int>(threadIdx.x) / kWarpgroupThreads;
  const bool leader = threadIdx.x % kWarpgroupThreads == 0;
  if (threadIdx.x == 0) length = 0;
  __syncthreads();  // the last block-wide barrier: warpgroup 0 leaves next

  if (warpgroup == 0) {
    sm90::setmaxnreg_dec<24>();
    return;
  }
  sm90::setmaxnreg_inc<240>();
  constexpr uint32_t kPairThreads = 2 * kWarpgroupThreads;
  const PingPongBarrier own = warpgroup == 1 ? PingPongBarrier::kFirstConsumerTurn
                                             : PingPongBarrier::kSecondConsumerTurn;
  const PingPongBarrier other = warpgroup == 1 ? PingPongBarrier::kSecondConsumerTurn
                                               : PingPongBarrier::kFirstConsumerTurn;
  if (warpgroup == 2) sm90::named_barrier_arrive(id(other), kPairThreads);
  for (int round = 0; round < kPingPongRounds; ++round) {
    sm90::named_barrier_sync(id(own), kPairThreads);
    if (leader) log[length++] = warpgroup;
    // The last hand-over of warpgroup 2 would have no taker.
    if (!(warpgroup == 2 && round == kPingPongRounds - 1)) {
      sm90::named_barrier_arrive(id(other), kPairThreads);
    }
  }
  sm90::named_barrier_sync(id(PingPongBarrier::kDone), kPairThreads);
  for (int i = static_cast<int>(threadIdx.x) - kWarpgroupThreads; i < kLogLength;
       i += static_cast<int>(kPairThreads)) {
    log_out[i] = i < length ? log[i] : -1;
  }
}

}  // namespace

TEST_CASE("mbarrier parity: fresh barriers pass parity 1, each phase flips it",
          "[gpu][sm90][mbarrier]") {
  DeviceBuffer<int> passed(kParityProbes);
  mbarrier_parity_kernel<<<1, kWarpSize>>>(passed.get());
  sync_and_check();
  const std::vector<int> got = passed.to_host();
  CHECK(got[0] == 0);  // phase 0 is running
  CHECK(got[1] == 1);  // the phase "before" it counts as completed
  CHECK(got[2] == 1);  // phase 0 completed
  CHECK(got[3] == 0);  // phase 1 is running
  CHECK(got[4] == 0);  // phase 2 is running
  CHECK(got[5] == 1);  // phase 1 completed
}

TEST_CASE("mbarrier ring: a producer and a consumer warp reuse two stages for 500 rounds",
          "[gpu][sm90][mbarrier]") {
  for (uint64_t seed : {1ull, 2ull, 3ull}) {
    DeviceBuffer<int> wrong(1);
    FLASHMMA_CUDA_CHECK(cudaMemset(wrong.get(), 0, wrong.bytes()));
    mbarrier_ring_kernel<<<1, 2 * kWarpSize>>>(wrong.get(), seed);
    sync_and_check();
    INFO("seed " << seed);
    REQUIRE(wrong.to_host()[0] == 0);
  }
}

TEST_CASE("elect.sync elects exactly one lane of the member mask, the same each time",
          "[gpu][sm90][elect]") {
  constexpr int kThreads = kElectWarps * kWarpSize;
  DeviceBuffer<int> elected(kElectCalls * kThreads);
  elect_kernel<<<1, kThreads>>>(elected.get());
  sync_and_check();
  const std::vector<int> got = elected.to_host();
  for (int warp = 0; warp < kElectWarps; ++warp) {
    for (int call = 0; call < kElectCalls; ++call) {
      const uint32_t mask = call == 0 ? 0xFFFFFFFFu : kPartialMask;
      int winners = 0;
      int winner = -1;
      for (int lane = 0; lane < kWarpSize; ++lane) {
        if (got[call * kThreads + warp * kWarpSize + lane] != 0) {
          ++winners;
          winner = lane;
        }
      }
      INFO("warp " << warp << ", call " << call << ": elected lane " << winner);
      REQUIRE(winners == 1);
      REQUIRE(((mask >> winner) & 1u) == 1u);
    }
    for (int lane = 0; lane < kWarpSize; ++lane) {
      const int at = warp * kWarpSize + lane;
      REQUIRE(got[kThreads + at] == got[2 * kThreads + at]);
    }
  }
}

TEST_CASE("setmaxnreg and named barriers: two consumer warpgroups alternate strictly",
          "[gpu][sm90][named_barrier][setmaxnreg]") {
  DeviceBuffer<int> log(kLogLength);
  ping_pong_kernel<<<1, kPingPongThreads>>>(log.get());
  sync_and_check();
  const std::vector<int> got = log.to_host();
  int out_of_turn = 0;
  for (int i = 0; i < kLogLength; ++i) {
    const int expected = 1 + i % 2;
    if (got[i] != expected && ++out_of_turn <= 8) {
      UNSCOPED_INFO("turn " << i << ": warpgroup " << got[i] << ", expected " << expected);
    }
  }
  REQUIRE(out_of_turn == 0);
}
