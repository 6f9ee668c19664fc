// SPDX-License-Identifier: Apache-2.0
// Variable-length batches (params.cu_seqlens_q, cu_seqlens_k, total_q, total_k, seqused_k): packed
// sequences of lengths 0, 1, odd and long in one call, packed queries over a dense KV cache
// filled to different lengths, every built-in policy per sequence, GQA, split-KV, and the
// refusals, and on a compute capability 9.0 GPU the Hopper kernels that forward(params) runs
// prefill-sized packed sequences on. Each sequence is checked against the host reference of its
// own lengths. Where
// flashmma::kernels is built this file links it and compiles only its forward<Config> kernels.
#include "support/catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/gpu_helpers.cuh"
#include "support/policy_reference.cuh"
#include "support/variant_fields.cuh"

namespace {

using flashmma::ForwardParams;
using flashmma::test::DeviceBuffer;
using flashmma::test::Slopes;
using flashmma::test::Variant;

// The sequences of one call. Packed tensors hold exactly their tokens; a dense K/V holds
// `capacity` rows per sequence, of which seqused_k says how many count (a KV cache).
struct VarlenShape {
  const char* what;
  std::vector<int32_t> seqlens_q;  // packed queries; empty: dense, dense_seqlen_q each
  std::vector<int32_t> seqlens_k;  // packed keys, or the used keys of a dense cache
  int64_t heads_q = 4;
  int64_t heads_kv = 2;
  bool dense_kv = false;     // K/V [batch, capacity, heads_kv, d] with seqused_k = seqlens_k
  bool seqused_k = false;    // packed keys with seqused_k: the first 3/4 of each sequence
  int64_t dense_seqlen_q = 0;
  int64_t capacity = 0;      // dense_kv: rows per sequence (>= every length)
};

template <class Element>
struct VarlenTensors {
  std::vector<int32_t> cu_q, cu_k, used_k;  // host copies; empty where absent
  DeviceBuffer<int32_t> cu_q_device, cu_k_device, used_k_device;
  DeviceBuffer<Element> q, k, v, o;
  DeviceBuffer<float> lse;
  ForwardParams params;
};

std::vector<int32_t> prefix_sums(const std::vector<int32_t>& lengths) {
  std::vector<int32_t> sums{0};
  for (const int32_t n : lengths) sums.push_back(sums.back() + n);
  return sums;
}

DeviceBuffer<int32_t> upload(const std::vector<int32_t>& host) {
  if (host.empty()) return DeviceBuffer<int32_t>();
  DeviceBuffer<int32_t> device(static_cast<int64_t>(host.size()));
  device.copy_from_host(host);
  return device;
}

template <class Element>
VarlenTensors<Element> make_varlen_tensors(const VarlenShape& s, int64_t head_dim) {
  using flashmma::test::kGuardElements;
  VarlenTensors<Element> t;
  ForwardParams& p = t.params;
  const bool packed_q = !s.seqlens_q.empty();
  p.batch = static_cast<int64_t>(s.seqlens_k.size());
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = head_dim;
  p.dtype = flashmma::ElementTraits<Element>::kScalarType;
  const int64_t d = head_dim;

  int64_t q_rows = 0;
  if (packed_q) {
    t.cu_q = prefix_sums(s.seqlens_q);
    p.total_q = t.cu_q.back();
    p.seqlen_q = std::max<int64_t>(1, *std::max_element(s.seqlens_q.begin(), s.seqlens_q.end()));
    p.q_strides = {0, d, s.heads_q * d};
    q_rows = p.total_q;
  } else {
    p.seqlen_q = s.dense_seqlen_q;
    p.q_strides = flashmma::bshd_strides(p.seqlen_q, s.heads_q, d);
    q_rows = p.batch * p.seqlen_q;
  }
  p.o_strides = p.q_strides;

  int64_t kv_rows = 0;
  if (s.dense_kv) {
    t.used_k = s.seqlens_k;
    p.seqlen_k = s.capacity;
    p.k_strides = flashmma::bshd_strides(s.capacity, s.heads_kv, d);
    kv_rows = p.batch * s.capacity;
  } else {
    t.cu_k = prefix_sums(s.seqlens_k);
    p.seqlen_k = std::max<int64_t>(1, *std::max_element(s.seqlens_k.begin(), s.seqlens_k.end()));
    p.k_strides = {0, d, s.heads_kv * d};
    kv_rows = t.cu_k.back();
    p.total_k = kv_rows;
    if (s.seqused_k) {
      for (const int32_t n : s.seqlens_k) t.used_k.push_back(n * 3 / 4);
    }
  }
  p.v_strides = p.k_strides;

  const int64_t q_elements = q_rows * s.heads_q * d;
  const int64_t kv_elements = std::max<int64_t>(1, kv_rows) * s.heads_kv * d;
  t.q = DeviceBuffer<Element>(q_elements + kGuardElements);
  t.k = DeviceBuffer<Element>(kv_elements + kGuardElements);
  t.v = DeviceBuffer<Element>(kv_elements + kGuardElements);
  t.o = DeviceBuffer<Element>(q_elements + kGuardElements);
  const uint64_t seed = flashmma::test::mix64(static_cast<uint64_t>(q_rows * 131 + kv_rows + d));
  flashmma::test::fill_normal(t.q, seed + 1);
  flashmma::test::fill_normal(t.k, seed + 2);
  flashmma::test::fill_normal(t.v, seed + 3);
  flashmma::test::poison(t.o);
  t.lse = DeviceBuffer<float>(s.heads_q * q_rows + kGuardElements);
  flashmma::test::poison(t.lse);
  t.cu_q_device = upload(t.cu_q);
  t.cu_k_device = upload(t.cu_k);
  t.used_k_device = upload(t.used_k);

  p.q = t.q.get();
  p.k = t.k.get();
  p.v = t.v.get();
  p.o = t.o.get();
  p.lse = t.lse.get();
  p.cu_seqlens_q = t.cu_q.empty() ? nullptr : t.cu_q_device.get();
  p.cu_seqlens_k = t.cu_k.empty() ? nullptr : t.cu_k_device.get();
  p.seqused_k = t.used_k.empty() ? nullptr : t.used_k_device.get();
  return t;
}

template <class Element, class Policy>
void check_varlen_outputs(const VarlenTensors<Element>& t, const Policy& policy) {
  using flashmma::test::host_values;
  const ForwardParams& p = t.params;
  const std::vector<float> lse = t.lse.to_host();
  flashmma::test::check_outputs_against_policy_reference<Element>(
      p, flashmma::test::host_sequences(p, t.cu_q, t.cu_k, t.used_k), host_values(t.q),
      host_values(t.k), host_values(t.v), host_values(t.o), lse, policy);
  // Rows past the last token are never written.
  const std::vector<Element> o = t.o.to_host();
  const int64_t q_rows = p.cu_seqlens_q != nullptr ? p.total_q : p.batch * p.seqlen_q;
  bool guard_intact = true;
  for (int64_t i = q_rows * p.heads_q * p.head_dim; i < static_cast<int64_t>(o.size()); ++i) {
    guard_intact = guard_intact && flashmma::test::is_poison(o[i]);
  }
  CHECK(guard_intact);
}

const std::vector<VarlenShape>& shapes() {
  static const std::vector<VarlenShape> all = {
      {"packed prefill: lengths 0, 1, odd, long; a sequence without keys",
       {0, 1, 17, 130, 64, 1},
       {5, 1, 200, 130, 0, 300}},
      {"packed, equal lengths both ways, GQA 8:1", {129, 1, 77, 256}, {129, 1, 77, 256}, 8, 1},
      {"packed with seqused_k (3/4 of each sequence's keys)",
       {3, 50, 1},
       {400, 64, 9},
       4,
       4,
       false,
       true},
      {"decoding: one query each over a dense cache filled to 1000, 1, 4097, 17",
       {1, 1, 1, 1},
       {1000, 1, 4097, 17},
       8,
       2,
       true,
       false,
       0,
       4200},
      {"dense queries (3 each) over a dense cache with seqused_k 0, 64, 333",
       {},
       {0, 64, 333},
       2,
       1,
       true,
       false,
       3,
       400},
  };
  return all;
}

const std::vector<Variant>& varlen_variants() {
  static const std::vector<Variant> all = {
      {"no variant"},
      {"causal", true},
      {"window (32, 0)", false, 32, 0},
      {"window (5, 17)", false, 5, 17},
      {"softcap 30 and ALiBi per batch entry", false, -1, -1, 30.f, true, true},
      {"ALiBi per head, causal", true, -1, -1, 0.f, true},
  };
  return all;
}

template <class Element, class Forward>
void check_shapes(int64_t head_dim, Forward&& forward) {
  const Slopes slopes;
  for (const VarlenShape& shape : shapes()) {
    for (const Variant& v : varlen_variants()) {
      INFO("shape: " << shape.what << "; head_dim " << head_dim << "; variant: " << v.what);
      VarlenTensors<Element> t = make_varlen_tensors<Element>(shape, head_dim);
      apply(v, slopes, t.params);
      const flashmma::Status status = forward(t.params);
      INFO("forward returned: " << status.message());
      REQUIRE(status.ok());
      FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
      check_varlen_outputs(t, reference_policy(v, slopes, t.params));
    }
  }
}

// Gives `p` the workspace forward_workspace_bytes names for it, in `workspace`, poisoned (a
// caller's workspace holds garbage); the status of forward_workspace_bytes.
flashmma::Status give_workspace(ForwardParams& p, DeviceBuffer<unsigned char>& workspace) {
  std::size_t bytes = 0;
  if (flashmma::Status s = flashmma::forward_workspace_bytes(p, bytes); !s) return s;
  workspace = DeviceBuffer<unsigned char>(static_cast<int64_t>(bytes > 0 ? bytes : 1));
  flashmma::test::poison(workspace);
  p.workspace = workspace.get();
  p.workspace_bytes = bytes;
  return flashmma::Status::success();
}

// forward(params) with a split-KV workspace of the size forward_workspace_bytes names.
flashmma::Status split_forward(const ForwardParams& params, int num_splits) {
  ForwardParams p = params;
  p.num_splits = num_splits;
  DeviceBuffer<unsigned char> workspace;
  if (flashmma::Status s = give_workspace(p, workspace); !s) return s;
  const flashmma::Status status = flashmma::forward(p);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());  // before the workspace is freed
  return status;
}

// A config no default uses: forward<Config>(params) compiles its built-in kernels here.
using OwnConfig =
    flashmma::TileConfig<__nv_bfloat16, 64, 64, 32, 4, 3, flashmma::SmemLayout::kXorSwizzle>;

}  // namespace

TEST_CASE("forward(params) runs packed batches of variable lengths", "[gpu][forward][varlen]") {
  const auto run = [](const ForwardParams& p) { return flashmma::forward(p); };
  SECTION("fp16, head dim 64") { check_shapes<__half>(64, run); }
  SECTION("bf16, head dim 128") { check_shapes<__nv_bfloat16>(128, run); }
  SECTION("fp16, head dim 88 (runs on 96)") { check_shapes<__half>(88, run); }
  SECTION("bf16, head dim 256") { check_shapes<__nv_bfloat16>(256, run); }
}

TEST_CASE("forward<Config>(params) runs variable lengths", "[gpu][forward][varlen]") {
  check_shapes<__nv_bfloat16>(64,
                              [](const ForwardParams& p) { return flashmma::forward<OwnConfig>(p); });
}

// On a compute capability 9.0 GPU running sm_90a code, prefill-sized packed sequences without a
// window, softcap or ALiBi run on the Hopper kernels for variable lengths (launch_plan.hpp's
// variable_length_prefill): lengths that end inside a warpgroup's 64 rows (their O rows are
// stored up to the sequence's end, not by TMA), sequences without queries or keys, GQA, and
// tiles of 128 and 192 rows; with the workspace forward_workspace_bytes names, the walking twins
// of the d = 64 and 128 defaults where the blocks walk (more tiles than SMs, few key tiles; the
// next test walks many short sequences). Without total_k the split kernel takes the same call.
TEST_CASE("forward(params) runs packed prefill on the Hopper kernel",
          "[gpu][forward][varlen][sm90]") {
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  if (device.compute_capability != 90 || !flashmma::sm90a_code_loaded()) {
    SUCCEED("not a compute capability 9.0 GPU running sm_90a code: the split kernel runs");
    return;
  }
  const VarlenShape long_shape{"packed prefill: 1000, 3, 517, 2049, 64 tokens over other lengths",
                               {1000, 3, 517, 2049, 64},
                               {1000, 700, 517, 2049, 1},
                               8,
                               2};
  const Slopes slopes;
  const auto run = [&](auto element_tag, int64_t head_dim) {
    using Element = decltype(element_tag);
    for (const VarlenShape* shape_ptr : {&shapes()[0], &shapes()[1], &long_shape}) {
      const VarlenShape& shape = *shape_ptr;
      for (const Variant& v : {varlen_variants()[0], varlen_variants()[1]}) {
        INFO("shape: " << shape.what << "; head_dim " << head_dim << "; variant: " << v.what);
        VarlenTensors<Element> t = make_varlen_tensors<Element>(shape, head_dim);
        apply(v, slopes, t.params);
        std::string kernel;
        REQUIRE(flashmma::describe_default_kernel(t.params, device, true, kernel).ok());
        INFO(kernel);
        CHECK(kernel.rfind("sm90::ForwardKernel<", 0) == 0);
        CHECK(kernel.find(", VariableLengths>") != std::string::npos);
        const flashmma::Status status = flashmma::forward(t.params);
        INFO("forward returned: " << status.message());
        REQUIRE(status.ok());
        FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
        check_varlen_outputs(t, reference_policy(v, slopes, t.params));

        // With the workspace forward_workspace_bytes names (left as garbage): the d = 64 and
        // 128 defaults' walking twins where their blocks walk (the long shape: 17 key tiles,
        // within both of their Sm90WalkLimits), the same results. (The short shapes, with fewer
        // tiles than SMs, may split their keys on the split kernel once given the workspace.)
        {
          const bool twin = head_dim == 64 || head_dim == 128;
          const bool walks = twin && shape_ptr == &long_shape;
          ForwardParams walked = t.params;
          DeviceBuffer<unsigned char> workspace;
          REQUIRE(give_workspace(walked, workspace).ok());
          REQUIRE(flashmma::describe_default_kernel(walked, device, true, kernel).ok());
          INFO(kernel);
          CHECK((kernel.find(", VariableLengths> on ") != std::string::npos) == walks);
          CHECK((kernel.find("blocks walking its tiles") != std::string::npos) == walks);
          flashmma::test::poison(t.o);
          flashmma::test::poison(t.lse);
          REQUIRE(flashmma::forward(walked).ok());
          FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
          check_varlen_outputs(t, reference_policy(v, slopes, t.params));
        }

        // Without total_k TMA cannot map packed K: the split kernel, the same results.
        t.params.total_k = 0;
        REQUIRE(flashmma::describe_default_kernel(t.params, device, true, kernel).ok());
        CHECK(kernel.rfind("sm80::ForwardKernel<", 0) == 0);
        flashmma::test::poison(t.o);
        flashmma::test::poison(t.lse);
        REQUIRE(flashmma::forward(t.params).ok());
        FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
        check_varlen_outputs(t, reference_policy(v, slopes, t.params));
      }
    }
  };
  SECTION("fp16, head dim 64 (192-row tiles)") { run(__half{}, 64); }
  SECTION("bf16, head dim 128") { run(__nv_bfloat16{}, 128); }
  SECTION("bf16, head dim 200 (runs on 224)") { run(__nv_bfloat16{}, 200); }
}

// The walking twins where most of a tile's warpgroups have no rows (sequences of 1 to 150
// tokens: a 192-row tile leaves two of three warpgroups idle, a 128-row one often one): such a
// warpgroup issues no wgmma, so nothing but the kernel's barriers keeps its warps in step with
// the tile slot and the K/V ring. Many calls in a row, each with results equal to the first's
// (and those to the reference); a lost step shows as a hang, which CTest's timeout fails.
TEST_CASE("walking twins over many short sequences: every call completes, the same results",
          "[gpu][forward][varlen][sm90][persistent]") {
  flashmma::DeviceInfo device;
  REQUIRE(flashmma::query_device(device).ok());
  if (device.compute_capability != 90 || !flashmma::sm90a_code_loaded()) {
    SUCCEED("not a compute capability 9.0 GPU running sm_90a code: no walking twin runs");
    return;
  }
  VarlenShape shape{"96 sequences of 1 to 150 tokens", {}, {}, 8, 2};
  for (int i = 0; i < 96; ++i) shape.seqlens_q.push_back(1 + (i * 37) % 150);
  shape.seqlens_k = shape.seqlens_q;
  const Slopes slopes;
  const auto run = [&](auto element_tag, int64_t head_dim) {
    using Element = decltype(element_tag);
    for (const Variant& v : {varlen_variants()[0], varlen_variants()[1]}) {
      INFO("head_dim " << head_dim << "; variant: " << v.what);
      VarlenTensors<Element> t = make_varlen_tensors<Element>(shape, head_dim);
      apply(v, slopes, t.params);
      DeviceBuffer<unsigned char> workspace;
      REQUIRE(give_workspace(t.params, workspace).ok());
      REQUIRE(t.params.workspace_bytes >= flashmma::kTileCounterBytes);
      std::string kernel;
      REQUIRE(flashmma::describe_default_kernel(t.params, device, true, kernel).ok());
      INFO(kernel);
      REQUIRE(kernel.find("VariableLengths> on ") != std::string::npos);
      REQUIRE(kernel.find("blocks walking its tiles") != std::string::npos);
      REQUIRE(flashmma::forward(t.params).ok());
      FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
      check_varlen_outputs(t, reference_policy(v, slopes, t.params));
      const std::vector<Element> first = t.o.to_host();
      const std::vector<float> first_lse = t.lse.to_host();
      for (int call = 0; call < 200; ++call) REQUIRE(flashmma::forward(t.params).ok());
      FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
      CHECK(flashmma::test::same_bytes(first, t.o.to_host()));
      CHECK(flashmma::test::same_bytes(first_lse, t.lse.to_host()));
    }
  };
  SECTION("fp16, head dim 64 (192-row tiles)") { run(__half{}, 64); }
  SECTION("bf16, head dim 128") { run(__nv_bfloat16{}, 128); }
}

TEST_CASE("variable lengths split the keys like dense calls", "[gpu][forward][varlen][split_kv]") {
  for (const int splits : {0, 3, 16}) {
    DYNAMIC_SECTION("num_splits " << splits) {
      check_shapes<__half>(128, [&](const ForwardParams& p) { return split_forward(p, splits); });
    }
  }
}

TEST_CASE("a split count gives the same bits run to run", "[gpu][forward][varlen][split_kv]") {
  VarlenTensors<__half> t = make_varlen_tensors<__half>(shapes()[3], 128);
  std::vector<__half> first;
  std::vector<float> first_lse;
  for (int run = 0; run < 3; ++run) {
    REQUIRE(split_forward(t.params, 5).ok());
    if (run == 0) {
      first = t.o.to_host();
      first_lse = t.lse.to_host();
    } else {
      CHECK(std::memcmp(first.data(), t.o.to_host().data(), first.size() * sizeof(__half)) == 0);
      CHECK(std::memcmp(first_lse.data(), t.lse.to_host().data(),
                        first_lse.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("variable-length fields are checked, and nothing is written on error",
          "[gpu][forward][varlen]") {
  VarlenTensors<__half> t = make_varlen_tensors<__half>(shapes()[0], 64);
  const std::vector<__half> o_before = t.o.to_host();
  const auto o_untouched = [&] {
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    return flashmma::test::same_bytes(o_before, t.o.to_host());
  };
  struct Break {
    const char* message;
    void (*edit)(ForwardParams&);
  };
  const std::vector<Break> breaks = {
      {"total_q must be the rows of packed Q", [](ForwardParams& p) { p.total_q = 0; }},
      {"total_q is set but cu_seqlens_q is null",
       [](ForwardParams& p) { p.cu_seqlens_q = nullptr; }},
      {"q_strides.batch must be 0 with cu_seqlens_q",
       [](ForwardParams& p) { p.q_strides.batch = 1024; }},
      {"v_strides.batch must be 0 with cu_seqlens_k",
       [](ForwardParams& p) { p.v_strides.batch = 1024; }},
      {"cu_seqlens_k must be 4-byte aligned", [](ForwardParams& p) {
         p.cu_seqlens_k = reinterpret_cast<const int32_t*>(
             reinterpret_cast<const char*>(p.cu_seqlens_k) + 2);
       }},
      {"lse must be 4-byte aligned (an fp32 [heads_q, total_q] array)", [](ForwardParams& p) {
         p.lse = reinterpret_cast<float*>(reinterpret_cast<char*>(p.lse) + 2);
       }},
  };
  for (const Break& b : breaks) {
    INFO(b.message);
    ForwardParams p = t.params;
    b.edit(p);
    const flashmma::Status s = flashmma::forward(p);
    INFO("got: " << s.message());
    CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
    CHECK(s.message().find(b.message) != std::string::npos);
    CHECK(o_untouched());
  }
}
