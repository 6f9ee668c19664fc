// SPDX-License-Identifier: Apache-2.0
// flashmma_memory_ceiling: how fast this GPU can read a decoding call's bytes at all.
//
//   flashmma_memory_ceiling [--iters N] [--rounds R] [--shape BxKEYS]
//
// A decoding call is bound by reading its K/V cache once (docs/perf.md, "Decoding and paged
// caches"). This program reads the same byte counts with kernels that do nothing else, timed the
// way flashmma_bench times a call (a CUDA event pair around each call, the calls queued back to
// back, inputs rotated so that none is in L2), and also as a queue of calls under one event pair
// (the GPU's time per call with no event between calls). What they reach is the ceiling for any
// kernel that reads these bytes, attention or not.
//
// Readers (each over the whole buffer, read once; a block's sum is stored so nothing is elided):
//   chunks     16-byte loads, 8 in flight per thread, each block one contiguous range
//   strided    16-byte loads, 8 in flight per thread, the whole grid sweeping the buffer together
//   heads      a decoding split's order: a block reads one KV head's 256-byte rows (d = 128, bf16)
//              of a contiguous key range, the rows 8 heads * 256 bytes apart (the
//              [keys, heads, d] cache layout), as the split kernel does with 33 splits x 8 heads
//   bulk       (sm_90) one thread per block streams its range into shared memory with
//              cp.async.bulk (TMA without a tensor map), 16 KiB a copy, a ring of stages
//   flashmma   the library's decoding call on the same bytes as K and V (one query per sequence,
//              32 query heads over 8 KV heads, d = 128, bf16): forward<SplitKernelConfig> with
//              the split count it chooses and its workspace, the call perf.md's decode rows time
// Blocks per SM: 1, 2 or 4 for the load readers, as given in each row.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "device_buffer.hpp"
#include "flashmma/flashmma.cuh"
#include "flashmma/ptx/sm90/mbarrier.cuh"
#include "flashmma/ptx/sm90/tma.cuh"

namespace {

using flashmma_bench::check_cuda;
using flashmma_bench::DeviceBuffer;
using flashmma_bench::EventPair;

constexpr int kThreads = 256;
constexpr int kVectorsInFlight = 8;  // 16-byte loads a thread issues before it uses any
constexpr int kRowBytes = 256;       // one key's d = 128 bf16 values
constexpr int kHeads = 8;            // KV heads of the decode rows

FLASHMMA_DEVICE uint4 load_streaming(const uint4* address) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.v4.u32 {%0, %1, %2, %3}, [%4];\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w)
               : "l"(address));
  return v;
}

FLASHMMA_DEVICE uint32_t fold(uint4 v) { return v.x ^ v.y ^ v.z ^ v.w; }

FLASHMMA_DEVICE void store_block_sum(uint32_t sum, uint32_t* sink) {
  for (int offset = 16; offset > 0; offset /= 2) sum ^= __shfl_xor_sync(0xffffffffu, sum, offset);
  if (threadIdx.x % 32 == 0) atomicXor(sink + blockIdx.x, sum);
}

// Reads address(i) for i = begin, begin + step, ... below end, kVectorsInFlight loads before any
// use; every reader's thread walks its indices so.
template <class Address>
FLASHMMA_DEVICE uint32_t read_indices(int64_t begin, int64_t end, int64_t step,
                                      const Address& address) {
  uint32_t sum = 0;
  int64_t i = begin;
  for (; i + (kVectorsInFlight - 1) * step < end; i += kVectorsInFlight * step) {
    uint4 v[kVectorsInFlight];
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) v[u] = load_streaming(address(i + u * step));
#pragma unroll
    for (int u = 0; u < kVectorsInFlight; ++u) sum ^= fold(v[u]);
  }
  for (; i < end; i += step) sum ^= fold(load_streaming(address(i)));
  return sum;
}

__global__ void __launch_bounds__(kThreads) read_chunks(const uint4* data, int64_t vectors,
                                                        uint32_t* sink) {
  const int64_t per_block = (vectors + gridDim.x - 1) / gridDim.x;
  const int64_t begin = per_block * blockIdx.x;
  const int64_t end = std::min(vectors, begin + per_block);
  store_block_sum(
      read_indices(begin + threadIdx.x, end, kThreads, [&](int64_t i) { return data + i; }), sink);
}

__global__ void __launch_bounds__(kThreads) read_strided(const uint4* data, int64_t vectors,
                                                         uint32_t* sink) {
  const int64_t step = static_cast<int64_t>(gridDim.x) * kThreads;
  store_block_sum(read_indices(blockIdx.x * static_cast<int64_t>(kThreads) + threadIdx.x, vectors,
                               step, [&](int64_t i) { return data + i; }),
                  sink);
}

// Block (split, head): keys [split * per_split, ...) of head `head`, each key's row 16 vectors;
// a warp reads two rows per load instruction, as the split kernel's copies do.
__global__ void __launch_bounds__(kThreads) read_heads(const uint4* data, int64_t vectors,
                                                       uint32_t* sink) {
  constexpr int kVectorsPerRow = kRowBytes / 16;
  constexpr int kRowsPerStep = kThreads / kVectorsPerRow;
  const int64_t keys = vectors / (kVectorsPerRow * kHeads);
  const int splits = gridDim.x / kHeads;
  const int head = blockIdx.x % kHeads;
  const int split = blockIdx.x / kHeads;
  const int64_t per_split = (keys + splits - 1) / splits;
  const int64_t first = per_split * split;
  const int64_t last = std::min(keys, first + per_split);
  const int lane_vector = threadIdx.x % kVectorsPerRow;
  store_block_sum(read_indices(first + threadIdx.x / kVectorsPerRow, last, kRowsPerStep,
                               [&](int64_t key) {
                                 return data + (key * kHeads + head) * kVectorsPerRow +
                                        lane_vector;
                               }),
                  sink);
}

constexpr uint32_t kBulkBytes = 16384;

// One thread streams the block's contiguous range through `stages` shared-memory slots of
// kBulkBytes, each refilled as soon as its copy has landed.
__global__ void __launch_bounds__(32) read_bulk(const char* data, int64_t bytes, int stages,
                                                uint32_t* sink) {
  extern __shared__ __align__(128) char ring[];
  __shared__ uint64_t full[16];
  namespace sm90 = flashmma::ptx::sm90;
  if (threadIdx.x != 0) return;
  const int64_t copies = bytes / kBulkBytes;
  const int64_t per_block = (copies + gridDim.x - 1) / gridDim.x;
  const int64_t first = per_block * blockIdx.x;
  const int64_t last = std::min(copies, first + per_block);
  for (int s = 0; s < stages; ++s) sm90::mbarrier_init(&full[s], 1);
  sm90::fence_mbarrier_init();
  auto issue = [&](int64_t copy) {
    const int s = static_cast<int>((copy - first) % stages);
    sm90::mbarrier_arrive_expect_tx(&full[s], kBulkBytes);
    sm90::bulk_copy_load(ring + s * kBulkBytes, data + copy * kBulkBytes, kBulkBytes, &full[s]);
  };
  for (int64_t c = first; c < std::min(last, first + stages); ++c) issue(c);
  uint32_t sum = 0;
  for (int64_t c = first; c < last; ++c) {
    const int64_t n = c - first;
    const int s = static_cast<int>(n % stages);
    sm90::mbarrier_wait_parity(&full[s], static_cast<uint32_t>((n / stages) % 2));
    sum ^= *reinterpret_cast<const uint32_t*>(ring + s * kBulkBytes);
    if (c + stages < last) issue(c + stages);
  }
  sink[blockIdx.x] ^= sum;
}

enum class Reader { kChunks, kStrided, kHeads, kBulk, kFlashmma };

const char* name_of(Reader r) {
  switch (r) {
    case Reader::kChunks: return "chunks";
    case Reader::kStrided: return "strided";
    case Reader::kHeads: return "heads";
    case Reader::kBulk: return "bulk";
    case Reader::kFlashmma: return "flashmma";
  }
  return "?";
}

struct Row {
  Reader reader;
  int blocks_per_sm;
  int stages;  // bulk only
};

struct Timing {
  float per_call_median_us;
  float queued_mean_us;
};

// One call of a row on input set `set`.
using Call = std::function<void(int set)>;

Call reader_call(const Row& row, int sms, const std::vector<const char*>& sets, int64_t bytes,
                 uint32_t* sink) {
  const int blocks = sms * row.blocks_per_sm;
  const int64_t vectors = bytes / 16;
  if (row.reader == Reader::kBulk) {
    check_cuda(cudaFuncSetAttribute(read_bulk, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                    row.stages * static_cast<int>(kBulkBytes)),
               "cudaFuncSetAttribute");
  }
  return [=](int set) {
    const char* data = sets[set % sets.size()];
    const auto* v = reinterpret_cast<const uint4*>(data);
    switch (row.reader) {
      case Reader::kChunks: read_chunks<<<blocks, kThreads>>>(v, vectors, sink); break;
      case Reader::kStrided: read_strided<<<blocks, kThreads>>>(v, vectors, sink); break;
      case Reader::kHeads:
        // Whole groups of kHeads blocks: 33 splits x 8 heads on 132 SMs x 2.
        read_heads<<<blocks / kHeads * kHeads, kThreads>>>(v, vectors, sink);
        break;
      case Reader::kBulk:
        read_bulk<<<blocks, 32, row.stages * kBulkBytes>>>(data, bytes, row.stages, sink);
        break;
      case Reader::kFlashmma: break;  // flashmma_call
    }
  };
}

using DecodeConfig = flashmma::SplitKernelConfigT<__nv_bfloat16, 128>;

// flashmma's decoding call over `batch` caches of `keys` keys: K the first half of each set, V
// the second. Throws if the call is refused.
Call flashmma_call(const std::vector<const char*>& sets, int64_t batch, int64_t keys,
                   const DeviceBuffer& q, const DeviceBuffer& o, DeviceBuffer& workspace) {
  flashmma::ForwardParams p;
  p.dtype = flashmma::ScalarType::kBFloat16;
  p.batch = batch;
  p.seqlen_q = 1;
  p.seqlen_k = keys;
  p.heads_q = 4 * kHeads;
  p.heads_kv = kHeads;
  p.head_dim = kRowBytes / 2;
  p.q = q.as<const void>();
  p.o = o.as<void>();
  p.q_strides = p.o_strides = flashmma::bshd_strides(1, p.heads_q, p.head_dim);
  p.k_strides = p.v_strides = flashmma::bshd_strides(keys, p.heads_kv, p.head_dim);
  p.k = sets[0];
  p.v = sets[0] + batch * keys * kHeads * kRowBytes;
  std::size_t bytes = 0;
  if (flashmma::Status s = flashmma::forward_workspace_bytes<DecodeConfig>(p, bytes); !s)
    throw std::runtime_error("forward_workspace_bytes: " + s.message());
  if (bytes > workspace.bytes()) throw std::runtime_error("the workspace is too small");
  p.workspace = workspace.as<void>();
  p.workspace_bytes = workspace.bytes();
  return [=](int set) {
    flashmma::ForwardParams call = p;
    call.k = sets[set % sets.size()];
    call.v = sets[set % sets.size()] + batch * keys * kHeads * kRowBytes;
    const flashmma::Status s =
        flashmma::forward<DecodeConfig>(call, flashmma::FullAttention{}, nullptr);
    if (!s) throw std::runtime_error("forward: " + s.message());
  };
}

Timing time_calls(const Call& call, int sets, int iters, int rounds) {
  for (int i = 0; i < 3; ++i) call(i % sets);
  check_cuda(cudaDeviceSynchronize(), "the warm-up");
  std::vector<float> per_call;
  std::vector<float> queued;
  for (int r = 0; r < rounds; ++r) {
    std::vector<EventPair> events(iters);
    for (int i = 0; i < iters; ++i) {
      check_cuda(cudaEventRecord(events[i].start()), "cudaEventRecord");
      call(i % sets);
      check_cuda(cudaEventRecord(events[i].stop()), "cudaEventRecord");
    }
    EventPair queue;
    check_cuda(cudaEventRecord(queue.start()), "cudaEventRecord");
    for (int i = 0; i < iters; ++i) call(i % sets);
    check_cuda(cudaEventRecord(queue.stop()), "cudaEventRecord");
    check_cuda(cudaDeviceSynchronize(), "the timed calls");
    check_cuda(cudaGetLastError(), "the timed calls");
    for (const EventPair& e : events) per_call.push_back(e.elapsed_ms() * 1000.f);
    queued.push_back(queue.elapsed_ms() * 1000.f / iters);
  }
  std::sort(per_call.begin(), per_call.end());
  std::sort(queued.begin(), queued.end());
  return {per_call[per_call.size() / 2], queued[queued.size() / 2]};
}

int parse_positive(const char* text, const char* flag) {
  char* end = nullptr;
  const long value = std::strtol(text, &end, 10);
  if (end == text || *end != '\0' || value <= 0 || value > 100000) {
    std::fprintf(stderr, "%s expects a positive integer, got '%s'\n", flag, text);
    std::exit(2);
  }
  return static_cast<int>(value);
}

}  // namespace

int main(int argc, char** argv) {
  int iters = 50;
  int rounds = 3;
  std::string only_shape;  // "BxKEYS": that decode shape alone
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if ((arg == "--iters" || arg == "--rounds") && i + 1 < argc) {
      (arg == "--iters" ? iters : rounds) = parse_positive(argv[++i], arg.c_str());
    } else if (arg == "--shape" && i + 1 < argc) {
      only_shape = argv[++i];
    } else {
      std::fprintf(stderr,
                   "usage: flashmma_memory_ceiling [--iters N] [--rounds R] [--shape BxKEYS]\n"
                   "  shapes: 1x32768, 1x131072, 64x8192 (all three without --shape)\n");
      return 2;
    }
  }
  try {
    int device = 0;
    check_cuda(cudaGetDevice(&device), "cudaGetDevice");
    cudaDeviceProp prop{};
    check_cuda(cudaGetDeviceProperties(&prop, device), "cudaGetDeviceProperties");
    const int sms = prop.multiProcessorCount;
    const bool hopper = prop.major == 9;
    std::printf("# %s, %d SMs, L2 %d MB; per call: median of %d x %d event pairs around one call "
                "each, queued back to back; queued: mean over %d calls under one pair\n",
                prop.name, sms, prop.l2CacheSize >> 20, rounds, iters, iters);
    std::printf("bytes,reader,blocks_per_sm,stages,per_call_us,per_call_GBps,queued_us,"
                "queued_GBps\n");
    DeviceBuffer sink(static_cast<std::size_t>(sms) * 4 * sizeof(uint32_t));
    // The decode rows' K + V bytes: 1 x 32k, 1 x 128k and 64 x 8k keys of 8 heads, d = 128, bf16.
    const int64_t kv_bytes_per_key = 2LL * kHeads * kRowBytes;
    DeviceBuffer q(64 * 4 * kHeads * kRowBytes);
    DeviceBuffer o(64 * 4 * kHeads * kRowBytes);
    check_cuda(cudaMemset(q.as<void>(), 0x3c, q.bytes()), "cudaMemset");
    DeviceBuffer workspace(64 << 20);
    const std::pair<int64_t, int64_t> batch_by_keys[] = {{1, 32768}, {1, 131072}, {64, 8192}};
    bool shape_found = only_shape.empty();
    for (const auto& [batch, keys] : batch_by_keys) {
      if (!only_shape.empty() &&
          only_shape != std::to_string(batch) + "x" + std::to_string(keys)) {
        continue;
      }
      shape_found = true;
      const int64_t bytes = batch * keys * kv_bytes_per_key;
      // Enough sets that the set read next was last read two calls ago or more, never in L2.
      const int set_count = static_cast<int>(std::max<int64_t>(
          3, (4LL * prop.l2CacheSize + bytes - 1) / bytes));
      std::vector<std::unique_ptr<DeviceBuffer>> owned;
      std::vector<const char*> sets;
      for (int s = 0; s < set_count; ++s) {
        owned.push_back(std::make_unique<DeviceBuffer>(static_cast<std::size_t>(bytes)));
        // 0x3c3c: a bf16 of about 0.0115, finite for the attention row.
        check_cuda(cudaMemset(owned.back()->as<void>(), 0x3c + s, bytes), "cudaMemset");
        sets.push_back(owned.back()->as<const char>());
      }
      std::vector<Row> rows = {{Reader::kChunks, 1, 0},  {Reader::kChunks, 2, 0},
                               {Reader::kChunks, 4, 0},  {Reader::kStrided, 2, 0},
                               {Reader::kStrided, 4, 0}, {Reader::kHeads, 2, 0},
                               {Reader::kHeads, 4, 0}};
      if (hopper) {
        rows.push_back({Reader::kBulk, 1, 8});
        rows.push_back({Reader::kBulk, 2, 4});
        rows.push_back({Reader::kBulk, 2, 6});
        rows.push_back({Reader::kBulk, 4, 3});
      }
      rows.push_back({Reader::kFlashmma, 0, 0});
      for (const Row& row : rows) {
        const Call call = row.reader == Reader::kFlashmma
                              ? flashmma_call(sets, batch, keys, q, o, workspace)
                              : reader_call(row, sms, sets, bytes, sink.as<uint32_t>());
        const Timing t = time_calls(call, set_count, iters, rounds);
        std::printf("%lld,%s,%d,%d,%.2f,%.0f,%.2f,%.0f\n", static_cast<long long>(bytes),
                    name_of(row.reader), row.blocks_per_sm, row.stages, t.per_call_median_us,
                    bytes / (t.per_call_median_us * 1e3), t.queued_mean_us,
                    bytes / (t.queued_mean_us * 1e3));
        std::fflush(stdout);
      }
    }
    if (!shape_found) {
      std::fprintf(stderr, "--shape %s: not one of 1x32768, 1x131072, 64x8192\n",
                   only_shape.c_str());
      return 2;
    }
  } catch (const std::exception& e) {
    std::fprintf(stderr, "flashmma_memory_ceiling: %s\n", e.what());
    return 1;
  }
  return 0;
}
