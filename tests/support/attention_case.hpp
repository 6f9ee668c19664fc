// SPDX-License-Identifier: Apache-2.0
// One forward test case (shape, mask, layout, LSE, scale) and the matrix of cases every tested
// configuration runs. Plain C++: the matrix's coverage is itself checked by a CPU test.
#pragma once

#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <vector>

#include "flashmma/params.hpp"
#include "flashmma/problem_shape.hpp"

namespace flashmma {
namespace test {

// How Q, K, V and O are laid out in memory. All four tensors of a case share the layout.
//   kBSHD:        contiguous [batch, seq, heads, head_dim] (FlashAttention's layout).
//   kBHSD:        contiguous [batch, heads, seq, head_dim].
//   kPaddedBSHD:  [batch, seq, heads, head_dim + kHeadPadding]: every head row is followed by
//                 padding that the kernel must neither read (inputs hold NaN there) nor write
//                 (the output's padding must keep its poison).
enum class Layout : int { kBSHD, kBHSD, kPaddedBSHD };

inline constexpr int64_t kHeadPadding = 8;  // keeps every stride a multiple of 8 elements

inline const char* layout_name(Layout layout) {
  switch (layout) {
    case Layout::kBSHD: return "BSHD";
    case Layout::kBHSD: return "BHSD";
    case Layout::kPaddedBSHD: return "padded-BSHD";
  }
  return "?";
}

// Elements from the start of one head row to the start of the next along the innermost
// allocated dimension (head_dim plus padding).
inline int64_t row_pitch(Layout layout, int64_t head_dim) {
  return layout == Layout::kPaddedBSHD ? head_dim + kHeadPadding : head_dim;
}

inline TensorStrides layout_strides(Layout layout, int64_t seqlen, int64_t heads,
                                    int64_t head_dim) {
  const int64_t pitch = row_pitch(layout, head_dim);
  if (layout == Layout::kBHSD) return bhsd_strides(seqlen, heads, pitch);
  return bshd_strides(seqlen, heads, pitch);
}

// Elements to allocate for a [batch, seqlen, heads, head_dim] tensor in `layout`.
inline int64_t layout_elements(Layout layout, int64_t batch, int64_t seqlen, int64_t heads,
                               int64_t head_dim) {
  return batch * seqlen * heads * row_pitch(layout, head_dim);
}

// A problem shape (by default one query, one key, one head of dim 64) and how to run it.
struct AttentionCase : ProblemShape {
  AttentionCase() : AttentionCase(make_problem_shape(1, 1, 1, 1, 1, 64)) {}
  explicit AttentionCase(const ProblemShape& shape) : ProblemShape(shape) {}

  bool causal = false;
  Layout layout = Layout::kBSHD;
  bool with_lse = true;
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();  // NaN: 1 / sqrt(head_dim)

  std::string describe() const {
    std::ostringstream os;
    os << "batch=" << batch << " seqlen_q=" << seqlen_q << " seqlen_k=" << seqlen_k
       << " heads_q=" << heads_q << " heads_kv=" << heads_kv << " head_dim=" << head_dim
       << (causal ? " causal" : " full") << " layout=" << layout_name(layout)
       << (with_lse ? " lse" : " no-lse") << " scale=";
    if (softmax_scale == softmax_scale) {
      os << softmax_scale;
    } else {
      os << "default";
    }
    return os.str();
  }

  // A seed that depends only on the case, so that a failing case reproduces on its own.
  uint64_t seed() const {
    uint64_t hash = 0xcbf29ce484222325ull;  // FNV-1a
    for (char c : describe()) {
      hash ^= static_cast<unsigned char>(c);
      hash *= 0x100000001b3ull;
    }
    return hash;
  }
};

// One case of the given shape, with the remaining fields at their defaults (LSE written, default
// softmax scale).
inline AttentionCase make_case(int64_t batch, int64_t seqlen_q, int64_t seqlen_k, int64_t heads_q,
                               int64_t heads_kv, int64_t head_dim, bool causal, Layout layout) {
  AttentionCase c(make_problem_shape(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim));
  c.causal = causal;
  c.layout = layout;
  return c;
}

namespace detail {

// One row of the case tables below; the generators add the head dim.
struct CaseShape {
  int64_t batch;
  int64_t seqlen_q;
  int64_t seqlen_k;
  int64_t heads_kv;
  int64_t group;  // heads_q / heads_kv: 1 (multi-head), 4 and 8 (grouped-query)
  bool causal;
  Layout layout;
  bool with_lse;
  float softmax_scale = std::numeric_limits<float>::quiet_NaN();  // NaN: the default
};

inline AttentionCase make_case(const CaseShape& shape, int64_t head_dim) {
  AttentionCase c = test::make_case(shape.batch, shape.seqlen_q, shape.seqlen_k,
                                    shape.heads_kv * shape.group, shape.heads_kv, head_dim,
                                    shape.causal, shape.layout);
  c.with_lse = shape.with_lse;
  c.softmax_scale = shape.softmax_scale;
  return c;
}

}  // namespace detail

// The cases every configuration runs at its own head dim (34 cases).
//
// Seqlens {1, 7, 63, 64, 65, 127, 1000, 4097} hit one row, odd tails, one tile minus/exactly/plus
// one, and long rows. The full cross product with GQA ratios, masks and layouts would be
// thousands of cases, most of them slow; instead the table is chosen so that
//   - every seqlen appears square (seqlen_q == seqlen_k), as seqlen_q and as seqlen_k;
//   - non-square pairs go both ways: seqlen_q < seqlen_k (causal rows see a prefix longer than
//     their index) and seqlen_q > seqlen_k (causal rows i < seqlen_q - seqlen_k see no key: O = 0,
//     LSE = -inf);
//   - every GQA ratio {1, 4, 8} appears causal and non-causal, and every layout causal and not;
//   - 4097 meets short partners (1, 7, 63, 65), 1000 and itself; where it meets a long partner,
//     heads stay at most 4 so that the reference (one GPU thread per row, in fp64) stays fast;
//   - two cases skip the LSE (nullptr path), two use an explicit scale: 0.5, sharper than the
//     default, and 0.03, flatter.
// The CPU test [case_matrix] checks these properties, so an edit cannot drop one silently.
inline std::vector<AttentionCase> forward_case_matrix(int64_t head_dim) {
  using detail::CaseShape;
  constexpr Layout kBSHD = Layout::kBSHD;
  constexpr Layout kBHSD = Layout::kBHSD;
  constexpr Layout kPadded = Layout::kPaddedBSHD;
  static const CaseShape kShapes[] = {
      // batch, seqlen_q, seqlen_k, heads_kv, group, causal, layout, lse[, scale]
      // Square.
      {2, 1, 1, 2, 1, false, kBSHD, true},
      {2, 1, 1, 1, 4, true, kBHSD, true},
      {2, 7, 7, 1, 8, true, kPadded, true},
      {3, 7, 7, 2, 1, false, kBHSD, true},
      {1, 63, 63, 2, 4, false, kBSHD, true},
      {2, 63, 63, 1, 1, true, kPadded, true},
      {2, 64, 64, 1, 8, false, kBHSD, true},
      {1, 64, 64, 2, 4, true, kBSHD, true},
      {2, 65, 65, 2, 1, true, kBHSD, true, 0.5f},
      {1, 65, 65, 1, 8, false, kPadded, true},
      {1, 127, 127, 1, 4, true, kBHSD, true},
      {2, 127, 127, 2, 1, false, kBSHD, false},
      {1, 1000, 1000, 1, 8, true, kBSHD, true},
      {1, 1000, 1000, 2, 1, false, kBHSD, true},
      {1, 4097, 4097, 1, 1, true, kBSHD, true},
      {1, 4097, 4097, 1, 4, false, kBHSD, true},
      // seqlen_q < seqlen_k.
      {2, 1, 64, 1, 4, true, kBSHD, true},
      {1, 1, 4097, 1, 8, true, kPadded, true},
      {2, 7, 65, 2, 1, true, kBHSD, true},
      {1, 7, 1000, 1, 4, false, kBSHD, true},
      {1, 63, 127, 1, 8, false, kBHSD, true},
      {1, 63, 1000, 2, 1, true, kPadded, true, 0.03f},
      {1, 65, 4097, 1, 1, false, kBSHD, true},
      {1, 1000, 4097, 1, 4, true, kBHSD, true},
      // seqlen_q > seqlen_k: under the causal mask the first seqlen_q - seqlen_k rows see nothing.
      {2, 64, 1, 2, 4, true, kBHSD, true},
      {1, 65, 7, 1, 8, true, kBSHD, true},
      {2, 127, 63, 1, 1, true, kPadded, true},
      {1, 127, 64, 2, 4, false, kBSHD, false},
      {1, 1000, 65, 1, 1, true, kBHSD, true},
      {1, 1000, 127, 1, 8, false, kPadded, true},
      {1, 64, 7, 1, 1, false, kBSHD, true},
      {1, 4097, 7, 1, 8, true, kBHSD, true},
      {1, 4097, 1, 2, 1, false, kPadded, true},
      {1, 4097, 63, 1, 4, true, kPadded, true},
  };
  std::vector<AttentionCase> cases;
  for (const CaseShape& shape : kShapes) cases.push_back(detail::make_case(shape, head_dim));
  return cases;
}

// Head dims that are not a kernel head dim but run on a kernel built for `kernel_head_dim`:
// 8 and 24 below it (within the 32 that separate the library's default head dims).
inline std::vector<int64_t> routed_head_dims(int64_t kernel_head_dim) {
  std::vector<int64_t> dims;
  for (int64_t below : {int64_t{8}, int64_t{24}}) {
    if (kernel_head_dim - below >= 8) dims.push_back(kernel_head_dim - below);
  }
  return dims;
}

// A few short cases for a head dim smaller than the kernel's: the extra columns must be
// zero-filled on load (the padded layout puts NaN there) and never stored.
inline std::vector<AttentionCase> routed_head_dim_cases(int64_t head_dim) {
  using detail::CaseShape;
  static const CaseShape kShapes[] = {
      {2, 65, 127, 1, 4, true, Layout::kPaddedBSHD, true},
      {1, 127, 63, 2, 1, true, Layout::kBHSD, true},
      {2, 64, 200, 1, 8, false, Layout::kBSHD, true},
  };
  std::vector<AttentionCase> cases;
  for (const CaseShape& shape : kShapes) cases.push_back(detail::make_case(shape, head_dim));
  return cases;
}

}  // namespace test
}  // namespace flashmma
