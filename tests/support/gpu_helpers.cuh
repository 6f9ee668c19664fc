// SPDX-License-Identifier: Apache-2.0
// What the GPU tests share: a CUDA error check that fails the Catch2 test, an owning device
// buffer, seeded random inputs, NaN poisoning, the reference attention run on the device, and the
// accuracy check of a forward result against it.
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <utility>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"
#include "support/reference.hpp"

// Evaluates a CUDA runtime call and fails the current test with the call, its place and the
// runtime's message when it does not return cudaSuccess.
#define FLASHMMA_CUDA_CHECK(expr)                                                            \
  do {                                                                                       \
    const cudaError_t flashmma_cuda_error = (expr);                                          \
    if (flashmma_cuda_error != cudaSuccess) {                                                \
      FAIL(__FILE__ << ":" << __LINE__ << ": " << #expr << " returned "                      \
                    << cudaGetErrorName(flashmma_cuda_error) << ": "                         \
                    << cudaGetErrorString(flashmma_cuda_error));                             \
    }                                                                                        \
  } while (0)

namespace flashmma {
namespace test {

inline constexpr int kHelperThreads = 256;        // block size of the helper kernels
inline constexpr int64_t kHelperMaxBlocks = 1 << 16;  // grid-stride loops cover the rest
inline constexpr int kReferenceThreads = 64;      // one thread per output row; small blocks
                                                  // spread a few thousand rows over every SM
inline constexpr unsigned char kPoisonByte = 0xFF;  // 0xFFFF / 0xFFFFFFFF: NaN in fp16, bf16, fp32
// Elements allocated after every tensor: NaN after inputs, poison after outputs, so that a read
// or write one tile past the end shows up. A multiple of 8 keeps the end 16-byte aligned.
inline constexpr int64_t kGuardElements = 64;

inline unsigned helper_blocks(int64_t count) {
  const int64_t blocks = (count + kHelperThreads - 1) / kHelperThreads;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(blocks, kHelperMaxBlocks)));
}

// An owning, move-only device allocation of `count` elements of T.
template <class T>
class DeviceBuffer {
 public:
  DeviceBuffer() = default;
  explicit DeviceBuffer(int64_t count) : count_(count) {
    if (count_ > 0) {
      FLASHMMA_CUDA_CHECK(cudaMalloc(&data_, bytes()));
    }
  }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  DeviceBuffer(DeviceBuffer&& other) noexcept { swap(other); }
  DeviceBuffer& operator=(DeviceBuffer&& other) noexcept {
    DeviceBuffer moved(std::move(other));
    swap(moved);
    return *this;
  }
  ~DeviceBuffer() {
    if (data_ != nullptr) cudaFree(data_);  // a destructor cannot fail the test
  }

  T* get() const { return data_; }
  int64_t size() const { return count_; }
  std::size_t bytes() const { return static_cast<std::size_t>(count_) * sizeof(T); }

  // Elements [begin, begin + count) copied to the host.
  std::vector<T> to_host(int64_t begin, int64_t count) const {
    std::vector<T> host(static_cast<std::size_t>(count));
    if (count > 0) {
      FLASHMMA_CUDA_CHECK(cudaMemcpy(host.data(), data_ + begin,
                                     static_cast<std::size_t>(count) * sizeof(T),
                                     cudaMemcpyDeviceToHost));
    }
    return host;
  }
  std::vector<T> to_host() const { return to_host(0, count_); }

  void copy_from_host(const std::vector<T>& host) {
    const bool same_size = static_cast<int64_t>(host.size()) == count_;
    REQUIRE(same_size);
    FLASHMMA_CUDA_CHECK(cudaMemcpy(data_, host.data(), bytes(), cudaMemcpyHostToDevice));
  }

 private:
  void swap(DeviceBuffer& other) noexcept {
    std::swap(data_, other.data_);
    std::swap(count_, other.count_);
  }
  T* data_ = nullptr;
  int64_t count_ = 0;
};

// Byte-wise equality of two host copies (bit-for-bit, NaN payloads included).
template <class T>
bool same_bytes(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

// Fills every byte with kPoisonByte: each fp16, bf16 or fp32 element becomes a NaN that no
// correct kernel produces, so an element a kernel never wrote is easy to find.
template <class T>
void poison(DeviceBuffer<T>& buffer) {
  FLASHMMA_CUDA_CHECK(cudaMemset(buffer.get(), kPoisonByte, buffer.bytes()));
}

// True when the element's bytes are all kPoisonByte.
template <class T>
bool is_poison(const T& value) {
  unsigned char bytes[sizeof(T)];
  std::memcpy(bytes, &value, sizeof(T));
  for (unsigned char byte : bytes) {
    if (byte != kPoisonByte) return false;
  }
  return true;
}

// ---- Seeded random inputs ------------------------------------------------------------------
// A counter-based generator: element `index` of a tensor draws from hash(seed, index), so the
// values do not depend on the launch shape and any element can be recomputed alone.

// The splitmix64 finalizer: a bijective 64-bit mix with full avalanche.
FLASHMMA_HOST_DEVICE uint64_t mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ull;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// A uniform double in (0, 1) from the top 53 bits.
FLASHMMA_HOST_DEVICE double uniform_open(uint64_t bits) {
  constexpr double kTwoToMinus53 = 1.0 / 9007199254740992.0;
  return (static_cast<double>(bits >> 11) + 0.5) * kTwoToMinus53;
}

// A standard normal sample (Box-Muller on two independent uniforms).
FLASHMMA_HOST_DEVICE double normal_sample(uint64_t seed, uint64_t index) {
  constexpr double kTwoPi = 6.283185307179586;
  const double u1 = uniform_open(mix64(seed ^ mix64(2 * index)));
  const double u2 = uniform_open(mix64(seed ^ mix64(2 * index + 1)));
  return sqrt(-2.0 * log(u1)) * cos(kTwoPi * u2);
}

// data[i] = N(0, 1) for i < tensor_elements with i % pitch < valid_columns; NaN elsewhere: in
// the padding of a padded layout and in the guard after the tensor, which a kernel must never
// read (out-of-range rows and columns are zero-filled, never loaded).
template <class Element>
__global__ void fill_normal_kernel(Element* data, int64_t count, int64_t tensor_elements,
                                   int64_t pitch, int64_t valid_columns, uint64_t seed) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const bool in_tensor = i < tensor_elements && i % pitch < valid_columns;
    const double value = in_tensor ? normal_sample(seed, static_cast<uint64_t>(i))
                                   : std::numeric_limits<double>::quiet_NaN();
    data[i] = from_double<Element>(value);
  }
}

// Fills a buffer with N(0, 1) values drawn from `seed`, NaN where fill_normal_kernel says.
template <class Element>
void fill_normal(DeviceBuffer<Element>& buffer, uint64_t seed, int64_t tensor_elements,
                 int64_t pitch, int64_t valid_columns) {
  fill_normal_kernel<<<helper_blocks(buffer.size()), kHelperThreads>>>(
      buffer.get(), buffer.size(), tensor_elements, pitch, valid_columns, seed);
  FLASHMMA_CUDA_CHECK(cudaGetLastError());
}

// Fills the whole buffer with N(0, 1) values.
template <class Element>
void fill_normal(DeviceBuffer<Element>& buffer, uint64_t seed) {
  fill_normal(buffer, seed, buffer.size(), buffer.size(), buffer.size());
}

FLASHMMA_HOST_DEVICE double to_double(float x) { return static_cast<double>(x); }

template <class T>
__global__ void count_nan_kernel(const T* data, int64_t count, unsigned long long* nan_count) {
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += stride) {
    const double value = to_double(data[i]);
    if (value != value) ++local;
  }
  if (local != 0) atomicAdd(nan_count, local);
}

// NaN elements among the first `count` of a device buffer (fp16, bf16 or fp32), counted on the
// device, for tensors too large to copy to the host.
template <class T>
int64_t count_nan(const DeviceBuffer<T>& buffer, int64_t count) {
  DeviceBuffer<unsigned long long> counter(1);
  FLASHMMA_CUDA_CHECK(cudaMemset(counter.get(), 0, counter.bytes()));
  count_nan_kernel<<<helper_blocks(count), kHelperThreads>>>(buffer.get(), count, counter.get());
  FLASHMMA_CUDA_CHECK(cudaGetLastError());
  return static_cast<int64_t>(counter.to_host()[0]);
}

// ---- Reference on the device -----------------------------------------------------------------

// Reference results for batches [batch_begin, batch_begin + batch_count) of a problem of this
// shape, on the host. out64 and out_low are [batch_count, heads_q, seqlen_q, head_dim], lse64 is
// [batch_count, heads_q, seqlen_q].
struct ReferenceRows : ProblemShape {
  int64_t batch_begin = 0;
  int64_t batch_count = 0;
  std::vector<double> out64;
  std::vector<double> out_low;
  std::vector<double> lse64;
};

// One thread per output row (b, h, i); consecutive threads take consecutive i of one head, so a
// warp reads the same K and V rows together.
template <class Element>
__global__ void reference_attention_kernel(ReferenceProblem<Element> problem, int64_t batch_begin,
                                           int64_t rows, double* out64, double* out_low,
                                           double* lse64) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= rows) return;
  const int64_t i = row % problem.seqlen_q;
  const int64_t h = (row / problem.seqlen_q) % problem.heads_q;
  const int64_t b = batch_begin + row / (problem.seqlen_q * problem.heads_q);
  const int64_t out_offset = row * problem.head_dim;
  lse64[row] = reference_row<Element, ReferencePrecision::kFp64>(problem, b, h, i,
                                                                  out64 + out_offset);
  reference_row<Element, ReferencePrecision::kLowPrecision>(problem, b, h, i,
                                                            out_low + out_offset);
}

template <class Element>
ReferenceRows compute_reference(const ReferenceProblem<Element>& problem, int64_t batch_begin,
                                int64_t batch_count) {
  ReferenceRows ref;
  static_cast<ProblemShape&>(ref) = problem;
  ref.batch_begin = batch_begin;
  ref.batch_count = batch_count;
  const int64_t rows = batch_count * problem.heads_q * problem.seqlen_q;
  DeviceBuffer<double> out64(rows * problem.head_dim);
  DeviceBuffer<double> out_low(rows * problem.head_dim);
  DeviceBuffer<double> lse64(rows);
  const int64_t blocks = (rows + kReferenceThreads - 1) / kReferenceThreads;
  reference_attention_kernel<Element><<<static_cast<unsigned>(blocks), kReferenceThreads>>>(
      problem, batch_begin, rows, out64.get(), out_low.get(), lse64.get());
  FLASHMMA_CUDA_CHECK(cudaGetLastError());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  ref.out64 = out64.to_host();
  ref.out_low = out_low.to_host();
  ref.lse64 = lse64.to_host();
  return ref;
}

// ---- Accuracy ------------------------------------------------------------------------------
//
// Output: FlashAttention's rule. The fp64 reference is the truth; the low-precision reference
// shows how far from it an exact computation with fp16/bf16 P and O already lands. A kernel may
// be at most twice as far (its fp32 accumulation and exp2 approximation add a little) plus 1e-5
// (for rows where the low-precision reference is exact, e.g. a single visible key), and its
// relative L2 error must stay under a bound of a few units of the format's rounding
// (Tolerance<Element> in reference.hpp).
//
// LSE: the kernel keeps it in fp32, so its error is that of fp32 arithmetic, not of the element
// type. Its worst-case sources: the fp32 row sum of up to n = 4097 terms (relative error
// <= n * 2^-24 = 2.4e-4, i.e. 2.4e-4 absolute in log), and the fp32 dot products behind the
// scores (at most ~1.5e-4 absolute at head_dim 256 and the default scale, proportionally more
// for a larger explicit scale, which also makes |LSE| larger). Bound: 5e-4 + 1e-4 * |LSE|, an
// order of magnitude above the typical error yet far below what a real bug causes (a wrong scale,
// log base or row max moves the LSE by O(1); one key too many or too few moves it by about 1/n).
inline constexpr double kMaxErrorSlack = 1e-5;
inline constexpr double kLseAbsoluteTolerance = 5e-4;
inline constexpr double kLseRelativeTolerance = 1e-4;

inline double lse_tolerance(double reference_lse) {
  return kLseAbsoluteTolerance + kLseRelativeTolerance * std::fabs(reference_lse);
}

struct AccuracyStats {
  int64_t outputs = 0;
  int64_t unwritten_outputs = 0;  // NaN in O: never written (poison left) or computed NaN
  int64_t clobbered_elements = 0;  // allocated but outside the tensor, and no longer poison
  int64_t outside_allocation = 0;  // tensor elements the strides put outside the buffer
  double max_error = 0.0;                // max |O - ref64|
  double max_low_precision_error = 0.0;  // max |ref_low - ref64|
  double error_norm = 0.0;               // ||O - ref64||_2
  double reference_norm = 0.0;           // ||ref64||_2
  double relative_l2_error = 0.0;
  bool lse_checked = false;
  int64_t lse_nan = 0;
  int64_t lse_infinity_mismatches = 0;  // -inf in one of kernel and reference but not the other
  int64_t lse_beyond_tolerance = 0;
  int64_t lse_clobbered = 0;  // elements of the LSE buffer after the checked rows, not poison
  double max_lse_error = 0.0;
};

// Compares O (and the LSE, when lse is not null) of batches [ref.batch_begin, +batch_count) with
// the reference. O and the LSE must have been poisoned before the kernel ran, so that the
// elements of their buffers that are not part of the tensor (layout padding, the guard after the
// end) can be checked to be untouched; the guard is checked when every batch is.
template <class Element>
AccuracyStats compare_with_reference(const DeviceBuffer<Element>& o, const TensorStrides& strides,
                                     const DeviceBuffer<float>* lse, const ReferenceRows& ref) {
  AccuracyStats stats;
  // The slice of the buffer that holds the batches checked: all of it when all are.
  const bool all_batches = ref.batch_begin == 0 && ref.batch_count == ref.batch;
  const int64_t begin = all_batches ? 0 : ref.batch_begin * strides.batch;
  const int64_t end =
      all_batches ? o.size() : std::min(o.size(), (ref.batch_begin + ref.batch_count) * strides.batch);
  const std::vector<Element> out = o.to_host(begin, end - begin);
  std::vector<unsigned char> in_tensor(out.size(), 0);

  double error_sq = 0.0;
  double reference_sq = 0.0;
  for (int64_t b = 0; b < ref.batch_count; ++b) {
    for (int64_t h = 0; h < ref.heads_q; ++h) {
      for (int64_t i = 0; i < ref.seqlen_q; ++i) {
        const int64_t row = (b * ref.heads_q + h) * ref.seqlen_q + i;
        const int64_t base = element_offset(strides, ref.batch_begin + b, i, h) - begin;
        for (int64_t d = 0; d < ref.head_dim; ++d) {
          ++stats.outputs;
          const int64_t at = base + d;
          if (at < 0 || at >= static_cast<int64_t>(out.size())) {
            ++stats.outside_allocation;
            continue;
          }
          in_tensor[static_cast<std::size_t>(at)] = 1;
          const double value = to_double(out[static_cast<std::size_t>(at)]);
          const double exact = ref.out64[static_cast<std::size_t>(row * ref.head_dim + d)];
          const double low = ref.out_low[static_cast<std::size_t>(row * ref.head_dim + d)];
          if (std::isnan(value)) {
            ++stats.unwritten_outputs;
            continue;
          }
          const double error = std::fabs(value - exact);
          stats.max_error = std::max(stats.max_error, error);
          stats.max_low_precision_error =
              std::max(stats.max_low_precision_error, std::fabs(low - exact));
          error_sq += error * error;
          reference_sq += exact * exact;
        }
      }
    }
  }
  for (std::size_t at = 0; at < out.size(); ++at) {
    if (!in_tensor[at] && !is_poison(out[at])) ++stats.clobbered_elements;
  }
  stats.error_norm = std::sqrt(error_sq);
  stats.reference_norm = std::sqrt(reference_sq);
  // A zero reference (never produced by random V) would make any error infinitely relative.
  stats.relative_l2_error = stats.reference_norm > 0.0 ? stats.error_norm / stats.reference_norm
                                                       : (stats.error_norm > 0.0 ? 1.0 : 0.0);

  if (lse != nullptr && lse->get() != nullptr) {
    stats.lse_checked = true;
    const int64_t rows_per_batch = ref.heads_q * ref.seqlen_q;
    const int64_t lse_begin = ref.batch_begin * rows_per_batch;
    const int64_t lse_rows = ref.batch_count * rows_per_batch;
    const int64_t lse_end = all_batches ? lse->size() : lse_begin + lse_rows;
    const std::vector<float> lse_out = lse->to_host(lse_begin, lse_end - lse_begin);
    for (std::size_t row = static_cast<std::size_t>(lse_rows); row < lse_out.size(); ++row) {
      if (!is_poison(lse_out[row])) ++stats.lse_clobbered;
    }
    for (std::size_t row = 0; row < static_cast<std::size_t>(lse_rows); ++row) {
      const double value = lse_out[row];
      const double exact = ref.lse64[row];
      if (std::isnan(value)) {
        ++stats.lse_nan;
        continue;
      }
      const bool value_empty = std::isinf(value) && value < 0.0;
      const bool exact_empty = std::isinf(exact) && exact < 0.0;
      if (value_empty != exact_empty) {
        ++stats.lse_infinity_mismatches;
        continue;
      }
      if (exact_empty) continue;
      const double error = std::fabs(value - exact);
      stats.max_lse_error = std::max(stats.max_lse_error, error);
      if (!(error <= lse_tolerance(exact))) ++stats.lse_beyond_tolerance;
    }
  }
  return stats;
}

// The accuracy rule above, as Catch2 assertions on precomputed values (nvcc's front end has
// crashed on complex expressions inside REQUIRE).
template <class Element>
void require_accurate(const AccuracyStats& stats) {
  const double max_error_bound = 2.0 * stats.max_low_precision_error + kMaxErrorSlack;
  const double relative_l2_bound = Tolerance<Element>::kRelativeL2;
  INFO("outputs " << stats.outputs << ", unwritten " << stats.unwritten_outputs
                  << ", clobbered outside the tensor " << stats.clobbered_elements);
  INFO("max |O - ref64| = " << stats.max_error << " (bound " << max_error_bound
                            << " = 2 * max |ref_low - ref64| + " << kMaxErrorSlack << ")");
  INFO("relative L2 error = " << stats.relative_l2_error << " (bound " << relative_l2_bound
                              << ")");
  INFO("LSE: checked " << stats.lse_checked << ", NaN " << stats.lse_nan << ", -inf mismatches "
                       << stats.lse_infinity_mismatches << ", beyond tolerance "
                       << stats.lse_beyond_tolerance << ", max error " << stats.max_lse_error
                       << ", clobbered after the rows " << stats.lse_clobbered);
  REQUIRE(stats.outside_allocation == 0);
  REQUIRE(stats.unwritten_outputs == 0);
  REQUIRE(stats.clobbered_elements == 0);
  REQUIRE(stats.max_error <= max_error_bound);
  REQUIRE(stats.relative_l2_error < relative_l2_bound);
  REQUIRE(stats.lse_nan == 0);
  REQUIRE(stats.lse_infinity_mismatches == 0);
  REQUIRE(stats.lse_beyond_tolerance == 0);
  REQUIRE(stats.lse_clobbered == 0);
}

}  // namespace test
}  // namespace flashmma
