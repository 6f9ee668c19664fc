// SPDX-License-Identifier: Apache-2.0
// Paged KV caches (params.block_table, page_size, num_pages): pools of shuffled pages of 1 to 256
// keys, with sequences filled to different lengths (seqused_k), decoding, chunked prefill and
// packed queries, every built-in policy, GQA, split counts; each sequence checked against the
// host reference of the same cache laid out contiguously, and the paged result against the
// contiguous one bit for bit. Table entries past a sequence's keys hold -1: reading one would
// stop the kernel. Where flashmma::kernels is built this file links it.
#include "support/catch.hpp"

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <random>
#include <string>
#include <tuple>
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

struct PagedShape {
  const char* what;
  std::vector<int32_t> cache_seqlens;  // keys of each sequence (seqused_k)
  int64_t capacity;                    // seqlen_k: the most keys a sequence may have
  int64_t seqlen_q = 1;                // dense queries per sequence; 0: packed, seqlens_q
  std::vector<int32_t> seqlens_q = {};
  int64_t heads_q = 8;
  int64_t heads_kv = 2;
};

template <class Element>
struct PagedTensors {
  std::vector<int32_t> table, cache_seqlens, cu_q;  // host copies
  DeviceBuffer<int32_t> table_device, seqlens_device, cu_q_device;
  DeviceBuffer<Element> q, k_pool, v_pool, o;
  DeviceBuffer<float> lse;
  ForwardParams params;
  // The same keys and values as a contiguous cache [batch, capacity, heads_kv, d] (host, double):
  // what the reference reads.
  std::vector<double> k_dense, v_dense;
};

DeviceBuffer<int32_t> upload(const std::vector<int32_t>& host) {
  DeviceBuffer<int32_t> device(static_cast<int64_t>(host.size()));
  device.copy_from_host(host);
  return device;
}

template <class Element>
PagedTensors<Element> make_paged_tensors(const PagedShape& s, int64_t page_size, int64_t d) {
  using flashmma::test::kGuardElements;
  PagedTensors<Element> t;
  ForwardParams& p = t.params;
  const int64_t batch = static_cast<int64_t>(s.cache_seqlens.size());
  const int64_t pages_per_sequence = (s.capacity + page_size - 1) / page_size;
  const int64_t spare_pages = 3;  // in the pool, in no table
  const int64_t num_pages = batch * pages_per_sequence + spare_pages;
  p.batch = batch;
  p.heads_q = s.heads_q;
  p.heads_kv = s.heads_kv;
  p.head_dim = d;
  p.dtype = flashmma::ElementTraits<Element>::kScalarType;
  p.seqlen_k = s.capacity;

  // Pages in a shuffled order; a row of the table has one spare column. Entries past a
  // sequence's last key are -1.
  std::vector<int32_t> order(static_cast<std::size_t>(num_pages));
  for (int64_t i = 0; i < num_pages; ++i) order[i] = static_cast<int32_t>(i);
  std::mt19937 rng(static_cast<unsigned>(page_size * 7919 + d));
  std::shuffle(order.begin(), order.end(), rng);
  p.block_table_batch_stride = pages_per_sequence + 1;
  t.table.assign(static_cast<std::size_t>(batch * p.block_table_batch_stride), -1);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t used_pages = (s.cache_seqlens[b] + page_size - 1) / page_size;
    for (int64_t i = 0; i < used_pages; ++i) {
      t.table[b * p.block_table_batch_stride + i] = order[b * pages_per_sequence + i];
    }
  }
  t.cache_seqlens = s.cache_seqlens;
  p.page_size = page_size;
  p.num_pages = num_pages;

  int64_t q_rows = 0;
  if (s.seqlen_q > 0) {
    p.seqlen_q = s.seqlen_q;
    p.q_strides = flashmma::bshd_strides(s.seqlen_q, s.heads_q, d);
    q_rows = batch * s.seqlen_q;
  } else {
    t.cu_q = {0};
    for (const int32_t n : s.seqlens_q) t.cu_q.push_back(t.cu_q.back() + n);
    p.total_q = t.cu_q.back();
    p.seqlen_q = *std::max_element(s.seqlens_q.begin(), s.seqlens_q.end());
    p.q_strides = {0, d, s.heads_q * d};
    q_rows = p.total_q;
  }
  p.o_strides = p.q_strides;
  p.k_strides = {page_size * s.heads_kv * d, d, s.heads_kv * d};
  p.v_strides = p.k_strides;

  const int64_t q_elements = q_rows * s.heads_q * d;
  const int64_t pool_elements = num_pages * page_size * s.heads_kv * d;
  t.q = DeviceBuffer<Element>(q_elements + kGuardElements);
  t.k_pool = DeviceBuffer<Element>(pool_elements + kGuardElements);
  t.v_pool = DeviceBuffer<Element>(pool_elements + kGuardElements);
  t.o = DeviceBuffer<Element>(q_elements + kGuardElements);
  const uint64_t seed = flashmma::test::mix64(static_cast<uint64_t>(pool_elements + q_rows + d));
  flashmma::test::fill_normal(t.q, seed + 1);
  flashmma::test::fill_normal(t.k_pool, seed + 2);
  flashmma::test::fill_normal(t.v_pool, seed + 3);
  flashmma::test::poison(t.o);
  t.lse = DeviceBuffer<float>(s.heads_q * q_rows + kGuardElements);
  flashmma::test::poison(t.lse);
  t.table_device = upload(t.table);
  t.seqlens_device = upload(t.cache_seqlens);
  if (!t.cu_q.empty()) t.cu_q_device = upload(t.cu_q);

  // The contiguous view of the used keys.
  const std::vector<double> k_pool = flashmma::test::host_values(t.k_pool);
  const std::vector<double> v_pool = flashmma::test::host_values(t.v_pool);
  const flashmma::TensorStrides dense = flashmma::bshd_strides(s.capacity, s.heads_kv, d);
  t.k_dense.assign(static_cast<std::size_t>(batch * dense.batch), 0.0);
  t.v_dense.assign(t.k_dense.size(), 0.0);
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t j = 0; j < s.cache_seqlens[b]; ++j) {
      const int64_t page = t.table[b * p.block_table_batch_stride + j / page_size];
      for (int64_t h = 0; h < s.heads_kv; ++h) {
        const int64_t from = page * p.k_strides.batch + (j % page_size) * p.k_strides.row +
                             h * p.k_strides.head;
        const int64_t to = b * dense.batch + j * dense.row + h * dense.head;
        for (int64_t x = 0; x < d; ++x) {
          t.k_dense[to + x] = k_pool[from + x];
          t.v_dense[to + x] = v_pool[from + x];
        }
      }
    }
  }

  p.q = t.q.get();
  p.k = t.k_pool.get();
  p.v = t.v_pool.get();
  p.o = t.o.get();
  p.lse = t.lse.get();
  p.block_table = t.table_device.get();
  p.seqused_k = t.seqlens_device.get();
  p.cu_seqlens_q = t.cu_q.empty() ? nullptr : t.cu_q_device.get();
  return t;
}

template <class Element, class Policy>
void check_paged_outputs(const PagedTensors<Element>& t, const Policy& policy) {
  ForwardParams dense = t.params;  // the reference reads the contiguous view
  dense.k_strides = dense.v_strides =
      flashmma::bshd_strides(dense.seqlen_k, dense.heads_kv, dense.head_dim);
  dense.block_table = nullptr;
  flashmma::test::check_outputs_against_policy_reference<Element>(
      dense, flashmma::test::host_sequences(dense, t.cu_q, {}, t.cache_seqlens),
      flashmma::test::host_values(t.q), t.k_dense, t.v_dense, flashmma::test::host_values(t.o),
      t.lse.to_host(), policy);
}

// forward(params) with `num_splits` and the workspace forward_workspace_bytes names.
flashmma::Status run(const ForwardParams& params, int num_splits) {
  ForwardParams p = params;
  p.num_splits = num_splits;
  std::size_t bytes = 0;
  if (flashmma::Status s = flashmma::forward_workspace_bytes(p, bytes); !s) return s;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(bytes > 0 ? bytes : 1));
  flashmma::test::poison(workspace);
  p.workspace = workspace.get();
  p.workspace_bytes = bytes;
  const flashmma::Status status = flashmma::forward(p);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());  // before the workspace is freed
  return status;
}

const std::vector<PagedShape>& shapes() {
  static const std::vector<PagedShape> all = {
      {"decoding: caches of 1000, 1, 4097, 17 and 0 keys", {1000, 1, 4097, 17, 0}, 4200},
      {"chunked prefill: 37 queries over 300, 37, 130 keys", {300, 37, 130}, 512, 37, {}, 4, 4},
      {"packed queries 5, 1, 20 over 200, 64, 20 keys", {200, 64, 20}, 256, 0, {5, 1, 20}, 4, 1},
  };
  return all;
}

const std::vector<Variant>& paged_variants() {
  static const std::vector<Variant> all = {
      {"no variant"},
      {"causal", true},
      {"window (32, 0)", false, 32, 0},
      {"softcap 30 and ALiBi per batch entry, causal", true, -1, -1, 30.f, true, true},
  };
  return all;
}

template <class Element>
void check_shapes(int64_t head_dim, const std::vector<int64_t>& page_sizes,
                  const std::vector<int>& splits) {
  const Slopes slopes;
  for (const PagedShape& shape : shapes()) {
    for (const int64_t page_size : page_sizes) {
      for (const Variant& v : paged_variants()) {
        for (const int num_splits : splits) {
          INFO("shape: " << shape.what << "; page size " << page_size << "; head_dim "
                         << head_dim << "; variant: " << v.what << "; num_splits "
                         << num_splits);
          PagedTensors<Element> t = make_paged_tensors<Element>(shape, page_size, head_dim);
          apply(v, slopes, t.params);
          const flashmma::Status status = run(t.params, num_splits);
          INFO("forward returned: " << status.message());
          REQUIRE(status.ok());
          check_paged_outputs(t, reference_policy(v, slopes, t.params));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("forward(params) reads a paged KV cache", "[gpu][forward][paged]") {
  SECTION("fp16, head dim 64, pages of 1, 16, 48 and 256 keys") {
    check_shapes<__half>(64, {1, 16, 48, 256}, {0});
  }
  SECTION("bf16, head dim 128, pages of 16 and 64 keys, split 1, 3 and automatically") {
    check_shapes<__nv_bfloat16>(128, {16, 64}, {0, 1, 3});
  }
  SECTION("fp16, head dim 256, pages of 16 keys") { check_shapes<__half>(256, {16}, {0}); }
}

// forward<Config, Policy> with a split count and the workspace forward_workspace_bytes<Config>
// names.
template <class Config, class Policy>
flashmma::Status run_config(const ForwardParams& params, const Policy& policy, int num_splits) {
  ForwardParams p = params;
  p.num_splits = num_splits;
  std::size_t bytes = 0;
  if (flashmma::Status s = flashmma::forward_workspace_bytes<Config>(p, bytes); !s) return s;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(bytes > 0 ? bytes : 1));
  flashmma::test::poison(workspace);
  p.workspace = workspace.get();
  p.workspace_bytes = bytes;
  const flashmma::Status status = flashmma::forward<Config>(p, policy);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  return status;
}

// The paged stream resolves a tile's rows ahead of its copies in a ring of shared-memory slots
// whose depth follows the schedule (sm80/kv_stream.cuh): the overlapped schedules (three and
// four K/V stages) issue two and three tiles before their first barrier.
using OverlappedConfigs =
    std::tuple<flashmma::TileConfig<__nv_bfloat16, 128, 64, 32, 4, 3, flashmma::SmemLayout::kXorSwizzle>,
               flashmma::TileConfig<__half, 64, 64, 32, 4, 4, flashmma::SmemLayout::kXorSwizzle>>;

TEMPLATE_LIST_TEST_CASE("forward<Config> reads a paged cache on three and four K/V stages",
                        "[gpu][forward][paged]", OverlappedConfigs) {
  using Element = typename TestType::element_type;
  for (const int64_t page_size : {int64_t{16}, int64_t{48}, int64_t{64}}) {
    for (const int splits : {0, 3}) {
      INFO("page size " << page_size << ", num_splits " << splits);
      PagedTensors<Element> t =
          make_paged_tensors<Element>(shapes()[0], page_size, TestType::kHeadDim);
      const flashmma::Status status = run_config<TestType>(t.params, flashmma::FullAttention{}, splits);
      INFO("forward returned: " << status.message());
      REQUIRE(status.ok());
      check_paged_outputs(t, flashmma::FullAttention{});
    }
  }
}

TEST_CASE("a paged cache gives the bits of the same cache laid out contiguously",
          "[gpu][forward][paged]") {
  for (const int64_t page_size : {int64_t{1}, int64_t{16}, int64_t{64}}) {
    for (const int splits : {1, 4}) {
      INFO("page size " << page_size << ", num_splits " << splits);
      PagedTensors<__nv_bfloat16> t = make_paged_tensors<__nv_bfloat16>(shapes()[0], page_size, 128);
      t.params.mask = flashmma::MaskKind::kCausal;
      REQUIRE(run(t.params, splits).ok());
      const std::vector<__nv_bfloat16> paged_o = t.o.to_host();
      const std::vector<float> paged_lse = t.lse.to_host();

      // The contiguous cache on the device, with the same lengths.
      DeviceBuffer<__nv_bfloat16> k(static_cast<int64_t>(t.k_dense.size()));
      DeviceBuffer<__nv_bfloat16> v(static_cast<int64_t>(t.v_dense.size()));
      std::vector<__nv_bfloat16> host(t.k_dense.size());
      for (std::size_t i = 0; i < host.size(); ++i) host[i] = __float2bfloat16(t.k_dense[i]);
      k.copy_from_host(host);
      for (std::size_t i = 0; i < host.size(); ++i) host[i] = __float2bfloat16(t.v_dense[i]);
      v.copy_from_host(host);
      ForwardParams dense = t.params;
      dense.k = k.get();
      dense.v = v.get();
      dense.k_strides = dense.v_strides =
          flashmma::bshd_strides(dense.seqlen_k, dense.heads_kv, dense.head_dim);
      dense.block_table = nullptr;
      dense.block_table_batch_stride = dense.page_size = dense.num_pages = 0;
      flashmma::test::poison(t.o);
      REQUIRE(run(dense, splits).ok());
      CHECK(std::memcmp(paged_o.data(), t.o.to_host().data(),
                        paged_o.size() * sizeof(__nv_bfloat16)) == 0);
      CHECK(std::memcmp(paged_lse.data(), t.lse.to_host().data(),
                        paged_lse.size() * sizeof(float)) == 0);
    }
  }
}

TEST_CASE("paged-cache fields are checked, and nothing is written on error",
          "[gpu][forward][paged]") {
  PagedTensors<__half> t = make_paged_tensors<__half>(shapes()[0], 16, 64);
  const std::vector<__half> o_before = t.o.to_host();
  ForwardParams p = t.params;
  p.block_table_batch_stride = 1;
  const flashmma::Status s = flashmma::forward(p);
  CHECK(s.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK(s.message().find("block_table_batch_stride must be at least") != std::string::npos);
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  CHECK(flashmma::test::same_bytes(o_before, t.o.to_host()));
}
