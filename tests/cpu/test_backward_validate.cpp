// SPDX-License-Identifier: Apache-2.0
// Every error of validate_backward_params, the workspace size and layout, the backward tile
// configs' constants (portable and Hopper), and when backward(params) picks the Hopper kernel: each validation case starts from a valid call, breaks one thing, and checks
// the code and that the message names it. Fake addresses stand in for device memory.
#include "support/catch.hpp"
#include "support/fake_backward_call.hpp"

#include <flashmma/backward_params.hpp>
#include <flashmma/backward_plan.hpp>
#include <flashmma/backward_validate.hpp>
#include <flashmma/traits/backward_config.hpp>
#include <flashmma/traits/sm90_backward_config.hpp>

#include <cstdint>
#include <string>

namespace {

using Catch::Contains;
using flashmma::BackwardParams;
using flashmma::ErrorCode;
using flashmma::Status;

using flashmma::test::fake_pointer;

// GQA, every tensor dense BSHD, bf16, with a workspace of the size asked.
BackwardParams valid_params() {
  return flashmma::test::fake_backward_call(flashmma::ScalarType::kBFloat16);
}

void require_refused(const BackwardParams& p, const std::string& fragment) {
  const Status s = flashmma::validate_backward_params(p);
  INFO(s.message());
  REQUIRE(s.code() == ErrorCode::kInvalidArgument);
  CHECK_THAT(s.message(), Contains(fragment));
}

}  // namespace

TEST_CASE("validate_backward_params accepts a valid call", "[backward][validate]") {
  const Status s = flashmma::validate_backward_params(valid_params());
  INFO(s.message());
  CHECK(s.ok());
}

TEST_CASE("validate_backward_params names each missing or misaligned gradient tensor",
          "[backward][validate]") {
  BackwardParams p = valid_params();
  p.d_o = nullptr;
  require_refused(p, "d_o is null");
  p = valid_params();
  p.dq = nullptr;
  require_refused(p, "dq is null: expected a device pointer to a [batch, seqlen_q, heads_q");
  p = valid_params();
  p.dk = fake_pointer(0x80002);
  require_refused(p, "dk must be 16-byte aligned");
  p = valid_params();
  p.dv_strides.row = 130;
  require_refused(p, "dv_strides.row must be a multiple of 8");
  p = valid_params();
  p.lse = nullptr;
  require_refused(p, "lse is null");
  p = valid_params();
  p.o = nullptr;
  require_refused(p, "o is null");
}

TEST_CASE("validate_backward_params checks the workspace", "[backward][validate]") {
  BackwardParams p = valid_params();
  p.workspace = nullptr;
  require_refused(p, "workspace: the backward pass needs");
  p = valid_params();
  p.workspace_bytes -= 1;
  require_refused(p, "got " + std::to_string(p.workspace_bytes) + " bytes");
  p = valid_params();
  p.workspace = fake_pointer(0x100080);
  require_refused(p, "workspace must be 256-byte aligned");
}

TEST_CASE("validate_backward_params refuses the forward features it does not take",
          "[backward][validate]") {
  const int32_t lengths[3] = {0, 50, 100};
  BackwardParams p = valid_params();
  p.seqused_k = lengths;
  require_refused(p, "seqused_k is set, but the backward pass takes dense or packed batches");
  p = valid_params();
  p.block_table = lengths;
  require_refused(p, "block_table is set");
  p = valid_params();
  p.k_new = fake_pointer(0x200000);
  require_refused(p, "k_new is set");
  p = valid_params();
  p.num_splits = 4;
  require_refused(p, "num_splits must be 0 or 1 for the backward pass");
}

TEST_CASE("validate_backward_params takes packed sequences, with packed gradients",
          "[backward][validate]") {
  const int32_t lengths[3] = {0, 50, 100};
  BackwardParams p = valid_params();
  p.cu_seqlens_q = lengths;
  p.cu_seqlens_k = lengths;
  p.total_q = 100;
  p.q_strides.batch = p.o_strides.batch = p.do_strides.batch = p.dq_strides.batch = 0;
  p.k_strides.batch = p.v_strides.batch = p.dk_strides.batch = p.dv_strides.batch = 0;
  const Status s = flashmma::validate_backward_params(p);
  INFO(s.message());
  CHECK(s.ok());
  // The kernels take them too: what backward<Config> checks next.
  using Config = flashmma::DefaultBackwardConfigT<__nv_bfloat16, 64>;
  const Status kernel =
      flashmma::validate_for_kernel(p, flashmma::backward_kernel_requirements<Config>());
  INFO(kernel.message());
  CHECK(kernel.ok());
  p.dq_strides.batch = 800;
  require_refused(p, "dq_strides.batch must be 0 with cu_seqlens_q: it is packed as q");
  p.dq_strides.batch = 0;
  p.dv_strides.batch = 800;
  require_refused(p, "dv_strides.batch must be 0 with cu_seqlens_k: it is packed as k");
}

TEST_CASE("validate_backward_params checks the forward's fields with the forward's rules",
          "[backward][validate]") {
  BackwardParams p = valid_params();
  p.heads_kv = 3;
  require_refused(p, "heads_q (8) must be a multiple of heads_kv (3)");
  p = valid_params();
  p.softcap = -1.f;
  require_refused(p, "softcap must be 0 (off) or a positive finite number");
}

TEST_CASE("backward workspace: padded rows, aligned parts, sized for every row",
          "[backward][workspace]") {
  const BackwardParams p = valid_params();
  const flashmma::BackwardWorkspace w = flashmma::backward_workspace_layout(p);
  CHECK(w.padded_rows == 128);  // 100 rounded up to the row padding
  const std::size_t rows = 2 * 8 * 128;
  CHECK(w.dq_offset == 0);
  CHECK(w.lse_log2_offset == rows * 64 * 4);
  CHECK(w.delta_offset == w.lse_log2_offset + rows * 4);
  CHECK(w.order_offset == w.delta_offset + rows * 4);
  CHECK(w.bytes == w.order_offset + 512);  // rows / 16 int32 counters, rounded up to 256 bytes
  CHECK(w.lse_log2_offset % flashmma::kBackwardWorkspaceAlignment == 0);
  CHECK(w.delta_offset % flashmma::kBackwardWorkspaceAlignment == 0);
  CHECK(flashmma::backward_workspace_bytes(BackwardParams{}) == 0);
}

TEST_CASE("backward_kernel_requirements: a config's element type, head dim and shared memory",
          "[backward][validate]") {
  using Config = flashmma::DefaultBackwardConfigT<__half, 128>;
  const flashmma::KernelRequirements req = flashmma::backward_kernel_requirements<Config>();
  CHECK(req.dtype == flashmma::ScalarType::kFloat16);
  CHECK(req.head_dim == 128);
  CHECK(req.block_m == 64);
  CHECK(req.smem_bytes == Config::kSmemBytes);
  CHECK(req.min_compute_capability == 80);
  CHECK(req.variable_lengths);
  CHECK(!req.paged_kv);
  BackwardParams p = valid_params();  // bf16, head dim 64
  const Status wrong_type = flashmma::validate_for_kernel(p, req);
  CHECK_THAT(wrong_type.message(), Contains("dtype is bf16 but the config was built for fp16"));
  p.dtype = flashmma::ScalarType::kFloat16;
  p.head_dim = 136;
  CHECK_THAT(flashmma::validate_for_kernel(p, req).message(),
             Contains("head_dim 136 exceeds the config's HeadDim 128"));
}

TEST_CASE("backward tile configs: keys per block, dQ's share of the warps",
          "[backward][traits]") {
  using D128 = flashmma::DefaultBackwardConfigT<__half, 128>;
  STATIC_REQUIRE(D128::kBlockN == 128);
  STATIC_REQUIRE(D128::kDqRowTiles * D128::kDqColumnGroups == D128::kWarps);
  STATIC_REQUIRE(D128::kDqColumns * D128::kDqColumnGroups == 128);
  using D256 = flashmma::DefaultBackwardConfigT<__nv_bfloat16, 256>;
  STATIC_REQUIRE(D256::kBlockN == 64);  // two warps share each 16 keys
  STATIC_REQUIRE(D256::kGradColumns == 128);
  STATIC_REQUIRE(D256::kSmemBytes <= 227 * 1024);
  CHECK(flashmma::backward_kernel_head_dim_for(40) == 64);
  CHECK(flashmma::backward_kernel_head_dim_for(96) == 128);
  CHECK(flashmma::backward_kernel_head_dim_for(200) == 256);
  CHECK(flashmma::backward_kernel_head_dim_for(264) == 0);
}

TEST_CASE("Hopper backward configs: the two dQ splits, the tiles' two views, shared memory",
          "[backward][traits][sm90]") {
  using D64 = flashmma::Sm90DefaultBackwardConfigT<__half, 64>;
  STATIC_REQUIRE(D64::kBlockN == 128);
  STATIC_REQUIRE(D64::kBlockM == 128);
  STATIC_REQUIRE(D64::kDqSplitsRows);      // 64 query rows per consumer warpgroup
  STATIC_REQUIRE(D64::kDqColumns == 64);   // every head-dim column
  STATIC_REQUIRE(D64::kThreads == 384);
  using D128 = flashmma::Sm90DefaultBackwardConfigT<__nv_bfloat16, 128>;
  STATIC_REQUIRE(D128::kBlockM == 64);
  STATIC_REQUIRE(!D128::kDqSplitsRows);
  STATIC_REQUIRE(D128::kDqColumns == 64);  // half of the head dim per consumer warpgroup
  using D96 = flashmma::Sm90BackwardTileConfig<__half, 96, 64>;
  STATIC_REQUIRE(D96::kHeadDimPadded == 128);
  STATIC_REQUIRE(D96::kDqColumns == 64);
  // Q's K-major and MN-major views (S^T's B, dK's B) name the same bytes, and so do K's.
  for (int row = 0; row < D128::kBlockM; row += 7) {
    for (int column = 0; column < 128; column += 5) {
      CHECK(D128::QTile::byte_offset(row, column) ==
            D128::QTileByColumns::byte_offset(column, row));
    }
  }
  for (int key = 0; key < D128::kBlockN; key += 3) {
    for (int column = 0; column < 128; column += 11) {
      CHECK(D128::KTile::byte_offset(key, column) ==
            D128::KTileByColumns::byte_offset(column, key));
    }
  }
  STATIC_REQUIRE(D128::kSmemBytes <= 227 * 1024);
  // d = 256: the consumers share 64 keys and split the queries of S^T and the head dim of the
  // gradients; P^T and dS^T go through shared memory, read K-major (dV, dK) and MN-major (dQ).
  using D256 = flashmma::Sm90DefaultBackwardConfigT<__half, 256>;
  STATIC_REQUIRE(D256::kSplitsHeadDim);
  STATIC_REQUIRE(D256::kBlockN == 64);
  STATIC_REQUIRE(D256::kScoreQueries == 32);
  STATIC_REQUIRE(D256::kGradColumns == 128);
  STATIC_REQUIRE(D256::kDqColumns == 128);
  STATIC_REQUIRE(D256::kSmemBytes <= 227 * 1024);
  STATIC_REQUIRE(!D128::kSplitsHeadDim && D128::kScoreQueries == 64 && D128::kGradColumns == 128);
  for (int key = 0; key < D256::kBlockN; ++key) {
    for (int query = 0; query < D256::kBlockM; query += 3) {
      CHECK(D256::ScoreTile::byte_offset(key, query) == D256::DsTile::byte_offset(query, key));
    }
  }
  // dQ's staging tile, above 128 columns only: rows 16-byte aligned for the bulk reductions, 4
  // banks apart; it leaves room for one Q/dO slot.
  STATIC_REQUIRE(D256::kStagesDq && !D128::kStagesDq && D128::kDqStageBytes == 0);
  STATIC_REQUIRE(D256::kDqStageOffset % 16 == 0 && D256::kDqStagePitch % 32 == 4);
  STATIC_REQUIRE(D256::kStages == 1 && D128::kStages == 2);
  STATIC_REQUIRE(flashmma::Sm90BackwardTileConfig<__half, 128, 64, 3>::kSmemBytes <= 227 * 1024);
  const flashmma::KernelRequirements req = flashmma::backward_kernel_requirements<D128>();
  CHECK(req.min_compute_capability == 90);
  CHECK(!req.variable_lengths);  // dense batches on this kernel
  CHECK(req.block_m == 64);
}

TEST_CASE("runs_sm90_backward_default: dense calls up to head dim 128 on sm_90a code",
          "[backward][sm90]") {
  flashmma::DeviceInfo h200;
  h200.compute_capability = 90;
  h200.smem_per_block_optin = 227 * 1024;
  BackwardParams p = valid_params();
  CHECK(flashmma::runs_sm90_backward_default(p, h200, /*sm90a_code=*/true));
  CHECK(!flashmma::runs_sm90_backward_default(p, h200, /*sm90a_code=*/false));
  flashmma::DeviceInfo a100 = h200;
  a100.compute_capability = 80;
  CHECK(!flashmma::runs_sm90_backward_default(p, a100, true));
  BackwardParams too_wide = p;
  too_wide.head_dim = 264;  // no kernel head dim holds it
  CHECK(!flashmma::runs_sm90_backward_default(too_wide, h200, true));
  BackwardParams d200 = p;  // the d = 256 kernel, the consumers splitting the head dim
  d200.head_dim = 200;
  d200.q_strides = d200.o_strides = d200.do_strides = d200.dq_strides =
      flashmma::bshd_strides(p.seqlen_q, p.heads_q, 200);
  d200.k_strides = d200.v_strides = d200.dk_strides = d200.dv_strides =
      flashmma::bshd_strides(p.seqlen_k, p.heads_kv, 200);
  CHECK(flashmma::runs_sm90_backward_default(d200, h200, true));
  BackwardParams d96 = p;
  d96.head_dim = 96;  // the d = 128 kernel, TMA zero-filling the padding
  d96.q_strides = d96.o_strides = d96.do_strides = d96.dq_strides =
      flashmma::bshd_strides(p.seqlen_q, p.heads_q, 96);
  d96.k_strides = d96.v_strides = d96.dk_strides = d96.dv_strides =
      flashmma::bshd_strides(p.seqlen_k, p.heads_kv, 96);
  CHECK(flashmma::runs_sm90_backward_default(d96, h200, true));
  BackwardParams odd_stride = p;
  odd_stride.do_strides.row += 4;  // 8 bytes: TMA needs 16-byte multiples
  CHECK(!flashmma::runs_sm90_backward_default(odd_stride, h200, true));
  CHECK_THAT(flashmma::sm90::check_backward_tma_layout(odd_stride).message(), Contains("d_o"));
  BackwardParams packed = p;
  int32_t cu_seqlens[3] = {0, 50, 100};
  packed.cu_seqlens_q = packed.cu_seqlens_k = cu_seqlens;
  CHECK(!flashmma::runs_sm90_backward_default(packed, h200, true));
}
