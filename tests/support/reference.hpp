// SPDX-License-Identifier: Apache-2.0
// The reference attention every forward test is checked against: one output row at a time, on
// the host (CPU tests, compiled by a plain C++ compiler) or on the device (the GPU tests run it
// once per row of a case, one thread per row).
//
// It reads the element-typed Q, K and V through the same int64 strides as ForwardParams and
// follows the library's definition (params.hpp): bottom-right causal mask, grouped-query heads,
// natural-log LSE, O = 0 and LSE = -inf for a row that sees no key. Scores and every sum are
// computed in double. Two precisions:
//
//   kFp64:          everything stays in double: the "true" answer, up to fp64 rounding.
//   kLowPrecision:  the same math, but P = exp(s - max) is rounded to the element type before it
//                   multiplies V and the finished row is rounded to the element type, which are
//                   the two roundings a 16-bit attention kernel cannot avoid. The row sum uses the
//                   unrounded P, as a kernel that keeps it in fp32 does. Its distance from kFp64
//                   measures the error that 16-bit storage alone causes.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <math.h>

#include <cstdint>
#include <limits>

#include "flashmma/macros.hpp"
#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"

namespace flashmma {
namespace test {

// The reference keeps a query row and an output row in fixed arrays of this many doubles.
inline constexpr int kReferenceMaxHeadDim = 256;

enum class ReferencePrecision : int { kFp64, kLowPrecision };

// Widening an fp16 or bf16 value to double is exact.
FLASHMMA_HOST_DEVICE double to_double(__half x) { return static_cast<double>(__half2float(x)); }
FLASHMMA_HOST_DEVICE double to_double(__nv_bfloat16 x) {
  return static_cast<double>(__bfloat162float(x));
}

// Round-to-nearest-even conversion from double.
template <class Element>
FLASHMMA_HOST_DEVICE Element from_double(double x);
template <>
FLASHMMA_HOST_DEVICE __half from_double<__half>(double x) {
  return __double2half(x);
}
template <>
FLASHMMA_HOST_DEVICE __nv_bfloat16 from_double<__nv_bfloat16>(double x) {
  return __double2bfloat16(x);
}

// x rounded to the nearest Element, returned as a double.
template <class Element>
FLASHMMA_HOST_DEVICE double round_to(double x) {
  return to_double(from_double<Element>(x));
}

// Element offset of (batch b, sequence position s, head h, column 0) under `strides`.
FLASHMMA_HOST_DEVICE int64_t element_offset(const TensorStrides& strides, int64_t b, int64_t s,
                                            int64_t h) {
  return b * strides.batch + s * strides.row + h * strides.head;
}

// The inputs of one attention call, as the reference reads them: its shape and its tensors.
// softmax_scale is resolved (never NaN): see resolved_softmax_scale().
template <class Element>
struct ReferenceProblem : ProblemShape {
  const Element* q = nullptr;
  const Element* k = nullptr;
  const Element* v = nullptr;
  TensorStrides q_strides;
  TensorStrides k_strides;
  TensorStrides v_strides;
  double softmax_scale = 0.0;
  bool causal = false;
};

// The scale the library applies: the caller's, or 1 / sqrt(head_dim) computed in float exactly as
// forward() does, so that reference and kernel multiply by the same number.
inline double resolved_softmax_scale(float softmax_scale, int64_t head_dim) {
  if (!(softmax_scale == softmax_scale)) {  // NaN: the default
    return static_cast<double>(1.0f / sqrtf(static_cast<float>(head_dim)));
  }
  return static_cast<double>(softmax_scale);
}

// The reference's view of a ForwardParams whose dtype is Element.
template <class Element>
ReferenceProblem<Element> reference_problem(const ForwardParams& p) {
  ReferenceProblem<Element> problem;
  static_cast<ProblemShape&>(problem) = p;
  problem.q = static_cast<const Element*>(p.q);
  problem.k = static_cast<const Element*>(p.k);
  problem.v = static_cast<const Element*>(p.v);
  problem.q_strides = p.q_strides;
  problem.k_strides = p.k_strides;
  problem.v_strides = p.v_strides;
  problem.softmax_scale = resolved_softmax_scale(p.softmax_scale, p.head_dim);
  problem.causal = p.mask == MaskKind::kCausal;
  return problem;
}

// The largest relative L2 error ||O - ref||_2 / ||ref||_2 against the kFp64 reference that a
// 16-bit kernel may show: a few units of the format's rounding (fp16: 2^-11 = 4.9e-4, bound
// 2e-3; bf16: 2^-8 = 3.9e-3, bound 1.6e-2). The GPU tests and the benchmark's output check use it.
template <class Element>
struct Tolerance;
template <>
struct Tolerance<__half> {
  static constexpr double kRelativeL2 = 2e-3;
};
template <>
struct Tolerance<__nv_bfloat16> {
  static constexpr double kRelativeL2 = 1.6e-2;
};

// Query row i sees keys [0, visible_key_end): all of them, or under the causal mask those with
// j <= i + (seqlen_k - seqlen_q). Zero or less means it sees none.
template <class Element>
FLASHMMA_HOST_DEVICE int64_t visible_key_end(const ReferenceProblem<Element>& p, int64_t i) {
  if (!p.causal) return p.seqlen_k;
  const int64_t end = i + p.diagonal() + 1;
  return end < p.seqlen_k ? end : p.seqlen_k;
}

// The K/V head that query head h reads: heads_q / heads_kv consecutive query heads share one.
template <class Element>
FLASHMMA_HOST_DEVICE int64_t kv_head_for(const ReferenceProblem<Element>& p, int64_t h) {
  return h / p.group_size();
}

// Computes output row (b, h, i) into out[0, head_dim) and returns its natural-log LSE.
// Two passes over the visible keys: the first finds the row max, the second sums and accumulates
// exp(s - max), so that the low-precision mode rounds the same P a finished softmax holds.
// A head_dim above kReferenceMaxHeadDim is a test bug: the row comes back NaN so that it fails.
template <class Element, ReferencePrecision Precision>
FLASHMMA_HOST_DEVICE double reference_row(const ReferenceProblem<Element>& p, int64_t b, int64_t h,
                                          int64_t i, double* out) {
  constexpr double kInfinity = std::numeric_limits<double>::infinity();
  const int dim = static_cast<int>(p.head_dim);
  if (dim < 1 || dim > kReferenceMaxHeadDim) {
    for (int d = 0; d < dim; ++d) out[d] = std::numeric_limits<double>::quiet_NaN();
    return std::numeric_limits<double>::quiet_NaN();
  }
  const int64_t key_end = visible_key_end(p, i);
  if (key_end <= 0) {
    for (int d = 0; d < dim; ++d) out[d] = 0.0;
    return -kInfinity;
  }

  double query[kReferenceMaxHeadDim];
  const Element* q_row = p.q + element_offset(p.q_strides, b, i, h);
  for (int d = 0; d < dim; ++d) query[d] = to_double(q_row[d]);

  const int64_t kv_head = kv_head_for(p, h);
  const Element* k_head = p.k + element_offset(p.k_strides, b, 0, kv_head);
  const Element* v_head = p.v + element_offset(p.v_strides, b, 0, kv_head);
  auto score = [&](int64_t j) {
    const Element* k_row = k_head + j * p.k_strides.row;
    double dot = 0.0;
    for (int d = 0; d < dim; ++d) dot += query[d] * to_double(k_row[d]);
    return p.softmax_scale * dot;
  };

  double row_max = -kInfinity;
  for (int64_t j = 0; j < key_end; ++j) row_max = fmax(row_max, score(j));

  double accumulator[kReferenceMaxHeadDim];
  for (int d = 0; d < dim; ++d) accumulator[d] = 0.0;
  double row_sum = 0.0;
  for (int64_t j = 0; j < key_end; ++j) {
    const double probability = exp(score(j) - row_max);
    row_sum += probability;
    double weight = probability;
    if constexpr (Precision == ReferencePrecision::kLowPrecision) {
      weight = round_to<Element>(probability);
    }
    const Element* v_row = v_head + j * p.v_strides.row;
    for (int d = 0; d < dim; ++d) accumulator[d] += weight * to_double(v_row[d]);
  }

  for (int d = 0; d < dim; ++d) {
    double value = accumulator[d] / row_sum;
    if constexpr (Precision == ReferencePrecision::kLowPrecision) {
      value = round_to<Element>(value);
    }
    out[d] = value;
  }
  return row_max + log(row_sum);
}

}  // namespace test
}  // namespace flashmma
