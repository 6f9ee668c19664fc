// SPDX-License-Identifier: Apache-2.0
// A program built for compute_75 only (tests/CMakeLists.txt sets its CUDA_ARCHITECTURES), as
// `nvcc` without -arch or CMake's default architectures would build it. Every flashmma kernel in
// it has its body compiled out. On a newer GPU the driver would JIT that PTX and run it; the
// entry points must refuse it with kUnsupportedDevice instead, launching nothing and writing
// nothing, and a kernel launched by hand must fail rather than return.
//
//   test_wrong_architecture          the entry points refuse (exit 0 when they all do)
//   test_wrong_architecture --trap   a kernel launched by hand fails (run alone: the trap leaves
//                                    the CUDA context unusable)
//
// A plain program rather than a Catch2 one: it is small, and it builds the same with every
// Catch2 version. Exit status: 0 passed, 1 failed, 77 no CUDA device (CTest's "Skipped").
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "flashmma/flashmma.cuh"

namespace {

using Config = flashmma::TileConfig<__half, 64, 64, 64, 4, 1, flashmma::SmemLayout::kXorSwizzle>;

constexpr int kSkipped = 77;
constexpr int64_t kBatch = 1, kSeqlen = 128, kHeads = 2, kHeadDim = 64;
constexpr int64_t kElements = kBatch * kSeqlen * kHeads * kHeadDim;
constexpr std::size_t kOutputBytes = kElements * sizeof(__half);
constexpr std::size_t kLseBytes = kBatch * kHeads * kSeqlen * sizeof(float);
constexpr unsigned char kPoisonByte = 0xA5;

int failures = 0;

void expect(bool condition, const std::string& what) {
  std::printf("%s: %s\n", condition ? "ok  " : "FAIL", what.c_str());
  if (!condition) ++failures;
}

bool cuda_ok(cudaError_t error, const char* what) {
  if (error == cudaSuccess) return true;
  std::printf("FAIL: %s: %s\n", what, cudaGetErrorName(error));
  ++failures;
  return false;
}

// Device q, k, v (zeros), o and lse (poison), and the params that describe them.
struct Problem {
  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  void* lse = nullptr;
  flashmma::ForwardParams params;

  bool init() {
    for (void** buffer : {&q, &k, &v, &o}) {
      if (!cuda_ok(cudaMalloc(buffer, kOutputBytes), "cudaMalloc")) return false;
    }
    if (!cuda_ok(cudaMalloc(&lse, kLseBytes), "cudaMalloc")) return false;
    for (void* input : {q, k, v}) {
      if (!cuda_ok(cudaMemset(input, 0, kOutputBytes), "cudaMemset")) return false;
    }
    if (!cuda_ok(cudaMemset(o, kPoisonByte, kOutputBytes), "cudaMemset") ||
        !cuda_ok(cudaMemset(lse, kPoisonByte, kLseBytes), "cudaMemset")) {
      return false;
    }
    params.dtype = flashmma::ScalarType::kFloat16;
    params.q = q;
    params.k = k;
    params.v = v;
    params.o = o;
    params.lse = static_cast<float*>(lse);
    params.batch = kBatch;
    params.seqlen_q = params.seqlen_k = kSeqlen;
    params.heads_q = params.heads_kv = kHeads;
    params.head_dim = kHeadDim;
    params.q_strides = params.k_strides = params.v_strides = params.o_strides =
        flashmma::bshd_strides(kSeqlen, kHeads, kHeadDim);
    return true;
  }
  ~Problem() {
    for (void* buffer : {q, k, v, o, lse}) cudaFree(buffer);
  }

  // True when o and lse still hold nothing but the poison.
  bool outputs_untouched() const {
    std::vector<unsigned char> bytes(kOutputBytes + kLseBytes);
    if (!cuda_ok(cudaMemcpy(bytes.data(), o, kOutputBytes, cudaMemcpyDeviceToHost), "cudaMemcpy") ||
        !cuda_ok(cudaMemcpy(bytes.data() + kOutputBytes, lse, kLseBytes, cudaMemcpyDeviceToHost),
                 "cudaMemcpy")) {
      return false;
    }
    for (unsigned char byte : bytes) {
      if (byte != kPoisonByte) return false;
    }
    return true;
  }
};

void expect_refused(const char* entry, const flashmma::Status& status, const Problem& problem) {
  const std::string& message = status.message();
  std::printf("%s: %s\n", entry, message.c_str());
  expect(status.code() == flashmma::ErrorCode::kUnsupportedDevice,
         std::string(entry) + " returns kUnsupportedDevice");
  expect(message.find("compute_75") != std::string::npos &&
             message.find("CUDA_ARCHITECTURES") != std::string::npos,
         std::string(entry) + "'s message names the code found and how to build");
  expect(cudaDeviceSynchronize() == cudaSuccess, std::string(entry) + " ran nothing that failed");
  expect(problem.outputs_untouched(), std::string(entry) + " wrote nothing");
}

int refused_by_entry_points() {
  Problem problem;
  if (!problem.init()) return 1;
  expect_refused("forward<Config>", flashmma::forward<Config>(problem.params), problem);
  problem.params.mask = flashmma::MaskKind::kCausal;
  expect_refused("forward<Config>, causal", flashmma::forward<Config>(problem.params), problem);
  problem.params.mask = flashmma::MaskKind::kNone;
  expect_refused("forward<Config, SlidingWindow>",
                 flashmma::forward<Config>(problem.params, flashmma::SlidingWindow{{}, 16, 0}),
                 problem);
  expect_refused("forward(params)", flashmma::forward(problem.params), problem);
  return failures == 0 ? 0 : 1;
}

int trap_when_launched_by_hand() {
  Problem problem;
  if (!problem.init()) return 1;
  using Kernel = flashmma::ForwardKernelFor<Config, flashmma::FullAttention>;
  const Kernel::Params params{flashmma::detail::make_forward_args<__half>(problem.params), {}, {}};
  const auto entry = flashmma::kernel_entry<Kernel>;
  if (!cuda_ok(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    static_cast<int>(Kernel::kSmemBytes)),
               "cudaFuncSetAttribute")) {
    return 1;
  }
  entry<<<1, Kernel::kThreads, Kernel::kSmemBytes>>>(params);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t finished = cudaDeviceSynchronize();
  std::printf("launch: %s, synchronize: %s\n", cudaGetErrorName(launched),
              cudaGetErrorName(finished));
  expect(launched != cudaSuccess || finished != cudaSuccess,
         "a compiled-out kernel launched by hand fails");
  return failures == 0 ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  int devices = 0;
  const cudaError_t error = cudaGetDeviceCount(&devices);
  if (error != cudaSuccess || devices == 0) {
    std::printf("no CUDA device: skipping (%s)\n",
                error != cudaSuccess ? cudaGetErrorName(error) : "0 devices");
    return kSkipped;
  }
  const bool trap = argc > 1 && std::strcmp(argv[1], "--trap") == 0;
  return trap ? trap_when_launched_by_hand() : refused_by_entry_points();
}
