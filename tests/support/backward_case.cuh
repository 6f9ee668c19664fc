// SPDX-License-Identifier: Apache-2.0
// One backward case on the GPU against the host reference (support/backward_reference.hpp):
// random Q, K, V, dO rounded to the element type, O and the LSE from the reference (rounded as
// the forward would write them), tensors in any test layout (inputs' padding NaN, outputs'
// poisoned), then dQ, dK, dV compared with the fp64 gradients.
//
// Accuracy: the relative L2 error of each gradient (over the elements the tensor holds) must stay
// under kBackwardRelativeL2<Element>, a few times the forward's output bound: the backward rounds
// P, dS and dO to the element type before its GEMMs, as FlashAttention's does. A wrong scale,
// mask, row or transform moves a gradient by O(1) of its norm. Every element outside the tensors
// (layout padding, the guard after the end) must keep its poison.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "flashmma/traits/element.hpp"
#include "support/attention_case.hpp"
#include "support/backward_reference.hpp"
#include "support/gpu_helpers.cuh"
#include "support/random_values.hpp"
#include "support/reference.hpp"

namespace flashmma {
namespace test {

template <class Element>
inline constexpr double kBackwardRelativeL2 = 4 * Tolerance<Element>::kRelativeL2;

// A backward case: the shape, the layout of every tensor, the scale and the gradient mode.
struct BackwardCase : ProblemShape {
  explicit BackwardCase(const ProblemShape& shape) : ProblemShape(shape) {}
  Layout layout = Layout::kBSHD;
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();
  bool accumulate_dkv = false;
  bool deterministic = false;
  ReferenceDropout dropout;  // params' dropout_p, seed and offset, and the reference's mask
  // > 1: the call runs that many times and every run must give the same bytes as the first.
  int repeats = 1;

  std::string describe() const {
    std::ostringstream os;
    os << "batch=" << batch << " seqlen_q=" << seqlen_q << " seqlen_k=" << seqlen_k
       << " heads_q=" << heads_q << " heads_kv=" << heads_kv << " head_dim=" << head_dim
       << " layout=" << layout_name(layout) << " scale=" << softmax_scale
       << (accumulate_dkv ? " accumulate" : "") << (deterministic ? " deterministic" : "")
       << (dropout.p > 0.f ? " dropout=" + std::to_string(dropout.p) : std::string())
       << (repeats > 1 ? " repeats=" + std::to_string(repeats) : std::string());
    return os.str();
  }
};

inline BackwardCase backward_case(int64_t batch, int64_t seqlen_q, int64_t seqlen_k,
                                  int64_t heads_q, int64_t heads_kv, int64_t head_dim,
                                  Layout layout = Layout::kBSHD) {
  BackwardCase c(make_problem_shape(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim));
  c.layout = layout;
  return c;
}

// A device tensor of `seqlen` x `heads` rows in the case's layout, from or to dense BSHD doubles.
template <class Element>
struct LayoutTensor {
  DeviceBuffer<Element> buffer;
  TensorStrides strides;
  int64_t batch, seqlen, heads, head_dim;
  Layout layout;

  LayoutTensor(Layout layout_, int64_t batch_, int64_t seqlen_, int64_t heads_, int64_t head_dim_)
      : buffer(layout_elements(layout_, batch_, seqlen_, heads_, head_dim_) + kGuardElements),
        strides(layout_strides(layout_, seqlen_, heads_, head_dim_)),
        batch(batch_),
        seqlen(seqlen_),
        heads(heads_),
        head_dim(head_dim_),
        layout(layout_) {}

  // Every element NaN / poison, then the tensor's own elements from `dense` (if given).
  void upload(const std::vector<double>* dense) {
    std::vector<Element> host(static_cast<std::size_t>(buffer.size()));
    Element poison_value;
    std::memset(&poison_value, kPoisonByte, sizeof(Element));
    for (Element& x : host) x = poison_value;
    if (dense != nullptr) {
      for_each_row([&](int64_t dense_row, int64_t offset) {
        for (int64_t x = 0; x < head_dim; ++x) {
          host[offset + x] = from_double<Element>((*dense)[dense_row * head_dim + x]);
        }
      });
    }
    buffer.copy_from_host(host);
  }

  // The tensor's elements as dense BSHD doubles; `untouched` counts the elements outside the
  // tensor that lost their poison.
  std::vector<double> download(int64_t& untouched_lost) const {
    const std::vector<Element> host = buffer.to_host();
    std::vector<double> dense(static_cast<std::size_t>(batch * seqlen * heads * head_dim));
    std::vector<bool> inside(host.size(), false);
    for_each_row([&](int64_t dense_row, int64_t offset) {
      for (int64_t x = 0; x < head_dim; ++x) {
        dense[dense_row * head_dim + x] = to_double(host[offset + x]);
        inside[offset + x] = true;
      }
    });
    untouched_lost = 0;
    for (std::size_t i = 0; i < host.size(); ++i) {
      if (!inside[i] && !is_poison(host[i])) ++untouched_lost;
    }
    return dense;
  }

  template <class Visit>
  void for_each_row(Visit&& visit) const {
    for (int64_t b = 0; b < batch; ++b) {
      for (int64_t s = 0; s < seqlen; ++s) {
        for (int64_t h = 0; h < heads; ++h) {
          visit((b * seqlen + s) * heads + h, element_offset(strides, b, s, h));
        }
      }
    }
  }
};

// || got - want ||_2 / || want ||_2 (0 when both are zero).
inline double relative_l2(const std::vector<double>& got, const std::vector<double>& want) {
  double error = 0, norm = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    error += (got[i] - want[i]) * (got[i] - want[i]);
    norm += want[i] * want[i];
  }
  if (norm == 0) return std::sqrt(error);
  return std::sqrt(error / norm);
}

inline bool all_finite(const std::vector<double>& values) {
  for (double x : values) {
    if (!std::isfinite(x)) return false;
  }
  return true;
}

// Runs `launch(params)` (a flashmma::backward call returning Status) on the case with
// `host_policy` in the reference, and checks dQ, dK and dV.
template <class Element, class HostPolicy, class Launch>
void check_backward_case(const BackwardCase& c, const HostPolicy& host_policy, Launch&& launch) {
  INFO(c.describe());
  const double scale = resolved_softmax_scale(c.softmax_scale, c.head_dim);
  const unsigned seed = static_cast<unsigned>(c.batch * 131 + c.seqlen_q * 31 + c.seqlen_k * 7 +
                                              c.heads_q * 3 + c.head_dim);
  const auto rounded = [](std::vector<double> values) {
    for (double& x : values) x = round_to<Element>(x);
    return values;
  };
  const std::vector<double> q = rounded(normal_values(c.q_elements(), seed));
  const std::vector<double> k = rounded(normal_values(c.kv_elements(), seed + 1));
  const std::vector<double> v = rounded(normal_values(c.kv_elements(), seed + 2));
  const std::vector<double> d_o = rounded(normal_values(c.q_elements(), seed + 3));
  const BackwardReference ref = backward_reference(c, scale, host_policy, q, k, v, d_o, c.dropout);
  const std::vector<double> o = rounded(ref.o);

  const auto query_rows = [&] {
    return LayoutTensor<Element>(c.layout, c.batch, c.seqlen_q, c.heads_q, c.head_dim);
  };
  const auto key_rows = [&] {
    return LayoutTensor<Element>(c.layout, c.batch, c.seqlen_k, c.heads_kv, c.head_dim);
  };
  LayoutTensor<Element> q_t = query_rows(), o_t = query_rows(), do_t = query_rows(),
                        dq_t = query_rows();
  LayoutTensor<Element> k_t = key_rows(), v_t = key_rows(), dk_t = key_rows(), dv_t = key_rows();
  q_t.upload(&q);
  k_t.upload(&k);
  v_t.upload(&v);
  o_t.upload(&o);
  do_t.upload(&d_o);
  dq_t.upload(nullptr);
  // With accumulate_dkv, dK and dV start at the reference gradients and must end at twice them.
  dk_t.upload(c.accumulate_dkv ? &ref.dk : nullptr);
  dv_t.upload(c.accumulate_dkv ? &ref.dv : nullptr);

  std::vector<float> lse(ref.lse.size());
  for (std::size_t i = 0; i < lse.size(); ++i) lse[i] = static_cast<float>(ref.lse[i]);
  DeviceBuffer<float> lse_buffer(static_cast<int64_t>(lse.size()));
  lse_buffer.copy_from_host(lse);

  BackwardParams p;
  static_cast<ProblemShape&>(p) = c;
  p.dtype = ElementTraits<Element>::kScalarType;
  p.q = q_t.buffer.get();
  p.k = k_t.buffer.get();
  p.v = v_t.buffer.get();
  p.o = o_t.buffer.get();
  p.lse = lse_buffer.get();
  p.d_o = do_t.buffer.get();
  p.dq = dq_t.buffer.get();
  p.dk = dk_t.buffer.get();
  p.dv = dv_t.buffer.get();
  p.q_strides = q_t.strides;
  p.k_strides = k_t.strides;
  p.v_strides = v_t.strides;
  p.o_strides = o_t.strides;
  p.do_strides = do_t.strides;
  p.dq_strides = dq_t.strides;
  p.dk_strides = dk_t.strides;
  p.dv_strides = dv_t.strides;
  p.softmax_scale = c.softmax_scale;
  p.accumulate_dkv = c.accumulate_dkv;
  p.deterministic = c.deterministic;
  p.dropout_p = c.dropout.p;
  p.dropout_seed = c.dropout.seed;
  p.dropout_offset = c.dropout.offset;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(backward_workspace_bytes(p)));
  poison(workspace);  // the kernels must initialize what they read of it
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.bytes();

  const Status status = launch(p);
  INFO(status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  if (c.repeats > 1) {
    REQUIRE(!c.accumulate_dkv);  // each run must start from the same buffers
    const std::vector<Element> dq0 = dq_t.buffer.to_host(), dk0 = dk_t.buffer.to_host(),
                               dv0 = dv_t.buffer.to_host();
    int differing_runs = 0;
    for (int run = 1; run < c.repeats; ++run) {
      REQUIRE(launch(p).ok());
      if (!same_bytes(dq_t.buffer.to_host(), dq0) || !same_bytes(dk_t.buffer.to_host(), dk0) ||
          !same_bytes(dv_t.buffer.to_host(), dv0)) {
        ++differing_runs;
      }
    }
    INFO("runs whose gradients differ from the first run's in some bit: " << differing_runs);
    CHECK(differing_runs == 0);
  }

  const struct {
    const char* name;
    const LayoutTensor<Element>& tensor;
    const std::vector<double>& want;
    double factor;
  } gradients[] = {{"dq", dq_t, ref.dq, 1.0},
                   {"dk", dk_t, ref.dk, c.accumulate_dkv ? 2.0 : 1.0},
                   {"dv", dv_t, ref.dv, c.accumulate_dkv ? 2.0 : 1.0}};
  for (const auto& g : gradients) {
    int64_t lost = 0;
    const std::vector<double> got = g.tensor.download(lost);
    std::vector<double> want = g.want;
    for (double& x : want) x *= g.factor;
    const double error = relative_l2(got, want);
    const bool finite = all_finite(got);
    INFO(g.name << ": relative L2 error " << error << " (bound " << kBackwardRelativeL2<Element>
                << "), elements outside the tensor written: " << lost);
    CHECK(finite);
    CHECK(error <= kBackwardRelativeL2<Element>);
    CHECK(lost == 0);
  }
}

// Packed sequences of the given lengths (cu_seqlens_q, cu_seqlens_k; lengths 0 allowed): the
// gradients of each sequence against the reference run on that sequence alone (with `dropout`,
// its mask drawn with the sequence's index as the batch index).
template <class Element, class HostPolicy, class Launch>
void check_backward_varlen_case(const std::vector<int32_t>& lengths_q,
                                const std::vector<int32_t>& lengths_k, int64_t heads_q,
                                int64_t heads_kv, int64_t head_dim, const HostPolicy& host_policy,
                                Launch&& launch, ReferenceDropout dropout = {}) {
  const int64_t batch = static_cast<int64_t>(lengths_q.size());
  std::vector<int32_t> cu_q{0}, cu_k{0};
  for (int64_t b = 0; b < batch; ++b) {
    cu_q.push_back(cu_q.back() + lengths_q[b]);
    cu_k.push_back(cu_k.back() + lengths_k[b]);
  }
  const int64_t total_q = cu_q.back(), total_k = cu_k.back();
  const int64_t max_q = *std::max_element(lengths_q.begin(), lengths_q.end());
  const int64_t max_k = *std::max_element(lengths_k.begin(), lengths_k.end());
  const double scale = resolved_softmax_scale(std::numeric_limits<float>::quiet_NaN(), head_dim);
  const auto rounded = [](std::vector<double> values) {
    for (double& x : values) x = round_to<Element>(x);
    return values;
  };
  const std::vector<double> q = rounded(normal_values(total_q * heads_q * head_dim, 11));
  const std::vector<double> k = rounded(normal_values(total_k * heads_kv * head_dim, 12));
  const std::vector<double> v = rounded(normal_values(total_k * heads_kv * head_dim, 13));
  const std::vector<double> d_o = rounded(normal_values(total_q * heads_q * head_dim, 14));
  std::vector<double> o(q.size()), dq(q.size()), dk(k.size()), dv(v.size());
  std::vector<float> lse(static_cast<std::size_t>(heads_q * total_q));
  const int64_t q_row = heads_q * head_dim, kv_row = heads_kv * head_dim;
  for (int64_t b = 0; b < batch; ++b) {
    const ProblemShape shape =
        make_problem_shape(1, lengths_q[b], lengths_k[b], heads_q, heads_kv, head_dim);
    const auto slice = [](const std::vector<double>& x, int64_t first, int64_t rows, int64_t row) {
      return std::vector<double>(x.begin() + first * row, x.begin() + (first + rows) * row);
    };
    dropout.first_batch = b;
    const BackwardReference r = backward_reference(
        shape, scale, host_policy, slice(q, cu_q[b], lengths_q[b], q_row),
        slice(k, cu_k[b], lengths_k[b], kv_row), slice(v, cu_k[b], lengths_k[b], kv_row),
        slice(d_o, cu_q[b], lengths_q[b], q_row), dropout);
    std::copy(r.o.begin(), r.o.end(), o.begin() + cu_q[b] * q_row);
    std::copy(r.dq.begin(), r.dq.end(), dq.begin() + cu_q[b] * q_row);
    std::copy(r.dk.begin(), r.dk.end(), dk.begin() + cu_k[b] * kv_row);
    std::copy(r.dv.begin(), r.dv.end(), dv.begin() + cu_k[b] * kv_row);
    for (int64_t h = 0; h < heads_q; ++h) {
      for (int64_t i = 0; i < lengths_q[b]; ++i) {
        lse[h * total_q + cu_q[b] + i] = static_cast<float>(r.lse[h * lengths_q[b] + i]);
      }
    }
  }
  o = rounded(o);

  // Packed tensors are one "batch entry" of all rows in LayoutTensor's terms.
  const auto packed = [&](int64_t rows, int64_t heads) {
    return LayoutTensor<Element>(Layout::kBSHD, 1, rows, heads, head_dim);
  };
  LayoutTensor<Element> q_t = packed(total_q, heads_q), o_t = packed(total_q, heads_q),
                        do_t = packed(total_q, heads_q), dq_t = packed(total_q, heads_q);
  LayoutTensor<Element> k_t = packed(total_k, heads_kv), v_t = packed(total_k, heads_kv),
                        dk_t = packed(total_k, heads_kv), dv_t = packed(total_k, heads_kv);
  q_t.upload(&q);
  k_t.upload(&k);
  v_t.upload(&v);
  o_t.upload(&o);
  do_t.upload(&d_o);
  dq_t.upload(nullptr);
  dk_t.upload(nullptr);
  dv_t.upload(nullptr);
  DeviceBuffer<float> lse_buffer(static_cast<int64_t>(lse.size()));
  lse_buffer.copy_from_host(lse);
  DeviceBuffer<int32_t> cu_q_buffer(batch + 1), cu_k_buffer(batch + 1);
  cu_q_buffer.copy_from_host(cu_q);
  cu_k_buffer.copy_from_host(cu_k);

  BackwardParams p;
  static_cast<ProblemShape&>(p) =
      make_problem_shape(batch, max_q, max_k, heads_q, heads_kv, head_dim);
  p.dtype = ElementTraits<Element>::kScalarType;
  p.cu_seqlens_q = cu_q_buffer.get();
  p.cu_seqlens_k = cu_k_buffer.get();
  p.total_q = total_q;
  const auto strides = [](const LayoutTensor<Element>& t) {
    TensorStrides packed_strides = t.strides;
    packed_strides.batch = 0;
    return packed_strides;
  };
  p.q = q_t.buffer.get();
  p.k = k_t.buffer.get();
  p.v = v_t.buffer.get();
  p.o = o_t.buffer.get();
  p.lse = lse_buffer.get();
  p.d_o = do_t.buffer.get();
  p.dq = dq_t.buffer.get();
  p.dk = dk_t.buffer.get();
  p.dv = dv_t.buffer.get();
  p.q_strides = strides(q_t);
  p.k_strides = strides(k_t);
  p.v_strides = strides(v_t);
  p.o_strides = strides(o_t);
  p.do_strides = strides(do_t);
  p.dq_strides = strides(dq_t);
  p.dk_strides = strides(dk_t);
  p.dv_strides = strides(dv_t);
  p.dropout_p = dropout.p;
  p.dropout_seed = dropout.seed;
  p.dropout_offset = dropout.offset;
  DeviceBuffer<unsigned char> workspace(static_cast<int64_t>(backward_workspace_bytes(p)));
  poison(workspace);
  p.workspace = workspace.get();
  p.workspace_bytes = workspace.bytes();

  const Status status = launch(p);
  INFO(status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const struct {
    const char* name;
    const LayoutTensor<Element>& tensor;
    const std::vector<double>& want;
  } gradients[] = {{"dq", dq_t, dq}, {"dk", dk_t, dk}, {"dv", dv_t, dv}};
  for (const auto& g : gradients) {
    int64_t lost = 0;
    const std::vector<double> got = g.tensor.download(lost);
    const double error = relative_l2(got, g.want);
    INFO(g.name << ": relative L2 error " << error << " (bound " << kBackwardRelativeL2<Element>
                << "), elements outside the tensor written: " << lost);
    CHECK(all_finite(got));
    CHECK(error <= kBackwardRelativeL2<Element>);
    CHECK(lost == 0);
  }
}

}  // namespace test
}  // namespace flashmma
