// SPDX-License-Identifier: Apache-2.0
// A program built for compute_75 only (tests/CMakeLists.txt sets its CUDA_ARCHITECTURES), as
// `nvcc` without -arch or CMake's default architectures would build it. Every flashmma kernel in
// it has its body compiled out. On a newer GPU the driver would JIT that PTX and run it; the
// entry points must refuse it with kUnsupportedDevice instead, launching nothing and writing
// nothing, and a kernel launched by hand must fail rather than return.
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/flashmma.cuh"

namespace {

using Config = flashmma::TileConfig<__half, 64, 64, 64, 4, 1, flashmma::SmemLayout::kXorSwizzle>;

constexpr int64_t kBatch = 1, kSeqlen = 128, kHeads = 2, kHeadDim = 64;
constexpr int64_t kElements = kBatch * kSeqlen * kHeads * kHeadDim;
constexpr unsigned char kPoisonByte = 0xA5;

// Device q, k, v (zeros) and o (poison), and the params that describe them.
struct Problem {
  Problem() {
    for (void** buffer : {&q, &k, &v, &o}) {
      REQUIRE(cudaMalloc(buffer, kElements * sizeof(__half)) == cudaSuccess);
    }
    REQUIRE(cudaMalloc(&lse, kBatch * kHeads * kSeqlen * sizeof(float)) == cudaSuccess);
    for (void* input : {q, k, v}) {
      REQUIRE(cudaMemset(input, 0, kElements * sizeof(__half)) == cudaSuccess);
    }
    REQUIRE(cudaMemset(o, kPoisonByte, kElements * sizeof(__half)) == cudaSuccess);
    REQUIRE(cudaMemset(lse, kPoisonByte, kBatch * kHeads * kSeqlen * sizeof(float)) ==
            cudaSuccess);
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
  }
  ~Problem() {
    for (void* buffer : {q, k, v, o, lse}) cudaFree(buffer);
  }

  // True when o and lse still hold nothing but the poison.
  bool outputs_untouched() const {
    std::vector<unsigned char> bytes(kElements * sizeof(__half));
    REQUIRE(cudaMemcpy(bytes.data(), o, bytes.size(), cudaMemcpyDeviceToHost) == cudaSuccess);
    std::vector<unsigned char> lse_bytes(kBatch * kHeads * kSeqlen * sizeof(float));
    REQUIRE(cudaMemcpy(lse_bytes.data(), lse, lse_bytes.size(), cudaMemcpyDeviceToHost) ==
            cudaSuccess);
    bytes.insert(bytes.end(), lse_bytes.begin(), lse_bytes.end());
    for (unsigned char byte : bytes) {
      if (byte != kPoisonByte) return false;
    }
    return true;
  }

  void* q = nullptr;
  void* k = nullptr;
  void* v = nullptr;
  void* o = nullptr;
  void* lse = nullptr;
  flashmma::ForwardParams params;
};

void require_refused(const flashmma::Status& status, const Problem& problem) {
  INFO("message: " << status.message());
  CHECK(status.code() == flashmma::ErrorCode::kUnsupportedDevice);
  const std::string& message = status.message();
  CHECK(message.find("compute_75") != std::string::npos);
  CHECK(message.find("CUDA_ARCHITECTURES") != std::string::npos);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);  // nothing ran, so nothing failed
  CHECK(problem.outputs_untouched());
}

}  // namespace

TEST_CASE("a build without sm_80 code is refused by forward<Config>", "[arch]") {
  Problem problem;
  for (const auto mask : {flashmma::MaskKind::kNone, flashmma::MaskKind::kCausal}) {
    problem.params.mask = mask;
    require_refused(flashmma::forward<Config>(problem.params), problem);
  }
}

TEST_CASE("a build without sm_80 code is refused by the default dispatch", "[arch]") {
  Problem problem;
  require_refused(flashmma::forward(problem.params), problem);
}

// Hidden, run by its own CTest entry (the trap leaves the CUDA context unusable): a kernel launched by
// hand, past the host check, must fail the launch instead of returning with O unwritten.
TEST_CASE("a kernel compiled out for compute_75 traps when launched by hand", "[.trap]") {
  Problem problem;
  using Kernel = flashmma::ForwardKernelFor<Config, flashmma::FullAttention>;
  const Kernel::Params params{flashmma::detail::make_forward_args<__half>(problem.params), {}, {}};
  const auto entry = flashmma::kernel_entry<Kernel>;
  REQUIRE(cudaFuncSetAttribute(entry, cudaFuncAttributeMaxDynamicSharedMemorySize,
                               static_cast<int>(Kernel::kSmemBytes)) == cudaSuccess);
  entry<<<1, Kernel::kThreads, Kernel::kSmemBytes>>>(params);
  const cudaError_t launched = cudaGetLastError();
  const cudaError_t finished = cudaDeviceSynchronize();
  INFO("launch: " << cudaGetErrorName(launched) << ", synchronize: "
                  << cudaGetErrorName(finished));
  CHECK((launched != cudaSuccess || finished != cudaSuccess));
}
