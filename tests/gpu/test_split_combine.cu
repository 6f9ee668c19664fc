// SPDX-License-Identifier: Apache-2.0
// The split-KV combine step (attention/split_combine.cuh) on its own: partials built on the host
// from rows of known logits and values, each split a consecutive part of a row's keys
// (split_key_tiles over single keys), merged on the GPU and compared with the softmax over the
// whole row in double. Empty splits hold NaN in their O, which must never be read; rows with no
// key at all must come out as O = 0 and LSE = -inf.
#include "support/catch.hpp"

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <random>
#include <type_traits>
#include <vector>

#include "flashmma/attention/split_combine.cuh"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/launch.cuh"
#include "support/gpu_helpers.cuh"
#include "support/reference.hpp"

namespace {

using flashmma::test::DeviceBuffer;

struct CombineCase {
  int64_t batch, heads, seqlen_q, head_dim, splits, max_keys;
};

template <class Element>
void check_combine(const CombineCase& c) {
  INFO("batch " << c.batch << " heads " << c.heads << " seqlen_q " << c.seqlen_q << " head_dim "
                << c.head_dim << " splits " << c.splits << " keys <= " << c.max_keys);
  const flashmma::SplitWorkspace layout =
      flashmma::split_workspace(c.splits, c.batch * c.heads * c.seqlen_q, c.head_dim);
  REQUIRE(layout.bytes > 0);
  std::vector<float> partial_o(static_cast<std::size_t>(c.splits * layout.rows * c.head_dim));
  std::vector<float> partial_lse(static_cast<std::size_t>(c.splits * layout.rows));
  std::vector<double> want_o(static_cast<std::size_t>(layout.rows * c.head_dim));
  std::vector<double> want_lse(static_cast<std::size_t>(layout.rows));

  std::mt19937_64 rng(static_cast<uint64_t>(c.splits * 1000 + c.head_dim));
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int64_t> key_count(0, c.max_keys);
  const double nan = std::numeric_limits<double>::quiet_NaN();
  for (int64_t row = 0; row < layout.rows; ++row) {
    // Row 0 has no key at all; the others a random count, some fewer than the splits.
    const int64_t keys = row == 0 ? 0 : key_count(rng);
    std::vector<double> logits(static_cast<std::size_t>(keys));
    std::vector<double> values(static_cast<std::size_t>(keys * c.head_dim));
    for (double& l : logits) l = 3.0 * normal(rng);
    for (double& v : values) v = normal(rng);
    const auto softmax_over = [&](int64_t first, int64_t count, double* o, double& lse) {
      double m = -INFINITY;
      for (int64_t j = first; j < first + count; ++j) m = std::max(m, logits[j]);
      double sum = 0;
      for (int64_t j = first; j < first + count; ++j) sum += std::exp(logits[j] - m);
      lse = count == 0 ? -INFINITY : m + std::log(sum);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        double acc = 0;
        for (int64_t j = first; j < first + count; ++j) {
          acc += std::exp(logits[j] - lse) * values[j * c.head_dim + d];
        }
        o[d] = count == 0 ? 0.0 : acc;
      }
    };
    double lse = 0;
    softmax_over(0, keys, &want_o[row * c.head_dim], lse);
    want_lse[row] = lse;
    std::vector<double> o(static_cast<std::size_t>(c.head_dim));
    for (int64_t s = 0; s < c.splits; ++s) {
      const flashmma::TileRange part = flashmma::split_key_tiles(
          flashmma::TileRange{0, static_cast<int>(keys)}, static_cast<unsigned>(s),
          static_cast<unsigned>(c.splits));
      double part_lse = 0;
      softmax_over(part.first, part.count, o.data(), part_lse);
      partial_lse[layout.lse_index(s, row)] = static_cast<float>(part_lse);
      for (int64_t d = 0; d < c.head_dim; ++d) {
        partial_o[layout.o_index(s, row, d)] =
            static_cast<float>(part.count == 0 ? nan : o[d]);  // never read when empty
      }
    }
  }

  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(layout.bytes));
  FLASHMMA_CUDA_CHECK(cudaMemcpy(workspace.get() + layout.o_offset, partial_o.data(),
                                 partial_o.size() * sizeof(float), cudaMemcpyHostToDevice));
  FLASHMMA_CUDA_CHECK(cudaMemcpy(workspace.get() + layout.lse_offset, partial_lse.data(),
                                 partial_lse.size() * sizeof(float), cudaMemcpyHostToDevice));
  // O as [batch, seqlen_q, heads, head_dim] with 8 elements of padding per row.
  flashmma::TensorStrides strides;
  strides.head = c.head_dim + 8;
  strides.row = c.heads * strides.head;
  strides.batch = c.seqlen_q * strides.row;
  DeviceBuffer<Element> out(c.batch * strides.batch);
  DeviceBuffer<float> lse(layout.rows);
  flashmma::test::poison(out);
  flashmma::test::poison(lse);

  using Kernel = flashmma::SplitCombineKernel<Element>;
  typename Kernel::Params params;
  params.partial_o = reinterpret_cast<const float*>(workspace.get() + layout.o_offset);
  params.partial_lse = reinterpret_cast<const float*>(workspace.get() + layout.lse_offset);
  params.layout = layout;
  params.o = out.get();
  params.o_strides = strides;
  params.lse = lse.get();
  params.heads_q = c.heads;
  params.rows_per_head = c.seqlen_q;
  const flashmma::Status status = flashmma::detail::launch_kernel<Kernel>(
      params, flashmma::GridShape{Kernel::blocks(layout.rows), 1, 1}, cudaStream_t{});
  INFO(status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());

  const std::vector<Element> got_o = out.to_host();
  const std::vector<float> got_lse = lse.to_host();
  const double tolerance = std::is_same_v<Element, __half> ? 2e-3 : 1.6e-2;
  double worst = 0;
  for (int64_t row = 0; row < layout.rows; ++row) {
    const int64_t query = row % c.seqlen_q;
    const int64_t head = row / c.seqlen_q % c.heads;
    const int64_t batch = row / c.seqlen_q / c.heads;
    const int64_t base = batch * strides.batch + query * strides.row + head * strides.head;
    if (std::isinf(want_lse[row])) {
      CHECK(std::isinf(got_lse[row]));
      CHECK(got_lse[row] < 0);
    } else {
      CHECK(std::fabs(got_lse[row] - want_lse[row]) <= 1e-5 * (1 + std::fabs(want_lse[row])));
    }
    for (int64_t d = 0; d < c.head_dim; ++d) {
      const double got = flashmma::test::to_double(got_o[base + d]);
      worst = std::max(worst, std::fabs(got - want_o[row * c.head_dim + d]));
    }
    // The padding after each row is never written.
    CHECK(flashmma::test::is_poison(got_o[base + c.head_dim]));
  }
  INFO("largest |O - reference| " << worst);
  CHECK(worst <= tolerance);
}

}  // namespace

TEMPLATE_TEST_CASE("the split-KV combine merges partials into the whole row's softmax",
                   "[gpu][split_kv]", __half, __nv_bfloat16) {
  check_combine<TestType>({2, 3, 5, 72, 2, 40});      // head_dim not a multiple of 32
  check_combine<TestType>({1, 4, 3, 256, 5, 300});    // the largest head dim
  check_combine<TestType>({2, 2, 1, 128, 128, 200});  // many splits, many of them empty
  check_combine<TestType>({3, 1, 2, 8, 7, 9});        // one column per lane at most
  check_combine<TestType>({1, 8, 1, 136, 50, 400});   // 3 slots of 34 threads; 17 splits each
}
