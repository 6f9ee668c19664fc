// SPDX-License-Identifier: Apache-2.0
// The checks every tensor argument of a call takes, forward or backward: a device pointer,
// cp.async's alignment, and strides that describe the tensor the call reads or writes. Plain
// C++: the CPU tests exercise every message.
//
// What the strides must say (docs/api.md, "Strides"):
//   - a stride matters only along a dimension longer than 1 (PyTorch gives size-1 dimensions
//     any stride), and every stride that matters is a multiple of 8 elements (16 bytes);
//   - an input (Q, K, V, dO, the new keys and values) may have a zero stride along some of its
//     dimensions: a broadcast, as PyTorch's expand() gives. Zero along every dimension that
//     matters is refused as unset: TensorStrides defaults to {0, 0, 0}, and a call that forgot
//     q_strides would read one row for every batch entry, head and query;
//   - an output (O, dQ, dK, dV, and K and V when a KV append writes them) must give every
//     (batch entry, head, row) a place of its own: no zero stride along a dimension longer than
//     1, and no two rows that overlap. Blocks that wrote one place would race.
#pragma once

#include <algorithm>
#include <array>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>

#include "flashmma/params.hpp"
#include "flashmma/status.hpp"

namespace flashmma {

inline constexpr std::size_t kCpAsyncAlignment = 16;  // bytes; cp.async.cg moves 16 at a time
inline constexpr std::size_t kElementBytes = 2;       // fp16 and bf16

namespace detail {

inline Status invalid(const std::string& message) {
  return Status::error(ErrorCode::kInvalidArgument, "flashmma: " + message);
}

// Whether the call reads a tensor or writes it.
enum class TensorAccess : int { kRead, kWritten };

// One tensor argument as the checks see it: its name in params (its strides are
// `<name>_strides`), the extents its strides step over, and the size names a message shows.
struct TensorArgument {
  const char* name;
  const void* data;
  const TensorStrides& strides;
  int64_t batch;         // batch entries (1 for packed sequences; pages for a paged pool)
  int64_t rows;          // rows of each batch entry
  int64_t heads;         // heads of each row
  int64_t row_elements;  // contiguous elements of one (batch entry, row, head): the head dim
  TensorAccess access;
  // How the sizes read in a message: "seqlen_q" and "heads_q" for Q, say.
  const char* rows_name;
  const char* heads_name;
  // "batch" or "num_pages"; nullptr for packed sequences, [rows, heads, head_dim] with no batch
  // dimension (varlen's layout, whose batch stride is 0).
  const char* batch_name = "batch";
  // The strides' field when it is not `<name>_strides` (d_o's are do_strides).
  const char* strides_field = nullptr;
};

inline std::string strides_name(const TensorArgument& t) {
  return t.strides_field != nullptr ? t.strides_field : std::string(t.name) + "_strides";
}

inline std::string tensor_shape(const TensorArgument& t) {
  const std::string batch = t.batch_name == nullptr ? "" : std::string(t.batch_name) + ", ";
  return "[" + batch + t.rows_name + ", " + t.heads_name + ", head_dim]";
}

// The strides of the contiguous tensor of that shape, as the user would write them.
inline std::string strides_hint(const TensorArgument& t) {
  const std::string strides = strides_name(t) + " = ";
  const std::string tensor = " for a contiguous " + tensor_shape(t) + " tensor";
  if (t.batch_name == nullptr) {
    return strides + "{0, head_dim, " + t.heads_name + " * head_dim}" + tensor;
  }
  return strides + "flashmma::bshd_strides(" + t.rows_name + ", " + t.heads_name +
         ", head_dim)" + tensor;
}

struct StridedDimension {
  const char* field;    // the TensorStrides member
  const char* entries;  // what it steps over, for messages
  int64_t stride;
  int64_t extent;
};
using StridedDimensions = std::array<StridedDimension, 3>;

// Spans of elements are counted up to 2^60: no tensor in memory spans more, and two such spans
// still add up without overflow.
inline constexpr int64_t kSpanLimit = int64_t{1} << 60;

// |stride| * count, saturated at kSpanLimit.
inline int64_t saturated_span(int64_t stride, int64_t count) {
  if (stride == std::numeric_limits<int64_t>::min()) return kSpanLimit;
  const int64_t magnitude = stride < 0 ? -stride : stride;
  if (count != 0 && magnitude > kSpanLimit / count) return kSpanLimit;
  return magnitude * count;
}

// An output's layout: zero strides, then overlapping rows. The overlap rule is the one that
// holds for every layout people build by slicing and permuting a contiguous tensor: taken by
// size, each stride must step past everything the smaller ones span (the row's elements first).
// An interleaved layout that never overlaps but breaks the rule is refused too; the message says
// which strides collide.
inline Status check_output_layout(const TensorArgument& t, StridedDimensions dims) {
  for (const StridedDimension& dim : dims) {
    if (dim.extent > 1 && dim.stride == 0) {
      std::ostringstream os;
      os << strides_name(t) << "." << dim.field << " is 0, but " << t.name << " is written: its "
         << dim.extent << " " << dim.entries << " would all land on the same elements (a race); "
         << "give each its own place, e.g. " << strides_hint(t);
      return invalid(os.str());
    }
  }
  std::sort(dims.begin(), dims.end(), [](const StridedDimension& a, const StridedDimension& b) {
    return saturated_span(a.stride, 1) < saturated_span(b.stride, 1);
  });
  int64_t span = t.row_elements;  // elements the dimensions taken so far cover
  std::string spanned = "head_dim";
  for (const StridedDimension& dim : dims) {
    if (dim.extent <= 1) continue;
    if (saturated_span(dim.stride, 1) < span) {
      std::ostringstream os;
      os << strides_name(t) << "." << dim.field << " = " << dim.stride << " is shorter than the "
         << span << " elements that the smaller strides already span (" << spanned << "), so "
         << t.name
         << "'s rows overlap and blocks would write over each other; e.g. " << strides_hint(t);
      return invalid(os.str());
    }
    span = std::min(saturated_span(dim.stride, dim.extent - 1) + span, kSpanLimit);
    spanned = spanned + ", " + dim.field;
  }
  return Status::success();
}

// Pointer, alignment and strides of one tensor argument.
inline Status check_tensor(const TensorArgument& t) {
  if (t.data == nullptr) {
    return invalid(std::string(t.name) + " is null: expected a device pointer to a " +
                   tensor_shape(t) + " tensor");
  }
  if (reinterpret_cast<std::uintptr_t>(t.data) % kCpAsyncAlignment != 0) {
    std::ostringstream os;
    os << t.name << " must be 16-byte aligned (cp.async moves 16 bytes at a time); got address "
       << t.data;
    return invalid(os.str());
  }
  const StridedDimensions dims = {{{"batch", "batch entries", t.strides.batch, t.batch},
                                   {"head", "heads", t.strides.head, t.heads},
                                   {"row", "rows", t.strides.row, t.rows}}};
  constexpr int64_t kStrideMultiple = kCpAsyncAlignment / kElementBytes;
  bool any_dimension = false;  // one that is longer than 1
  bool any_nonzero = false;    // ... with a stride that is not 0
  for (const StridedDimension& dim : dims) {
    if (dim.extent <= 1) continue;
    any_dimension = true;
    any_nonzero = any_nonzero || dim.stride != 0;
    if (dim.stride % kStrideMultiple != 0) {
      std::ostringstream os;
      os << strides_name(t) << "." << dim.field << " must be a multiple of 8 elements (16 bytes, "
         << "for cp.async); got " << dim.stride;
      return invalid(os.str());
    }
  }
  if (any_dimension && !any_nonzero) {
    return invalid(strides_name(t) + " is unset (0 along every dimension longer "
                   "than 1, so every batch entry, head and row would be the same row): set " +
                   strides_hint(t));
  }
  if (t.access == TensorAccess::kWritten) return check_output_layout(t, dims);
  return Status::success();
}

}  // namespace detail
}  // namespace flashmma
