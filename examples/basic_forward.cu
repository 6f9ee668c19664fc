// SPDX-License-Identifier: Apache-2.0
// The whole forward pass through the default dispatch: the GPU and the kernel forward(params)
// picks on it (the Hopper kernel or the portable one, with its config, as the library describes
// it), random inputs, flashmma::forward, a check against a CPU reference, then a timing.
//
//   basic_forward [--batch B] [--heads H] [--heads-kv H] [--seqlen N] [--seqlen-k N]
//                 [--head-dim D] [--dtype fp16|bf16] [--causal]
//
// Exits 0 when the output matches the reference, 1 otherwise (or on any error).
#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "common.hpp"
#include "flashmma/flashmma.cuh"

namespace {

constexpr uint64_t kSeed = 2024;
constexpr int kSampleRows = 64;
constexpr int kWarmupRuns = 3;
constexpr int kTimedRuns = 20;

struct Options {
  example::Shape shape;
  flashmma::ScalarType dtype = flashmma::ScalarType::kFloat16;
};

void print_usage(std::FILE* out, const char* program) {
  std::fprintf(out,
               "usage: %s [--batch B] [--heads H] [--heads-kv H] [--seqlen N] [--seqlen-k N]\n"
               "          [--head-dim D] [--dtype fp16|bf16] [--causal]\n"
               "defaults: batch 2, heads 8, heads-kv = heads, seqlen 1024, seqlen-k = seqlen,\n"
               "          head-dim 128, fp16, not causal\n",
               program);
}

bool parse_positive(const char* text, int64_t& value) {
  char* end = nullptr;
  const long long parsed = std::strtoll(text, &end, 10);
  if (end == text || *end != '\0' || parsed < 1) return false;
  value = parsed;
  return true;
}

bool parse_options(int argc, char** argv, Options& options) {
  int64_t heads_kv = 0, seqlen_k = 0;  // 0: same as the query side
  example::Shape& s = options.shape;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const char* value = i + 1 < argc ? argv[i + 1] : nullptr;
    bool ok = true;
    if (arg == "--causal") {
      s.causal = true;
      continue;
    } else if (value == nullptr) {
      ok = false;
    } else if (arg == "--batch") {
      ok = parse_positive(value, s.batch);
    } else if (arg == "--heads") {
      ok = parse_positive(value, s.heads_q);
    } else if (arg == "--heads-kv") {
      ok = parse_positive(value, heads_kv);
    } else if (arg == "--seqlen") {
      ok = parse_positive(value, s.seqlen_q);
    } else if (arg == "--seqlen-k") {
      ok = parse_positive(value, seqlen_k);
    } else if (arg == "--head-dim") {
      ok = parse_positive(value, s.head_dim);
    } else if (arg == "--dtype" && std::strcmp(value, "fp16") == 0) {
      options.dtype = flashmma::ScalarType::kFloat16;
    } else if (arg == "--dtype" && std::strcmp(value, "bf16") == 0) {
      options.dtype = flashmma::ScalarType::kBFloat16;
    } else {
      ok = false;
    }
    if (!ok) {
      std::fprintf(stderr, "bad argument: %s%s%s\n", arg.c_str(), value ? " " : "",
                   value ? value : "");
      return false;
    }
    ++i;  // the value
  }
  s.heads_kv = heads_kv > 0 ? heads_kv : s.heads_q;
  s.seqlen_k = seqlen_k > 0 ? seqlen_k : s.seqlen_q;
  return true;
}

// Median time of one forward call, in milliseconds, or a negative value on error.
float time_forward(const flashmma::ForwardParams& params) {
  cudaEvent_t start, stop;
  if (!example::cuda_ok(cudaEventCreate(&start), "cudaEventCreate") ||
      !example::cuda_ok(cudaEventCreate(&stop), "cudaEventCreate")) {
    return -1.f;
  }
  std::vector<float> times;
  bool ok = true;
  for (int run = 0; ok && run < kWarmupRuns + kTimedRuns; ++run) {
    ok = example::cuda_ok(cudaEventRecord(start), "cudaEventRecord") &&
         example::status_ok(flashmma::forward(params), "flashmma::forward") &&
         example::cuda_ok(cudaEventRecord(stop), "cudaEventRecord") &&
         example::cuda_ok(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0.f;
    if (ok && run >= kWarmupRuns) {
      ok = example::cuda_ok(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
      times.push_back(ms);
    }
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (!ok) return -1.f;
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

template <class Element>
int run(const Options& options) {
  const example::Shape& s = options.shape;
  std::printf("flashmma forward: %s, batch %lld, heads %lld (kv %lld), seqlen %lld (k %lld), "
              "head_dim %lld, %s\n",
              flashmma::scalar_type_name(options.dtype), static_cast<long long>(s.batch),
              static_cast<long long>(s.heads_q), static_cast<long long>(s.heads_kv),
              static_cast<long long>(s.seqlen_q), static_cast<long long>(s.seqlen_k),
              static_cast<long long>(s.head_dim), s.causal ? "causal" : "no mask");

  example::Problem<Element> problem;
  if (!problem.init(s, kSeed)) return 1;
  const flashmma::ForwardParams params = problem.params();
  // Which kernel runs depends on the GPU and on the code built for it: on an H100 or H200, the
  // Hopper kernel is there only in an sm_90a build.
  if (!example::print_default_kernel(params)) return 1;

  // Every entry point returns a Status; an argument error comes back before anything runs.
  if (!example::status_ok(flashmma::forward(params), "flashmma::forward")) return 1;
  // Faults inside the kernel are asynchronous: they surface here.
  if (!example::cuda_ok(cudaDeviceSynchronize(), "the forward kernel")) return 1;

  example::CheckResult check;
  if (!example::check_against_reference(problem, kSampleRows, check)) return 1;
  const bool passed = example::report(check, options.dtype);

  const float ms = time_forward(params);
  if (ms < 0.f) return 1;
  double flops = 4.0 * s.batch * s.heads_q * s.seqlen_q * s.seqlen_k * s.head_dim;
  if (s.causal && s.seqlen_q == s.seqlen_k) flops /= 2;  // half the scores are masked
  std::printf("time %.3f ms (median of %d), %.1f TFLOP/s\n", ms, kTimedRuns,
              flops / (ms * 1e-3) / 1e12);
  return passed ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::strcmp(argv[i], "--help") == 0 || std::strcmp(argv[i], "-h") == 0) {
      print_usage(stdout, argv[0]);
      return 0;
    }
  }
  Options options;
  if (!parse_options(argc, argv, options)) {
    print_usage(stderr, argv[0]);
    return 1;
  }
  if (!example::have_cuda_device()) return 1;
  return options.dtype == flashmma::ScalarType::kFloat16 ? run<__half>(options)
                                                         : run<__nv_bfloat16>(options);
}
