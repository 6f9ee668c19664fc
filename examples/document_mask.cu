// SPDX-License-Identifier: Apache-2.0
// A score policy of one's own: document masking of packed sequences (document_mask.hpp) through
// forward<Config, Policy>, then causal attention within each document through
// Combined<DocumentMask, CausalMask>. Each is checked against a CPU reference that applies the
// same policy's visible() to every (query, key) pair, and the program prints how many K/V tiles
// the policy's key ranges let the kernel skip.
//
// Exits 0 when both outputs match the reference, 1 otherwise (or on any error).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <vector>

#include "common.hpp"
#include "document_mask.hpp"
#include "flashmma/attention/key_range.hpp"
#include "flashmma/flashmma.cuh"

// fp16, head dim 64; 4 warps x 16 rows = 64 query rows per block, 64 keys per step, split
// schedule as the head-dim-64 default. Half the default's 128 query rows: a query tile that
// straddles a document boundary visits the key tiles of both documents, and smaller tiles
// straddle less of a sequence of short documents.
using DocumentConfig = flashmma::TileConfig<__half, /*HeadDim=*/64, /*BlockM=*/64,
                                            /*BlockN=*/64, /*Warps=*/4, /*Stages=*/1,
                                            flashmma::SmemLayout::kXorSwizzle>;
using Element = DocumentConfig::element_type;

namespace {

constexpr uint64_t kSeed = 11;
constexpr int kSpreadRows = 16;  // rows per (batch, head) spread evenly, besides the boundaries

// Two batch entries of 2037 tokens each, packed differently: boundaries off the 64-token tiles in
// the first, on them in the second.
const std::vector<std::vector<int64_t>> kDocumentLengths = {{300, 1000, 37, 700},
                                                            {512, 1024, 501}};

// Output row and LSE of query `row` of (batch, head) in double precision, over the keys `policy`
// shows it. A row that sees no key gets O = 0 and LSE = -inf, as in the library.
template <class Policy>
void reference_row(const example::Problem<Element>& pb, const Policy& policy, int64_t batch,
                   int64_t head, int64_t row, double scale, std::vector<double>& out,
                   double& lse) {
  const example::Shape& s = pb.shape;
  const int64_t kv_head = head / (s.heads_q / s.heads_kv);
  const int64_t d = s.head_dim;
  const flashmma::SequenceLengths lengths = flashmma::sequence_lengths(s.seqlen_q, s.seqlen_k);
  const Element* q = &pb.q[((batch * s.seqlen_q + row) * s.heads_q + head) * d];
  auto kv_row = [&](const std::vector<Element>& t, int64_t key) {
    return &t[((batch * s.seqlen_k + key) * s.heads_kv + kv_head) * d];
  };
  std::vector<double> scores(static_cast<std::size_t>(s.seqlen_k),
                             -std::numeric_limits<double>::infinity());
  double row_max = -std::numeric_limits<double>::infinity();
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    if (!flashmma::policy_visible(policy, flashmma::score_coord(batch, head, row, j), lengths)) {
      continue;
    }
    const Element* kj = kv_row(pb.k, j);
    double dot = 0;
    for (int64_t c = 0; c < d; ++c) {
      dot += double(example::to_float(q[c])) * example::to_float(kj[c]);
    }
    scores[j] = dot * scale;
    row_max = std::max(row_max, scores[j]);
  }
  out.assign(static_cast<std::size_t>(d), 0.0);
  if (row_max == -std::numeric_limits<double>::infinity()) {
    lse = row_max;
    return;
  }
  double row_sum = 0;
  for (int64_t j = 0; j < s.seqlen_k; ++j) {
    const double p = std::exp(scores[j] - row_max);  // 0 for hidden keys
    if (p == 0) continue;
    row_sum += p;
    const Element* vj = kv_row(pb.v, j);
    for (int64_t c = 0; c < d; ++c) out[c] += p * example::to_float(vj[c]);
  }
  for (double& x : out) x /= row_sum;
  lse = row_max + std::log(row_sum);
}

// The rows checked in batch entry b: every document's first, middle and last token (where a
// wrong key range or all_visible() would show first), and kSpreadRows rows spread evenly.
std::vector<int64_t> rows_to_check(int64_t b, int64_t seqlen) {
  std::vector<int64_t> rows;
  int64_t first = 0;
  for (const int64_t length : kDocumentLengths[static_cast<std::size_t>(b)]) {
    rows.insert(rows.end(), {first, first + length / 2, first + length - 1});
    first += length;
  }
  for (int r = 0; r < kSpreadRows; ++r) rows.push_back((seqlen - 1) * r / (kSpreadRows - 1));
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  return rows;
}

// Runs forward<DocumentConfig>(params, policy) and compares its O and LSE with the reference of
// `host_policy`, the same policy over the host copy of the tables.
template <class Policy>
bool run_and_check(const char* name, example::Problem<Element>& problem, const Policy& policy,
                   const Policy& host_policy) {
  std::printf("\n%s:\n", name);
  // NaN in every element first, so that a row the kernel never writes cannot pass.
  if (!example::cuda_ok(cudaMemset(problem.o_dev.get(), 0xff, problem.o_dev.bytes()),
                        "cudaMemset(o)") ||
      !example::cuda_ok(cudaMemset(problem.lse_dev.get(), 0xff, problem.lse_dev.bytes()),
                        "cudaMemset(lse)") ||
      !example::status_ok(flashmma::forward<DocumentConfig>(problem.params(), policy),
                          "flashmma::forward<DocumentConfig, Policy>") ||
      !example::cuda_ok(cudaDeviceSynchronize(), "the forward kernel")) {
    return false;
  }
  const example::Shape& s = problem.shape;
  std::vector<Element> o(problem.q.size());
  std::vector<float> lse(static_cast<std::size_t>(s.batch * s.heads_q * s.seqlen_q));
  if (!example::cuda_ok(cudaMemcpy(o.data(), problem.o_dev.get(), problem.o_dev.bytes(),
                                   cudaMemcpyDeviceToHost),
                        "copying o back") ||
      !example::cuda_ok(cudaMemcpy(lse.data(), problem.lse_dev.get(), problem.lse_dev.bytes(),
                                   cudaMemcpyDeviceToHost),
                        "copying lse back")) {
    return false;
  }

  const double scale = 1.0 / std::sqrt(double(s.head_dim));
  example::CheckResult result;
  double error_sq = 0, reference_sq = 0;
  std::vector<double> expected;
  for (int64_t b = 0; b < s.batch; ++b) {
    for (const int64_t row : rows_to_check(b, s.seqlen_q)) {
      for (int64_t h = 0; h < s.heads_q; ++h) {
        double expected_lse = 0;
        reference_row(problem, host_policy, b, h, row, scale, expected, expected_lse);
        ++result.rows;
        const Element* got = &o[((b * s.seqlen_q + row) * s.heads_q + h) * s.head_dim];
        for (int64_t c = 0; c < s.head_dim; ++c) {
          const double value = example::to_float(got[c]);
          if (!std::isfinite(value)) result.finite = false;
          const double error = std::abs(value - expected[c]);
          result.max_abs_error = std::max(result.max_abs_error, error);
          error_sq += error * error;
          reference_sq += expected[c] * expected[c];
        }
        // Every row sees at least its own token: the LSE is always finite.
        const double got_lse = lse[(b * s.heads_q + h) * s.seqlen_q + row];
        if (!std::isfinite(got_lse) || !std::isfinite(expected_lse)) {
          result.finite = false;
        } else {
          result.max_lse_error = std::max(result.max_lse_error, std::abs(got_lse - expected_lse));
        }
      }
    }
  }
  result.rel_l2_error = std::sqrt(error_sq / std::max(reference_sq, 1e-30));
  return example::report(result, DocumentConfig::kScalarType);
}

// K/V tiles the kernel visits per (batch, head), summed over the query tiles, out of all of them,
// and how many of the visited ones need the per-element mask: what key_range() and all_visible()
// buy.
template <class Policy>
void print_tiles(const char* name, const Policy& host_policy, int64_t seqlen) {
  const flashmma::SequenceLengths lengths = flashmma::sequence_lengths(seqlen, seqlen);
  const int64_t m_blocks = (seqlen + DocumentConfig::kBlockM - 1) / DocumentConfig::kBlockM;
  const int64_t n_blocks = (seqlen + DocumentConfig::kBlockN - 1) / DocumentConfig::kBlockN;
  int64_t visited = 0, masked = 0;
  for (int64_t m = 0; m < m_blocks; ++m) {
    const flashmma::IndexRange queries{
        m * DocumentConfig::kBlockM, std::min(seqlen, (m + 1) * DocumentConfig::kBlockM)};
    const flashmma::TileRange tiles =
        flashmma::key_tiles(host_policy, lengths, queries, DocumentConfig::kBlockN);
    visited += tiles.count;
    for (int64_t n = tiles.first; n < tiles.first + tiles.count; ++n) {
      masked += flashmma::tile_needs_mask(host_policy, lengths, queries,
                                          n * DocumentConfig::kBlockN, DocumentConfig::kBlockN);
    }
  }
  std::printf("  %-34s %4lld of %lld K/V tiles visited, %lld of them masked per element\n", name,
              static_cast<long long>(visited), static_cast<long long>(m_blocks * n_blocks),
              static_cast<long long>(masked));
}

}  // namespace

int main() {
  std::printf("DocumentConfig: %s, HeadDim %d, BlockM %d, BlockN %d, Warps %d, Stages %d\n",
              flashmma::ElementTraits<Element>::kName, DocumentConfig::kHeadDim,
              DocumentConfig::kBlockM, DocumentConfig::kBlockN, DocumentConfig::kWarps,
              DocumentConfig::kStages);
  if (!example::have_cuda_device()) return 1;

  std::vector<std::vector<int32_t>> segment_ids;
  for (const std::vector<int64_t>& lengths : kDocumentLengths) {
    segment_ids.push_back(example::segment_ids_of(lengths));
  }
  example::DocumentTables tables;
  if (!example::status_ok(example::build_document_tables(segment_ids, tables),
                          "example::build_document_tables")) {
    return 1;
  }

  // Grouped-query attention: 4 query heads share 2 K/V heads.
  example::Shape shape;
  shape.batch = tables.batch;
  shape.seqlen_q = tables.seqlen;
  shape.seqlen_k = tables.seqlen;
  shape.heads_q = 4;
  shape.heads_kv = 2;
  shape.head_dim = DocumentConfig::kHeadDim;
  std::printf("batch %lld x %lld tokens, heads %lld (kv %lld); documents:",
              static_cast<long long>(shape.batch), static_cast<long long>(shape.seqlen_q),
              static_cast<long long>(shape.heads_q), static_cast<long long>(shape.heads_kv));
  for (const std::vector<int64_t>& lengths : kDocumentLengths) {
    std::printf(" {");
    for (std::size_t d = 0; d < lengths.size(); ++d) {
      std::printf("%s%lld", d ? ", " : "", static_cast<long long>(lengths[d]));
    }
    std::printf("}");
  }
  std::printf("\n");

  example::Problem<Element> problem;
  if (!problem.init(shape, kSeed)) return 1;
  if (!example::status_ok(tables.check(problem.params()), "DocumentTables::check")) return 1;

  example::DeviceBuffer device_tables;
  const std::size_t table_bytes = tables.values.size() * sizeof(int32_t);
  if (!device_tables.allocate(table_bytes) ||
      !example::cuda_ok(cudaMemcpy(device_tables.get(), tables.values.data(), table_bytes,
                                   cudaMemcpyHostToDevice),
                        "copying the document tables")) {
    return 1;
  }
  const example::DocumentMask documents =
      tables.policy(static_cast<const int32_t*>(device_tables.get()));
  const example::DocumentMask host_documents = tables.policy(tables.values.data());

  // The tile hooks are not told the batch entry, so with two layouts they skip the tiles hidden
  // in both (document_mask.hpp); one layout alone is skipped exactly.
  example::DocumentTables first_entry;
  if (!example::status_ok(example::build_document_tables({segment_ids[0]}, first_entry),
                          "example::build_document_tables")) {
    return 1;
  }
  std::printf("tile skipping, per (batch, head):\n");
  print_tiles("documents, both layouts", host_documents, tables.seqlen);
  print_tiles("documents, first layout alone", first_entry.policy(first_entry.values.data()),
              tables.seqlen);
  print_tiles("causal documents, both layouts", example::causal(host_documents), tables.seqlen);

  const bool documents_pass = run_and_check("documents", problem, documents, host_documents);
  const bool causal_pass = run_and_check("causal within documents", problem,
                                         example::causal(documents),
                                         example::causal(host_documents));
  return documents_pass && causal_pass ? 0 : 1;
}
