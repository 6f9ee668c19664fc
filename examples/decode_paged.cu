// SPDX-License-Identifier: Apache-2.0
// A decoding loop over a paged KV cache, as a serving engine runs it: each step brings one new
// token per sequence, whose key and value flashmma::forward appends to the cache (rotary
// embedding applied) before it attends over the cache. The call is captured once in a CUDA graph
// and replayed every step: between replays only device memory changes (the new token's Q, K and
// V, and the cache lengths, which a tiny kernel advances). Every step's output is checked against
// a double-precision CPU reference over the cache as the GPU left it.
//
//   decode_paged [--steps N]
//
// Exits 0 when every step matches the reference, 1 otherwise (or on any error).
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <string>
#include <vector>

#include "common.hpp"
#include "flashmma/flashmma.cuh"

namespace {

using Element = __half;
constexpr int64_t kBatch = 4, kHeadsQ = 32, kHeadsKV = 8, kHeadDim = 128;
constexpr int64_t kPageSize = 16;
constexpr int64_t kCapacity = 4096;  // keys a sequence may hold
constexpr int64_t kPagesPerSequence = kCapacity / kPageSize;
constexpr int64_t kPages = kBatch * kPagesPerSequence;
constexpr int64_t kRotaryDim = kHeadDim;
const int32_t kPromptLengths[kBatch] = {1000, 17, 3000, 250};

// One more token in every cache: what the engine does after a step.
__global__ void advance_lengths(int32_t* lengths, int batch) {
  const int b = static_cast<int>(threadIdx.x);
  if (b < batch) ++lengths[b];
}

std::vector<Element> random_elements(std::size_t count, std::mt19937& rng) {
  std::normal_distribution<float> normal(0.f, 1.f);
  std::vector<Element> values(count);
  for (Element& x : values) x = example::from_float<Element>(normal(rng));
  return values;
}

bool upload(void* device, const void* host, std::size_t bytes) {
  return example::cuda_ok(cudaMemcpy(device, host, bytes, cudaMemcpyHostToDevice), "cudaMemcpy");
}

// Rotates the rotary pairs (2i, 2i + 1) of a row at `position`, as flashmma does (fp32 math).
void rotate(std::vector<double>& row, const std::vector<Element>& cos,
            const std::vector<Element>& sin, int64_t position) {
  for (int64_t i = 0; i < kRotaryDim / 2; ++i) {
    const double c = example::to_float(cos[position * kRotaryDim / 2 + i]);
    const double s = example::to_float(sin[position * kRotaryDim / 2 + i]);
    const double x = row[2 * i], y = row[2 * i + 1];
    row[2 * i] = x * c - y * s;
    row[2 * i + 1] = x * s + y * c;
  }
}

}  // namespace

int main(int argc, char** argv) {
  int steps = 8;
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--steps") == 0 && i + 1 < argc) {
      steps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: %s [--steps N]\n", argv[0]);
      return 1;
    }
  }
  if (steps < 1 || !example::have_cuda_device()) return 1;

  // The cache: pools of pages in a shuffled order, filled with each sequence's prompt.
  std::mt19937 rng(7);
  const std::size_t row_elements = kHeadsKV * kHeadDim;
  const std::size_t pool_elements = kPages * kPageSize * row_elements;
  std::vector<Element> k_pool = random_elements(pool_elements, rng);
  std::vector<Element> v_pool = random_elements(pool_elements, rng);
  std::vector<int32_t> table(kPages);
  std::iota(table.begin(), table.end(), 0);
  std::shuffle(table.begin(), table.end(), rng);
  std::vector<int32_t> lengths(kPromptLengths, kPromptLengths + kBatch);
  std::vector<Element> cos(kCapacity * kRotaryDim / 2), sin(cos.size());
  for (int64_t p = 0; p < kCapacity; ++p) {
    for (int64_t i = 0; i < kRotaryDim / 2; ++i) {
      const double angle = p * std::pow(10000.0, -2.0 * i / kRotaryDim);
      cos[p * kRotaryDim / 2 + i] = example::from_float<Element>(static_cast<float>(std::cos(angle)));
      sin[p * kRotaryDim / 2 + i] = example::from_float<Element>(static_cast<float>(std::sin(angle)));
    }
  }

  const std::size_t q_elements = kBatch * kHeadsQ * kHeadDim;  // one token per sequence
  const std::size_t new_elements = kBatch * row_elements;
  example::DeviceBuffer k_cache, v_cache, table_d, lengths_d, cos_d, sin_d, q_d, k_new_d, v_new_d,
      o_d, workspace;
  if (!k_cache.allocate(pool_elements * sizeof(Element)) ||
      !v_cache.allocate(pool_elements * sizeof(Element)) ||
      !table_d.allocate(table.size() * sizeof(int32_t)) ||
      !lengths_d.allocate(kBatch * sizeof(int32_t)) ||
      !cos_d.allocate(cos.size() * sizeof(Element)) ||
      !sin_d.allocate(sin.size() * sizeof(Element)) ||
      !q_d.allocate(q_elements * sizeof(Element)) ||
      !k_new_d.allocate(new_elements * sizeof(Element)) ||
      !v_new_d.allocate(new_elements * sizeof(Element)) ||
      !o_d.allocate(q_elements * sizeof(Element)) ||
      !upload(k_cache.get(), k_pool.data(), k_cache.bytes()) ||
      !upload(v_cache.get(), v_pool.data(), v_cache.bytes()) ||
      !upload(table_d.get(), table.data(), table_d.bytes()) ||
      !upload(lengths_d.get(), lengths.data(), lengths_d.bytes()) ||
      !upload(cos_d.get(), cos.data(), cos_d.bytes()) ||
      !upload(sin_d.get(), sin.data(), sin_d.bytes())) {
    return 1;
  }

  flashmma::ForwardParams p;
  static_cast<flashmma::ProblemShape&>(p) =
      flashmma::make_problem_shape(kBatch, 1, kCapacity, kHeadsQ, kHeadsKV, kHeadDim);
  p.dtype = flashmma::ScalarType::kFloat16;
  p.q = q_d.get();
  p.o = o_d.get();
  p.q_strides = p.o_strides = flashmma::bshd_strides(1, kHeadsQ, kHeadDim);
  p.k = k_cache.get();
  p.v = v_cache.get();
  p.k_strides = p.v_strides = flashmma::bshd_strides(kPageSize, kHeadsKV, kHeadDim);
  p.block_table = static_cast<const int32_t*>(table_d.get());
  p.block_table_batch_stride = kPagesPerSequence;
  p.page_size = kPageSize;
  p.num_pages = kPages;
  p.k_new = k_new_d.get();
  p.v_new = v_new_d.get();
  p.k_new_strides = p.v_new_strides = flashmma::bshd_strides(1, kHeadsKV, kHeadDim);
  p.seqlen_new = 1;
  p.cache_seqlens = static_cast<const int32_t*>(lengths_d.get());
  p.rotary_cos = cos_d.get();
  p.rotary_sin = sin_d.get();
  p.rotary_dim = kRotaryDim;
  p.rotary_positions = kCapacity;
  p.mask = flashmma::MaskKind::kCausal;  // one query: it sees the whole cache, itself included
  std::size_t workspace_bytes = 0;
  if (!example::status_ok(flashmma::forward_workspace_bytes(p, workspace_bytes),
                          "flashmma::forward_workspace_bytes") ||
      !workspace.allocate(workspace_bytes)) {
    return 1;
  }
  p.workspace = workspace.get();
  p.workspace_bytes = workspace_bytes;
  if (!example::print_default_kernel(p)) return 1;

  // Capture one step.
  cudaStream_t stream;
  cudaGraph_t graph;
  cudaGraphExec_t exec;
  if (!example::cuda_ok(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking),
                        "cudaStreamCreate") ||
      !example::cuda_ok(cudaStreamBeginCapture(stream, cudaStreamCaptureModeThreadLocal),
                        "cudaStreamBeginCapture")) {
    return 1;
  }
  const flashmma::Status captured = flashmma::forward(p, stream);
  if (!example::cuda_ok(cudaStreamEndCapture(stream, &graph), "cudaStreamEndCapture") ||
      !example::status_ok(captured, "flashmma::forward (captured)") ||
      !example::cuda_ok(cudaGraphInstantiate(&exec, graph, 0), "cudaGraphInstantiate")) {
    return 1;
  }

  const double scale = 1.0 / std::sqrt(static_cast<double>(kHeadDim));
  double worst = 0;
  for (int step = 0; step < steps; ++step) {
    const std::vector<Element> q = random_elements(q_elements, rng);
    const std::vector<Element> k_new = random_elements(new_elements, rng);
    const std::vector<Element> v_new = random_elements(new_elements, rng);
    if (!upload(q_d.get(), q.data(), q_d.bytes()) ||
        !upload(k_new_d.get(), k_new.data(), k_new_d.bytes()) ||
        !upload(v_new_d.get(), v_new.data(), v_new_d.bytes()) ||
        !example::cuda_ok(cudaGraphLaunch(exec, stream), "cudaGraphLaunch") ||
        !example::cuda_ok(cudaStreamSynchronize(stream), "the step")) {
      return 1;
    }
    std::vector<Element> o(q_elements);
    if (!example::cuda_ok(cudaMemcpy(o.data(), o_d.get(), o_d.bytes(), cudaMemcpyDeviceToHost),
                          "cudaMemcpy") ||
        !example::cuda_ok(cudaMemcpy(k_pool.data(), k_cache.get(), k_cache.bytes(),
                                     cudaMemcpyDeviceToHost),
                          "cudaMemcpy") ||
        !example::cuda_ok(cudaMemcpy(v_pool.data(), v_cache.get(), v_cache.bytes(),
                                     cudaMemcpyDeviceToHost),
                          "cudaMemcpy")) {
      return 1;
    }

    // The reference: each query (rotated at its position) over its cache as the GPU left it.
    double error_sq = 0, reference_sq = 0;
    for (int64_t b = 0; b < kBatch; ++b) {
      const int64_t keys = lengths[b] + 1;
      const auto row = [&](const std::vector<Element>& pool, int64_t key, int64_t head) {
        const int64_t page = table[b * kPagesPerSequence + key / kPageSize];
        return &pool[((page * kPageSize + key % kPageSize) * kHeadsKV + head) * kHeadDim];
      };
      for (int64_t h = 0; h < kHeadsQ; ++h) {
        const int64_t kv_head = h / (kHeadsQ / kHeadsKV);
        std::vector<double> query(kHeadDim);
        for (int64_t x = 0; x < kHeadDim; ++x) {
          query[x] = example::to_float(q[(b * kHeadsQ + h) * kHeadDim + x]);
        }
        rotate(query, cos, sin, lengths[b]);
        std::vector<double> scores(keys), out(kHeadDim, 0.0);
        double row_max = -std::numeric_limits<double>::infinity(), sum = 0;
        for (int64_t j = 0; j < keys; ++j) {
          const Element* k = row(k_pool, j, kv_head);
          double dot = 0;
          for (int64_t x = 0; x < kHeadDim; ++x) dot += query[x] * example::to_float(k[x]);
          scores[j] = dot * scale;
          row_max = std::max(row_max, scores[j]);
        }
        for (int64_t j = 0; j < keys; ++j) {
          const double weight = std::exp(scores[j] - row_max);
          sum += weight;
          const Element* v = row(v_pool, j, kv_head);
          for (int64_t x = 0; x < kHeadDim; ++x) out[x] += weight * example::to_float(v[x]);
        }
        for (int64_t x = 0; x < kHeadDim; ++x) {
          const double expected = out[x] / sum;
          const double got = example::to_float(o[(b * kHeadsQ + h) * kHeadDim + x]);
          error_sq += (got - expected) * (got - expected);
          reference_sq += expected * expected;
        }
      }
      // The appended value must be the new token's, bit for bit; the appended key the new one
      // rotated at its position, up to one fp16 rounding.
      for (int64_t h = 0; h < kHeadsKV; ++h) {
        const Element* new_key = &k_new[(b * kHeadsKV + h) * kHeadDim];
        std::vector<double> rotated(kHeadDim);
        for (int64_t x = 0; x < kHeadDim; ++x) rotated[x] = example::to_float(new_key[x]);
        rotate(rotated, cos, sin, lengths[b]);
        const Element* stored = row(k_pool, lengths[b], h);
        bool key_ok = true;
        for (int64_t x = 0; x < kHeadDim; ++x) {
          key_ok = key_ok && std::fabs(example::to_float(stored[x]) - rotated[x]) <=
                                 1e-3 * (1.0 + std::fabs(rotated[x]));
        }
        if (!key_ok || std::memcmp(row(v_pool, lengths[b], h),
                                   &v_new[(b * kHeadsKV + h) * kHeadDim],
                                   kHeadDim * sizeof(Element)) != 0) {
          std::printf("step %d: sequence %lld's new key or value is not in its cache\n", step,
                      static_cast<long long>(b));
          return 1;
        }
      }
    }
    const double error = std::sqrt(error_sq / reference_sq);
    worst = std::max(worst, error);
    std::printf("step %d: cache lengths %d %d %d %d, relative L2 error %.2e\n", step,
                lengths[0] + 1, lengths[1] + 1, lengths[2] + 1, lengths[3] + 1, error);

    advance_lengths<<<1, 32, 0, stream>>>(static_cast<int32_t*>(lengths_d.get()), kBatch);
    for (int32_t& n : lengths) ++n;
  }
  cudaGraphExecDestroy(exec);
  cudaGraphDestroy(graph);
  cudaStreamDestroy(stream);
  const bool pass = worst < example::CheckResult::rel_l2_bound(flashmma::ScalarType::kFloat16);
  std::printf("%s: %d steps, worst relative L2 error %.2e\n", pass ? "PASS" : "FAIL", steps, worst);
  return pass ? 0 : 1;
}
