// SPDX-License-Identifier: Apache-2.0
// Checks a benchmark row's output against the test suite's reference attention
// (tests/support/reference.hpp), so that no number is reported for a kernel that computes the
// wrong thing: kCheckedRows query rows, spread over every batch, head and position, are
// recomputed in fp64 on the device (one thread per row) and compared on the host by the tests'
// rule for O, a relative L2 error of at most Tolerance<Element>::kRelativeL2 (2e-3 for fp16,
// 1.6e-2 for bf16).
//
// That reference knows the causal mask only. A row with a sliding window, a softcap or ALiBi is
// recomputed by variant_reference_row below instead, the same fp64 computation with the variant
// applied as params.hpp defines it, so that a kernel which ignores a variant field fails.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <vector>

#include "device_buffer.hpp"
#include "flashmma/params.hpp"
#include "support/reference.hpp"

namespace flashmma_bench {

inline constexpr int kCheckedRows = 64;

struct OutputCheck {
  int rows = 0;  // query rows recomputed
  double relative_l2_error = std::numeric_limits<double>::quiet_NaN();  // over those rows
  double max_error = std::numeric_limits<double>::quiet_NaN();          // max |O - reference|
  double bound = std::numeric_limits<double>::quiet_NaN();  // largest relative L2 error allowed
  bool passed() const { return relative_l2_error <= bound; }
};

// Flat index (batch, head, query) of checked row r of `rows`, spread evenly over `total` rows;
// the first and the last row are always among them.
__host__ __device__ inline int64_t checked_row(int r, int rows, int64_t total) {
  if (rows <= 1) return 0;
  return static_cast<int64_t>(static_cast<double>(r) * static_cast<double>(total - 1) /
                              static_cast<double>(rows - 1));
}

// The variant fields of ForwardParams, as the reference applies them.
struct ScoreVariant {
  int64_t window_left = -1;   // -1: unbounded
  int64_t window_right = -1;  // -1: unbounded (the causal mask makes it 0)
  double softcap = 0.0;       // 0: off
  const float* alibi_slopes = nullptr;  // device; nullptr: off
  int64_t alibi_batch_stride = 0;

  __host__ __device__ bool any() const {
    return window_left >= 0 || window_right >= 0 || softcap > 0.0 || alibi_slopes != nullptr;
  }
};

inline ScoreVariant score_variant(const flashmma::ForwardParams& p) {
  return ScoreVariant{p.window_left, p.window_right, static_cast<double>(p.softcap),
                      p.alibi_slopes, p.alibi_batch_stride};
}

// Output row (b, h, i) in fp64 under a variant: query i sees keys [i + d - left, i + d + right],
// d = seqlen_k - seqlen_q; its logit for key j is the scaled score s, then softcap *
// tanh(s / softcap), then - slope(b, h) * |i + d - j|. A row that sees no key is O = 0. The same
// two passes as the tests' reference_row, over the visible keys only.
template <class Element>
__device__ void variant_reference_row(const flashmma::test::ReferenceProblem<Element>& p,
                                      const ScoreVariant& variant, int64_t b, int64_t h,
                                      int64_t i, double* out) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  const int dim = static_cast<int>(p.head_dim);
  if (dim < 1 || dim > flashmma::test::kReferenceMaxHeadDim) {
    for (int x = 0; x < dim; ++x) out[x] = std::numeric_limits<double>::quiet_NaN();
    return;
  }
  const int64_t diagonal = i + p.seqlen_k - p.seqlen_q;
  const int64_t right = p.causal ? 0 : variant.window_right;
  const int64_t first = diagonal - variant.window_left;
  const int64_t key_begin = variant.window_left < 0 || first < 0 ? 0 : first;
  const int64_t last = diagonal + right;
  const int64_t key_end = right < 0 || last + 1 > p.seqlen_k ? p.seqlen_k : last + 1;
  if (key_end <= key_begin) {
    for (int x = 0; x < dim; ++x) out[x] = 0.0;
    return;
  }

  double query[flashmma::test::kReferenceMaxHeadDim];
  const Element* q_row = p.q + flashmma::test::element_offset(p.q_strides, b, i, h);
  for (int x = 0; x < dim; ++x) query[x] = flashmma::test::to_double(q_row[x]);
  const double slope = variant.alibi_slopes == nullptr
                           ? 0.0
                           : static_cast<double>(
                                 variant.alibi_slopes[b * variant.alibi_batch_stride + h]);

  const int64_t kv_head = flashmma::test::kv_head_for(p, h);
  const Element* k_head = p.k + flashmma::test::element_offset(p.k_strides, b, 0, kv_head);
  const Element* v_head = p.v + flashmma::test::element_offset(p.v_strides, b, 0, kv_head);
  auto logit = [&](int64_t j) {
    const Element* k_row = k_head + j * p.k_strides.row;
    double dot = 0.0;
    for (int x = 0; x < dim; ++x) dot += query[x] * flashmma::test::to_double(k_row[x]);
    double score = p.softmax_scale * dot;
    if (variant.softcap > 0.0) score = variant.softcap * tanh(score / variant.softcap);
    return score - slope * fabs(static_cast<double>(diagonal - j));
  };

  double row_max = -kInfinity;
  for (int64_t j = key_begin; j < key_end; ++j) row_max = fmax(row_max, logit(j));
  double accumulator[flashmma::test::kReferenceMaxHeadDim];
  for (int x = 0; x < dim; ++x) accumulator[x] = 0.0;
  double row_sum = 0.0;
  for (int64_t j = key_begin; j < key_end; ++j) {
    const double probability = exp(logit(j) - row_max);
    row_sum += probability;
    const Element* v_row = v_head + j * p.v_strides.row;
    for (int x = 0; x < dim; ++x) {
      accumulator[x] += probability * flashmma::test::to_double(v_row[x]);
    }
  }
  for (int x = 0; x < dim; ++x) out[x] = accumulator[x] / row_sum;
}

template <class Element>
__global__ void reference_rows_kernel(flashmma::test::ReferenceProblem<Element> problem,
                                      ScoreVariant variant, const Element* o,
                                      flashmma::TensorStrides o_strides, int rows,
                                      int64_t total_rows, double* expected, double* actual) {
  const int r = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x);
  if (r >= rows) return;
  const int64_t flat = checked_row(r, rows, total_rows);
  const int64_t i = flat % problem.seqlen_q;
  const int64_t h = (flat / problem.seqlen_q) % problem.heads_q;
  const int64_t b = flat / (problem.seqlen_q * problem.heads_q);
  const int64_t at = static_cast<int64_t>(r) * problem.head_dim;
  if (variant.any()) {
    variant_reference_row(problem, variant, b, h, i, expected + at);
  } else {
    flashmma::test::reference_row<Element, flashmma::test::ReferencePrecision::kFp64>(
        problem, b, h, i, expected + at);
  }
  const Element* o_row = o + flashmma::test::element_offset(o_strides, b, i, h);
  for (int64_t d = 0; d < problem.head_dim; ++d) {
    actual[at + d] = flashmma::test::to_double(o_row[d]);
  }
}

// Compares the O that `params` points at (the kernel has run and finished) with the reference.
// Throws CudaFailure on a CUDA error, OutOfMemory when its buffer does not fit.
template <class Element>
OutputCheck check_output(const flashmma::ForwardParams& params) {
  OutputCheck check;
  const int64_t total_rows = params.batch * params.heads_q * params.seqlen_q;
  check.rows = static_cast<int>(std::min<int64_t>(kCheckedRows, total_rows));
  check.bound = flashmma::test::Tolerance<Element>::kRelativeL2;
  if (check.rows == 0) {
    check.relative_l2_error = check.max_error = 0.0;
    return check;
  }
  const std::size_t values = static_cast<std::size_t>(check.rows) * params.head_dim;
  DeviceBuffer device_values(2 * values * sizeof(double));  // expected, then actual
  double* const expected_values = device_values.as<double>();
  constexpr int kThreads = 64;
  reference_rows_kernel<Element><<<(check.rows + kThreads - 1) / kThreads, kThreads>>>(
      flashmma::test::reference_problem<Element>(params), score_variant(params),
      static_cast<const Element*>(params.o), params.o_strides, check.rows, total_rows,
      expected_values, expected_values + values);
  check_cuda(cudaGetLastError(), "launching the output check's reference kernel");
  std::vector<double> host(2 * values);
  check_cuda(cudaMemcpy(host.data(), expected_values, host.size() * sizeof(double),
                        cudaMemcpyDeviceToHost),
             "the output check's reference kernel");

  double error_sq = 0.0, reference_sq = 0.0, max_error = 0.0;
  for (std::size_t at = 0; at < values; ++at) {
    const double expected = host[at];
    const double difference = std::fabs(host[values + at] - expected);
    // NaN in O fails the check: it propagates through the sums below.
    max_error = std::isnan(difference) ? difference : std::max(max_error, difference);
    error_sq += difference * difference;
    reference_sq += expected * expected;
  }
  check.max_error = max_error;
  check.relative_l2_error =
      reference_sq > 0.0 ? std::sqrt(error_sq / reference_sq) : (error_sq > 0.0 ? 1.0 : 0.0);
  return check;
}

inline OutputCheck check_output(const flashmma::ForwardParams& params) {
  return params.dtype == flashmma::ScalarType::kFloat16 ? check_output<__half>(params)
                                                        : check_output<__nv_bfloat16>(params);
}

}  // namespace flashmma_bench
