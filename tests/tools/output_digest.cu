// SPDX-License-Identifier: Apache-2.0
// Prints a digest of the forward outputs (O and LSE bytes) of every tested configuration over a
// fixed set of cases, one line per (config, case). Built against two source trees, the two
// listings must be identical when a change claims to leave every result bit for bit the same:
//
//   nvcc -std=c++17 --expt-relaxed-constexpr -arch=sm_90a -I<tree>/include -I<tree>/tests \
//        tests/tools/output_digest.cu -o digest && ./digest > digest.txt
//
// It uses only the public entry points, DefaultConfig<Element, HeadDim>::{type, causal, compact}
// and tests/support/test_configs.hpp's CustomConfigs, which every tree since 3d0a511 has.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <tuple>
#include <vector>

#include "flashmma/flashmma.cuh"
#include "support/test_configs.hpp"

namespace {

// Not a flashmma::ProblemShape: this file must also build against trees that predate it (the
// head dim comes from the config).
struct Case {
  int64_t batch, seqlen_q, seqlen_k, heads_q, heads_kv;
  bool causal;
};

// Odd lengths both ways, GQA and MQA, rows that see no key (seqlen_q > seqlen_k, causal).
const Case kCases[] = {
    {2, 128, 128, 4, 4, false}, {2, 128, 128, 4, 4, true},  {1, 77, 301, 8, 2, false},
    {1, 77, 301, 8, 2, true},   {1, 301, 77, 4, 1, false},  {1, 301, 77, 4, 1, true},
    {3, 1, 257, 2, 2, false},   {1, 513, 513, 2, 1, true},
};

void check(cudaError_t error, const char* what) {
  if (error != cudaSuccess) {
    std::fprintf(stderr, "%s: %s\n", what, cudaGetErrorString(error));
    std::exit(2);
  }
}

uint64_t fnv1a(const std::vector<unsigned char>& bytes, uint64_t hash) {
  for (unsigned char byte : bytes) hash = (hash ^ byte) * 1099511628211ull;
  return hash;
}

// Deterministic inputs in [-2, 2), the same in every build.
template <class Element>
std::vector<Element> inputs(int64_t count, uint64_t seed) {
  std::vector<Element> values(static_cast<std::size_t>(count));
  uint64_t state = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (Element& value : values) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    const float x = static_cast<float>((state >> 40) & 0xffff) / 16384.f - 2.f;
    value = Element(x);
  }
  return values;
}

template <class Element>
void* upload(const std::vector<Element>& host) {
  void* device = nullptr;
  check(cudaMalloc(&device, host.size() * sizeof(Element)), "cudaMalloc");
  check(cudaMemcpy(device, host.data(), host.size() * sizeof(Element), cudaMemcpyHostToDevice),
        "cudaMemcpy");
  return device;
}

std::vector<unsigned char> download(const void* device, std::size_t bytes) {
  std::vector<unsigned char> host(bytes);
  check(cudaMemcpy(host.data(), device, bytes, cudaMemcpyDeviceToHost), "cudaMemcpy");
  return host;
}

// Runs `launch` on one case with the head dim `head_dim` and prints the digest line.
template <class Element, class Launch>
void digest(const std::string& name, int64_t head_dim, const Case& c, Launch launch) {
  const int64_t q_elements = c.batch * c.seqlen_q * c.heads_q * head_dim;
  const int64_t kv_elements = c.batch * c.seqlen_k * c.heads_kv * head_dim;
  void* q = upload(inputs<Element>(q_elements, 1));
  void* k = upload(inputs<Element>(kv_elements, 2));
  void* v = upload(inputs<Element>(kv_elements, 3));
  void* o = nullptr;
  float* lse = nullptr;
  const std::size_t lse_bytes = c.batch * c.heads_q * c.seqlen_q * sizeof(float);
  check(cudaMalloc(&o, q_elements * sizeof(Element)), "cudaMalloc");
  check(cudaMalloc(&lse, lse_bytes), "cudaMalloc");
  check(cudaMemset(o, 0xFF, q_elements * sizeof(Element)), "cudaMemset");
  check(cudaMemset(lse, 0xFF, lse_bytes), "cudaMemset");

  flashmma::ForwardParams params;
  params.dtype = flashmma::ElementTraits<Element>::kScalarType;
  params.q = q;
  params.k = k;
  params.v = v;
  params.o = o;
  params.lse = lse;
  params.batch = c.batch;
  params.seqlen_q = c.seqlen_q;
  params.seqlen_k = c.seqlen_k;
  params.heads_q = c.heads_q;
  params.heads_kv = c.heads_kv;
  params.head_dim = head_dim;
  params.q_strides = params.o_strides = flashmma::bshd_strides(c.seqlen_q, c.heads_q, head_dim);
  params.k_strides = params.v_strides = flashmma::bshd_strides(c.seqlen_k, c.heads_kv, head_dim);
  params.mask = c.causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;
  const flashmma::Status status = launch(params);
  check(cudaDeviceSynchronize(), "forward");
  uint64_t hash = 14695981039346656037ull;
  if (status.ok()) {
    hash = fnv1a(download(o, q_elements * sizeof(Element)), hash);
    hash = fnv1a(download(lse, lse_bytes), hash);
  }
  std::printf("%s d=%lld b=%lld sq=%lld sk=%lld hq=%lld hkv=%lld %s: %s %016llx\n",
              name.c_str(), static_cast<long long>(head_dim), static_cast<long long>(c.batch),
              static_cast<long long>(c.seqlen_q), static_cast<long long>(c.seqlen_k),
              static_cast<long long>(c.heads_q), static_cast<long long>(c.heads_kv),
              c.causal ? "causal" : "none", status.ok() ? "ok" : status.message().c_str(),
              static_cast<unsigned long long>(hash));
  for (void* buffer : {q, k, v, o, static_cast<void*>(lse)}) cudaFree(buffer);
}

template <class Config>
void digest_config(int index) {
  using Element = typename Config::element_type;
  const std::string name = "config" + std::to_string(index) + "(" +
                           flashmma::ElementTraits<Element>::kName + " d" +
                           std::to_string(Config::kHeadDim) + " m" +
                           std::to_string(Config::kBlockM) + " n" +
                           std::to_string(Config::kBlockN) + " w" +
                           std::to_string(Config::kWarps) + " s" +
                           std::to_string(Config::kStages) + ")";
  for (const Case& c : kCases) {
    digest<Element>(name, Config::kHeadDim, c,
                    [](const flashmma::ForwardParams& p) { return flashmma::forward<Config>(p); });
  }
}

template <class Tuple, std::size_t... I>
void digest_all(int first_index, std::index_sequence<I...>) {
  (digest_config<std::tuple_element_t<I, Tuple>>(first_index + static_cast<int>(I)), ...);
}

// The general, causal and compact defaults of every kernel head dim (the same config twice where
// a head dim's defaults coincide: its digest lines repeat).
template <class Element, int HeadDim>
using DefaultTriple = std::tuple<typename flashmma::DefaultConfig<Element, HeadDim>::type,
                                 typename flashmma::DefaultConfig<Element, HeadDim>::causal,
                                 typename flashmma::DefaultConfig<Element, HeadDim>::compact>;
template <class Element>
using AllDefaults = decltype(std::tuple_cat(
    DefaultTriple<Element, 32>{}, DefaultTriple<Element, 64>{}, DefaultTriple<Element, 96>{},
    DefaultTriple<Element, 128>{}, DefaultTriple<Element, 160>{}, DefaultTriple<Element, 192>{},
    DefaultTriple<Element, 224>{}, DefaultTriple<Element, 256>{}));

template <class Tuple>
int digest_list(int first_index) {
  digest_all<Tuple>(first_index, std::make_index_sequence<std::tuple_size<Tuple>::value>{});
  return first_index + static_cast<int>(std::tuple_size<Tuple>::value);
}

}  // namespace

int main() {
  int index = 0;
  index = digest_list<AllDefaults<__half>>(index);
  index = digest_list<AllDefaults<__nv_bfloat16>>(index);
  index = digest_list<flashmma::test::CustomConfigs>(index);
  // The default dispatch, at head dims with and without a kernel of their own.
  for (const int64_t head_dim : {8, 40, 64, 128, 200, 256}) {
    for (const Case& c : kCases) {
      digest<__half>("default", head_dim, c,
                     [](const flashmma::ForwardParams& p) { return flashmma::forward(p); });
      digest<__nv_bfloat16>("default", head_dim, c,
                            [](const flashmma::ForwardParams& p) { return flashmma::forward(p); });
    }
  }
  return 0;
}
