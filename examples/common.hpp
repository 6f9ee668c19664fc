// SPDX-License-Identifier: Apache-2.0
// What the examples share: device buffers, random inputs, and a CPU reference that checks a
// sample of query rows in double precision. Not part of the library.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "flashmma/flashmma.cuh"

namespace example {

// Prints what failed and returns false unless `error` is cudaSuccess.
inline bool cuda_ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::fprintf(stderr, "%s failed: %s (%s)\n", what, cudaGetErrorName(error),
               cudaGetErrorString(error));
  return false;
}

// Prints the message and returns false unless `status` is ok.
inline bool status_ok(const flashmma::Status& status, const char* what) {
  if (status.ok()) return true;
  std::fprintf(stderr, "%s failed: %s\n", what, status.message().c_str());
  return false;
}

// True when a CUDA device can be used; otherwise prints why, with the runtime's own error (a
// driver older than the toolkit is not the same problem as a machine without a GPU).
inline bool have_cuda_device() {
  int count = 0;
  const cudaError_t error = cudaGetDeviceCount(&count);
  if (error == cudaSuccess && count > 0) return true;
  std::fflush(stdout);  // keep what was printed before the message
  if (error != cudaSuccess) {
    std::fprintf(stderr, "no usable CUDA device: cudaGetDeviceCount failed: %s (%s)\n",
                 cudaGetErrorName(error), cudaGetErrorString(error));
  } else {
    std::fprintf(stderr, "no CUDA device found (cudaGetDeviceCount returned 0)\n");
  }
  return false;
}

// Prints the GPU and the kernel flashmma::forward(params) picks on it, named by the library
// (describe_default_kernel): the Hopper kernel (wgmma + TMA) or the portable one (mma.sync),
// with its config. On an H100 or H200 the Hopper kernel exists only in sm_90a code; a program
// built for plain sm_90 runs the portable kernel there, which is said, with how to build it.
inline bool print_default_kernel(const flashmma::ForwardParams& params) {
  int device_index = 0;
  cudaDeviceProp properties{};
  flashmma::DeviceInfo device;
  std::string kernel;
  const bool sm90a_code = flashmma::sm90a_code_loaded();
  if (!cuda_ok(cudaGetDevice(&device_index), "cudaGetDevice") ||
      !cuda_ok(cudaGetDeviceProperties(&properties, device_index), "cudaGetDeviceProperties") ||
      !status_ok(flashmma::query_device(device), "flashmma::query_device") ||
      !status_ok(flashmma::describe_default_kernel(params, device, sm90a_code, kernel),
                 "flashmma::describe_default_kernel")) {
    return false;
  }
  constexpr int kHopper = 90;  // compute capability 9.0: H100, H200
  std::printf("GPU: %s, compute capability %d.%d%s\n", properties.name, properties.major,
              properties.minor,
              device.compute_capability == kHopper
                  ? (sm90a_code ? ", sm_90a code loaded" : ", no sm_90a code in this program")
                  : "");
  const bool hopper_kernel = kernel.find("sm90::") != std::string::npos;
  std::printf("kernel: %s: %s\n",
              hopper_kernel ? "the Hopper kernel (wgmma + TMA)" : "the portable kernel (mma.sync)",
              kernel.c_str());
  if (device.compute_capability == kHopper && !sm90a_code) {
    std::printf("note: this GPU runs flashmma's Hopper kernels only from sm_90a code; build with "
                "-DCMAKE_CUDA_ARCHITECTURES=90a (or native, which flashmma's own build turns "
                "into 90a here)\n");
  }
  return true;
}

inline float to_float(__half x) { return __half2float(x); }
inline float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }
template <class Element>
Element from_float(float x);
template <>
inline __half from_float<__half>(float x) { return __float2half_rn(x); }
template <>
inline __nv_bfloat16 from_float<__nv_bfloat16>(float x) { return __float2bfloat16_rn(x); }

// One device allocation, freed on scope exit.
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(pointer_); }

  bool allocate(std::size_t bytes) {
    bytes_ = bytes;
    return cuda_ok(cudaMalloc(&pointer_, bytes), "cudaMalloc");
  }
  void* get() const { return pointer_; }
  std::size_t bytes() const { return bytes_; }

 private:
  void* pointer_ = nullptr;
  std::size_t bytes_ = 0;
};

// The problem's shape (batch, lengths, heads, head dim) and its mask.
struct Shape : flashmma::ProblemShape {
  Shape() : flashmma::ProblemShape(flashmma::make_problem_shape(2, 1024, 1024, 8, 8, 128)) {}
  bool causal = false;
};

// Q, K, V on the host (random normal, fixed seed, rounded to Element) and Q, K, V, O, LSE on the
// device. Every tensor is contiguous [batch, seq, heads, head_dim]; the LSE is [batch, heads, seq].
template <class Element>
struct Problem {
  Shape shape;
  std::vector<Element> q, k, v;
  DeviceBuffer q_dev, k_dev, v_dev, o_dev, lse_dev;

  bool init(const Shape& s, uint64_t seed) {
    shape = s;
    std::mt19937_64 generator(seed);
    std::normal_distribution<float> normal(0.f, 1.f);
    auto fill = [&](std::vector<Element>& t, int64_t elements) {
      t.resize(static_cast<std::size_t>(elements));
      for (Element& x : t) x = from_float<Element>(normal(generator));
    };
    fill(q, s.q_elements());
    fill(k, s.kv_elements());
    fill(v, s.kv_elements());
    const std::size_t lse_bytes = sizeof(float) * s.lse_elements();
    return q_dev.allocate(q.size() * sizeof(Element)) &&
           k_dev.allocate(k.size() * sizeof(Element)) &&
           v_dev.allocate(v.size() * sizeof(Element)) &&
           o_dev.allocate(q.size() * sizeof(Element)) && lse_dev.allocate(lse_bytes) &&
           cuda_ok(cudaMemcpy(q_dev.get(), q.data(), q_dev.bytes(), cudaMemcpyHostToDevice),
                   "copying q") &&
           cuda_ok(cudaMemcpy(k_dev.get(), k.data(), k_dev.bytes(), cudaMemcpyHostToDevice),
                   "copying k") &&
           cuda_ok(cudaMemcpy(v_dev.get(), v.data(), v_dev.bytes(), cudaMemcpyHostToDevice),
                   "copying v") &&
           // All bits set is NaN in fp16, bf16 and fp32: an element the kernel misses shows up.
           cuda_ok(cudaMemset(o_dev.get(), 0xff, o_dev.bytes()), "cudaMemset(o)") &&
           cuda_ok(cudaMemset(lse_dev.get(), 0xff, lse_dev.bytes()), "cudaMemset(lse)");
  }

  flashmma::ForwardParams params() const {
    flashmma::ForwardParams p;
    static_cast<flashmma::ProblemShape&>(p) = shape;
    p.dtype = flashmma::ElementTraits<Element>::kScalarType;
    p.q = q_dev.get();
    p.k = k_dev.get();
    p.v = v_dev.get();
    p.o = o_dev.get();
    p.lse = static_cast<float*>(lse_dev.get());
    p.q_strides = flashmma::bshd_strides(shape.seqlen_q, shape.heads_q, shape.head_dim);
    p.k_strides = flashmma::bshd_strides(shape.seqlen_k, shape.heads_kv, shape.head_dim);
    p.v_strides = p.k_strides;
    p.o_strides = p.q_strides;
    p.mask = shape.causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;
    return p;  // softmax_scale stays NaN: 1 / sqrt(head_dim)
  }
};

struct CheckResult {
  int rows = 0;
  double max_abs_error = 0;
  double rel_l2_error = 0;
  double max_lse_error = 0;
  bool finite = true;  // every checked value is finite where the reference is

  // fp16 keeps 11 significant bits, bf16 8: the bound follows the rounding of P and O.
  static double rel_l2_bound(flashmma::ScalarType dtype) {
    return dtype == flashmma::ScalarType::kFloat16 ? 2e-3 : 1.6e-2;
  }
  static constexpr double kLseBound = 1e-3;  // the LSE is fp32 math on exact 16-bit inputs

  bool passed(flashmma::ScalarType dtype) const {
    return finite && rel_l2_error < rel_l2_bound(dtype) && max_lse_error < kLseBound;
  }
};

// Reference output row and LSE of query `row` in (batch, head), in double precision.
// A row that sees no key gets O = 0 and LSE = -inf, as in the library.
template <class Element>
void reference_row(const Problem<Element>& pb, int64_t batch, int64_t head, int64_t row,
                   double scale, std::vector<double>& out, double& lse) {
  const Shape& s = pb.shape;
  const int64_t kv_head = head / s.group_size();
  const int64_t d = s.head_dim;
  const Element* q = &pb.q[((batch * s.seqlen_q + row) * s.heads_q + head) * d];
  auto kv_row = [&](const std::vector<Element>& t, int64_t key) {
    return &t[((batch * s.seqlen_k + key) * s.heads_kv + kv_head) * d];
  };
  const int64_t keys = s.causal ? std::min(s.seqlen_k, row + s.diagonal() + 1) : s.seqlen_k;
  out.assign(static_cast<std::size_t>(d), 0.0);
  if (keys <= 0) {
    lse = -std::numeric_limits<double>::infinity();
    return;
  }
  std::vector<double> scores(static_cast<std::size_t>(keys));
  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < keys; ++j) {
    const Element* kj = kv_row(pb.k, j);
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) dot += double(to_float(q[c])) * to_float(kj[c]);
    scores[j] = dot * scale;
    row_max = std::max(row_max, scores[j]);
  }
  double row_sum = 0;
  for (int64_t j = 0; j < keys; ++j) {
    const double p = std::exp(scores[j] - row_max);
    row_sum += p;
    const Element* vj = kv_row(pb.v, j);
    for (int64_t c = 0; c < d; ++c) out[c] += p * to_float(vj[c]);
  }
  for (double& x : out) x /= row_sum;
  lse = row_max + std::log(row_sum);
}

// Copies O and the LSE back and compares, against reference_row, `sample_rows` query rows spread
// evenly over the sequence (first and last included) and over every (batch, head), plus every row
// of the last (batch, head) when that costs at most kFullHeadWork multiply-adds.
inline constexpr int64_t kFullHeadWork = int64_t{1} << 28;

template <class Element>
bool check_against_reference(const Problem<Element>& pb, int sample_rows, CheckResult& result) {
  const Shape& s = pb.shape;
  std::vector<Element> o(pb.q.size());
  std::vector<float> lse(static_cast<std::size_t>(s.lse_elements()));
  if (!cuda_ok(cudaMemcpy(o.data(), pb.o_dev.get(), pb.o_dev.bytes(), cudaMemcpyDeviceToHost),
               "copying o back") ||
      !cuda_ok(cudaMemcpy(lse.data(), pb.lse_dev.get(), pb.lse_dev.bytes(),
                          cudaMemcpyDeviceToHost),
               "copying lse back")) {
    return false;
  }

  struct RowId {
    int64_t batch_head, row;
  };
  std::vector<RowId> rows;
  const int64_t heads_total = s.batch * s.heads_q;
  for (int r = 0; r < sample_rows; ++r) {
    const int64_t row = sample_rows > 1 ? (s.seqlen_q - 1) * r / (sample_rows - 1) : 0;
    const int64_t bh = heads_total > sample_rows ? heads_total * r / sample_rows : r % heads_total;
    rows.push_back({bh, row});
  }
  if (s.seqlen_q * s.seqlen_k * s.head_dim <= kFullHeadWork) {
    for (int64_t row = 0; row < s.seqlen_q; ++row) rows.push_back({heads_total - 1, row});
  }

  const double scale = 1.0 / std::sqrt(double(s.head_dim));
  double error_sq = 0, reference_sq = 0;
  std::vector<double> expected;
  result = CheckResult{};
  result.rows = static_cast<int>(rows.size());
  for (const RowId& id : rows) {
    const int64_t batch = id.batch_head / s.heads_q, head = id.batch_head % s.heads_q;
    double expected_lse = 0;
    reference_row(pb, batch, head, id.row, scale, expected, expected_lse);

    const Element* got = &o[((batch * s.seqlen_q + id.row) * s.heads_q + head) * s.head_dim];
    for (int64_t c = 0; c < s.head_dim; ++c) {
      const double value = to_float(got[c]);
      if (!std::isfinite(value)) result.finite = false;
      const double error = std::abs(value - expected[c]);
      result.max_abs_error = std::max(result.max_abs_error, error);
      error_sq += error * error;
      reference_sq += expected[c] * expected[c];
    }
    const double got_lse = lse[id.batch_head * s.seqlen_q + id.row];
    if (std::isinf(expected_lse)) {
      if (!(std::isinf(got_lse) && got_lse < 0)) result.finite = false;
    } else if (!std::isfinite(got_lse)) {
      result.finite = false;
    } else {
      result.max_lse_error = std::max(result.max_lse_error, std::abs(got_lse - expected_lse));
    }
  }
  result.rel_l2_error = std::sqrt(error_sq / std::max(reference_sq, 1e-30));
  return true;
}

// Prints the comparison and returns whether it passed.
inline bool report(const CheckResult& r, flashmma::ScalarType dtype) {
  const bool pass = r.passed(dtype);
  std::printf("checked %d rows against a double-precision CPU reference:\n", r.rows);
  std::printf("  max abs error  %.3e\n", r.max_abs_error);
  std::printf("  rel L2 error   %.3e (bound %.1e)\n", r.rel_l2_error,
              CheckResult::rel_l2_bound(dtype));
  std::printf("  max LSE error  %.3e (bound %.1e)\n", r.max_lse_error, CheckResult::kLseBound);
  if (!r.finite) std::printf("  non-finite values where the reference is finite\n");
  std::printf("%s\n", pass ? "PASS" : "FAIL");
  return pass;
}

}  // namespace example
