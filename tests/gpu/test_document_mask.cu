// SPDX-License-Identifier: Apache-2.0
// The document mask of examples/document_mask.hpp, a user's score policy for packed sequences,
// through forward<Config, Policy>: one document, many tiny ones, boundaries on and off the tiles,
// a layout per batch entry and one shared by the batch, GQA and MQA, fp16 and bf16, with and
// without causal attention inside the documents. Each run is checked against a host reference
// that applies the same policy's visible() to every pair, and against the same mask run with the
// contract's default tile hooks (every K/V tile visited and masked element by element), which
// must agree with it to within an fp32 rounding per skipped tile. The tile hooks themselves are
// checked against visible() on the host: safe for every layout, exact where one layout serves
// the whole batch.
#include "support/catch.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <string>
#include <tuple>
#include <type_traits>
#include <utility>
#include <vector>

#include "document_mask.hpp"
#include "flashmma/flashmma.cuh"
#include "support/attention_case.hpp"
#include "support/forward_case.cuh"
#include "support/gpu_helpers.cuh"

namespace {

using example::CausalDocumentMask;
using example::DocumentMask;
using example::DocumentTables;
using flashmma::IndexRange;
using flashmma::ScoreCoord;
using flashmma::SequenceLengths;
using flashmma::test::AttentionCase;
using flashmma::test::CaseTensors;
using flashmma::test::DeviceBuffer;
using flashmma::test::Layout;

static_assert(flashmma::check_score_policy<DocumentMask>(), "");
static_assert(flashmma::check_score_policy<CausalDocumentMask>(), "");
static_assert(std::is_trivially_copyable<DocumentMask>::value, "");

// The same mask with the contract's defaults for the tile hooks: every K/V tile is visited and
// every tile is masked element by element.
template <class Policy>
struct EveryTile : flashmma::ScorePolicyBase {
  static constexpr bool kMasks = true;
  Policy policy;

  FLASHMMA_HOST_DEVICE bool visible(const ScoreCoord& c, const SequenceLengths& lengths) const {
    return flashmma::policy_visible(policy, c, lengths);
  }
};

// Tiles of every schedule: split (Stages 1), overlapped (3); 128, 64 and 16 query rows against
// 64, 32 and 16 keys, so that one boundary falls on some tiles and inside others; both element
// types.
using DocumentConfigs = std::tuple<
    flashmma::DefaultConfigT<__half, 64>,
    flashmma::TileConfig<__nv_bfloat16, 128, 64, 32, 4, 3, flashmma::SmemLayout::kXorSwizzle>,
    flashmma::TileConfig<__half, 32, 16, 16, 1, 1, flashmma::SmemLayout::kPaddedRows>>;

// Documents of 1, 2, ..., 7, 1, 2, ... tokens from `first_length` on, the last one cut to end
// the sequence at `seqlen`.
std::vector<int64_t> tiny_documents(int64_t seqlen, int64_t first_length) {
  std::vector<int64_t> lengths;
  int64_t length = first_length, total = 0;
  while (total < seqlen) {
    lengths.push_back(std::min(length, seqlen - total));
    total += lengths.back();
    length = length % 7 + 1;
  }
  return lengths;
}

struct DocumentCase {
  std::string name;
  std::vector<std::vector<int64_t>> documents;  // lengths per batch entry; one: shared
  int64_t batch;
  int64_t heads_q;
  int64_t heads_kv;
  Layout layout;

  DocumentTables tables() const {
    std::vector<std::vector<int32_t>> ids;
    for (const std::vector<int64_t>& lengths : documents) {
      ids.push_back(example::segment_ids_of(lengths));
    }
    DocumentTables tables;
    const flashmma::Status status = example::build_document_tables(ids, tables);
    INFO(status.message());
    REQUIRE(status.ok());
    return tables;
  }

  AttentionCase attention_case(int64_t head_dim) const {
    int64_t seqlen = 0;
    for (const int64_t length : documents[0]) seqlen += length;
    return flashmma::test::make_case(batch, seqlen, seqlen, heads_q, heads_kv, head_dim,
                                     /*causal=*/false, layout);
  }
};

// 128 is a multiple of every tile size above; 127 and 1 are not.
std::vector<DocumentCase> document_cases() {
  return {
      {"one document", {{333}}, 1, 2, 2, Layout::kBSHD},
      {"tiny documents of 1 to 7 tokens", {tiny_documents(200, 1)}, 1, 4, 1, Layout::kBHSD},
      {"boundaries on the tiles", {{128, 256, 128, 128}}, 1, 4, 2, Layout::kBSHD},
      {"boundaries off the tiles", {{127, 258, 1, 190, 65}}, 1, 2, 1, Layout::kPaddedBSHD},
      {"a layout per batch entry",
       {{300, 100, 13}, {413}, tiny_documents(413, 3)},
       3,
       4,
       2,
       Layout::kBSHD},
      {"one layout shared by the batch", {{64, 200, 149}}, 2, 2, 2, Layout::kBHSD},
  };
}

// The reference of every row on the host, in the form compare_with_reference() reads: the
// library's definition (support/reference.hpp), in fp64 and with P and O rounded to Element, over
// the keys `host_policy` shows the row. Every row sees at least its own token.
template <class Element, class Policy>
flashmma::test::ReferenceRows policy_reference(const CaseTensors<Element>& t,
                                               const Policy& host_policy) {
  using flashmma::test::element_offset;
  using flashmma::test::to_double;
  const flashmma::ForwardParams& p = t.params;
  const std::vector<Element> q = t.q.to_host();
  const std::vector<Element> k = t.k.to_host();
  const std::vector<Element> v = t.v.to_host();
  const double scale = flashmma::test::resolved_softmax_scale(p.softmax_scale, p.head_dim);
  const SequenceLengths lengths = flashmma::sequence_lengths(p.seqlen_q, p.seqlen_k);
  const int64_t d = p.head_dim;
  const int64_t group = p.heads_q / p.heads_kv;

  flashmma::test::ReferenceRows ref;
  ref.batch_begin = 0;
  ref.batch_count = p.batch;
  ref.batch = p.batch;
  ref.heads_q = p.heads_q;
  ref.seqlen_q = p.seqlen_q;
  ref.head_dim = d;
  const int64_t rows = p.batch * p.heads_q * p.seqlen_q;
  ref.out64.assign(static_cast<std::size_t>(rows * d), 0.0);
  ref.out_low.assign(static_cast<std::size_t>(rows * d), 0.0);
  ref.lse64.assign(static_cast<std::size_t>(rows), -std::numeric_limits<double>::infinity());

  std::vector<int64_t> keys;
  std::vector<double> scores, out64(static_cast<std::size_t>(d)), out_low(out64);
  for (int64_t b = 0; b < p.batch; ++b) {
    for (int64_t h = 0; h < p.heads_q; ++h) {
      for (int64_t i = 0; i < p.seqlen_q; ++i) {
        const int64_t row = (b * p.heads_q + h) * p.seqlen_q + i;
        const Element* q_row = &q[element_offset(p.q_strides, b, i, h)];
        keys.clear();
        scores.clear();
        double row_max = -std::numeric_limits<double>::infinity();
        for (int64_t j = 0; j < p.seqlen_k; ++j) {
          if (!flashmma::policy_visible(host_policy, flashmma::score_coord(b, h, i, j), lengths)) {
            continue;
          }
          const Element* k_row = &k[element_offset(p.k_strides, b, j, h / group)];
          double dot = 0;
          for (int64_t x = 0; x < d; ++x) dot += to_double(q_row[x]) * to_double(k_row[x]);
          keys.push_back(j);
          scores.push_back(scale * dot);
          row_max = std::fmax(row_max, scores.back());
        }
        if (keys.empty()) continue;  // O = 0, LSE = -inf
        double sum = 0;
        std::fill(out64.begin(), out64.end(), 0.0);
        std::fill(out_low.begin(), out_low.end(), 0.0);
        for (std::size_t n = 0; n < keys.size(); ++n) {
          const double weight = std::exp(scores[n] - row_max);
          const double low_weight = flashmma::test::round_to<Element>(weight);
          sum += weight;
          const Element* v_row = &v[element_offset(p.v_strides, b, keys[n], h / group)];
          for (int64_t x = 0; x < d; ++x) {
            out64[x] += weight * to_double(v_row[x]);
            out_low[x] += low_weight * to_double(v_row[x]);
          }
        }
        for (int64_t x = 0; x < d; ++x) {
          ref.out64[static_cast<std::size_t>(row * d + x)] = out64[x] / sum;
          ref.out_low[static_cast<std::size_t>(row * d + x)] =
              flashmma::test::round_to<Element>(out_low[x] / sum);
        }
        ref.lse64[static_cast<std::size_t>(row)] = row_max + std::log(sum);
      }
    }
  }
  return ref;
}

// |x - y| in units in the last place of the larger of the two, in a format of `mantissa_bits`
// explicit bits (fp16 10, bf16 7, fp32 23); from 2^-14 down, in the ulp of 2^-14, which is far
// below any output here. NaN in both (padding and guard, checked elsewhere) is 0 apart; NaN in
// one, or infinities that differ, are infinitely far.
double ulps_apart(double x, double y, int mantissa_bits) {
  if (std::isnan(x) || std::isnan(y)) {
    return std::isnan(x) && std::isnan(y) ? 0.0 : std::numeric_limits<double>::infinity();
  }
  if (x == y) return 0.0;  // infinities included
  const double magnitude = std::fmax(std::fmax(std::fabs(x), std::fabs(y)), std::ldexp(1.0, -14));
  return std::fabs(x - y) / std::ldexp(1.0, std::ilogb(magnitude) - mantissa_bits);
}

template <class Element>
constexpr int kMantissaBits = std::is_same<Element, __half>::value ? 10 : 7;

// How far apart two runs of one case are, elementwise, in ulps of the larger value.
struct Agreement {
  double o_ulps = 0;
  double lse_ulps = 0;
};

template <class Element>
Agreement compare_runs(const CaseTensors<Element>& a, const CaseTensors<Element>& b) {
  using flashmma::test::to_double;
  Agreement agreement;
  const std::vector<Element> o_a = a.o.to_host(), o_b = b.o.to_host();
  for (std::size_t i = 0; i < o_a.size(); ++i) {
    const double x = to_double(o_a[i]), y = to_double(o_b[i]);
    agreement.o_ulps = std::fmax(agreement.o_ulps, ulps_apart(x, y, kMantissaBits<Element>));
  }
  const int64_t rows = a.params.lse_elements();
  const std::vector<float> lse_a = a.lse.to_host(0, rows), lse_b = b.lse.to_host(0, rows);
  for (std::size_t i = 0; i < lse_a.size(); ++i) {
    agreement.lse_ulps = std::fmax(agreement.lse_ulps, ulps_apart(lse_a[i], lse_b[i], 23));
  }
  return agreement;
}

// The runs are not bit for bit alike: a hidden tile still runs the online softmax, whose
// correction exp2(m * scale - round(m * scale)) for a row maximum m that does not move is not 1
// but exp2 of the product's rounding error once nvcc contracts it into an FMA. Every tile the
// skipping run leaves out thus nudges the other run's row sum by about an fp32 ulp (measured on
// an H200: O within 1 ulp, the LSE within 22 ulps where 16-key tiles add up to 40 hidden tiles
// a row). A visible tile skipped by mistake moves the LSE by its keys' share of the row's
// probability: thousands of ulps.
inline constexpr double kMaxOUlps = 2;
inline constexpr double kMaxLseUlps = 64;

// Runs forward<Config>(params, policy) on the case, checks O and the LSE against the host
// reference of `host_policy` (the same policy over the host copy of the tables), then runs
// EveryTile<Policy> on the same inputs. A skipped tile holds only hidden pairs, whose
// probabilities are 0 whether the kernel visits the tile or not, and a tile that skips the
// per-element mask holds only visible ones: the two runs must agree to the rounding above.
template <class Config, class Policy>
void check_document_policy(const AttentionCase& c, const Policy& policy,
                           const Policy& host_policy) {
  using Element = typename Config::element_type;
  INFO("case: " << c.describe());
  CaseTensors<Element> t = flashmma::test::make_case_tensors<Element>(c);
  const flashmma::Status status = flashmma::forward<Config>(t.params, policy);
  INFO("forward returned: " << status.message());
  REQUIRE(status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());

  const flashmma::test::AccuracyStats stats = flashmma::test::compare_with_reference(
      t.o, t.params.o_strides, &t.lse, policy_reference(t, host_policy));
  flashmma::test::require_accurate<Element>(stats);
  const std::vector<float> lse = t.lse.to_host(0, t.params.lse_elements());
  int64_t empty_rows = 0;  // every row sees its own token
  for (const float x : lse) empty_rows += std::isinf(x) ? 1 : 0;
  CHECK(empty_rows == 0);

  CaseTensors<Element> every = flashmma::test::make_case_tensors<Element>(c);
  const flashmma::Status every_status =
      flashmma::forward<Config>(every.params, EveryTile<Policy>{{}, policy});
  INFO("forward (every tile) returned: " << every_status.message());
  REQUIRE(every_status.ok());
  FLASHMMA_CUDA_CHECK(cudaDeviceSynchronize());
  const Agreement agreement = compare_runs(t, every);
  INFO("every tile: O within " << agreement.o_ulps << " ulps, LSE within " << agreement.lse_ulps
                               << " fp32 ulps of the run that skips");
  CHECK(agreement.o_ulps <= kMaxOUlps);
  CHECK(agreement.lse_ulps <= kMaxLseUlps);
}

// Over every query tile x key tile of a block_m x block_n grid: a tile that holds a visible pair
// of some batch entry lies in key_tiles() of its query tile and its query tile in query_tiles()
// of its key tile, and a tile that skips the per-element mask holds only visible pairs, in every
// batch entry. With `exact`, the converse too: the tiles visited are those with a visible pair,
// and every tile whose pairs are all visible skips the mask.
template <class Policy>
void check_tile_hooks(const Policy& policy, int64_t batch, int64_t seqlen, int64_t block_m,
                      int64_t block_n, bool exact) {
  INFO("tiles " << block_m << " x " << block_n << (exact ? ", exact" : ", safe"));
  const SequenceLengths lengths = flashmma::sequence_lengths(seqlen, seqlen);
  const int64_t m_blocks = (seqlen + block_m - 1) / block_m;
  const int64_t n_blocks = (seqlen + block_n - 1) / block_n;
  int64_t missed = 0, extra = 0, wrongly_unmasked = 0, wrongly_masked = 0, visited = 0;
  for (int64_t m = 0; m < m_blocks; ++m) {
    const IndexRange queries{m * block_m, std::min(seqlen, (m + 1) * block_m)};
    const flashmma::TileRange key_tiles = flashmma::key_tiles(policy, lengths, queries, block_n);
    visited += key_tiles.count;
    for (int64_t n = 0; n < n_blocks; ++n) {
      const IndexRange keys{n * block_n, std::min(seqlen, (n + 1) * block_n)};
      bool some = false, every = keys.end - keys.begin == block_n;  // a partial tile is masked
      for (int64_t b = 0; b < batch; ++b) {
        for (int64_t i = queries.begin; i < queries.end; ++i) {
          for (int64_t j = keys.begin; j < keys.end; ++j) {
            const bool visible =
                flashmma::policy_visible(policy, flashmma::score_coord(b, 0, i, j), lengths);
            some = some || visible;
            every = every && visible;
          }
        }
      }
      const flashmma::TileRange query_tiles =
          flashmma::query_tiles(policy, lengths, keys, block_m);
      const bool in_key_tiles = n >= key_tiles.first && n < key_tiles.first + key_tiles.count;
      const bool in_query_tiles =
          m >= query_tiles.first && m < query_tiles.first + query_tiles.count;
      const bool unmasked = !flashmma::tile_needs_mask(policy, lengths, queries, n * block_n,
                                                       block_n);
      if (some && !(in_key_tiles && in_query_tiles)) ++missed;
      if (unmasked && !every) ++wrongly_unmasked;
      if (exact && !some && (in_key_tiles || in_query_tiles)) ++extra;
      if (exact && every && !unmasked) ++wrongly_masked;
    }
  }
  INFO("visited " << visited << " of " << m_blocks * n_blocks << " key tiles");
  CHECK(missed == 0);
  CHECK(wrongly_unmasked == 0);
  CHECK(extra == 0);
  CHECK(wrongly_masked == 0);
}

}  // namespace

TEMPLATE_LIST_TEST_CASE("document mask: every layout against a host reference, and unchanged "
                        "by tile skipping",
                        "[gpu][forward][policy][document]", DocumentConfigs) {
  for (const DocumentCase& document_case : document_cases()) {
    DYNAMIC_SECTION(document_case.name) {
      const DocumentTables tables = document_case.tables();
      DeviceBuffer<int32_t> device_values(static_cast<int64_t>(tables.values.size()));
      device_values.copy_from_host(tables.values);
      const DocumentMask documents = tables.policy(device_values.get());
      const DocumentMask host_documents = tables.policy(tables.values.data());
      const AttentionCase c = document_case.attention_case(TestType::kHeadDim);
      const flashmma::Status fits = tables.check(flashmma::make_problem_shape(
          c.batch, c.seqlen_q, c.seqlen_k, c.heads_q, c.heads_kv, c.head_dim));
      INFO(fits.message());
      REQUIRE(fits.ok());
      {
        INFO("documents");
        check_document_policy<TestType>(c, documents, host_documents);
      }
      {
        INFO("causal within documents");
        check_document_policy<TestType>(c, example::causal(documents),
                                        example::causal(host_documents));
      }
    }
  }
}

TEST_CASE("document mask: the tile hooks agree with visible()", "[gpu][policy][document]") {
  for (const DocumentCase& document_case : document_cases()) {
    INFO("layout: " << document_case.name);
    const DocumentTables tables = document_case.tables();
    const DocumentMask documents = tables.policy(tables.values.data());
    // The hooks are not told the batch entry: exact only where one layout serves every entry.
    const bool exact = tables.batch == 1;
    const std::vector<std::pair<int64_t, int64_t>> tiles = {
        {128, 64}, {64, 32}, {16, 16}, {64, 128}};
    for (const std::pair<int64_t, int64_t>& tile : tiles) {
      check_tile_hooks(documents, document_case.batch, tables.seqlen, tile.first, tile.second,
                       exact);
      check_tile_hooks(example::causal(documents), document_case.batch, tables.seqlen,
                       tile.first, tile.second, exact);
    }
  }
}

TEST_CASE("document tables: begins, ends, their union and intersection over the batch",
          "[gpu][policy][document]") {
  DocumentTables tables;
  REQUIRE(example::build_document_tables({{0, 0, 1, 1}, {3, 5, 5, 5}}, tables).ok());
  CHECK(tables.batch == 2);
  CHECK(tables.seqlen == 4);
  const std::vector<int32_t> expected = {
      0, 0, 2, 2, 0, 1, 1, 1,  // document_begin of entries 0 and 1
      2, 2, 4, 4, 1, 4, 4, 4,  // document_end
      0, 0, 1, 1,              // any_begin: the smaller begin
      2, 4, 4, 4,              // any_end: the larger end
      0, 1, 2, 2,              // every_begin: the larger begin
      1, 2, 4, 4};             // every_end: the smaller end
  CHECK(tables.values == expected);
  const DocumentMask mask = tables.policy(tables.values.data());
  CHECK(mask.batch_stride == 4);
  const SequenceLengths lengths{4, 4};
  CHECK(mask.visible(ScoreCoord{0, 0, 1, 0}, lengths));
  CHECK_FALSE(mask.visible(ScoreCoord{1, 0, 1, 0}, lengths));
  CHECK(mask.visible(ScoreCoord{1, 0, 1, 3}, lengths));
  CHECK_FALSE(mask.visible(ScoreCoord{0, 0, 1, 3}, lengths));

  // One layout serves a batch of any size.
  REQUIRE(example::build_document_tables({{7, 7, 7}}, tables).ok());
  CHECK(tables.policy(tables.values.data()).batch_stride == 0);
  CHECK(tables.check(flashmma::make_problem_shape(5, 3, 3, 1, 1, 64)).ok());
}

TEST_CASE("document tables: refused layouts and shapes", "[gpu][policy][document]") {
  DocumentTables tables;
  const flashmma::Status decreasing = example::build_document_tables({{0, 1, 0}}, tables);
  CHECK(decreasing.code() == flashmma::ErrorCode::kInvalidArgument);
  CHECK_THAT(decreasing.message(), Catch::Contains("decrease"));
  const flashmma::Status decreasing_later =
      example::build_document_tables({{0, 1, 1}, {0, 2, 1}}, tables);
  CHECK_THAT(decreasing_later.message(), Catch::Contains("batch entry 1 at token 2"));
  CHECK(example::build_document_tables({{0, 1}, {0, 1, 2}}, tables).code() ==
        flashmma::ErrorCode::kInvalidArgument);
  CHECK(example::build_document_tables({}, tables).code() ==
        flashmma::ErrorCode::kInvalidArgument);
  CHECK(example::build_document_tables({{}}, tables).code() ==
        flashmma::ErrorCode::kInvalidArgument);

  REQUIRE(example::build_document_tables({{0, 0, 1}, {0, 1, 1}}, tables).ok());
  CHECK(tables.check(flashmma::make_problem_shape(2, 3, 3, 1, 1, 64)).ok());
  CHECK_FALSE(tables.check(flashmma::make_problem_shape(3, 3, 3, 1, 1, 64)).ok());
  CHECK_FALSE(tables.check(flashmma::make_problem_shape(2, 3, 4, 1, 1, 64)).ok());
  CHECK_FALSE(tables.check(flashmma::make_problem_shape(2, 4, 4, 1, 1, 64)).ok());
}
