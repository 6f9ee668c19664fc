// SPDX-License-Identifier: Apache-2.0
// flashmma_bench: times flashmma's forward pass on the GPU.
//
//   flashmma_bench --preset fa2 --dtype both --format csv --out fa2.csv
//   flashmma_bench --shapes "b=4,h=16,sq=4096,sk=4096,d=128;b=1,h=32,sq=1,sk=16384,d=128" \
//                  --mask none --gqa 4 --config d128_m128_n64_w4_s2_swz
//   flashmma_bench --preset variants --dtype both --format csv --out variants.csv
//
// Attention variants (sliding window, softcap, ALiBi) are ForwardParams fields, given per shape
// (wl, wr, softcap, alibi) and run through the default dispatch like any other row; the ALiBi rows
// of the variants preset also run the same bias as a policy type on the same tile (alibi-policy,
// alibi-user), and the run ends with the ratios the project tracks (write_ratios).
//
// How it times (the project's rules): one pair of CUDA events around each launch, a warm-up, the
// median and minimum of the timed launches, inputs drawn from a normal distribution (never zeros),
// and enough input sets, used in turn, that one launch never finds the previous one's data in L2.
// Every Status and every CUDA call is checked. O is poisoned with NaN before the runs and checked
// afterwards, so a row whose kernel left anything unwritten or non-finite is reported as failed;
// then 64 of its query rows are recomputed by the test suite's fp64 reference (output_check.cuh)
// and a row whose O is further from it than the tests allow is reported as failed too.
//
// Throughput follows FlashAttention's convention: FLOPs = 4 * B * Hq * Sq * Sk * d, halved for a
// causal mask when Sq == Sk. For a causal mask with Sq != Sk, and for any sliding window, the
// visible (query, key) pairs are counted exactly instead (FLOPs = 4 * B * Hq * d * pairs), so a
// window's TFLOP/s counts only the scores it keeps. ALiBi and the softcap change no count. Rows
// with Sq <= 128 also report bandwidth: the bytes of Q, K, V read once and O written once, over
// the median time.
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <iostream>
#include <limits>
#include <random>
#include <sstream>
#include <stdexcept>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "bench_configs.hpp"
#include "device_buffer.hpp"
#include "flashmma/default_dispatch.hpp"
#include "flashmma/device.hpp"
#include "flashmma/forward.cuh"  // sm90a_code_loaded (the kernels are in the shards)
#include "flashmma/launch_plan.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/element.hpp"
#include "output_check.cuh"

namespace flashmma_bench {
namespace {

constexpr std::size_t kMinRotationBytes = 120u * 1000u * 1000u;  // 2 x the H200's 60 MB of L2
constexpr int kMaxInputSets = 4096;
constexpr std::size_t kSetAlignment = 256;   // bytes between the starts of two input sets
constexpr int64_t kBandwidthMaxSeqlenQ = 128;  // rows this short are memory-bound: report GB/s
constexpr int kFillThreads = 256;
constexpr int kFillBlocks = 4096;

// ---------------------------------------------------------------------------------------------
// Errors

// A wrong command line: reported with the usage hint, exit code 2.
struct UsageError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---------------------------------------------------------------------------------------------
// Device helpers: random fill, non-finite count

__device__ __forceinline__ uint64_t splitmix64(uint64_t x) {
  x += 0x9E3779B97F4A7C15ull;
  x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9ull;
  x = (x ^ (x >> 27)) * 0x94D049BB133111EBull;
  return x ^ (x >> 31);
}

template <class Element>
__device__ __forceinline__ Element from_float(float x);
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}
template <>
__device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}

__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }
__device__ __forceinline__ float to_float(__nv_bfloat16 x) { return __bfloat162float(x); }

// Standard normal values (Box-Muller over a counter-based hash): reproducible for a seed.
template <class Element>
__global__ void fill_normal(Element* data, int64_t count, uint64_t seed) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    const uint64_t bits = splitmix64(seed ^ splitmix64(static_cast<uint64_t>(i)));
    const float u1 = static_cast<float>((bits >> 40) + 1) * 0x1p-24f;        // (0, 1]
    const float u2 = static_cast<float>((bits >> 16) & 0xFFFFFFu) * 0x1p-24f;  // [0, 1)
    data[i] = from_float<Element>(sqrtf(-2.f * logf(u1)) * cospif(2.f * u2));
  }
}

template <class Element>
__global__ void count_non_finite(const Element* data, int64_t count,
                                 unsigned long long* result) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * blockDim.x;
  unsigned long long local = 0;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < count;
       i += step) {
    if (!isfinite(to_float(data[i]))) ++local;
  }
  if (local != 0) atomicAdd(result, local);
}

template <class Element>
void fill_normal_on_device(void* data, int64_t count, uint64_t seed) {
  fill_normal<Element><<<kFillBlocks, kFillThreads>>>(static_cast<Element*>(data), count, seed);
  check_cuda(cudaGetLastError(), "launching fill_normal");
}

void fill_normal_on_device(flashmma::ScalarType dtype, void* data, int64_t count, uint64_t seed) {
  if (dtype == flashmma::ScalarType::kFloat16) {
    fill_normal_on_device<__half>(data, count, seed);
  } else {
    fill_normal_on_device<__nv_bfloat16>(data, count, seed);
  }
}

uint64_t non_finite_count(flashmma::ScalarType dtype, const void* data, int64_t count) {
  DeviceBuffer result(sizeof(unsigned long long));
  check_cuda(cudaMemset(result.as<void>(), 0, sizeof(unsigned long long)), "cudaMemset");
  if (dtype == flashmma::ScalarType::kFloat16) {
    count_non_finite<<<kFillBlocks, kFillThreads>>>(static_cast<const __half*>(data), count,
                                                    result.as<unsigned long long>());
  } else {
    count_non_finite<<<kFillBlocks, kFillThreads>>>(static_cast<const __nv_bfloat16*>(data),
                                                    count, result.as<unsigned long long>());
  }
  check_cuda(cudaGetLastError(), "launching count_non_finite");
  unsigned long long host = 0;
  check_cuda(cudaMemcpy(&host, result.as<void>(), sizeof(host), cudaMemcpyDeviceToHost),
             "cudaMemcpy");
  return host;
}

// ---------------------------------------------------------------------------------------------
// What to run

enum class Layout { kBshd, kBhsd };
enum class OutputFormat { kTable, kCsv, kJson };

struct Shape {
  int64_t batch = 1;
  int64_t heads_q = 1;
  int64_t heads_kv = 0;  // 0: heads_q / --gqa
  int64_t seqlen_q = 0;
  int64_t seqlen_k = 0;
  int64_t head_dim = 0;
  int causal = -1;  // -1: from --mask; 0 or 1: fixed by the shape
  // The variant, as ForwardParams has it: window sides (-1 unbounded), softcap (0 off), and ALiBi
  // with the slopes of alibi_slopes().
  int64_t window_left = -1;
  int64_t window_right = -1;
  float softcap = 0.f;
  bool alibi = false;
  // > 0: K and V are a paged KV cache of pages of this many keys, in a shuffled order, read
  // through a block table (params.block_table); 0: contiguous.
  int64_t page_size = 0;
  std::string config;  // empty: --config
};

bool has_window(const Shape& s) { return s.window_left >= 0 || s.window_right >= 0; }
bool has_variant(const Shape& s) { return has_window(s) || s.softcap != 0.f || s.alibi; }

// "-", or the variant's parts, e.g. "window(4096,0)", "alibi", "softcap=50", "page=16" (a paged
// cache), joined by '+'.
std::string variant_name(const Shape& s) {
  std::string name;
  auto add = [&name](const std::string& part) { name += (name.empty() ? "" : "+") + part; };
  if (has_window(s)) {
    add("window(" + std::to_string(s.window_left) + "," + std::to_string(s.window_right) + ")");
  }
  if (s.softcap != 0.f) {
    std::ostringstream cap;
    cap << "softcap=" << s.softcap;
    add(cap.str());
  }
  if (s.alibi) add("alibi");
  if (s.page_size > 0) add("page=" + std::to_string(s.page_size));
  return name.empty() ? "-" : name;
}

// ALiBi's slopes for `heads` heads (Press et al.): the geometric sequence 2^(-8 (h + 1) / heads),
// shared by every batch entry. bench/compare_variants.py gives FlexAttention the same ones.
std::vector<float> alibi_slopes(int64_t heads) {
  std::vector<float> slopes;
  for (int64_t h = 0; h < heads; ++h) {
    slopes.push_back(std::exp2(-8.f * static_cast<float>(h + 1) / static_cast<float>(heads)));
  }
  return slopes;
}

struct Options {
  std::vector<Shape> shapes;
  std::string shapes_source = "preset fa2";
  std::vector<flashmma::ScalarType> dtypes = {flashmma::ScalarType::kFloat16};
  std::vector<bool> masks = {false, true};  // causal or not
  std::string config = kDefaultName;
  int64_t gqa = 1;
  Layout layout = Layout::kBshd;
  bool write_lse = true;
  bool workspace = true;
  int rounds = 1;
  int warmup = 5;
  int iters = 30;
  OutputFormat format = OutputFormat::kTable;
  std::string out_path;
  bool list_configs = false;
};

// One benchmark row: a shape, a dtype and a mask.
struct Case {
  Shape shape;
  flashmma::ScalarType dtype;
  bool causal;
};

struct Result {
  Case run;
  std::string entry;  // the entry's name: "default", a TileShape name, "alibi-user", ...
  // The resolved entry's name, e.g. "d128_m128_n64_w4_s2_swz" or
  // "default(d128_m128_n64_w4_s1_swz causal:d128_m64_n64_w4_s1_swz)"; for the entries that follow
  // the dispatch, also which tile and why, e.g. "alibi-user(d128_m128_n64_w4_s1_swz, the
  // dispatch's tile)".
  std::string config;
  std::string status;   // "ok", "skipped: ..." or "error: ..."
  // For "default" rows and the entries that follow the dispatch, the kernel
  // flashmma::describe_default_kernel names for this case and device.
  std::string kernel;
  double visible_pairs = std::numeric_limits<double>::quiet_NaN();  // per (batch, head)
  int input_sets = 0;
  double ms_median = std::numeric_limits<double>::quiet_NaN();
  double ms_min = std::numeric_limits<double>::quiet_NaN();
  double tflops = std::numeric_limits<double>::quiet_NaN();       // at the median
  double tflops_peak = std::numeric_limits<double>::quiet_NaN();  // at the minimum
  double gbps = std::numeric_limits<double>::quiet_NaN();         // Sq <= 128 only
  // Relative L2 error of O against the fp64 reference, over the checked rows.
  double rel_error = std::numeric_limits<double>::quiet_NaN();
};

const char* kUsage = R"(flashmma_bench: times flashmma's forward pass.

  --preset NAME     fa2 (default): d in {64,128,256}, N in {1k,2k,4k,8k,16k}, B*N = 16384,
                    H*d = 2048, Sq = Sk = N; decode: one query per sequence, 32 query heads over 8
                    KV heads, d = 128, non-causal, B x Sk in {1 x 128k, 1 x 32k, 8 x 16k,
                    32 x 4k, 64 x 8k, 128 x 2k}; paged: each decode row, then the same with K
                    and V in a paged cache of pages of 16 keys and of 256 (shape key page);
                    variants: H*d = 2048, each variant next to its plain
                    row: a causal sliding window (4096, 0) at N = 16384, B = 1, d in {128,64};
                    ALiBi at d = 128, N in {4k,16k}, B*N = 16384, causal and not, through the
                    default dispatch, alibi-policy and alibi-user; softcap 50 at d = 128,
                    N = 4096, B = 4, causal and not; sm90: d in {64,96,128,160,192,224,256}, N in
                    {1k,4k,8k,16k}, B*N = 16384, H*d = 2048, causal and not, each row on the
                    default and on every Hopper tile of its head dim (sm90_*, compute
                    capability 9.0 and a binary with sm_90a code only)
  --shapes SPEC     instead of a preset: shapes separated by ';', each a list of key=value
                    separated by ',': b, h (query heads), hkv, sq, sk, n (sq = sk = n), d,
                    causal (0 or 1; else --mask applies), wl and wr (sliding window sides,
                    -1 unbounded), softcap (a number, 0 off), alibi (0 or 1: ALiBi with the
                    slopes 2^(-8(h+1)/H)), page (0 or a page size: K and V in a paged cache
                    of shuffled pages, read through a block table), config (this shape's
                    --config).
                    Example: "b=16,h=16,n=1024,d=128;b=1,h=16,n=16384,d=128,causal=1,wl=4096"
  --dtype T         fp16 (default), bf16 or both
  --mask M          none, causal or both (default)
  --config NAME     default (what flashmma::forward runs for the head dim, mask and GPU; the
                    default) or a named config, see --list-configs. alibi-policy and
                    alibi-user run a row's ALiBi as flashmma::AlibiBias or as a user's policy
                    through forward<Config, Policy>, Config the d = 128 tile the default
                    dispatch names for the row (the mask's tile where it names neither)
  --gqa R           heads_kv = heads_q / R (default 1) where a shape gives no hkv
  --layout L        bshd (default, [batch, seq, heads, dim]) or bhsd
  --no-lse          do not write the log-sum-exp (written by default, as training does)
  --no-workspace    give no split-KV workspace (by default every call gets the
                    forward_workspace_bytes() it asks for, as a serving engine would, so that
                    calls with few query tiles may split their keys)
  --rounds R        time the whole list R times in turn (default 1); each row reports the round
                    of its median time, so that no row gains from when it ran (a GPU that has
                    been idle runs its first calls at higher clocks: the first row of a run read
                    up to 10% fast, which skews ratios between rows)
  --warmup N        launches before timing (default 5)
  --iters N         timed launches (default 30); the median and minimum are reported
  --format F        table (default), csv or json
  --out FILE        write the results there (a table is still printed); default: stdout
  --list-configs    print the configurations compiled in, then exit

Every row's O is checked: no element may be left unwritten or non-finite, and 64 of its query
rows, recomputed in fp64 with the row's window, softcap and ALiBi, must match within the tests'
bound (relative L2 error 2e-3 for fp16, 1.6e-2 for bf16); the error is reported as rel_error, and
a row that fails is an error.

Windowed rows count FLOPs on the visible (query, key) pairs only. After the table come the
ratios of each variant row to its plain row (and of alibi-user to the built-in ALiBi).
)";

// ---------------------------------------------------------------------------------------------
// Command line

int64_t parse_int(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  int64_t value = 0;
  try {
    value = std::stoll(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size()) {
    throw UsageError(what + ": expected an integer, got '" + text + "'");
  }
  return value;
}

float parse_float(const std::string& text, const std::string& what) {
  std::size_t used = 0;
  float value = 0.f;
  try {
    value = std::stof(text, &used);
  } catch (const std::exception&) {
    used = 0;
  }
  if (used == 0 || used != text.size() || !std::isfinite(value)) {
    throw UsageError(what + ": expected a number, got '" + text + "'");
  }
  return value;
}

std::vector<std::string> split(const std::string& text, char separator) {
  std::vector<std::string> parts;
  std::stringstream stream(text);
  std::string part;
  while (std::getline(stream, part, separator)) {
    if (!part.empty()) parts.push_back(part);
  }
  return parts;
}

Shape parse_shape(const std::string& spec) {
  Shape shape;
  for (const std::string& item : split(spec, ',')) {
    const std::size_t eq = item.find('=');
    if (eq == std::string::npos) throw UsageError("shape item '" + item + "' is not key=value");
    const std::string key = item.substr(0, eq);
    const std::string text = item.substr(eq + 1);
    if (key == "config") {
      if (text.empty()) throw UsageError("shape key config needs a name");
      shape.config = text;
      continue;
    }
    if (key == "softcap") {
      shape.softcap = parse_float(text, "shape key softcap");
      if (shape.softcap < 0.f) throw UsageError("softcap must be >= 0");
      continue;
    }
    const int64_t value = parse_int(text, "shape key " + key);
    if (key == "b") {
      shape.batch = value;
    } else if (key == "h" || key == "hq") {
      shape.heads_q = value;
    } else if (key == "hkv") {
      shape.heads_kv = value;
    } else if (key == "sq") {
      shape.seqlen_q = value;
    } else if (key == "sk") {
      shape.seqlen_k = value;
    } else if (key == "n") {
      shape.seqlen_q = shape.seqlen_k = value;
    } else if (key == "d") {
      shape.head_dim = value;
    } else if (key == "causal") {
      if (value != 0 && value != 1) throw UsageError("causal must be 0 or 1");
      shape.causal = static_cast<int>(value);
    } else if (key == "wl" || key == "wr") {
      if (value < -1) throw UsageError(key + " must be -1 (unbounded) or >= 0");
      (key == "wl" ? shape.window_left : shape.window_right) = value;
    } else if (key == "alibi") {
      if (value != 0 && value != 1) throw UsageError("alibi must be 0 or 1");
      shape.alibi = value == 1;
    } else if (key == "page") {
      if (value < 0) throw UsageError("page must be 0 (contiguous K and V) or a page size >= 1");
      shape.page_size = value;
    } else {
      throw UsageError("unknown shape key '" + key +
                       "' (known: b, h, hkv, sq, sk, n, d, causal, wl, wr, softcap, alibi, "
                       "page, config)");
    }
  }
  if (shape.seqlen_q <= 0 || shape.seqlen_k <= 0 || shape.head_dim <= 0) {
    throw UsageError("shape '" + spec + "' needs sq and sk (or n) and d");
  }
  return shape;
}

// The variants preset: each variant row right after the plain row it is compared with (no row
// twice). bench/compare_variants.py times FlexAttention on the same rows.
std::vector<Shape> variant_shapes() {
  constexpr int64_t kTokens = 16384;     // B * N
  constexpr int64_t kModelWidth = 2048;  // H * d
  std::vector<Shape> shapes;
  auto add = [&shapes](const Shape& shape) {
    const bool seen = std::any_of(shapes.begin(), shapes.end(), [&](const Shape& s) {
      return std::tie(s.batch, s.heads_q, s.seqlen_q, s.head_dim, s.causal, s.window_left,
                      s.window_right, s.softcap, s.alibi, s.config) ==
             std::tie(shape.batch, shape.heads_q, shape.seqlen_q, shape.head_dim, shape.causal,
                      shape.window_left, shape.window_right, shape.softcap, shape.alibi,
                      shape.config);
    });
    if (!seen) shapes.push_back(shape);
  };
  auto plain = [&](int64_t n, int64_t d, bool causal) {
    Shape shape;
    shape.batch = kTokens / n;
    shape.heads_q = kModelWidth / d;
    shape.seqlen_q = shape.seqlen_k = n;
    shape.head_dim = d;
    shape.causal = causal ? 1 : 0;
    return shape;
  };
  // A causal sliding window of 4096 keys (FlashAttention-2's window_size = (4096, 0)): goal, the
  // causal row's TFLOP/s within 0.9x when both count the scores they keep.
  for (int64_t d : {128, 64}) {
    Shape window = plain(16384, d, true);
    add(window);
    window.window_left = 4096;
    window.window_right = 0;
    add(window);
  }
  // ALiBi through the default dispatch, then the same bias as flashmma::AlibiBias and as a user's
  // policy on the dispatch's tile: goal, the user's within 5% of the built-in.
  for (bool causal : {false, true}) {
    for (int64_t n : {4096, 16384}) {
      Shape alibi = plain(n, 128, causal);
      add(alibi);
      alibi.alibi = true;
      for (const char* config : {"", "alibi-policy", "alibi-user"}) {
        alibi.config = config;
        add(alibi);
      }
    }
  }
  // Gemma 2's softcap of 50, next to the plain row: the cost of the transform.
  for (bool causal : {false, true}) {
    Shape softcap = plain(4096, 128, causal);
    add(softcap);
    softcap.softcap = 50.f;
    add(softcap);
  }
  return shapes;
}

// The Hopper preset: the standard sweep's head dims at N in {1k, 4k, 8k, 16k}, causal and not,
// each row on the default (the portable kernel) and then on every Hopper tile of its head dim.
std::vector<Shape> sm90_shapes() {
  constexpr int64_t kTokens = 16384;     // B * N
  constexpr int64_t kModelWidth = 2048;  // H * d
  std::vector<Shape> shapes;
  for (int64_t d : {64, 96, 128, 160, 192, 224, 256}) {
    for (int causal : {0, 1}) {
      for (int64_t n : {1024, 4096, 8192, 16384}) {
        Shape shape;
        shape.batch = kTokens / n;
        shape.heads_q = kModelWidth / d;
        shape.seqlen_q = shape.seqlen_k = n;
        shape.head_dim = d;
        shape.causal = causal;
        shape.config = kDefaultName;
        shapes.push_back(shape);
        for (const std::string& config : sm90_shape_names(static_cast<int>(d))) {
          shape.config = config;
          shapes.push_back(shape);
        }
      }
    }
  }
  return shapes;
}

std::vector<Shape> preset_shapes(const std::string& name) {
  std::vector<Shape> shapes;
  if (name == "fa2") {
    constexpr int64_t kTokens = 16384;     // B * N
    constexpr int64_t kModelWidth = 2048;  // H * d
    for (int64_t d : {64, 128, 256}) {
      for (int64_t n : {1024, 2048, 4096, 8192, 16384}) {
        Shape shape;
        shape.batch = kTokens / n;
        shape.heads_q = kModelWidth / d;
        shape.seqlen_q = shape.seqlen_k = n;
        shape.head_dim = d;
        shapes.push_back(shape);
      }
    }
  } else if (name == "decode" || name == "paged") {
    // A decoding step: one new query per sequence against its KV cache (GB/s is the measure);
    // "paged": each cache contiguous, then in pages of 16 keys, then of 256.
    const std::pair<int64_t, int64_t> batch_by_cache[] = {
        {1, 131072}, {1, 32768}, {8, 16384}, {32, 4096}, {64, 8192}, {128, 2048}};
    for (const auto& [batch, cache] : batch_by_cache) {
      Shape shape;
      shape.batch = batch;
      shape.heads_q = 32;
      shape.heads_kv = 8;
      shape.seqlen_q = 1;
      shape.seqlen_k = cache;
      shape.head_dim = 128;
      shape.causal = 0;
      if (name == "decode") {
        shapes.push_back(shape);
        continue;
      }
      for (const int64_t page_size : {0, 16, 256}) {  // the contiguous row, then its pages
        shape.page_size = page_size;
        shapes.push_back(shape);
      }
    }
  } else if (name == "variants") {
    shapes = variant_shapes();
  } else if (name == "sm90") {
    shapes = sm90_shapes();
  } else {
    throw UsageError("unknown preset '" + name + "' (known: fa2, decode, paged, variants, sm90)");
  }
  return shapes;
}

Options parse_options(int argc, char** argv) {
  Options options;
  options.shapes = preset_shapes("fa2");
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    std::string value;
    const bool has_inline_value = arg.rfind("--", 0) == 0 && arg.find('=') != std::string::npos;
    if (has_inline_value) {
      value = arg.substr(arg.find('=') + 1);
      arg = arg.substr(0, arg.find('='));
    }
    auto next = [&]() -> std::string {
      if (has_inline_value) return value;
      if (i + 1 >= argc) throw UsageError(arg + " needs a value");
      return argv[++i];
    };
    if (arg == "--help" || arg == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg == "--preset") {
      const std::string name = next();
      options.shapes = preset_shapes(name);
      options.shapes_source = "preset " + name;
    } else if (arg == "--shapes") {
      const std::string spec = next();
      options.shapes.clear();
      for (const std::string& item : split(spec, ';')) options.shapes.push_back(parse_shape(item));
      if (options.shapes.empty()) throw UsageError("--shapes names no shape");
      options.shapes_source = "shapes " + spec;
    } else if (arg == "--dtype") {
      const std::string name = next();
      if (name == "fp16") {
        options.dtypes = {flashmma::ScalarType::kFloat16};
      } else if (name == "bf16") {
        options.dtypes = {flashmma::ScalarType::kBFloat16};
      } else if (name == "both") {
        options.dtypes = {flashmma::ScalarType::kFloat16, flashmma::ScalarType::kBFloat16};
      } else {
        throw UsageError("--dtype must be fp16, bf16 or both");
      }
    } else if (arg == "--mask") {
      const std::string name = next();
      if (name == "none") {
        options.masks = {false};
      } else if (name == "causal") {
        options.masks = {true};
      } else if (name == "both") {
        options.masks = {false, true};
      } else {
        throw UsageError("--mask must be none, causal or both");
      }
    } else if (arg == "--config") {
      options.config = next();
    } else if (arg == "--gqa") {
      options.gqa = parse_int(next(), "--gqa");
      if (options.gqa < 1) throw UsageError("--gqa must be >= 1");
    } else if (arg == "--layout") {
      const std::string name = next();
      if (name == "bshd") {
        options.layout = Layout::kBshd;
      } else if (name == "bhsd") {
        options.layout = Layout::kBhsd;
      } else {
        throw UsageError("--layout must be bshd or bhsd");
      }
    } else if (arg == "--no-lse") {
      options.write_lse = false;
    } else if (arg == "--no-workspace") {
      options.workspace = false;
    } else if (arg == "--rounds") {
      options.rounds = static_cast<int>(parse_int(next(), "--rounds"));
      if (options.rounds < 1) throw UsageError("--rounds must be >= 1");
    } else if (arg == "--warmup") {
      options.warmup = static_cast<int>(parse_int(next(), "--warmup"));
      if (options.warmup < 0) throw UsageError("--warmup must be >= 0");
    } else if (arg == "--iters") {
      options.iters = static_cast<int>(parse_int(next(), "--iters"));
      if (options.iters < 1) throw UsageError("--iters must be >= 1");
    } else if (arg == "--format") {
      const std::string name = next();
      if (name == "table") {
        options.format = OutputFormat::kTable;
      } else if (name == "csv") {
        options.format = OutputFormat::kCsv;
      } else if (name == "json") {
        options.format = OutputFormat::kJson;
      } else {
        throw UsageError("--format must be table, csv or json");
      }
    } else if (arg == "--out") {
      options.out_path = next();
    } else if (arg == "--list-configs") {
      options.list_configs = true;
    } else {
      throw UsageError("unknown argument '" + arg + "'");
    }
  }
  return options;
}

// The config a case runs: its shape's, else --config.
std::string config_name(const Case& c, const Options& options) {
  return c.shape.config.empty() ? options.config : c.shape.config;
}

std::vector<Case> expand_cases(const Options& options) {
  std::vector<Case> cases;
  for (flashmma::ScalarType dtype : options.dtypes) {
    for (const Shape& base : options.shapes) {
      Shape shape = base;
      if (shape.heads_kv == 0) {
        if (shape.heads_q % options.gqa != 0) {
          throw UsageError("heads_q " + std::to_string(shape.heads_q) +
                           " is not a multiple of --gqa " + std::to_string(options.gqa));
        }
        shape.heads_kv = shape.heads_q / options.gqa;
      }
      if (shape.causal >= 0) {
        cases.push_back(Case{shape, dtype, shape.causal == 1});
        continue;
      }
      for (bool causal : options.masks) cases.push_back(Case{shape, dtype, causal});
    }
  }
  return cases;
}

// ---------------------------------------------------------------------------------------------
// The configuration registry

template <class Element, int Shard>
void append_shard(std::vector<ConfigEntry>& entries) {
  const std::vector<ConfigEntry> shard = config_shard<Element, Shard, FLASHMMA_BENCH_SHARDS>();
  entries.insert(entries.end(), shard.begin(), shard.end());
}

template <class Element, int... Shards>
void append_all_shards(std::vector<ConfigEntry>& entries,
                       std::integer_sequence<int, Shards...>) {
  (append_shard<Element, Shards>(entries), ...);
}

std::vector<ConfigEntry> all_configs() {
  std::vector<ConfigEntry> entries;
  append_all_shards<__half>(entries, std::make_integer_sequence<int, FLASHMMA_BENCH_SHARDS>{});
  append_all_shards<__nv_bfloat16>(entries,
                                   std::make_integer_sequence<int, FLASHMMA_BENCH_SHARDS>{});
  // Shards interleave the list: put it back in order (dtype, head dim, default first, name).
  std::sort(entries.begin(), entries.end(), [](const ConfigEntry& a, const ConfigEntry& b) {
    const bool a_named = a.name != kDefaultName;
    const bool b_named = b.name != kDefaultName;
    return std::tie(a.dtype, a.head_dim, a_named, a.name) <
           std::tie(b.dtype, b.head_dim, b_named, b.name);
  });
  return entries;
}

std::string describe(const ConfigEntry& entry) {
  return entry.name == kDefaultName || entry.follows_dispatch
             ? entry.name + "(" + entry.shape + ")"
             : entry.name;
}

// The default tile (general, or the masked one) of `entry`'s dtype and kernel head dim for a
// masked or unmasked row, with the compact fallback taken as the masked tile, which it is for
// every head dim the dispatch-following entries cover (bench_kernels.cuh checks).
flashmma::DefaultTile mask_tile(const ConfigEntry& entry, bool masked,
                                std::size_t smem_per_block_optin) {
  const auto tile_for = [&](auto element_tag) {
    using Element = decltype(element_tag);
    return flashmma::visit_kernel_head_dim(
        entry.head_dim,
        [&](auto head_dim) {
          return flashmma::default_tile<Element, decltype(head_dim)::value>(masked,
                                                                            smem_per_block_optin);
        },
        [] { return flashmma::DefaultTile::kGeneral; });
  };
  const flashmma::DefaultTile tile = entry.dtype == flashmma::ScalarType::kFloat16
                                         ? tile_for(__half{})
                                         : tile_for(__nv_bfloat16{});
  return tile == flashmma::DefaultTile::kCompact ? flashmma::DefaultTile::kCausal : tile;
}

// For an entry that follows the dispatch, the sibling (same name and dtype, one per tile) on the
// tile that the default dispatch runs for the row: the one whose config the dispatch's kernel
// (describe_default_kernel) names. Where it names none (no description, or a tile no sibling
// has), the sibling on the tile of the row's mask and window, and `how` says so. nullptr when no
// sibling fits either.
const ConfigEntry* dispatch_tile_entry(const std::vector<ConfigEntry>& entries,
                                       const ConfigEntry& requested,
                                       const std::string& dispatch_kernel, bool masked,
                                       std::size_t smem_per_block_optin, std::string& how) {
  auto is_sibling = [&](const ConfigEntry& entry) {
    return entry.name == requested.name && entry.dtype == requested.dtype;
  };
  if (!dispatch_kernel.empty()) {
    for (const ConfigEntry& entry : entries) {
      if (is_sibling(entry) &&
          dispatch_kernel.find(entry.config_description) != std::string::npos) {
        how = "the dispatch's tile";
        return &entry;
      }
    }
  }
  how = std::string(masked ? "the masked" : "the general") +
        " tile: the dispatch's kernel names no tile of " + requested.name;
  const flashmma::DefaultTile tile = mask_tile(requested, masked, smem_per_block_optin);
  for (const ConfigEntry& entry : entries) {
    if (is_sibling(entry) && entry.tile == tile) return &entry;
  }
  return nullptr;
}

// The entry that serves `name` for a dtype and head dim, or nullptr with `why` filled.
const ConfigEntry* find_config(const std::vector<ConfigEntry>& entries, const std::string& name,
                               flashmma::ScalarType dtype, int64_t head_dim, std::string& why) {
  if (name == kDefaultName) {
    const int kernel_dim = flashmma::kernel_head_dim_for(head_dim);
    for (const ConfigEntry& entry : entries) {
      if (entry.name == kDefaultName && entry.dtype == dtype && entry.head_dim == kernel_dim) {
        return &entry;
      }
    }
    why = "no default config serves head dim " + std::to_string(head_dim);
    return nullptr;
  }
  for (const ConfigEntry& entry : entries) {
    if (entry.name != name || entry.dtype != dtype) continue;
    if (entry.head_dim < head_dim) {
      why = name + " serves head dims up to " + std::to_string(entry.head_dim);
      return nullptr;
    }
    return &entry;
  }
  why = "unknown config '" + name + "'";
  return nullptr;
}

// ---------------------------------------------------------------------------------------------
// Timing one case

struct TensorSizes {
  int64_t q_elements, kv_elements, o_elements, lse_elements;
};

// Pages per sequence of a paged shape: enough for seqlen_k keys.
int64_t pages_per_sequence(const Shape& s) {
  return s.page_size > 0 ? (s.seqlen_k + s.page_size - 1) / s.page_size : 0;
}

TensorSizes tensor_sizes(const Shape& s) {
  // A paged cache holds whole pages: its pools may be a little larger than the keys.
  const int64_t kv_rows =
      s.page_size > 0 ? s.batch * pages_per_sequence(s) * s.page_size : s.batch * s.seqlen_k;
  return TensorSizes{s.batch * s.seqlen_q * s.heads_q * s.head_dim,
                     kv_rows * s.heads_kv * s.head_dim,
                     s.batch * s.seqlen_q * s.heads_q * s.head_dim,
                     s.batch * s.heads_q * s.seqlen_q};
}

// A paged shape's block table: every sequence's pages, in a shuffled order of the pool (a fixed
// seed), as a cache that has allocated its pages over time holds them.
std::vector<int32_t> shuffled_block_table(const Shape& s) {
  std::vector<int32_t> table(static_cast<std::size_t>(s.batch * pages_per_sequence(s)));
  for (std::size_t i = 0; i < table.size(); ++i) table[i] = static_cast<int32_t>(i);
  std::mt19937 rng(12345);
  std::shuffle(table.begin(), table.end(), rng);
  return table;
}

// The pages of one input set copied back in sequence order into `dense` ([batch, pages x
// page_size, heads_kv, head_dim]), so that the output check reads them as a contiguous cache.
void gather_pages(const Shape& s, const std::vector<int32_t>& table, const char* pool,
                  char* dense, std::size_t element_bytes) {
  const std::size_t page_bytes =
      static_cast<std::size_t>(s.page_size * s.heads_kv * s.head_dim) * element_bytes;
  for (std::size_t i = 0; i < table.size(); ++i) {
    check_cuda(cudaMemcpy(dense + i * page_bytes, pool + table[i] * page_bytes, page_bytes,
                          cudaMemcpyDeviceToDevice),
               "cudaMemcpy(gathering pages)");
  }
}

std::size_t round_up(std::size_t bytes, std::size_t multiple) {
  return (bytes + multiple - 1) / multiple * multiple;
}

// (query, key) pairs of one (batch, head) that the mask and window leave visible, aligned to the
// bottom-right corner as params.hpp defines them: query i sees keys [i + d - left, i + d + right],
// d = seqlen_k - seqlen_q, a side of -1 unbounded, and the causal mask is right = 0.
double visible_pairs(const Case& c) {
  const Shape& s = c.shape;
  const int64_t right = c.causal ? 0 : s.window_right;
  double pairs = 0;
  for (int64_t i = 0; i < s.seqlen_q; ++i) {
    const int64_t diagonal = i + s.seqlen_k - s.seqlen_q;
    const int64_t first = s.window_left < 0 ? 0 : std::max<int64_t>(0, diagonal - s.window_left);
    const int64_t last = right < 0 ? s.seqlen_k - 1 : std::min(s.seqlen_k - 1, diagonal + right);
    pairs += static_cast<double>(std::max<int64_t>(0, last - first + 1));
  }
  return pairs;
}

double forward_flops(const Case& c) {
  const Shape& s = c.shape;
  const double per_pair = 4.0 * s.batch * s.heads_q * s.head_dim;
  if (has_window(s) || (c.causal && s.seqlen_q != s.seqlen_k)) return per_pair * visible_pairs(c);
  if (!c.causal) return per_pair * s.seqlen_q * s.seqlen_k;
  return per_pair * s.seqlen_q * s.seqlen_k / 2;
}

double median(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  const std::size_t n = values.size();
  return n % 2 == 1 ? values[n / 2] : 0.5 * (values[n / 2 - 1] + values[n / 2]);
}

// The round of a case whose median time is the median over its rounds; the first failed round
// if any failed.
Result median_round(std::vector<Result> runs) {
  for (Result& r : runs) {
    if (r.status != "ok") return std::move(r);
  }
  std::sort(runs.begin(), runs.end(),
            [](const Result& a, const Result& b) { return a.ms_median < b.ms_median; });
  return std::move(runs[runs.size() / 2]);
}

Result run_case(const Case& c, const ConfigEntry& requested,
                const std::vector<ConfigEntry>& entries, const Options& options,
                std::size_t rotation_bytes) {
  Result result;
  result.run = c;
  result.entry = requested.name;
  result.config = describe(requested);
  result.visible_pairs = visible_pairs(c);
  const Shape& s = c.shape;
  const std::size_t element_bytes = 2;
  const TensorSizes sizes = tensor_sizes(s);

  // Input sets, each tensor kind in one allocation with the sets kSetAlignment bytes apart.
  const std::size_t q_stride = round_up(sizes.q_elements * element_bytes, kSetAlignment);
  const std::size_t kv_stride = round_up(sizes.kv_elements * element_bytes, kSetAlignment);
  const std::size_t o_stride = round_up(sizes.o_elements * element_bytes, kSetAlignment);
  const std::size_t lse_stride = round_up(sizes.lse_elements * sizeof(float), kSetAlignment);
  const std::size_t set_bytes =
      q_stride + 2 * kv_stride + o_stride + (options.write_lse ? lse_stride : 0);
  const int sets = static_cast<int>(std::clamp<std::size_t>(
      (rotation_bytes + set_bytes - 1) / set_bytes, 2, kMaxInputSets));
  result.input_sets = sets;

  DeviceBuffer q(q_stride * sets), k(kv_stride * sets), v(kv_stride * sets), o(o_stride * sets);
  DeviceBuffer lse(options.write_lse ? lse_stride * sets : kSetAlignment);
  DeviceBuffer slopes(static_cast<std::size_t>(s.heads_q) * sizeof(float));
  const std::vector<float> host_slopes = alibi_slopes(s.heads_q);
  check_cuda(cudaMemcpy(slopes.as<void>(), host_slopes.data(), slopes.bytes(),
                        cudaMemcpyHostToDevice),
             "cudaMemcpy(ALiBi slopes)");
  fill_normal_on_device(c.dtype, q.as<void>(), static_cast<int64_t>(q.bytes() / element_bytes), 1);
  fill_normal_on_device(c.dtype, k.as<void>(), static_cast<int64_t>(k.bytes() / element_bytes), 2);
  fill_normal_on_device(c.dtype, v.as<void>(), static_cast<int64_t>(v.bytes() / element_bytes), 3);
  // All-ones bits are NaN in fp16 and bf16: any element the kernel fails to write shows up.
  check_cuda(cudaMemset(o.as<void>(), 0xFF, o.bytes()), "cudaMemset(O)");

  const bool bshd = options.layout == Layout::kBshd;
  auto strides = [bshd](int64_t seqlen, int64_t heads, int64_t head_dim) {
    return bshd ? flashmma::bshd_strides(seqlen, heads, head_dim)
                : flashmma::bhsd_strides(seqlen, heads, head_dim);
  };
  flashmma::ForwardParams params;
  params.dtype = c.dtype;
  params.batch = s.batch;
  params.seqlen_q = s.seqlen_q;
  params.seqlen_k = s.seqlen_k;
  params.heads_q = s.heads_q;
  params.heads_kv = s.heads_kv;
  params.head_dim = s.head_dim;
  params.q_strides = strides(s.seqlen_q, s.heads_q, s.head_dim);
  params.k_strides = strides(s.seqlen_k, s.heads_kv, s.head_dim);
  params.v_strides = params.k_strides;
  params.o_strides = params.q_strides;
  params.mask = c.causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;
  params.window_left = s.window_left;
  params.window_right = s.window_right;
  params.softcap = s.softcap;
  params.alibi_slopes = s.alibi ? slopes.as<const float>() : nullptr;
  params.alibi_batch_stride = 0;

  const std::vector<int32_t> table = s.page_size > 0 ? shuffled_block_table(s) : std::vector<int32_t>{};
  DeviceBuffer table_device(std::max<std::size_t>(table.size() * sizeof(int32_t), kSetAlignment));
  if (s.page_size > 0) {
    if (!bshd) {
      result.status = "error: a paged cache (page=) has the bshd layout; run it without --layout bhsd";
      return result;
    }
    check_cuda(cudaMemcpy(table_device.as<void>(), table.data(), table.size() * sizeof(int32_t),
                          cudaMemcpyHostToDevice),
               "cudaMemcpy(block table)");
    params.k_strides = {s.page_size * s.heads_kv * s.head_dim, s.head_dim, s.heads_kv * s.head_dim};
    params.v_strides = params.k_strides;
    params.block_table = table_device.as<const int32_t>();
    params.block_table_batch_stride = pages_per_sequence(s);
    params.page_size = s.page_size;
    params.num_pages = static_cast<int64_t>(table.size());
  }

  auto params_for_set = [&](int set) {
    flashmma::ForwardParams p = params;
    p.q = q.as<char>() + q_stride * set;
    p.k = k.as<char>() + kv_stride * set;
    p.v = v.as<char>() + kv_stride * set;
    p.o = o.as<char>() + o_stride * set;
    p.lse = options.write_lse ? reinterpret_cast<float*>(lse.as<char>() + lse_stride * set)
                              : nullptr;
    return p;
  };
  // One workspace for every set: the launches are serialized on one stream.
  std::size_t workspace_bytes = 0;
  if (options.workspace) {
    const flashmma::Status sized = flashmma::forward_workspace_bytes(params_for_set(0), workspace_bytes);
    if (!sized.ok()) {
      result.status = "error: " + sized.message();
      return result;
    }
  }
  DeviceBuffer workspace(workspace_bytes > 0 ? workspace_bytes : kSetAlignment);
  if (workspace_bytes > 0) {
    params.workspace = workspace.as<void>();
    params.workspace_bytes = workspace_bytes;
  }

  const ConfigEntry* config = &requested;
  if (requested.name == kDefaultName || requested.follows_dispatch) {
    flashmma::DeviceInfo device;
    if (!flashmma::query_device(device).ok() ||
        !flashmma::describe_default_kernel(params_for_set(0), device,
                                           flashmma::sm90a_code_loaded(), result.kernel)
             .ok()) {
      result.kernel.clear();
    }
    if (requested.follows_dispatch) {
      std::string how;
      config = dispatch_tile_entry(entries, requested, result.kernel, c.causal || has_window(s),
                                   device.smem_per_block_optin, how);
      if (config == nullptr) {
        result.status = "error: no " + requested.name + " entry runs " + how;
        return result;
      }
      result.config = requested.name + "(" + config->shape + ", " + how + ")";
    }
  }
  auto launch = [&](int iteration) -> bool {
    const flashmma::Status status = config->launch(params_for_set(iteration % sets), nullptr);
    if (!status.ok()) {
      result.status = "error: " + status.message();
      return false;
    }
    return true;
  };

  for (int i = 0; i < options.warmup; ++i) {
    if (!launch(i)) return result;
  }
  check_cuda(cudaDeviceSynchronize(), "synchronizing after the warm-up");

  std::vector<EventPair> events(static_cast<std::size_t>(options.iters));
  for (int i = 0; i < options.iters; ++i) {
    check_cuda(cudaEventRecord(events[i].start()), "cudaEventRecord");
    if (!launch(options.warmup + i)) return result;
    check_cuda(cudaEventRecord(events[i].stop()), "cudaEventRecord");
  }
  check_cuda(cudaDeviceSynchronize(), "synchronizing after the timed launches");
  check_cuda(cudaGetLastError(), "the timed launches");

  // Every set was written at least once when warmup + iters >= sets; check set 0 always.
  const uint64_t bad = non_finite_count(c.dtype, o.as<void>(), sizes.o_elements);
  if (bad != 0) {
    result.status = "error: O holds " + std::to_string(bad) + " non-finite or unwritten values";
    return result;
  }
  flashmma::ForwardParams checked = params_for_set(0);
  DeviceBuffer dense_k(s.page_size > 0 ? kv_stride : kSetAlignment);
  DeviceBuffer dense_v(s.page_size > 0 ? kv_stride : kSetAlignment);
  if (s.page_size > 0) {  // the reference reads the pages in sequence order, as a dense cache
    gather_pages(s, table, static_cast<const char*>(checked.k), dense_k.as<char>(), element_bytes);
    gather_pages(s, table, static_cast<const char*>(checked.v), dense_v.as<char>(), element_bytes);
    checked.k = dense_k.as<const void>();
    checked.v = dense_v.as<const void>();
    checked.k_strides = checked.v_strides =
        flashmma::bshd_strides(pages_per_sequence(s) * s.page_size, s.heads_kv, s.head_dim);
    checked.block_table = nullptr;
    checked.block_table_batch_stride = checked.page_size = checked.num_pages = 0;
  }
  const OutputCheck check = check_output(checked);
  result.rel_error = check.relative_l2_error;
  if (!check.passed()) {
    std::ostringstream why;
    why << "error: O differs from the fp64 reference: relative L2 error "
        << check.relative_l2_error << " over " << check.rows << " query rows (at most "
        << check.bound << " allowed), max |O - ref| " << check.max_error;
    result.status = why.str();
    return result;
  }

  std::vector<double> times;
  times.reserve(events.size());
  for (const EventPair& pair : events) times.push_back(pair.elapsed_ms());
  result.ms_median = median(times);
  result.ms_min = *std::min_element(times.begin(), times.end());
  const double flops = forward_flops(c);
  result.tflops = flops / (result.ms_median * 1e-3) / 1e12;
  result.tflops_peak = flops / (result.ms_min * 1e-3) / 1e12;
  if (s.seqlen_q <= kBandwidthMaxSeqlenQ) {
    // The keys' bytes, not the pools': a paged row and its contiguous row move the same data.
    const double kv_elements = static_cast<double>(s.batch * s.seqlen_k * s.heads_kv * s.head_dim);
    const double bytes =
        static_cast<double>(element_bytes) * (sizes.q_elements + 2 * kv_elements + sizes.o_elements);
    result.gbps = bytes / (result.ms_median * 1e-3) / 1e9;
  }
  result.status = "ok";
  return result;
}

// ---------------------------------------------------------------------------------------------
// Output

const char* dtype_name(flashmma::ScalarType dtype) { return flashmma::scalar_type_name(dtype); }

std::string number(double value, int precision) {
  if (std::isnan(value)) return "";
  char text[64];
  std::snprintf(text, sizeof(text), "%.*f", precision, value);
  return text;
}

// Small values such as errors: three significant digits, e.g. 4.12e-04; empty for NaN.
std::string scientific(double value) {
  if (std::isnan(value)) return "";
  char text[64];
  std::snprintf(text, sizeof(text), "%.2e", value);
  return text;
}

std::string csv_quote(const std::string& text) {
  if (text.find_first_of(",\"\n") == std::string::npos) return text;
  std::string quoted = "\"";
  for (char ch : text) quoted += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return quoted + "\"";
}

std::string json_string(const std::string& text) {
  std::string out = "\"";
  for (char ch : text) {
    switch (ch) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(ch) < 0x20) {
          char escaped[8];
          std::snprintf(escaped, sizeof(escaped), "\\u%04x", ch);
          out += escaped;
        } else {
          out += ch;
        }
    }
  }
  return out + "\"";
}

std::string json_number(double value, int precision) {
  return std::isnan(value) ? "null" : number(value, precision);
}

std::string json_scientific(double value) {
  return std::isnan(value) ? "null" : scientific(value);
}

struct DeviceSummary {
  std::string name;
  int compute_capability = 0;
  int sms = 0;
  std::size_t l2_bytes = 0;
};

const char* kCsvHeader =
    "dtype,config,layout,batch,heads_q,heads_kv,seqlen_q,seqlen_k,head_dim,causal,lse,"
    "input_sets,iters,ms_median,ms_min,tflops,tflops_peak,gbps,rel_error,status,"
    "window_left,window_right,softcap,alibi,visible_pairs,entry,kernel,page_size";

// The shortest decimal form of a float, e.g. "50" or "0.5".
std::string shortest(float value) {
  std::ostringstream text;
  text << value;
  return text.str();
}

void write_csv(std::ostream& out, const std::vector<Result>& results, const Options& options) {
  out << kCsvHeader << "\n";
  for (const Result& r : results) {
    const Shape& s = r.run.shape;
    out << dtype_name(r.run.dtype) << "," << csv_quote(r.config) << ","
        << (options.layout == Layout::kBshd ? "bshd" : "bhsd") << "," << s.batch << ","
        << s.heads_q << "," << s.heads_kv << "," << s.seqlen_q << "," << s.seqlen_k << ","
        << s.head_dim << "," << (r.run.causal ? 1 : 0) << "," << (options.write_lse ? 1 : 0)
        << "," << r.input_sets << "," << options.iters << "," << number(r.ms_median, 4) << ","
        << number(r.ms_min, 4) << "," << number(r.tflops, 2) << ","
        << number(r.tflops_peak, 2) << "," << number(r.gbps, 1) << ","
        << scientific(r.rel_error) << "," << csv_quote(r.status) << "," << s.window_left << ","
        << s.window_right << "," << shortest(s.softcap) << "," << (s.alibi ? 1 : 0) << ","
        << number(r.visible_pairs, 0) << "," << csv_quote(r.entry) << ","
        << csv_quote(r.kernel) << "," << s.page_size << "\n";
  }
}

void write_json(std::ostream& out, const std::vector<Result>& results, const Options& options,
                const DeviceSummary& device, const std::string& command) {
  out << "{\n  \"device\": {\"name\": " << json_string(device.name)
      << ", \"compute_capability\": " << device.compute_capability
      << ", \"sms\": " << device.sms << ", \"l2_bytes\": " << device.l2_bytes << "},\n"
      << "  \"command\": " << json_string(command) << ",\n"
      << "  \"warmup\": " << options.warmup << ", \"iters\": " << options.iters << ",\n"
      << "  \"layout\": \"" << (options.layout == Layout::kBshd ? "bshd" : "bhsd") << "\",\n"
      << "  \"lse\": " << (options.write_lse ? "true" : "false") << ",\n"
      << "  \"results\": [";
  for (std::size_t i = 0; i < results.size(); ++i) {
    const Result& r = results[i];
    const Shape& s = r.run.shape;
    out << (i == 0 ? "\n" : ",\n") << "    {\"dtype\": \"" << dtype_name(r.run.dtype)
        << "\", \"config\": " << json_string(r.config) << ", \"batch\": " << s.batch
        << ", \"heads_q\": " << s.heads_q << ", \"heads_kv\": " << s.heads_kv
        << ", \"seqlen_q\": " << s.seqlen_q << ", \"seqlen_k\": " << s.seqlen_k
        << ", \"head_dim\": " << s.head_dim << ", \"causal\": " << (r.run.causal ? "true" : "false")
        << ", \"input_sets\": " << r.input_sets << ", \"ms_median\": " << json_number(r.ms_median, 4)
        << ", \"ms_min\": " << json_number(r.ms_min, 4) << ", \"tflops\": "
        << json_number(r.tflops, 2) << ", \"tflops_peak\": " << json_number(r.tflops_peak, 2)
        << ", \"gbps\": " << json_number(r.gbps, 1) << ", \"rel_error\": "
        << json_scientific(r.rel_error) << ", \"status\": " << json_string(r.status)
        << ", \"window_left\": " << s.window_left << ", \"window_right\": " << s.window_right
        << ", \"softcap\": " << shortest(s.softcap) << ", \"alibi\": "
        << (s.alibi ? "true" : "false") << ", \"visible_pairs\": "
        << json_number(r.visible_pairs, 0) << ", \"entry\": " << json_string(r.entry)
        << ", \"kernel\": " << json_string(r.kernel) << ", \"page_size\": " << s.page_size
        << "}";
  }
  out << "\n  ]\n}\n";
}

void write_table(std::ostream& out, const std::vector<Result>& results) {
  char line[1024];
  std::snprintf(line, sizeof(line),
                "%-5s %-28s %5s %5s %4s %6s %6s %4s %-6s %-16s %9s %9s %8s %8s %9s  %s\n",
                "dtype", "config", "B", "Hq", "Hkv", "Sq", "Sk", "d", "mask", "variant", "ms(med)",
                "ms(min)", "TFLOP/s", "GB/s", "rel.err", "status");
  out << line;
  for (const Result& r : results) {
    const Shape& s = r.run.shape;
    std::snprintf(line, sizeof(line),
                  "%-5s %-28s %5lld %5lld %4lld %6lld %6lld %4lld %-6s %-16s %9s %9s %8s %8s %9s"
                  "  %s\n",
                  dtype_name(r.run.dtype), r.config.c_str(), static_cast<long long>(s.batch),
                  static_cast<long long>(s.heads_q), static_cast<long long>(s.heads_kv),
                  static_cast<long long>(s.seqlen_q), static_cast<long long>(s.seqlen_k),
                  static_cast<long long>(s.head_dim), r.run.causal ? "causal" : "none",
                  variant_name(s).c_str(), number(r.ms_median, 4).c_str(),
                  number(r.ms_min, 4).c_str(), number(r.tflops, 1).c_str(),
                  number(r.gbps, 0).c_str(),
                  scientific(r.rel_error).c_str(), r.status.c_str());
    out << line;
  }
}

// The ratios the project tracks for variants, from the rows that ran: each variant row against
// the plain row of the same problem and entry (a window's TFLOP/s, counted on the scores it keeps,
// against the plain row's; a transform's cost as a time ratio), and alibi-user against the
// built-in ALiBi of the default dispatch and against flashmma::AlibiBias on the same tile.
void write_ratios(std::ostream& out, const std::vector<Result>& results) {
  auto same_problem = [](const Result& a, const Result& b) {
    const Shape& x = a.run.shape;
    const Shape& y = b.run.shape;
    return a.status == "ok" && b.status == "ok" && a.run.dtype == b.run.dtype &&
           a.run.causal == b.run.causal &&
           std::tie(x.batch, x.heads_q, x.heads_kv, x.seqlen_q, x.seqlen_k, x.head_dim) ==
               std::tie(y.batch, y.heads_q, y.heads_kv, y.seqlen_q, y.seqlen_k, y.head_dim);
  };
  auto find = [&](const Result& row, auto&& wanted) -> const Result* {
    for (const Result& other : results) {
      if (&other != &row && same_problem(row, other) && wanted(other)) return &other;
    }
    return nullptr;
  };
  auto label = [](const Result& r) {
    const Shape& s = r.run.shape;
    std::ostringstream text;
    text << dtype_name(r.run.dtype) << " b=" << s.batch << " h=" << s.heads_q
         << " n=" << s.seqlen_q << " d=" << s.head_dim << (r.run.causal ? " causal" : "") << " "
         << variant_name(s);
    return text.str();
  };
  std::vector<std::string> lines;
  for (const Result& r : results) {
    const Shape& s = r.run.shape;
    if (r.status == "ok" && s.page_size > 0 && !has_variant(s)) {
      const Result* contiguous = find(r, [](const Result& o) {
        return o.run.shape.page_size == 0 && !has_variant(o.run.shape);
      });
      if (contiguous == nullptr) continue;
      const double ratio = contiguous->ms_median / r.ms_median;
      std::ostringstream line;
      line << label(r) << " vs contiguous: GB/s " << number(r.gbps, 0) << " vs "
           << number(contiguous->gbps, 0) << ": " << number(ratio, 3) << "x (goal >= 0.9"
           << (ratio >= 0.9 ? ", met)" : ", NOT met)");
      lines.push_back(line.str());
      continue;
    }
    if (r.status != "ok" || !has_variant(s)) continue;
    if (r.entry == "alibi-user") {
      const Result* builtin = find(r, [](const Result& o) {
        return o.entry == kDefaultName && o.run.shape.alibi && !has_window(o.run.shape) &&
               o.run.shape.softcap == 0.f;
      });
      const Result* policy = find(r, [](const Result& o) { return o.entry == "alibi-policy"; });
      std::ostringstream line;
      line << label(r) << ": alibi-user / built-in time "
           << (builtin ? number(r.ms_median / builtin->ms_median, 3) : std::string("n/a"))
           << " (goal: within 5%), alibi-user / alibi-policy "
           << (policy ? number(r.ms_median / policy->ms_median, 3) : std::string("n/a"))
           << "; alibi-user ran " << r.config << ", the built-in "
           << (builtin && !builtin->kernel.empty() ? builtin->kernel : std::string("n/a"));
      lines.push_back(line.str());
      continue;
    }
    if (r.entry != kDefaultName) continue;
    const Result* plain = find(r, [](const Result& o) {
      return o.entry == kDefaultName && !has_variant(o.run.shape);
    });
    if (plain == nullptr) continue;
    std::ostringstream line;
    line << label(r) << " vs plain: time " << number(r.ms_median / plain->ms_median, 3) << "x";
    if (has_window(s)) {
      const double ratio = r.tflops / plain->tflops;
      line << ", TFLOP/s on visible scores " << number(r.tflops, 1) << " vs "
           << number(plain->tflops, 1) << ": " << number(ratio, 3) << "x (goal >= 0.9"
           << (ratio >= 0.9 ? ", met)" : ", NOT met)");
    }
    lines.push_back(line.str());
  }
  if (lines.empty()) return;
  out << "\nvariant and paged-cache ratios (median times):\n";
  for (const std::string& line : lines) out << "  " << line << "\n";
}

DeviceSummary query_device_summary() {
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  cudaDeviceProp prop{};
  check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
  DeviceSummary summary;
  summary.name = prop.name;
  summary.compute_capability = prop.major * 10 + prop.minor;
  summary.sms = prop.multiProcessorCount;
  summary.l2_bytes = static_cast<std::size_t>(prop.l2CacheSize);
  return summary;
}

void list_configs(std::ostream& out, const std::vector<ConfigEntry>& entries) {
  char line[256];
  std::snprintf(line, sizeof(line), "%-28s %-5s %5s %6s %6s %5s %6s %9s %10s\n", "name",
                "dtype", "d", "BlockM", "BlockN", "warps", "stages", "blocks/SM", "smem bytes");
  out << line;
  for (const ConfigEntry& e : entries) {
    std::snprintf(line, sizeof(line), "%-28s %-5s %5d %6d %6d %5d %6d %9d %10zu\n",
                  e.name.c_str(), dtype_name(e.dtype), e.head_dim, e.block_m, e.block_n, e.warps,
                  e.stages, e.min_blocks_per_sm, e.smem_bytes);
    out << line;
    if (e.name == kDefaultName) out << "    " << e.shape << "\n";
  }
}

int run(int argc, char** argv) {
  const Options options = parse_options(argc, argv);
  const std::vector<ConfigEntry> configs = all_configs();
  if (options.list_configs) {
    list_configs(std::cout, configs);
    return 0;
  }
  const std::vector<Case> cases = expand_cases(options);
  std::vector<std::string> names = {options.config};
  for (const Case& c : cases) names.push_back(config_name(c, options));
  for (const std::string& name : names) {
    const bool known = std::any_of(configs.begin(), configs.end(), [&](const ConfigEntry& e) {
      return e.name == name;
    });
    if (!known) {
      std::cerr << "flashmma_bench: unknown config '" << name << "'; compiled in:\n";
      list_configs(std::cerr, configs);
      return 2;
    }
  }

  std::string command;
  for (int i = 0; i < argc; ++i) command += (i ? " " : "") + std::string(argv[i]);
  const DeviceSummary device = query_device_summary();
  const std::size_t rotation_bytes = std::max(kMinRotationBytes, 2 * device.l2_bytes);
  std::cerr << "device: " << device.name << " (sm_" << device.compute_capability << ", "
            << device.sms << " SMs, " << device.l2_bytes / 1000000 << " MB L2); " << cases.size()
            << " cases, " << options.warmup << " warm-up + " << options.iters
            << " timed launches each, inputs rotated over >= " << rotation_bytes / 1000000
            << " MB\n";

  // rounds[i][r]: case i in round r.
  std::vector<std::vector<Result>> rounds(cases.size());
  bool any_error = false;
  for (int round = 0; round < options.rounds; ++round) {
    for (std::size_t i = 0; i < cases.size(); ++i) {
      const Case& c = cases[i];
      std::string why;
      const std::string name = config_name(c, options);
      const ConfigEntry* config = find_config(configs, name, c.dtype, c.shape.head_dim, why);
      Result result;
      if (config == nullptr) {
        result.run = c;
        result.entry = result.config = name;
        result.status = "skipped: " + why;
      } else {
        try {
          result = run_case(c, *config, configs, options, rotation_bytes);
        } catch (const OutOfMemory& error) {
          result.run = c;
          result.entry = config->name;
          result.config = describe(*config);
          result.status = std::string("error: ") + error.what();
        }
        any_error = any_error || result.status != "ok";
      }
      std::cerr << "  " << (options.rounds > 1 ? "round " + std::to_string(round + 1) + " " : "")
                << dtype_name(c.dtype) << " b=" << c.shape.batch << " hq=" << c.shape.heads_q
                << " hkv=" << c.shape.heads_kv << " sq=" << c.shape.seqlen_q
                << " sk=" << c.shape.seqlen_k << " d=" << c.shape.head_dim
                << (c.causal ? " causal" : "")
                << (has_variant(c.shape) ? " " + variant_name(c.shape) : "")
                << (name != kDefaultName ? " " + name : "") << ": "
                << (result.status == "ok" ? number(result.tflops, 1) + " TFLOP/s" : result.status)
                << (result.kernel.empty() ? "" : " [" + result.kernel + "]") << "\n";
      rounds[i].push_back(std::move(result));
    }
  }
  std::vector<Result> results;
  for (std::vector<Result>& runs : rounds) results.push_back(median_round(std::move(runs)));

  std::ostringstream formatted;
  switch (options.format) {
    case OutputFormat::kTable: write_table(formatted, results); break;
    case OutputFormat::kCsv: write_csv(formatted, results, options); break;
    case OutputFormat::kJson: write_json(formatted, results, options, device, command); break;
  }
  if (options.out_path.empty()) {
    std::cout << formatted.str();
    // Keeps a CSV or JSON on stdout parseable.
    write_ratios(options.format == OutputFormat::kTable ? std::cout : std::cerr, results);
  } else {
    std::ofstream file(options.out_path);
    file << formatted.str();
    if (!file) {
      std::cerr << "flashmma_bench: could not write " << options.out_path << "\n";
      return 1;
    }
    write_table(std::cout, results);
    write_ratios(std::cout, results);
  }
  return any_error ? 1 : 0;
}

}  // namespace
}  // namespace flashmma_bench

int main(int argc, char** argv) {
  try {
    return flashmma_bench::run(argc, argv);
  } catch (const flashmma_bench::UsageError& error) {
    std::cerr << "flashmma_bench: " << error.what() << "\n(see --help)\n";
    return 2;
  } catch (const std::exception& error) {
    std::cerr << "flashmma_bench: " << error.what() << "\n";
    return 1;
  }
}
