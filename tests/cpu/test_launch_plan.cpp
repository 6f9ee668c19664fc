// SPDX-License-Identifier: Apache-2.0
// The launch plan (launch_plan.hpp) without a GPU: how many blocks of a config an SM holds, and
// the split count and workspace a call gets, for a described H200 and an A10-class GPU.
#include "support/catch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "flashmma/launch_plan.hpp"

namespace {

using flashmma::DeviceInfo;
using flashmma::ForwardParams;

DeviceInfo h200() {
  DeviceInfo d;
  d.compute_capability = 90;
  d.smem_per_block_optin = 232448;
  d.smem_per_sm = 233472;
  d.l2_cache_bytes = 60 * 1024 * 1024;
  d.sm_count = 132;
  d.max_threads_per_sm = 2048;
  return d;
}

ForwardParams decode_params(int64_t batch, int64_t seqlen_k) {
  ForwardParams p;
  static_cast<flashmma::ProblemShape&>(p) =
      flashmma::make_problem_shape(batch, 1, seqlen_k, 32, 8, 128);
  p.dtype = flashmma::ScalarType::kBFloat16;
  return p;
}

template <class Config>
int plan(const ForwardParams& p, const DeviceInfo& device, bool assume_workspace = true) {
  int splits = 0;
  REQUIRE(flashmma::detail::plan_splits<Config>(
              p, device, flashmma::detail::scheduler_inputs<Config>(p, device), assume_workspace,
              splits)
              .ok());
  return splits;
}

// The kernel forward(params) picks for a bf16, d = 128 call (launch_plan.hpp's default_route).
flashmma::detail::DefaultRoute bf16_d128_route(const ForwardParams& p, const DeviceInfo& device,
                                               bool sm90a_code) {
  flashmma::detail::DefaultRoute route = flashmma::detail::DefaultRoute::kPortable;
  flashmma::detail::SplitPlan plan;
  REQUIRE(flashmma::detail::default_route<__nv_bfloat16, 128>(
              p, device, [&] { return sm90a_code; }, false, route, plan)
              .ok());
  return route;
}

}  // namespace

TEST_CASE("blocks_per_sm: the least of shared memory, threads and registers", "[launch_plan]") {
  const DeviceInfo device = h200();
  // 4 warps, 64 KB: two blocks by registers (255 of 65536 / 128 threads), three by shared memory.
  using flashmma::SmemLayout;
  using Split128 = flashmma::TileConfig<__half, 128, 128, 64, 4, 1, SmemLayout::kXorSwizzle>;
  CHECK(flashmma::detail::blocks_per_sm<Split128>(device) == 2);
  // 8 warps, 128 KB: one.
  using Ring128 = flashmma::TileConfig<__half, 128, 128, 64, 8, 2, SmemLayout::kXorSwizzle>;
  CHECK(flashmma::detail::blocks_per_sm<Ring128>(device) == 1);
  // MinBlocksPerSm = 3 on 4 warps of 20 KB: three by registers (170 -> 168 each).
  using Small = flashmma::TileConfig<__half, 32, 128, 64, 4, 1, SmemLayout::kPaddedRows, 3>;
  CHECK(flashmma::detail::blocks_per_sm<Small>(device) == 3);
  // A GPU with 100 KB per SM and 1536 threads holds one 64 KB block.
  DeviceInfo small_gpu = device;
  small_gpu.smem_per_sm = 102400;
  small_gpu.max_threads_per_sm = 1536;
  CHECK(flashmma::detail::blocks_per_sm<Split128>(small_gpu) == 1);
}

TEST_CASE("plan_splits: automatic, explicit, off, and not on the sm_90a kernel", "[launch_plan]") {
  using Config = flashmma::DefaultConfigT<__nv_bfloat16, 128>;  // 8 warps x 128 rows, 1 per SM
  const DeviceInfo device = h200();
  // 1 x 32 heads x one query over 128k keys: 32 blocks on 132 SMs, 4 splits fill 128 of them.
  CHECK(plan<Config>(decode_params(1, 131072), device) == 4);
  // Without a workspace, automatic means no split.
  CHECK(plan<Config>(decode_params(1, 131072), device, /*assume_workspace=*/false) == 1);
  // 32 x 32 = 1024 blocks already: no split.
  CHECK(plan<Config>(decode_params(32, 4096), device) == 1);
  ForwardParams p = decode_params(1, 131072);
  p.num_splits = 1;
  CHECK(plan<Config>(p, device) == 1);
  p.num_splits = 16;
  CHECK(plan<Config>(p, device) == 16);
  // An explicit count is capped at one split per key tile (100 keys: 2 tiles of 64).
  ForwardParams short_keys = decode_params(1, 100);
  short_keys.num_splits = 16;
  CHECK(plan<Config>(short_keys, device) == 2);

  using Hopper = flashmma::Sm90TileConfig<__nv_bfloat16, 128, 128>;
  CHECK(plan<Hopper>(decode_params(1, 131072), device) == 1);
  int splits = 0;
  p.num_splits = 4;
  const flashmma::Status refused = flashmma::detail::plan_splits<Hopper>(
      p, device, flashmma::detail::scheduler_inputs<Hopper>(p, device), true, splits);
  CHECK(refused.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(refused.message().find("not available on the sm_90a kernel") != std::string::npos);
}

TEST_CASE("check_workspace names what a split call needs", "[launch_plan]") {
  ForwardParams p = decode_params(2, 4096);
  const std::size_t needed = flashmma::detail::split_layout(p, 8).bytes;
  CHECK(needed > 0);
  flashmma::Status s = flashmma::detail::check_workspace(p, 8);
  CHECK(s.message().find("num_splits = 8 needs a workspace of " + std::to_string(needed) +
                         " bytes") != std::string::npos);
  CHECK(s.message().find("got none") != std::string::npos);
  alignas(256) static unsigned char fake[256];
  p.workspace = fake;
  p.workspace_bytes = needed;
  CHECK(flashmma::detail::check_workspace(p, 8).ok());
  p.workspace_bytes = needed - 1;
  CHECK(flashmma::detail::check_workspace(p, 8).message().find(
            "got " + std::to_string(needed - 1) + " bytes") != std::string::npos);
}

TEST_CASE("packed GQA: one query over GQA heads packs a group's heads into one work tile",
          "[launch_plan]") {
  using Split = flashmma::SplitKernelConfigT<__nv_bfloat16, 128>;  // 64 rows
  const DeviceInfo device = h200();
  // 1 x 32 query heads over 8 K/V heads, one query: packed, 4 rows per tile, 8 heads on the grid.
  ForwardParams p = decode_params(1, 131072);
  CHECK(flashmma::detail::packs_gqa(p));
  CHECK(flashmma::detail::split_kernel_rows(p) == 4);
  flashmma::SchedulerInputs in = flashmma::detail::split_scheduler_inputs<Split>(p, device);
  CHECK(in.heads == 8);
  CHECK(in.m_blocks == 1);
  // 8 work tiles on 132 SMs x 2 blocks: split to fill them (>= 85% of the best wave).
  flashmma::detail::SplitPlan plan;
  REQUIRE(flashmma::detail::plan_split_kernel<Split>(p, device, true, false, plan).ok());
  CHECK(plan.on_split_kernel);
  CHECK(plan.splits > 16);
  CHECK(plan.splits <= 33);

  // Several queries, or one K/V head per query head: not packed.
  ForwardParams two_queries = p;
  static_cast<flashmma::ProblemShape&>(two_queries) =
      flashmma::make_problem_shape(1, 2, 131072, 32, 8, 128);
  CHECK_FALSE(flashmma::detail::packs_gqa(two_queries));
  ForwardParams mha = p;
  static_cast<flashmma::ProblemShape&>(mha) = flashmma::make_problem_shape(1, 1, 4096, 32, 32, 128);
  CHECK_FALSE(flashmma::detail::packs_gqa(mha));
  in = flashmma::detail::split_scheduler_inputs<Split>(mha, device);
  CHECK(in.heads == 32);

  // 64 query heads over 1 (multi-query): 64 rows, one tile; 128 over 1: two tiles.
  ForwardParams mqa = p;
  static_cast<flashmma::ProblemShape&>(mqa) = flashmma::make_problem_shape(2, 1, 4096, 128, 1, 128);
  in = flashmma::detail::split_scheduler_inputs<Split>(mqa, device);
  CHECK(in.m_blocks == 2);
  CHECK(in.heads == 1);
}

TEST_CASE("default_route: the split kernel for decoding, the Hopper or portable kernel for the rest",
          "[launch_plan]") {
  const DeviceInfo device = h200();
  using flashmma::detail::DefaultRoute;
  const auto route_of = [&](const ForwardParams& p, bool sm90a_code) {
    return bf16_d128_route(p, device, sm90a_code);
  };
  // Decoding (packed or not, with or without a workspace) runs on the split kernel.
  CHECK(route_of(decode_params(64, 8192), true) == DefaultRoute::kSplitKernel);
  ForwardParams mha = decode_params(8, 4096);
  static_cast<flashmma::ProblemShape&>(mha) = flashmma::make_problem_shape(8, 16, 4096, 32, 32, 128);
  CHECK(route_of(mha, true) == DefaultRoute::kSplitKernel);
  // A prefill: Hopper where sm_90a code runs, else the portable default.
  ForwardParams prefill = decode_params(2, 4096);
  static_cast<flashmma::ProblemShape&>(prefill) =
      flashmma::make_problem_shape(2, 4096, 4096, 32, 8, 128);
  prefill.q_strides = prefill.o_strides = flashmma::bshd_strides(4096, 32, 128);
  prefill.k_strides = prefill.v_strides = flashmma::bshd_strides(4096, 8, 128);
  CHECK(route_of(prefill, false) == DefaultRoute::kPortable);
  DeviceInfo a10 = device;
  a10.compute_capability = 86;
  DefaultRoute route = DefaultRoute::kHopper;
  flashmma::detail::SplitPlan plan;
  REQUIRE(flashmma::detail::default_route<__nv_bfloat16, 128>(
              prefill, a10, [] { return true; }, false, route, plan)
              .ok());
  CHECK(route == DefaultRoute::kPortable);
}

TEST_CASE("default_route: packed prefill runs on the Hopper kernels for variable lengths",
          "[launch_plan][varlen]") {
  const DeviceInfo device = h200();
  using flashmma::detail::DefaultRoute;
  const auto route_of = [&](const ForwardParams& p, bool sm90a_code) {
    return bf16_d128_route(p, device, sm90a_code);
  };
  // 4 sequences of at most 3000 tokens, 8000 in all; keys packed the same way.
  ForwardParams p;
  static_cast<flashmma::ProblemShape&>(p) = flashmma::make_problem_shape(4, 3000, 3000, 32, 8, 128);
  p.dtype = flashmma::ScalarType::kBFloat16;
  alignas(16) static int32_t cu_seqlens[2][5];
  p.cu_seqlens_q = cu_seqlens[0];
  p.cu_seqlens_k = cu_seqlens[1];
  p.total_q = 8000;
  p.total_k = 8000;
  p.q = p.k = p.v = reinterpret_cast<const void*>(uintptr_t{0x100000});
  p.o = reinterpret_cast<void*>(uintptr_t{0x200000});
  p.q_strides = p.o_strides = {0, 128, 32 * 128};
  p.k_strides = p.v_strides = {0, 128, 8 * 128};
  REQUIRE(flashmma::validate_params(p).ok());
  CHECK(route_of(p, true) == DefaultRoute::kHopper);
  std::string kernel;
  REQUIRE(flashmma::describe_default_kernel(p, device, true, kernel).ok());
  CHECK(kernel ==
        "sm90::ForwardKernel<" + flashmma::describe_config<flashmma::Sm90DefaultConfig<
                                     __nv_bfloat16, 128>::type>() +
            ", FullAttention, PlainScheduler, VariableLengths>");
  ForwardParams causal = p;
  causal.mask = flashmma::MaskKind::kCausal;
  CHECK(route_of(causal, true) == DefaultRoute::kHopper);
  REQUIRE(flashmma::describe_default_kernel(causal, device, true, kernel).ok());
  CHECK(kernel.find(", CausalMask, HeaviestFirstScheduler, VariableLengths>") != std::string::npos);
  // Ragged keys of a dense cache (seqused_k alone) too.
  ForwardParams used = p;
  used.cu_seqlens_q = used.cu_seqlens_k = nullptr;
  used.total_q = used.total_k = 0;
  used.seqused_k = cu_seqlens[1];
  used.q_strides = used.o_strides = flashmma::bshd_strides(3000, 32, 128);
  used.k_strides = used.v_strides = flashmma::bshd_strides(3000, 8, 128);
  REQUIRE(flashmma::validate_params(used).ok());
  CHECK(route_of(used, true) == DefaultRoute::kHopper);

  // The split kernel keeps the rest: no sm_90a code, unknown total_k, a window, softcap or ALiBi,
  // dropout, decoding-sized calls, and explicit splits.
  CHECK(route_of(p, false) == DefaultRoute::kSplitKernel);
  ForwardParams unknown_total = p;
  unknown_total.total_k = 0;
  REQUIRE(flashmma::validate_params(unknown_total).ok());
  CHECK(route_of(unknown_total, true) == DefaultRoute::kSplitKernel);
  CHECK_THAT(flashmma::sm90::check_tma_layout(unknown_total).message(),
             Catch::Contains("need total_k, the rows of packed K and V"));
  ForwardParams window = p;
  window.window_left = 256;
  CHECK(route_of(window, true) == DefaultRoute::kSplitKernel);
  ForwardParams softcap = p;
  softcap.softcap = 30.f;
  CHECK(route_of(softcap, true) == DefaultRoute::kSplitKernel);
  ForwardParams dropout = p;
  dropout.dropout_p = 0.1f;
  CHECK(route_of(dropout, true) == DefaultRoute::kSplitKernel);
  ForwardParams decoding = p;
  decoding.seqlen_q = 1;
  decoding.total_q = 4;
  CHECK(route_of(decoding, true) == DefaultRoute::kSplitKernel);
  ForwardParams split = p;
  split.num_splits = 4;
  CHECK(route_of(split, true) == DefaultRoute::kSplitKernel);
}
