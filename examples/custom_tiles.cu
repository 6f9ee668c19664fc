// SPDX-License-Identifier: Apache-2.0
// Choosing your own tiles: one `using` line names the kernel, forward<MyConfig> runs it, and only
// that kernel is compiled into this program. Also shows that a bad argument comes back as a
// Status, with nothing launched and nothing written.
#include <cstdio>
#include <cstring>
#include <vector>

#include "common.hpp"
#include "flashmma/flashmma.cuh"

// bf16, head dim 64; 4 warps x 16 rows = 64 query rows per block, 32 keys per step, three K/V
// tile pairs in shared memory (with 3 or more, the next tile's Q K^T overlaps this tile's
// softmax), XOR-swizzled shared memory (head dim 64 is a whole swizzle group).
using MyConfig = flashmma::TileConfig<__nv_bfloat16, /*HeadDim=*/64, /*BlockM=*/64,
                                      /*BlockN=*/32, /*Warps=*/4, /*Stages=*/3,
                                      flashmma::SmemLayout::kXorSwizzle>;
using Element = MyConfig::element_type;

namespace {

constexpr uint64_t kSeed = 7;
constexpr int kSampleRows = 64;

void print_config() {
  std::printf("MyConfig: %s, HeadDim %d, BlockM %d, BlockN %d, Warps %d, Stages %d, %s\n",
              flashmma::ElementTraits<Element>::kName, MyConfig::kHeadDim, MyConfig::kBlockM,
              MyConfig::kBlockN, MyConfig::kWarps, MyConfig::kStages,
              MyConfig::kSmemLayout == flashmma::SmemLayout::kXorSwizzle ? "XOR swizzle"
                                                                         : "padded rows");
  std::printf("  threads per block       %d\n", MyConfig::kThreads);
  std::printf("  query rows per warp     %d\n", MyConfig::kRowsPerWarp);
  std::printf("  shared memory per block %zu bytes\n", MyConfig::kSmemBytes);
  std::printf("  smem row stride         %d elements\n", MyConfig::kRowStride);
  std::printf("  fp32 accumulators       %d registers per thread\n",
              MyConfig::kAccumulatorRegisters);
  std::printf("  Q kept in registers     %s\n", MyConfig::kQInRegisters ? "yes" : "no");
}

// forward<MyConfig> with 6 query heads over 4 KV heads: not a whole number of query heads per
// KV head. The call must fail with kInvalidArgument and leave O as it was.
bool bad_argument_is_rejected(const example::Problem<Element>& problem) {
  std::vector<unsigned char> before(problem.o_dev.bytes()), after(problem.o_dev.bytes());
  if (!example::cuda_ok(cudaMemcpy(before.data(), problem.o_dev.get(), before.size(),
                                   cudaMemcpyDeviceToHost),
                        "copying o back")) {
    return false;
  }
  flashmma::ForwardParams bad = problem.params();
  bad.heads_q = 6;
  bad.heads_kv = 4;
  const flashmma::Status status = flashmma::forward<MyConfig>(bad);
  std::printf("heads_q = 6, heads_kv = 4 -> %s\n", status.message().c_str());
  if (status.ok() || status.code() != flashmma::ErrorCode::kInvalidArgument) {
    std::fprintf(stderr, "expected ErrorCode::kInvalidArgument\n");
    return false;
  }
  if (!example::cuda_ok(cudaDeviceSynchronize(), "cudaDeviceSynchronize") ||
      !example::cuda_ok(cudaMemcpy(after.data(), problem.o_dev.get(), after.size(),
                                   cudaMemcpyDeviceToHost),
                        "copying o back")) {
    return false;
  }
  const bool untouched = before == after;
  std::printf("  o untouched: %s\n", untouched ? "yes" : "no");
  return untouched;
}

}  // namespace

int main() {
  print_config();
  if (!example::have_cuda_device()) return 1;

  // Grouped-query attention (8 query heads share 2 KV heads) with a causal mask and more keys than
  // queries: query i sees keys 0 .. i + (seqlen_k - seqlen_q).
  example::Shape shape;
  shape.batch = 2;
  shape.heads_q = 8;
  shape.heads_kv = 2;
  shape.seqlen_q = 1000;
  shape.seqlen_k = 1500;
  shape.head_dim = MyConfig::kHeadDim;
  shape.causal = true;

  example::Problem<Element> problem;
  if (!problem.init(shape, kSeed)) return 1;
  if (!example::status_ok(flashmma::forward<MyConfig>(problem.params()),
                          "flashmma::forward<MyConfig>") ||
      !example::cuda_ok(cudaDeviceSynchronize(), "the forward kernel")) {
    return 1;
  }
  example::CheckResult check;
  if (!example::check_against_reference(problem, kSampleRows, check)) return 1;
  const bool passed = example::report(check, MyConfig::kScalarType);

  const bool rejected = bad_argument_is_rejected(problem);
  return passed && rejected ? 0 : 1;
}
