// SPDX-License-Identifier: Apache-2.0
// flashmma_backward_bench: times flashmma::backward (the three launches of one call) over
// FlashAttention-2's benchmark sweep, as CSV on stdout:
//
//   flashmma_backward_bench [--tile default|NAME] [--dtype fp16|bf16|both] [--iters N]
//                           [--head-dims 64,128] [--seqlens 1024,...,16384] [--deterministic]
//                           [--dropout P] [--list-tiles]
//
// --dropout P > 0 times the tile's kernels compiled with dropout (backward_with_dropout).
//
// Rows: d in --head-dims, N in {1k, 2k, 4k, 8k, 16k} with B * N = 16384 and H * d = 2048, causal
// and not. TFLOP/s count 2.5 times the forward's FLOPs (4 B H N^2 d, halved for causal), as
// FlashAttention's benchmarks do for the backward's five GEMMs against the forward's two.
// Inputs are N(0, 1); O is N(0, 1) and every LSE log(N) + 0.5, near what such inputs give (the
// time does not depend on them). The median of --iters timed calls after 3 untimed ones.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "flashmma/backward.cuh"

namespace {

using flashmma_bench::DeviceBuffer;

__global__ void fill_normal_kernel(__half* data, int64_t count, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    uint64_t x = (i + 1) * 0x9e3779b97f4a7c15ull ^ seed;
    x ^= x >> 31;
    x *= 0xbf58476d1ce4e5b9ull;
    x ^= x >> 29;
    const float u1 = ((x >> 40) + 0.5f) / 16777216.f;
    const float u2 = (((x >> 16) & 0xffffff) + 0.5f) / 16777216.f;
    const float normal = sqrtf(-2.f * logf(u1)) * cosf(6.2831853f * u2);
    data[i] = __float2half(normal);  // the bits are reinterpreted for bf16: values stay O(1)
  }
}

__global__ void fill_value_kernel(float* data, int64_t count, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count;
       i += int64_t{gridDim.x} * blockDim.x) {
    data[i] = value;
  }
}

struct Shape {
  int64_t batch, seqlen, heads, head_dim;
  bool causal;
};

using Runner = std::function<flashmma::Status(const flashmma::BackwardParams&)>;

// Config with the shape's policy (FullAttention or CausalMask), passed as a policy so that only
// those two kernels are compiled per config (backward(params) would compile all 72 defaults).
template <class Config>
flashmma::Status run_with_mask(flashmma::BackwardParams p) {
  const bool causal = p.mask == flashmma::MaskKind::kCausal;
  p.mask = flashmma::MaskKind::kNone;
  if (p.dropout_p > 0.f) {
    if (causal) return flashmma::backward_with_dropout<Config>(p, flashmma::CausalMask{});
    return flashmma::backward_with_dropout<Config>(p, flashmma::FullAttention{});
  }
  if (causal) return flashmma::backward<Config>(p, flashmma::CausalMask{});
  return flashmma::backward<Config>(p, flashmma::FullAttention{});
}

// What backward(params) runs for the shape's head dim (backward.cuh's backward_default_config):
// the Hopper default where runs_sm90_backward_default says so, else the portable one.
template <class Element, int HeadDim>
flashmma::Status run_default(const flashmma::BackwardParams& p) {
  using Hopper = flashmma::Sm90DefaultBackwardConfigT<Element, HeadDim>;
  flashmma::DeviceInfo device;
  if (flashmma::Status s = flashmma::query_device(device); !s) return s;
  const bool sm90a_code = device.compute_capability == 90 &&
                          flashmma::detail::sm90a_code_loaded<
                              flashmma::sm90::BackwardKernel<Hopper, flashmma::FullAttention>>();
  if (flashmma::runs_sm90_backward_default(p, device, sm90a_code)) return run_with_mask<Hopper>(p);
  return run_with_mask<flashmma::DefaultBackwardConfigT<Element, HeadDim>>(p);
}

// The tiles a run may time, by name: "default" is the config backward(params) runs, "portable"
// the portable default of the head dim on any GPU.
template <class Element>
std::map<std::string, Runner> tiles() {
  using flashmma::BackwardTileConfig;
  using flashmma::DefaultBackwardConfigT;
  return {
      {"default",
       [](const flashmma::BackwardParams& p) {
         switch (flashmma::backward_kernel_head_dim_for(p.head_dim)) {
           case 64: return run_default<Element, 64>(p);
           case 128: return run_default<Element, 128>(p);
           default: return run_default<Element, 256>(p);
         }
       }},
      {"portable",
       [](const flashmma::BackwardParams& p) {
         switch (flashmma::backward_kernel_head_dim_for(p.head_dim)) {
           case 64: return run_with_mask<DefaultBackwardConfigT<Element, 64>>(p);
           case 128: return run_with_mask<DefaultBackwardConfigT<Element, 128>>(p);
           default: return run_with_mask<DefaultBackwardConfigT<Element, 256>>(p);
         }
       }},
      {"sm90_d128_s3", [](const flashmma::BackwardParams& p) {
         return run_with_mask<flashmma::Sm90BackwardTileConfig<Element, 128, 64, 3>>(p);
       }},
      {"d128_m32", [](const flashmma::BackwardParams& p) {
         return run_with_mask<BackwardTileConfig<Element, 128, 32, 8>>(p);
       }},
      {"d128_swizzled", [](const flashmma::BackwardParams& p) {
         return run_with_mask<
             BackwardTileConfig<Element, 128, 64, 8, 1, flashmma::SmemLayout::kXorSwizzle>>(p);
       }},
  };
}

double time_call(const Shape& s, flashmma::ScalarType dtype, const Runner& run, int iters,
                 bool deterministic, float dropout_p) {
  const int64_t q_elements = s.batch * s.seqlen * s.heads * s.head_dim;
  const std::size_t bytes = static_cast<std::size_t>(q_elements) * 2;
  DeviceBuffer q(bytes), k(bytes), v(bytes), o(bytes), d_o(bytes), dq(bytes), dk(bytes), dv(bytes),
      lse(static_cast<std::size_t>(s.batch * s.heads * s.seqlen) * 4);
  uint64_t seed = 1;
  for (DeviceBuffer* b : {&q, &k, &v, &o, &d_o}) {
    fill_normal_kernel<<<1024, 256>>>(b->as<__half>(), q_elements, seed++);
  }
  fill_value_kernel<<<1024, 256>>>(lse.as<float>(), s.batch * s.heads * s.seqlen,
                                   std::log(static_cast<float>(s.seqlen)) + 0.5f);
  flashmma::BackwardParams p;
  static_cast<flashmma::ProblemShape&>(p) =
      flashmma::make_problem_shape(s.batch, s.seqlen, s.seqlen, s.heads, s.heads, s.head_dim);
  p.dtype = dtype;
  p.q = q.as<void>();
  p.k = k.as<void>();
  p.v = v.as<void>();
  p.o = o.as<void>();
  p.d_o = d_o.as<void>();
  p.lse = lse.as<float>();
  p.dq = dq.as<void>();
  p.dk = dk.as<void>();
  p.dv = dv.as<void>();
  const flashmma::TensorStrides strides = flashmma::bshd_strides(s.seqlen, s.heads, s.head_dim);
  p.q_strides = p.k_strides = p.v_strides = p.o_strides = strides;
  p.do_strides = p.dq_strides = p.dk_strides = p.dv_strides = strides;
  p.mask = s.causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;
  p.deterministic = deterministic;
  p.dropout_p = dropout_p;
  p.dropout_seed = 0x1234;
  DeviceBuffer workspace(flashmma::backward_workspace_bytes(p));
  p.workspace = workspace.as<void>();
  p.workspace_bytes = flashmma::backward_workspace_bytes(p);

  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  std::vector<float> times;
  for (int i = 0; i < iters + 3; ++i) {
    cudaEventRecord(start);
    const flashmma::Status status = run(p);
    cudaEventRecord(stop);
    if (!status.ok()) {
      std::fprintf(stderr, "%s\n", status.message().c_str());
      std::exit(1);
    }
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    if (i >= 3) times.push_back(ms);
  }
  flashmma_bench::check_cuda(cudaGetLastError(), "backward");
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

}  // namespace

int main(int argc, char** argv) {
  std::string tile = "default", dtypes = "both", head_dims = "64,128",
              seqlens = "1024,2048,4096,8192,16384";
  int iters = 20;
  bool deterministic = false;
  float dropout_p = 0.f;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    const auto value = [&] {
      if (i + 1 >= argc) {
        std::fprintf(stderr, "%s needs a value\n", arg.c_str());
        std::exit(2);
      }
      return std::string(argv[++i]);
    };
    if (arg == "--tile") {
      tile = value();
    } else if (arg == "--dtype") {
      dtypes = value();
    } else if (arg == "--iters") {
      iters = std::atoi(value().c_str());
    } else if (arg == "--head-dims") {
      head_dims = value();
    } else if (arg == "--seqlens") {
      seqlens = value();
    } else if (arg == "--deterministic") {
      deterministic = true;
    } else if (arg == "--dropout") {
      dropout_p = std::strtof(value().c_str(), nullptr);
    } else if (arg == "--list-tiles") {
      for (const auto& entry : tiles<__half>()) std::printf("%s\n", entry.first.c_str());
      return 0;
    } else {
      std::fprintf(stderr, "unknown argument %s (see the file's header)\n", arg.c_str());
      return 2;
    }
  }
  if (tiles<__half>().count(tile) == 0) {
    std::fprintf(stderr, "unknown tile %s (--list-tiles)\n", tile.c_str());
    return 2;
  }
  int device_count = 0;
  if (cudaGetDeviceCount(&device_count) != cudaSuccess || device_count == 0) {
    std::fprintf(stderr, "no CUDA device\n");
    return 77;
  }
  const auto numbers = [](const std::string& text) {
    std::vector<int64_t> values;
    std::stringstream list(text);
    for (std::string item; std::getline(list, item, ',');) values.push_back(std::stoll(item));
    return values;
  };
  const std::vector<int64_t> dims = numbers(head_dims);

  std::printf("tile,dtype,d,seqlen,batch,heads,causal,ms,tflops\n");
  for (const std::string dtype : {"fp16", "bf16"}) {
    if (dtypes != "both" && dtypes != dtype) continue;
    const flashmma::ScalarType type =
        dtype == "fp16" ? flashmma::ScalarType::kFloat16 : flashmma::ScalarType::kBFloat16;
    const Runner run = dtype == "fp16" ? tiles<__half>()[tile] : tiles<__nv_bfloat16>()[tile];
    for (const int64_t d : dims) {
      for (const int64_t n : numbers(seqlens)) {
        for (const bool causal : {false, true}) {
          const Shape s{16384 / n, n, 2048 / d, d, causal};
          const double ms = time_call(s, type, run, iters, deterministic, dropout_p);
          const double flops = 2.5 * 4.0 * s.batch * s.heads * double(n) * n * d * (causal ? 0.5 : 1.0);
          std::printf("%s,%s,%lld,%lld,%lld,%lld,%d,%.4f,%.1f\n", tile.c_str(), dtype.c_str(),
                      static_cast<long long>(d), static_cast<long long>(n),
                      static_cast<long long>(s.batch), static_cast<long long>(s.heads),
                      causal ? 1 : 0, ms, flops / ms * 1e-9);
          std::fflush(stdout);
        }
      }
    }
  }
  return 0;
}
