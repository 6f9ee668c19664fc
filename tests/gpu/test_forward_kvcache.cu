// SPDX-License-Identifier: Apache-2.0
// KV append through forward(params) (k_new, v_new, seqlen_new, cache_seqlens, kv_batch_index,
// rotary_*): FlashAttention's flash_attn_with_kvcache, against support/kvcache_reference.hpp. The
// new rows must land rotated (keys) or as they are (values) at the cached lengths, of contiguous
// and paged caches (across a page boundary, up to the cache's end), nothing else in the cache may
// change, Q is not written, and the attention over the updated cache must match, with every
// built-in policy and split counts. A captured CUDA graph replays with new lengths and new rows
// written on the device. Where flashmma::kernels is built this file links it.
#include "support/catch.hpp"

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <numeric>
#include <random>
#include <string>
#include <type_traits>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/gpu_helpers.cuh"
#include "support/kvcache_reference.hpp"
#include "support/random_values.hpp"
#include "support/reference.hpp"
#include "support/variant_fields.cuh"

namespace {

using flashmma::ForwardParams;
using flashmma::test::DeviceBuffer;
using flashmma::test::KVCache;
using flashmma::test::KVCacheCall;
using flashmma::test::RotaryStyle;
using flashmma::test::RotaryTable;
using flashmma::test::Slopes;
using flashmma::test::Variant;

struct AppendCase {
  const char* what;
  std::vector<int32_t> cache_seqlens;  // rows before the call, per sequence
  int64_t capacity;                    // seqlen_k
  int64_t seqlen_new;
  int64_t seqlen_q;
  int64_t heads_q = 8;
  int64_t heads_kv = 2;
  int64_t page_size = 0;                 // 0: contiguous
  std::vector<int32_t> cache_batch_idx;  // empty: sequence b uses entry b
  int64_t entries = 0;                   // contiguous entries (>= batch); 0: batch
  int64_t rotary_dim = 0;                // 0: no rotary embedding
  RotaryStyle style = RotaryStyle::kInterleaved;
};

// Values rounded to the element type, as the device holds them.
template <class Element>
std::vector<double> rounded(std::vector<double> values) {
  for (double& x : values) x = flashmma::test::round_to<Element>(x);
  return values;
}

template <class Element>
std::vector<Element> to_elements(const std::vector<double>& values) {
  std::vector<Element> elements(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) {
    elements[i] = flashmma::test::from_double<Element>(values[i]);
  }
  return elements;
}

template <class Element>
DeviceBuffer<Element> upload(const std::vector<double>& values) {
  DeviceBuffer<Element> device(static_cast<int64_t>(values.size()));
  device.copy_from_host(to_elements<Element>(values));
  return device;
}

// The relative rounding error of one rounding to the element type.
template <class Element>
constexpr double unit_roundoff() {
  return std::is_same<Element, __half>::value ? 0x1p-11 : 0x1p-8;
}

DeviceBuffer<int32_t> upload_int(const std::vector<int32_t>& values) {
  DeviceBuffer<int32_t> device(static_cast<int64_t>(values.size()));
  device.copy_from_host(values);
  return device;
}

template <class Element>
std::vector<double> download(const DeviceBuffer<Element>& buffer) {
  std::vector<double> values;
  for (const Element& x : buffer.to_host()) values.push_back(flashmma::test::to_double(x));
  return values;
}

// Everything one call needs, on the host (the reference's inputs) and on the device.
template <class Element>
struct AppendTensors {
  KVCacheCall call;
  KVCache cache;  // before the call
  DeviceBuffer<Element> q, k_new, v_new, k_cache, v_cache, o, cos, sin;
  DeviceBuffer<float> lse;
  DeviceBuffer<int32_t> cache_seqlens, table, batch_idx;
  ForwardParams params;
};

template <class Element>
AppendTensors<Element> make_tensors(const AppendCase& c, int64_t d, unsigned seed) {
  AppendTensors<Element> t;
  const int64_t batch = static_cast<int64_t>(c.cache_seqlens.size());
  KVCacheCall& call = t.call;
  call.batch = batch;
  call.seqlen_q = c.seqlen_q;
  call.heads_q = c.heads_q;
  call.head_dim = d;
  call.q = rounded<Element>(flashmma::test::normal_values(batch * c.seqlen_q * c.heads_q * d, seed));
  call.cache_seqlens = c.cache_seqlens;
  call.cache_batch_idx = c.cache_batch_idx;
  call.seqlen_new = c.seqlen_new;
  const int64_t new_elements = batch * c.seqlen_new * c.heads_kv * d;
  call.k_new = rounded<Element>(flashmma::test::normal_values(new_elements, seed + 1));
  call.v_new = rounded<Element>(flashmma::test::normal_values(new_elements, seed + 2));
  call.scale = 1.0 / std::sqrt(static_cast<double>(d));
  call.round_rotated = &flashmma::test::round_to<Element>;
  if (c.rotary_dim > 0) {
    call.rotary = RotaryTable::standard(c.rotary_dim, c.capacity, c.style);
    call.rotary.cos = rounded<Element>(call.rotary.cos);
    call.rotary.sin = rounded<Element>(call.rotary.sin);
  }

  KVCache& cache = t.cache;
  cache.heads = c.heads_kv;
  cache.head_dim = d;
  cache.capacity = c.capacity;
  cache.page_size = c.page_size;
  int64_t slots = 0;  // rows of the device pools
  if (c.page_size > 0) {
    const int64_t pages_per_sequence = c.capacity / c.page_size;
    const int64_t pages = batch * pages_per_sequence + 2;  // two spare pages
    std::vector<int32_t> order(static_cast<std::size_t>(pages));
    std::iota(order.begin(), order.end(), 0);
    std::mt19937 rng(seed);
    std::shuffle(order.begin(), order.end(), rng);
    cache.block_table.assign(order.begin(), order.begin() + batch * pages_per_sequence);
    slots = pages * c.page_size;
  } else {
    slots = (c.entries > 0 ? c.entries : batch) * c.capacity;
  }
  cache.k = rounded<Element>(flashmma::test::normal_values(slots * c.heads_kv * d, seed + 3));
  cache.v = rounded<Element>(flashmma::test::normal_values(slots * c.heads_kv * d, seed + 4));

  t.q = upload<Element>(call.q);
  t.k_new = upload<Element>(call.k_new);
  t.v_new = upload<Element>(call.v_new);
  t.k_cache = upload<Element>(cache.k);
  t.v_cache = upload<Element>(cache.v);
  t.o = DeviceBuffer<Element>(static_cast<int64_t>(call.q.size()));
  flashmma::test::poison(t.o);
  t.lse = DeviceBuffer<float>(batch * c.heads_q * c.seqlen_q);
  flashmma::test::poison(t.lse);
  t.cache_seqlens = upload_int(c.cache_seqlens);

  ForwardParams& p = t.params;
  p.dtype = flashmma::ElementTraits<Element>::kScalarType;
  p.batch = batch;
  p.seqlen_q = c.seqlen_q;
  p.seqlen_k = c.capacity;
  p.heads_q = c.heads_q;
  p.heads_kv = c.heads_kv;
  p.head_dim = d;
  p.q = t.q.get();
  p.k = t.k_cache.get();
  p.v = t.v_cache.get();
  p.o = t.o.get();
  p.lse = t.lse.get();
  p.q_strides = p.o_strides = flashmma::bshd_strides(c.seqlen_q, c.heads_q, d);
  if (c.page_size > 0) {
    p.k_strides = p.v_strides = flashmma::bshd_strides(c.page_size, c.heads_kv, d);
    t.table = upload_int(cache.block_table);
    p.block_table = t.table.get();
    p.block_table_batch_stride = c.capacity / c.page_size;
    p.page_size = c.page_size;
    p.num_pages = slots / c.page_size;
  } else {
    p.k_strides = p.v_strides = flashmma::bshd_strides(c.capacity, c.heads_kv, d);
  }
  if (!c.cache_batch_idx.empty()) {
    t.batch_idx = upload_int(c.cache_batch_idx);
    p.kv_batch_index = t.batch_idx.get();
    p.kv_batch_entries = c.entries;
  }
  p.k_new = t.k_new.get();
  p.v_new = t.v_new.get();
  p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(c.seqlen_new, c.heads_kv, d);
  p.seqlen_new = c.seqlen_new;
  p.cache_seqlens = t.cache_seqlens.get();
  if (c.rotary_dim > 0) {
    t.cos = upload<Element>(call.rotary.cos);
    t.sin = upload<Element>(call.rotary.sin);
    p.rotary_cos = t.cos.get();
    p.rotary_sin = t.sin.get();
    p.rotary_dim = c.rotary_dim;
    p.rotary_positions = c.capacity;
    p.rotary_interleaved = c.style == RotaryStyle::kInterleaved;
  }
  return t;
}

// forward(params) with the workspace forward_workspace_bytes names, kept for a graph's replays.
struct Workspace {
  DeviceBuffer<unsigned char> buffer;
  flashmma::Status attach(ForwardParams& p) {
    std::size_t bytes = 0;
    if (flashmma::Status s = flashmma::forward_workspace_bytes(p, bytes); !s) return s;
    buffer = DeviceBuffer<unsigned char>(static_cast<int64_t>(bytes));
    flashmma::test::poison(buffer);
    p.workspace = buffer.get();
    p.workspace_bytes = bytes;
    return flashmma::Status::success();
  }
};

double relative_l2(const std::vector<double>& actual, const std::vector<double>& expected) {
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < expected.size(); ++i) {
    error += (actual[i] - expected[i]) * (actual[i] - expected[i]);
    norm += expected[i] * expected[i];
  }
  return norm > 0 ? std::sqrt(error / norm) : std::sqrt(error);
}

// Checks O, the LSE and the updated cache of a finished call against the reference.
template <class Element, class Policy>
void check_call(const AppendTensors<Element>& t, const KVCache& before, const Policy& policy) {
  KVCache expected = before;
  const flashmma::test::KVCacheResult r =
      flashmma::test::kvcache_reference(t.call, expected, policy);
  const std::vector<double> o = download(t.o);
  INFO("O relative L2 error " << relative_l2(o, r.o));
  CHECK(relative_l2(o, r.o) <= flashmma::test::Tolerance<Element>::kRelativeL2);
  const std::vector<float> lse = t.lse.to_host();
  double worst_lse = 0;
  int64_t empty_mismatches = 0;
  for (std::size_t i = 0; i < r.lse.size(); ++i) {
    if (std::isinf(r.lse[i])) {
      empty_mismatches += !(std::isinf(lse[i]) && lse[i] < 0);
    } else {
      worst_lse = std::max(worst_lse, std::fabs(lse[i] - r.lse[i]) / (1.0 + std::fabs(r.lse[i])));
    }
  }
  CHECK(empty_mismatches == 0);
  CHECK(worst_lse <= 1e-3);

  // The cache: untouched rows keep their bits; new rows hold the (rotated) keys and the values,
  // rounded once to the element type (the rotation in fp32 against the reference's double may
  // round a key to the neighbouring value).
  const std::vector<double> k = download(t.k_cache);
  const std::vector<double> v = download(t.v_cache);
  double worst_key = 0;
  int64_t value_mismatches = 0, untouched_mismatches = 0;
  for (std::size_t i = 0; i < k.size(); ++i) {
    const bool appended = expected.k[i] != before.k[i] || expected.v[i] != before.v[i];
    if (!appended) {
      untouched_mismatches += k[i] != before.k[i] || v[i] != before.v[i];
      continue;
    }
    worst_key = std::max(worst_key, std::fabs(k[i] - expected.k[i]) / (1.0 + std::fabs(expected.k[i])));
    value_mismatches += v[i] != expected.v[i];
  }
  CHECK(untouched_mismatches == 0);
  CHECK(value_mismatches == 0);
  INFO("worst appended key error " << worst_key);
  CHECK(worst_key <= 2.0 * unit_roundoff<Element>());
}

const std::vector<AppendCase>& cases() {
  static const std::vector<AppendCase> all = {
      {"decoding, contiguous, rotary (interleaved) on half the head", {0, 17, 250}, 300, 1, 1,
       8, 2, 0, {}, 0, 64},
      {"a chunk of 5, paged (16), across a page boundary, rotary halves on the whole head",
       {14, 40}, 64, 5, 5, 4, 4, 16, {}, 0, -1, RotaryStyle::kHalves},
      {"cache_batch_idx: sequences 0 and 1 in entries 3 and 1", {7, 30}, 48, 2, 2, 4, 1, 0,
       {3, 1}, 4},
      {"to the cache's end, paged (1)", {61, 0}, 64, 3, 3, 2, 2, 1},
  };
  return all;
}

const std::vector<Variant>& append_variants() {
  static const std::vector<Variant> all = {
      {"no variant"},
      {"causal", true},
      {"window (8, 0)", false, 8, 0},
      {"softcap 30 and ALiBi per batch entry, causal", true, -1, -1, 30.f, true, true},
  };
  return all;
}

template <class Element>
void check_cases(int64_t head_dim, const std::vector<int>& splits) {
  const Slopes slopes;
  unsigned seed = 1;
  for (AppendCase c : cases()) {
    if (c.rotary_dim < 0) c.rotary_dim = head_dim;  // the whole head
    for (const Variant& v : append_variants()) {
      for (const int num_splits : splits) {
        INFO("case: " << c.what << "; head_dim " << head_dim << "; variant: " << v.what
                      << "; num_splits " << num_splits);
        AppendTensors<Element> t = make_tensors<Element>(c, head_dim, seed++);
        apply(v, slopes, t.params);
        t.call.rotate_queries_per_row = v.causal || v.window_left >= 0 || v.window_right >= 0;
        t.params.num_splits = num_splits;
        Workspace workspace;
        REQUIRE(workspace.attach(t.params).ok());
        const std::vector<double> q_before = download(t.q);
        const flashmma::Status status = flashmma::forward(t.params);
        INFO("forward returned: " << status.message());
        REQUIRE(status.ok());
        FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
        CHECK(download(t.q) == q_before);  // Q is read, never written
        check_call(t, t.cache, reference_policy(v, slopes, t.params));
      }
    }
  }
}

}  // namespace

TEST_CASE("forward(params) appends to the KV cache, then attends over it", "[gpu][forward][kvcache]") {
  SECTION("bf16, head dim 128, split 1, 3 and automatically") {
    check_cases<__nv_bfloat16>(128, {0, 1, 3});
  }
  SECTION("fp16, head dim 64") { check_cases<__half>(64, {0}); }
}

TEST_CASE("a captured call replays with new lengths and new rows", "[gpu][forward][kvcache][graph]") {
  // Three decoding steps of one captured call: between replays only device memory changes (the
  // lengths, the new rows); each replay must match the reference of its step.
  const AppendCase c = cases()[0];
  AppendTensors<__half> t = make_tensors<__half>(c, 128, 99);
  t.params.mask = flashmma::MaskKind::kCausal;
  t.call.rotate_queries_per_row = true;
  Workspace workspace;
  REQUIRE(workspace.attach(t.params).ok());

  cudaStream_t stream;
  FLASHMMA_CUDA_CHECK(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking));
  cudaGraph_t graph;
  FLASHMMA_CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal));
  const flashmma::Status captured = flashmma::forward(t.params, stream);
  FLASHMMA_CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  INFO("forward returned: " << captured.message());
  REQUIRE(captured.ok());
  cudaGraphExec_t exec;
  FLASHMMA_CUDA_CHECK(cudaGraphInstantiate(&exec, graph, 0));

  KVCache cache = t.cache;
  for (int step = 0; step < 3; ++step) {
    INFO("step " << step);
    const KVCache before = cache;
    FLASHMMA_CUDA_CHECK(cudaGraphLaunch(exec, stream));
    FLASHMMA_CUDA_CHECK(cudaStreamSynchronize(stream));
    check_call(t, before, flashmma::CausalMask{});
    // The next step: the cache as the device left it (checked above), lengths one row longer,
    // new rows; written to the arrays the graph reads.
    cache.k = download(t.k_cache);
    cache.v = download(t.v_cache);
    for (int32_t& n : t.call.cache_seqlens) n += static_cast<int32_t>(c.seqlen_new);
    t.cache_seqlens.copy_from_host(t.call.cache_seqlens);
    t.call.k_new = rounded<__half>(flashmma::test::normal_values(
        static_cast<int64_t>(t.call.k_new.size()), 1000 + 2 * step));
    t.call.v_new = rounded<__half>(flashmma::test::normal_values(
        static_cast<int64_t>(t.call.v_new.size()), 1001 + 2 * step));
    t.k_new.copy_from_host(to_elements<__half>(t.call.k_new));
    t.v_new.copy_from_host(to_elements<__half>(t.call.v_new));
  }
  FLASHMMA_CUDA_CHECK(cudaGraphExecDestroy(exec));
  FLASHMMA_CUDA_CHECK(cudaGraphDestroy(graph));
  FLASHMMA_CUDA_CHECK(cudaStreamDestroy(stream));
}

TEST_CASE("KV append fields are checked, and nothing is written on error",
          "[gpu][forward][kvcache]") {
  AppendTensors<__half> t = make_tensors<__half>(cases()[0], 64, 7);
  Workspace workspace;
  REQUIRE(workspace.attach(t.params).ok());
  const std::vector<double> k_before = download(t.k_cache);
  struct Break {
    const char* message;
    void (*edit)(ForwardParams&);
  };
  const std::vector<Break> breaks = {
      {"v_new is null", [](ForwardParams& p) { p.v_new = nullptr; }},
      {"cache_seqlens must be a 4-byte aligned int32 [batch] device array",
       [](ForwardParams& p) { p.cache_seqlens = nullptr; }},
      {"seqused_k must be null with k_new", [](ForwardParams& p) { p.seqused_k = p.cache_seqlens; }},
      {"rotary_dim must be even", [](ForwardParams& p) { p.rotary_dim = 63; }},
      {"k_new (a KV append) needs a workspace of", [](ForwardParams& p) {
         p.workspace = nullptr;
         p.workspace_bytes = 0;
       }},
      {"seqlen_new must be between 1 and seqlen_k", [](ForwardParams& p) { p.seqlen_new = 0; }},
  };
  for (const Break& b : breaks) {
    INFO(b.message);
    ForwardParams p = t.params;
    b.edit(p);
    const flashmma::Status s = flashmma::forward(p);
    INFO("got: " << s.message());
    CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
    CHECK(s.message().find(b.message) != std::string::npos);
    FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
    CHECK(download(t.k_cache) == k_before);
  }
}
