// SPDX-License-Identifier: Apache-2.0
// TMA on the device, with maps from encode_tensor_map: loads land in shared memory at the
// swizzle.hpp offsets of every swizzle mode, with zeros outside the tensor (right, bottom and
// negative coordinates), over one mbarrier reused phase after phase; a [B, S, H, D] map with
// non-monotonic strides loads head-dim sub-tiles; stores write the box and drop what lies outside
// the tensor. Shared memory is copied out byte for byte and compared with the host's expectation.
#include <cuda.h>
#include <cuda_runtime.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "support/catch.hpp"

#include "flashmma/ptx/sm90/async_proxy.cuh"
#include "flashmma/ptx/sm90/mbarrier.cuh"
#include "flashmma/ptx/sm90/swizzle.hpp"
#include "flashmma/ptx/sm90/tensor_map.hpp"
#include "flashmma/ptx/sm90/tma.cuh"
#include "test_sm90_support.cuh"

namespace {

namespace sm90 = flashmma::ptx::sm90;
using flashmma::test::DeviceBuffer;
using sm90::Swizzle;
using namespace flashmma::test::sm90_support;

constexpr int kThreads = 128;
constexpr int kMaxCases = 6;
constexpr uint16_t kPoison = 0xFFFF;

template <int Rank>
struct BoxCoords {
  int32_t coords[kMaxCases][Rank];
  int count;
};

// Loads box after box into one tile, waiting on one mbarrier whose phase flips each time, and
// copies each landed tile to out[case]. The first loads are preceded by an L2 prefetch of the box.
template <int Rank>
__global__ void __launch_bounds__(kThreads)
    tma_load_kernel(const __grid_constant__ CUtensorMap map, BoxCoords<Rank> boxes,
                    uint32_t box_bytes, uint4* out) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile = align_up(smem_raw, sm90::kSwizzleAlignment);
  __shared__ uint64_t barrier;
  if (threadIdx.x == 0) {
    sm90::prefetch_tensor_map(&map);
    sm90::mbarrier_init(&barrier, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  for (int box = 0; box < boxes.count; ++box) {
    int32_t coords[Rank];
    for (int i = 0; i < Rank; ++i) coords[i] = boxes.coords[box][i];
    if (threadIdx.x == 0) {
      sm90::tma_prefetch_tile(&map, coords);
      sm90::mbarrier_arrive_expect_tx(&barrier, box_bytes);
      sm90::tma_load_tile(tile, &map, coords, &barrier);
    }
    wait_or_trap(&barrier, static_cast<uint32_t>(box & 1), "TMA load");
    const uint4* landed = reinterpret_cast<const uint4*>(tile);
    const uint32_t words = box_bytes / sizeof(uint4);
    for (uint32_t i = threadIdx.x; i < words; i += kThreads) out[box * words + i] = landed[i];
    __syncthreads();  // every thread has read the tile before the next load overwrites it
  }
}

// Writes `image` (a box in its shared-memory layout) to the tile with generic stores, then stores
// it with TMA at each box of `boxes` in turn.
__global__ void __launch_bounds__(kThreads)
    tma_store_kernel(const __grid_constant__ CUtensorMap map, BoxCoords<2> boxes,
                     const uint4* image, uint32_t box_bytes) {
  extern __shared__ unsigned char smem_raw[];
  unsigned char* tile = align_up(smem_raw, sm90::kSwizzleAlignment);
  for (int box = 0; box < boxes.count; ++box) {
    const uint32_t words = box_bytes / sizeof(uint4);
    uint4* staged = reinterpret_cast<uint4*>(tile);
    for (uint32_t i = threadIdx.x; i < words; i += kThreads) staged[i] = image[box * words + i];
    sm90::fence_proxy_async_shared();  // every writer, before the barrier and the store
    __syncthreads();
    if (threadIdx.x == 0) {
      const int32_t coords[2] = {boxes.coords[box][0], boxes.coords[box][1]};
      sm90::tma_store_tile(&map, coords, tile);
      sm90::tma_store_commit_group();
      sm90::tma_store_wait_read<0>();  // the tile may be overwritten now
      sm90::tma_store_wait<0>();
    }
    __syncthreads();
  }
}

// A nonzero 16-bit value per element, so that zero fill and poison stand out.
uint16_t element_id(uint64_t index) { return static_cast<uint16_t>(index % 65521 + 1); }

// The box's shared-memory image: element (row, col) of a box `inner` elements wide at the
// swizzled offset of byte row * inner * 2 + col * 2; `value(row, col)` gives the element.
template <class Value>
std::vector<uint16_t> box_image(Swizzle swizzle, int inner, int rows, Value value) {
  std::vector<uint16_t> image(static_cast<std::size_t>(inner) * rows, 0xDEAD);
  for (int row = 0; row < rows; ++row) {
    for (int col = 0; col < inner; ++col) {
      const uint32_t logical = static_cast<uint32_t>((row * inner + col) * 2);
      image[sm90::swizzle_byte_offset(swizzle, logical) / 2] = value(row, col);
    }
  }
  return image;
}

// Runs tma_load_kernel and returns the landed boxes, box_elements 16-bit values each.
template <int Rank>
std::vector<uint16_t> run_loads(const CUtensorMap& map, const BoxCoords<Rank>& boxes,
                                uint32_t box_bytes) {
  DeviceBuffer<uint4> out(static_cast<int64_t>(boxes.count) * box_bytes / sizeof(uint4));
  // The box plus the slack to align its start to 1024 bytes.
  const std::size_t smem = box_bytes + sm90::kSwizzleAlignment;
  tma_load_kernel<Rank><<<1, kThreads, smem>>>(map, boxes, box_bytes, out.get());
  sync_and_check();
  const std::vector<uint4> words = out.to_host();
  std::vector<uint16_t> values(words.size() * sizeof(uint4) / sizeof(uint16_t));
  std::memcpy(values.data(), words.data(), values.size() * sizeof(uint16_t));
  return values;
}

constexpr int kRows = 320;
constexpr int kCols = 256;  // 160 KiB: above the 128 KiB below which some drivers misencode

// The map of the kRows x kCols bf16 matrix at `tensor` (row-major), with boxes of `inner`
// columns by `box_rows` rows under `swizzle`; the test fails if it does not encode.
void encode_matrix_map(const void* tensor, int inner, int box_rows, Swizzle swizzle,
                       CUtensorMap* map) {
  sm90::TensorTile tile;
  tile.data_type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  tile.rank = 2;
  tile.global_address = tensor;
  tile.dims[0] = kCols;
  tile.dims[1] = kRows;
  tile.strides_bytes[0] = kCols * sizeof(uint16_t);
  tile.box[0] = static_cast<uint32_t>(inner);
  tile.box[1] = static_cast<uint32_t>(box_rows);
  tile.swizzle = swizzle;
  const flashmma::Status status = sm90::encode_tensor_map(tile, map);
  INFO("swizzle " << static_cast<int>(swizzle) << ": " << status.message());
  REQUIRE(status.ok());
}

}  // namespace

TEST_CASE("TMA 2D loads land swizzled, zero-filled outside the tensor, phase after phase",
          "[gpu][sm90][tma]") {
  std::vector<uint16_t> host(static_cast<std::size_t>(kRows) * kCols);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = element_id(i);
  DeviceBuffer<uint16_t> tensor = to_device(host);

  for (Swizzle swizzle : {Swizzle::kNone, Swizzle::k32B, Swizzle::k64B, Swizzle::k128B}) {
    // The widest box each swizzle allows (unswizzled: 64 elements, like 128B), 64 rows.
    const int inner =
        swizzle == Swizzle::kNone ? 64 : static_cast<int>(sm90::swizzle_span_bytes(swizzle)) / 2;
    const int box_rows = 64;
    alignas(64) CUtensorMap map;
    encode_matrix_map(tensor.get(), inner, box_rows, swizzle, &map);

    // In bounds; over the right edge; over the bottom; before both starts; over the corner.
    const BoxCoords<2> boxes{{{0, 0},
                              {kCols - inner / 2, 5},
                              {8, kRows - 20},
                              {-8, -3},
                              {kCols - 8, kRows - 8},
                              {inner, 64}},
                             6};
    const uint32_t box_bytes = static_cast<uint32_t>(inner * box_rows * 2);
    const std::vector<uint16_t> landed = run_loads(map, boxes, box_bytes);

    int mismatches = 0;
    for (int box = 0; box < boxes.count; ++box) {
      const int x0 = boxes.coords[box][0];
      const int y0 = boxes.coords[box][1];
      const std::vector<uint16_t> expected =
          box_image(swizzle, inner, box_rows, [&](int row, int col) -> uint16_t {
            const int y = y0 + row;
            const int x = x0 + col;
            const bool inside = x >= 0 && x < kCols && y >= 0 && y < kRows;
            return inside ? host[static_cast<std::size_t>(y) * kCols + x] : uint16_t{0};
          });
      for (std::size_t i = 0; i < expected.size(); ++i) {
        const uint16_t got = landed[box * expected.size() + i];
        if (got != expected[i] && ++mismatches <= 8) {
          UNSCOPED_INFO("box " << box << " at (" << x0 << ", " << y0 << "), shared element " << i
                               << ": got " << got << ", expected " << expected[i]);
        }
      }
    }
    REQUIRE(mismatches == 0);
  }
}

TEST_CASE("TMA 4D [B, S, H, D] loads: head-dim sub-tiles, strides not increasing",
          "[gpu][sm90][tma]") {
  constexpr int kBatch = 2;
  constexpr int kSeq = 300;
  constexpr int kHeads = 3;
  constexpr int kDim = 128;
  std::vector<uint16_t> host(static_cast<std::size_t>(kBatch) * kSeq * kHeads * kDim);
  for (std::size_t i = 0; i < host.size(); ++i) host[i] = element_id(i);
  DeviceBuffer<uint16_t> tensor = to_device(host);

  sm90::TensorTile tile;
  tile.data_type = CU_TENSOR_MAP_DATA_TYPE_BFLOAT16;
  tile.rank = 4;
  tile.global_address = tensor.get();
  const uint64_t dims[4] = {kDim, kSeq, kHeads, kBatch};
  const uint64_t strides[3] = {kHeads * kDim * 2, kDim * 2,
                               static_cast<uint64_t>(kSeq) * kHeads * kDim * 2};
  for (int i = 0; i < 4; ++i) tile.dims[i] = dims[i];
  for (int i = 0; i < 3; ++i) tile.strides_bytes[i] = strides[i];
  const uint32_t box[4] = {64, 64, 1, 1};
  for (int i = 0; i < 4; ++i) tile.box[i] = box[i];
  tile.swizzle = Swizzle::k128B;
  alignas(64) CUtensorMap map;
  const flashmma::Status status = sm90::encode_tensor_map(tile, &map);
  INFO(status.message());
  REQUIRE(status.ok());

  // (d, s, h, b): both d sub-tiles of one head, a box past the sequence's end, one before it.
  const BoxCoords<4> boxes{
      {{0, 10, 1, 0}, {64, 10, 1, 0}, {64, 280, 2, 1}, {0, -16, 0, 1}}, 4};
  const uint32_t box_bytes = 64 * 64 * 2;
  const std::vector<uint16_t> landed = run_loads(map, boxes, box_bytes);

  int mismatches = 0;
  for (int box_index = 0; box_index < boxes.count; ++box_index) {
    const int* c = boxes.coords[box_index];
    const std::vector<uint16_t> expected =
        box_image(Swizzle::k128B, 64, 64, [&](int row, int col) -> uint16_t {
          const int s = c[1] + row;
          if (s < 0 || s >= kSeq) return 0;
          const std::size_t at =
              ((static_cast<std::size_t>(c[3]) * kSeq + s) * kHeads + c[2]) * kDim + c[0] + col;
          return host[at];
        });
    for (std::size_t i = 0; i < expected.size(); ++i) {
      const uint16_t got = landed[box_index * expected.size() + i];
      if (got != expected[i] && ++mismatches <= 8) {
        UNSCOPED_INFO("box " << box_index << ", shared element " << i << ": got " << got
                             << ", expected " << expected[i]);
      }
    }
  }
  REQUIRE(mismatches == 0);
}

TEST_CASE("TMA 2D stores write the box and clip it at the tensor's edges", "[gpu][sm90][tma]") {
  DeviceBuffer<uint16_t> tensor(static_cast<int64_t>(kRows) * kCols);
  FLASHMMA_CUDA_CHECK(cudaMemset(tensor.get(), 0xFF, tensor.bytes()));

  constexpr int kInner = 64;
  constexpr int kBoxRows = 64;
  alignas(64) CUtensorMap map;
  encode_matrix_map(tensor.get(), kInner, kBoxRows, Swizzle::k128B, &map);

  // Inside; over the right and bottom edges (no negative start: that faults on the H200).
  const BoxCoords<2> boxes{{{64, 32}, {kCols - 24, kRows - 40}}, 2};
  const auto value = [](int box, int row, int col) {
    return static_cast<uint16_t>(1 + box * 8192 + row * kInner + col);
  };
  std::vector<uint16_t> images;
  for (int box = 0; box < boxes.count; ++box) {
    const std::vector<uint16_t> image = box_image(
        Swizzle::k128B, kInner, kBoxRows, [&](int row, int col) { return value(box, row, col); });
    images.insert(images.end(), image.begin(), image.end());
  }
  std::vector<uint4> image_words(images.size() * sizeof(uint16_t) / sizeof(uint4));
  std::memcpy(image_words.data(), images.data(), images.size() * sizeof(uint16_t));
  DeviceBuffer<uint4> image_device = to_device(image_words);
  const uint32_t box_bytes = kInner * kBoxRows * 2;
  tma_store_kernel<<<1, kThreads, box_bytes + sm90::kSwizzleAlignment>>>(
      map, boxes, image_device.get(), box_bytes);
  sync_and_check();

  std::vector<uint16_t> expected(static_cast<std::size_t>(kRows) * kCols, kPoison);
  for (int box = 0; box < boxes.count; ++box) {
    for (int row = 0; row < kBoxRows; ++row) {
      for (int col = 0; col < kInner; ++col) {
        const int y = boxes.coords[box][1] + row;
        const int x = boxes.coords[box][0] + col;
        if (x < kCols && y < kRows) {
          expected[static_cast<std::size_t>(y) * kCols + x] = value(box, row, col);
        }
      }
    }
  }
  const std::vector<uint16_t> got = tensor.to_host();
  int mismatches = 0;
  for (std::size_t i = 0; i < got.size(); ++i) {
    if (got[i] != expected[i] && ++mismatches <= 8) {
      UNSCOPED_INFO("element (" << i / kCols << ", " << i % kCols << "): got " << got[i]
                                << ", expected " << expected[i]);
    }
  }
  REQUIRE(mismatches == 0);
}

namespace {

// Copies `rounds` runs of `bytes` bytes, each from source + round * stride_bytes, into one
// shared buffer over one mbarrier (phase `round & 1`), and copies each landed run to out.
__global__ void __launch_bounds__(kThreads)
    bulk_copy_kernel(const unsigned char* source, uint32_t bytes, uint32_t stride_bytes,
                     int rounds, uint4* out) {
  extern __shared__ __align__(16) unsigned char buffer[];
  __shared__ uint64_t barrier;
  if (threadIdx.x == 0) {
    sm90::mbarrier_init(&barrier, 1);
    sm90::fence_mbarrier_init();
  }
  __syncthreads();
  for (int round = 0; round < rounds; ++round) {
    if (threadIdx.x == 0) {
      sm90::mbarrier_arrive_expect_tx(&barrier, bytes);
      sm90::bulk_copy_load(buffer, source + static_cast<std::size_t>(round) * stride_bytes,
                           bytes, &barrier);
    }
    wait_or_trap(&barrier, static_cast<uint32_t>(round & 1), "bulk copy");
    const uint4* landed = reinterpret_cast<const uint4*>(buffer);
    const uint32_t words = bytes / sizeof(uint4);
    for (uint32_t i = threadIdx.x; i < words; i += kThreads) out[round * words + i] = landed[i];
    __syncthreads();
  }
}

}  // namespace

TEST_CASE("bulk copies land contiguous runs, phase after phase", "[gpu][sm90][tma]") {
  // Runs of 256 and 512 bytes (64 and 128 fp32 values, the backward's per-row values of a query
  // tile) and 16 bytes, from offsets that are multiples of 16 but not of 128.
  for (const uint32_t bytes : {16u, 256u, 512u}) {
    CAPTURE(bytes);
    constexpr int kRounds = 3;
    const uint32_t stride = bytes + 48;
    std::vector<uint4> source_words((kRounds * stride + 64) / sizeof(uint4));
    std::vector<uint32_t> values(source_words.size() * 4);
    for (std::size_t i = 0; i < values.size(); ++i) values[i] = static_cast<uint32_t>(i * 2654435761u);
    std::memcpy(source_words.data(), values.data(), values.size() * 4);
    DeviceBuffer<uint4> source = to_device(source_words);
    DeviceBuffer<uint4> out(static_cast<int64_t>(kRounds) * bytes / sizeof(uint4));
    const auto* base = reinterpret_cast<const unsigned char*>(source.get()) + 16;
    bulk_copy_kernel<<<1, kThreads, bytes>>>(base, bytes, stride, kRounds, out.get());
    sync_and_check();
    const std::vector<uint4> got_words = out.to_host();
    std::vector<uint32_t> got(got_words.size() * 4);
    std::memcpy(got.data(), got_words.data(), got.size() * 4);
    int mismatches = 0;
    for (int round = 0; round < kRounds; ++round) {
      for (uint32_t i = 0; i < bytes / 4; ++i) {
        const uint32_t expected = values[(16 + round * stride) / 4 + i];
        if (got[round * bytes / 4 + i] != expected && ++mismatches <= 8) {
          UNSCOPED_INFO("round " << round << " word " << i << ": got "
                                 << got[round * bytes / 4 + i] << ", expected " << expected);
        }
      }
    }
    REQUIRE(mismatches == 0);
  }
}

namespace {

// Each block adds `rounds` runs of `bytes` bytes of fp32 values to destination with bulk
// reductions from one shared buffer, rewritten between rounds once the previous reduction has
// read it (tma_store_wait_read): value i of round r in block b is (b + 1) * (r + 1) + i % 7, a
// small integer, so that every order of the sums gives the same float.
__global__ void __launch_bounds__(kThreads)
    bulk_reduce_kernel(float* destination, uint32_t bytes, int rounds) {
  extern __shared__ __align__(16) float run[];
  const uint32_t count = bytes / sizeof(float);
  for (int round = 0; round < rounds; ++round) {
    if (threadIdx.x == 0) sm90::tma_store_wait_read<0>();  // the last round has read the buffer
    __syncthreads();
    for (uint32_t i = threadIdx.x; i < count; i += kThreads) {
      run[i] = static_cast<float>((blockIdx.x + 1) * (round + 1) + i % 7);
    }
    sm90::fence_proxy_async_shared();
    __syncthreads();
    if (threadIdx.x == 0) {
      sm90::bulk_reduce_add(destination, run, bytes);
      sm90::tma_store_commit_group();
    }
  }
  if (threadIdx.x == 0) sm90::tma_store_wait<0>();
}

}  // namespace

TEST_CASE("bulk reductions add runs of fp32 values from every block", "[gpu][sm90][tma]") {
  // Runs of 16, 256 and 512 bytes (the backward's dQ rows at d = 64 and 128 columns) and 1040,
  // added by 96 blocks at once, twice each, to a destination 16 bytes into its buffer: the
  // values before and after the run are left as they were.
  for (const uint32_t bytes : {16u, 256u, 512u, 1040u}) {
    CAPTURE(bytes);
    constexpr int kBlocks = 96;
    constexpr int kRounds = 2;
    const uint32_t count = bytes / 4;
    std::vector<float> initial(count + 8);
    for (std::size_t i = 0; i < initial.size(); ++i) initial[i] = static_cast<float>(i) - 3.f;
    DeviceBuffer<float> buffer = to_device(initial);
    bulk_reduce_kernel<<<kBlocks, kThreads, bytes>>>(buffer.get() + 4, bytes, kRounds);
    sync_and_check();
    const std::vector<float> got = buffer.to_host();
    int mismatches = 0;
    for (std::size_t i = 0; i < got.size(); ++i) {
      double expected = initial[i];
      if (i >= 4 && i < 4 + count) {
        for (int b = 0; b < kBlocks; ++b) {
          for (int r = 0; r < kRounds; ++r) expected += (b + 1) * (r + 1) + (i - 4) % 7;
        }
      }
      if (got[i] != static_cast<float>(expected) && ++mismatches <= 8) {
        UNSCOPED_INFO("element " << i << ": got " << got[i] << ", expected " << expected);
      }
    }
    REQUIRE(mismatches == 0);
  }
}
