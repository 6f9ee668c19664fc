// SPDX-License-Identifier: Apache-2.0
// Argument checking for the forward pass. Plain C++: the CPU tests exercise every message.
// forward() calls validate() before it touches the device; on error nothing is launched and
// nothing is written.
#pragma once

#include <array>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <limits>
#include <sstream>
#include <string>
#include <tuple>

#include "flashmma/attention/dropout.hpp"
#include "flashmma/attention/split_kv.hpp"
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/traits/default_configs.hpp"
#include "flashmma/traits/element.hpp"
#include "flashmma/traits/sm90_tile_config.hpp"
#include "flashmma/traits/tile_config.hpp"
#include "flashmma/validate_tensor.hpp"

namespace flashmma {

// What a kernel configuration requires of the call (filled from a TileConfig by forward()).
struct KernelRequirements {
  ScalarType dtype = ScalarType::kFloat16;
  int head_dim = 0;             // the kernel's compile-time head dim
  int block_m = 0;              // query rows per block, for the grid
  std::size_t smem_bytes = 0;   // dynamic shared memory per block
  int min_compute_capability = 80;
  bool variable_lengths = true;  // runs cu_seqlens_q, cu_seqlens_k and seqused_k
  bool paged_kv = true;          // runs block_table
  bool dropout = false;          // compiled with dropout (runs dropout_p > 0)
};

namespace detail {

// The fields every config kind fills alike, forward or backward; each kind's requirements add
// which calls it takes (variable lengths, paged caches).
template <class Config, class Dropout>
KernelRequirements config_requirements() {
  KernelRequirements req;
  req.dtype = Config::kScalarType;
  req.head_dim = Config::kHeadDim;
  req.block_m = Config::kBlockM;
  req.smem_bytes = Config::kSmemBytes;
  req.min_compute_capability = Config::arch_tag::kMinComputeCapability;
  req.dropout = Dropout::kEnabled;
  return req;
}

}  // namespace detail

// The requirements of one TileConfig or Sm90TileConfig, compiled with dropout or not
// (attention/dropout.hpp).
template <class Config, class Dropout = NoDropout>
KernelRequirements kernel_requirements() {
  static_assert(IsForwardConfig<Config>::value,
                "Config must be a flashmma::TileConfig<...> or flashmma::Sm90TileConfig<...>");
  KernelRequirements req = detail::config_requirements<Config, Dropout>();
  // The Hopper kernel: dense batches (the default dispatch has Hopper kernels of its own for
  // packed sequences: launch_plan.hpp's variable_length_prefill).
  req.variable_lengths = !IsSm90TileConfig<Config>::value;
  req.paged_kv = !IsSm90TileConfig<Config>::value;
  return req;
}

// What the device offers (filled from cudaGetDeviceProperties by forward()).
struct DeviceInfo {
  int compute_capability = 0;     // major * 10 + minor
  std::size_t smem_per_block_optin = 0;
  std::size_t l2_cache_bytes = 0;  // sizes the groups of the causal block order
  // Size split-KV's automatic split count (split_launch.cuh).
  int sm_count = 0;
  std::size_t smem_per_sm = 0;
  int max_threads_per_sm = 0;
};

inline constexpr int64_t kMaxGridY = 65535;  // heads_q go in gridDim.y
inline constexpr int64_t kMaxGridZ = 65535;  // batch goes in gridDim.z
// Sequence positions are 32-bit in the kernels and in the score-policy contract (ScoreCoord);
// 2^30 leaves room to add a tile or a window bound to any position without overflow.
inline constexpr int64_t kMaxSeqlen = int64_t{1} << 30;
namespace detail {

// Whether a TileConfig's call runs on its split kernel even without a split: variable lengths, a
// cache's batch index, paged caches and KV appends (whose attention reads the new lengths as
// seqused_k) run on it alone among the portable kernels (sm80/forward_kernel.cuh says why). The
// default dispatch runs prefill-sized variable lengths on a Hopper kernel of their own instead
// where it can (launch_plan.hpp's variable_length_prefill).
inline bool runs_on_split_kernel(const ForwardParams& p) {
  return has_variable_lengths(p) || paged_kv(p) || p.kv_batch_index != nullptr || appends_kv(p);
}

inline Status check_dropout(const ForwardParams& p) {
  if (!(p.dropout_p >= 0.f && p.dropout_p < 1.f)) {
    std::ostringstream os;
    os << "dropout_p must be in [0, 1) (got " << p.dropout_p << ")";
    return invalid(os.str());
  }
  if (uses_dropout(p) && (p.block_table != nullptr || p.k_new != nullptr)) {
    return invalid(std::string("dropout_p > 0 is for training calls: not with ") +
                   (p.block_table != nullptr ? "block_table (a paged KV cache)"
                                             : "k_new (a KV append)"));
  }
  return Status::success();
}

inline Status check_positive(const char* name, int64_t value) {
  if (value >= 1) return Status::success();
  std::ostringstream os;
  os << name << " must be >= 1 (got " << value << ")";
  return invalid(os.str());
}

// The window, softcap and ALiBi fields (FlashAttention-2's window_size, softcap, alibi_slopes).
inline Status check_variant(const ForwardParams& p) {
  const struct {
    const char* name;
    int64_t value;
  } sides[] = {{"window_left", p.window_left}, {"window_right", p.window_right}};
  for (const auto& side : sides) {
    if (side.value < -1) {
      std::ostringstream os;
      os << side.name << " must be -1 (unbounded) or a number of keys >= 0 (got " << side.value
         << ")";
      return invalid(os.str());
    }
  }
  if (p.mask == MaskKind::kCausal && p.window_right > 0) {
    std::ostringstream os;
    os << "window_right must be -1 or 0 when mask is MaskKind::kCausal (the causal mask is the "
       << "window (window_left, 0)); got " << p.window_right
       << ": use mask MaskKind::kNone with the window you want";
    return invalid(os.str());
  }
  if (!(std::isfinite(p.softcap) && p.softcap >= 0.f)) {
    std::ostringstream os;
    os << "softcap must be 0 (off) or a positive finite number (got " << p.softcap << ")";
    return invalid(os.str());
  }
  if (p.alibi_slopes == nullptr) {
    if (p.alibi_batch_stride != 0) {
      return invalid("alibi_batch_stride is set but alibi_slopes is null: give the slopes, or "
                     "leave alibi_batch_stride 0");
    }
    return Status::success();
  }
  if (reinterpret_cast<std::uintptr_t>(p.alibi_slopes) % alignof(float) != 0) {
    return invalid("alibi_slopes must be 4-byte aligned (an fp32 array of [heads_q] or "
                   "[batch, heads_q] slopes)");
  }
  if (p.alibi_batch_stride != 0 && p.alibi_batch_stride < p.heads_q) {
    std::ostringstream os;
    os << "alibi_batch_stride must be 0 (one slope per head, shared by the batch: [heads_q]) or "
       << "at least heads_q = " << p.heads_q << " (a [batch, heads_q] array); got "
       << p.alibi_batch_stride;
    return invalid(os.str());
  }
  return Status::success();
}

// Variable-length batches (cu_seqlens_q, cu_seqlens_k, total_q, total_k, seqused_k). The
// arrays' contents live on the device and may change between replays of a captured graph, so
// they are not read here; the kernels stop on lengths the call does not allow for
// (sequence_info.hpp).
inline Status check_variable_lengths(const ForwardParams& p) {
  const struct {
    const char* name;
    const int32_t* values;
    const char* shape;
  } arrays[] = {{"cu_seqlens_q", p.cu_seqlens_q, "[batch + 1]"},
                {"cu_seqlens_k", p.cu_seqlens_k, "[batch + 1]"},
                {"seqused_k", p.seqused_k, "[batch]"}};
  for (const auto& array : arrays) {
    if (reinterpret_cast<std::uintptr_t>(array.values) % alignof(int32_t) != 0) {
      return invalid(std::string(array.name) + " must be 4-byte aligned (an int32 " +
                     array.shape + " device array)");
    }
  }
  if (p.cu_seqlens_q == nullptr) {
    if (p.total_q != 0) {
      return invalid("total_q is set but cu_seqlens_q is null: total_q counts the rows of "
                     "packed queries; leave it 0 for dense ones");
    }
  } else {
    if (p.total_q < 1 || p.total_q > std::numeric_limits<int32_t>::max()) {
      std::ostringstream os;
      os << "total_q must be the rows of packed Q, between 1 and 2^31 - 1 (cu_seqlens_q is "
         << "int32), with cu_seqlens_q; got " << p.total_q;
      return invalid(os.str());
    }
  }
  if (p.cu_seqlens_k == nullptr) {
    if (p.total_k != 0) {
      return invalid("total_k is set but cu_seqlens_k is null: total_k counts the rows of "
                     "packed keys; leave it 0 for dense ones");
    }
  } else if (p.total_k < 0 || p.total_k > std::numeric_limits<int32_t>::max()) {
    std::ostringstream os;
    os << "total_k must be the rows of packed K and V, between 1 and 2^31 - 1 (cu_seqlens_k is "
       << "int32), or 0 when not known; got " << p.total_k;
    return invalid(os.str());
  }
  const struct {
    const char* name;
    const int32_t* cu_seqlens;
    int64_t batch_stride;
    const char* packed_shape;
  } packed[] = {{"q", p.cu_seqlens_q, p.q_strides.batch, "[total_q, heads_q, head_dim]"},
                {"o", p.cu_seqlens_q, p.o_strides.batch, "[total_q, heads_q, head_dim]"},
                {"k", p.cu_seqlens_k, p.k_strides.batch, "[total_k, heads_kv, head_dim]"},
                {"v", p.cu_seqlens_k, p.v_strides.batch, "[total_k, heads_kv, head_dim]"}};
  for (const auto& tensor : packed) {
    if (tensor.cu_seqlens != nullptr && tensor.batch_stride != 0 && p.batch > 1) {
      std::ostringstream os;
      os << tensor.name << "_strides.batch must be 0 with "
         << (tensor.name[0] == 'q' || tensor.name[0] == 'o' ? "cu_seqlens_q" : "cu_seqlens_k")
         << ": " << tensor.name << " is packed, " << tensor.packed_shape
         << ", and its sequences start at the rows the prefix sums give (got "
         << tensor.batch_stride << ")";
      return invalid(os.str());
    }
  }
  return Status::success();
}

// A paged KV cache (block_table, block_table_batch_stride, page_size, num_pages).
inline Status check_paged_kv(const ForwardParams& p) {
  if (p.block_table == nullptr) {
    if (p.page_size != 0 || p.num_pages != 0 || p.block_table_batch_stride != 0) {
      return invalid("page_size, num_pages or block_table_batch_stride is set but block_table "
                     "is null: give the table, or leave them 0 for contiguous K and V");
    }
    return Status::success();
  }
  if (reinterpret_cast<std::uintptr_t>(p.block_table) % alignof(int32_t) != 0) {
    return invalid("block_table must be 4-byte aligned (an int32 [batch, pages per sequence] "
                   "device array)");
  }
  if (p.cu_seqlens_k != nullptr) {
    return invalid("cu_seqlens_k must be null with block_table: the keys of a paged cache are "
                   "found through the table; give their counts in seqused_k");
  }
  if (p.page_size < 1 || p.page_size > kMaxSeqlen) {
    std::ostringstream os;
    os << "page_size must be the keys per page, between 1 and 2^30, with block_table (got "
       << p.page_size << ")";
    return invalid(os.str());
  }
  if (p.num_pages < 1 || p.num_pages > std::numeric_limits<int32_t>::max()) {
    std::ostringstream os;
    os << "num_pages must be the pages in the K and V pools, between 1 and 2^31 - 1 (the table "
       << "is int32), with block_table (got " << p.num_pages << ")";
    return invalid(os.str());
  }
  const int64_t pages_per_sequence = (p.seqlen_k + p.page_size - 1) / p.page_size;
  if (p.block_table_batch_stride < pages_per_sequence) {
    std::ostringstream os;
    os << "block_table_batch_stride must be at least ceil(seqlen_k / page_size) = "
       << pages_per_sequence << " (a row of the table holds the pages of seqlen_k = " << p.seqlen_k
       << " keys); got " << p.block_table_batch_stride;
    return invalid(os.str());
  }
  return Status::success();
}

// A cache's batch index and a KV append (kv_batch_index, k_new, v_new, seqlen_new,
// cache_seqlens, rotary_*).
inline Status check_kv_append(const ForwardParams& p) {
  if (p.kv_batch_index != nullptr) {
    if (reinterpret_cast<std::uintptr_t>(p.kv_batch_index) % alignof(int32_t) != 0) {
      return invalid("kv_batch_index must be 4-byte aligned (an int32 [batch] device array)");
    }
    if (p.block_table != nullptr || p.cu_seqlens_k != nullptr) {
      return invalid("kv_batch_index must be null with block_table or cu_seqlens_k: it picks a "
                     "batch entry of contiguous K and V");
    }
    if (p.kv_batch_entries < 1 || p.kv_batch_entries > kMaxGridZ * 1024) {
      std::ostringstream os;
      os << "kv_batch_entries must be the batch entries of K and V (>= 1) with kv_batch_index; "
         << "got " << p.kv_batch_entries;
      return invalid(os.str());
    }
  } else if (p.kv_batch_entries != 0) {
    return invalid("kv_batch_entries is set but kv_batch_index is null");
  }
  const bool rotary = p.rotary_cos != nullptr || p.rotary_sin != nullptr;
  if (p.k_new == nullptr) {
    if (p.v_new != nullptr || p.cache_seqlens != nullptr || p.seqlen_new != 0 || rotary ||
        p.rotary_dim != 0 || p.rotary_positions != 0) {
      return invalid("v_new, seqlen_new, cache_seqlens or a rotary field is set but k_new is "
                     "null: a KV append needs k_new, v_new, seqlen_new and cache_seqlens (the "
                     "rotary tables are optional)");
    }
    return Status::success();
  }
  if (p.v_new == nullptr) return invalid("v_new is null: a KV append (k_new) needs new values too");
  if (p.seqlen_new < 1 || p.seqlen_new > p.seqlen_k) {
    std::ostringstream os;
    os << "seqlen_new must be between 1 and seqlen_k = " << p.seqlen_k
       << " (the new rows of each sequence) with k_new; got " << p.seqlen_new;
    return invalid(os.str());
  }
  if (p.cache_seqlens == nullptr ||
      reinterpret_cast<std::uintptr_t>(p.cache_seqlens) % alignof(int32_t) != 0) {
    return invalid("cache_seqlens must be a 4-byte aligned int32 [batch] device array with "
                   "k_new: the rows of each cache before the call, where the new ones go");
  }
  if (p.seqused_k != nullptr) {
    return invalid("seqused_k must be null with k_new: the keys used are cache_seqlens + "
                   "seqlen_new");
  }
  if (p.cu_seqlens_q != nullptr || p.cu_seqlens_k != nullptr) {
    return invalid("cu_seqlens_q and cu_seqlens_k must be null with k_new: a KV append takes "
                   "dense queries and a contiguous or paged cache");
  }
  for (const auto& [name, data, strides] :
       {std::make_tuple("k_new", p.k_new, &p.k_new_strides),
        std::make_tuple("v_new", p.v_new, &p.v_new_strides)}) {
    if (Status s = check_tensor({name, data, *strides, p.batch, p.seqlen_new, p.heads_kv,
                                 p.head_dim, TensorAccess::kRead, "seqlen_new", "heads_kv"});
        !s)
      return s;
  }
  if (!rotary) {
    if (p.rotary_dim != 0 || p.rotary_positions != 0) {
      return invalid("rotary_dim or rotary_positions is set but rotary_cos and rotary_sin are "
                     "null");
    }
    return Status::success();
  }
  if (p.rotary_cos == nullptr || p.rotary_sin == nullptr) {
    return invalid("rotary_cos and rotary_sin go together: give both tables or neither");
  }
  if (reinterpret_cast<std::uintptr_t>(p.rotary_cos) % kElementBytes != 0 ||
      reinterpret_cast<std::uintptr_t>(p.rotary_sin) % kElementBytes != 0) {
    return invalid("rotary_cos and rotary_sin must be 2-byte aligned (tables of the element "
                   "type)");
  }
  if (p.rotary_dim < 2 || p.rotary_dim % 2 != 0 || p.rotary_dim > p.head_dim) {
    std::ostringstream os;
    os << "rotary_dim must be even, between 2 and head_dim = " << p.head_dim << "; got "
       << p.rotary_dim;
    return invalid(os.str());
  }
  if (p.rotary_positions < 1) {
    std::ostringstream os;
    os << "rotary_positions must be the rows of rotary_cos and rotary_sin (>= 1); got "
       << p.rotary_positions;
    return invalid(os.str());
  }
  return Status::success();
}

// Q, K, V and O as the tensor checks see them. Packed sequences are one batch entry of total
// rows as far as their strides go; pools of pages are num_pages entries of page_size rows. A KV
// append writes K and V.
inline std::array<TensorArgument, 4> forward_tensors(const ForwardParams& p) {
  const bool packed_keys = p.cu_seqlens_k != nullptr;
  const int64_t q_batch = packed_queries(p) ? 1 : p.batch;
  const int64_t q_rows = packed_queries(p) ? p.total_q : p.seqlen_q;
  const char* q_rows_name = packed_queries(p) ? "total_q" : "seqlen_q";
  const char* q_batch_name = packed_queries(p) ? nullptr : "batch";
  const int64_t kv_batch = paged_kv(p) ? p.num_pages : (packed_keys ? 1 : p.batch);
  const int64_t kv_rows =
      paged_kv(p) ? p.page_size : (packed_keys && p.total_k > 0 ? p.total_k : p.seqlen_k);
  const char* kv_rows_name = paged_kv(p) ? "page_size" : (packed_keys ? "total_k" : "seqlen_k");
  const char* kv_batch_name = paged_kv(p) ? "num_pages" : (packed_keys ? nullptr : "batch");
  const TensorAccess kv_access = appends_kv(p) ? TensorAccess::kWritten : TensorAccess::kRead;
  return {{{"q", p.q, p.q_strides, q_batch, q_rows, p.heads_q, p.head_dim, TensorAccess::kRead,
            q_rows_name, "heads_q", q_batch_name},
           {"k", p.k, p.k_strides, kv_batch, kv_rows, p.heads_kv, p.head_dim, kv_access,
            kv_rows_name, "heads_kv", kv_batch_name},
           {"v", p.v, p.v_strides, kv_batch, kv_rows, p.heads_kv, p.head_dim, kv_access,
            kv_rows_name, "heads_kv", kv_batch_name},
           {"o", p.o, p.o_strides, q_batch, q_rows, p.heads_q, p.head_dim,
            TensorAccess::kWritten, q_rows_name, "heads_q", q_batch_name}}};
}

// forward<Config, Policy> runs the caller's policy alone: built-in variant fields would be
// silently ignored there, so they are refused.
inline Status validate_no_builtin_variant(const ForwardParams& p) {
  if (p.mask != MaskKind::kNone) {
    return invalid(
        "mask must be MaskKind::kNone when a score policy is given; put the causal mask in "
        "the policy instead (flashmma::Combined<YourPolicy, flashmma::CausalMask>)");
  }
  if (p.window_left != -1 || p.window_right != -1) {
    return invalid(
        "window_left and window_right must be -1 when a score policy is given; put the window "
        "in the policy instead (flashmma::Combined<YourPolicy, flashmma::SlidingWindow>)");
  }
  if (p.softcap != 0.f) {
    return invalid(
        "softcap must be 0 when a score policy is given; put it in the policy instead "
        "(flashmma::Combined<flashmma::Softcap, YourPolicy>)");
  }
  if (p.alibi_slopes != nullptr) {
    return invalid(
        "alibi_slopes must be null when a score policy is given; put ALiBi in the policy "
        "instead (flashmma::Combined<YourPolicy, flashmma::AlibiBias>)");
  }
  return Status::success();
}

}  // namespace detail

// Checks the call alone: pointers, sizes, strides, scale, mask, window, softcap, ALiBi.
[[nodiscard]] inline Status validate_params(const ForwardParams& p) {
  if (p.dtype != ScalarType::kFloat16 && p.dtype != ScalarType::kBFloat16) {
    return detail::invalid("dtype must be ScalarType::kFloat16 or ScalarType::kBFloat16");
  }
  const struct {
    const char* name;
    int64_t value;
  } sizes[] = {{"batch", p.batch},     {"seqlen_q", p.seqlen_q}, {"seqlen_k", p.seqlen_k},
               {"heads_q", p.heads_q}, {"heads_kv", p.heads_kv}, {"head_dim", p.head_dim}};
  for (const auto& size : sizes) {
    if (Status s = detail::check_positive(size.name, size.value); !s) return s;
  }
  if (p.seqlen_q > kMaxSeqlen || p.seqlen_k > kMaxSeqlen) {
    std::ostringstream os;
    os << "seqlen_q and seqlen_k must be at most 2^30 = " << kMaxSeqlen << " (got " << p.seqlen_q
       << " and " << p.seqlen_k << ")";
    return detail::invalid(os.str());
  }
  if (p.head_dim % 8 != 0 || p.head_dim > kMaxHeadDim) {
    std::ostringstream os;
    os << "head_dim must be a multiple of 8 between 8 and 256 (got " << p.head_dim
       << "); pad other head dims with zeros to the next multiple of 8";
    return detail::invalid(os.str());
  }
  if (p.heads_q % p.heads_kv != 0) {
    std::ostringstream os;
    os << "heads_q (" << p.heads_q << ") must be a multiple of heads_kv (" << p.heads_kv
       << ") for grouped-query attention";
    return detail::invalid(os.str());
  }
  if (p.heads_q > kMaxGridY) {
    std::ostringstream os;
    os << "heads_q must be at most " << kMaxGridY << " (got " << p.heads_q << ")";
    return detail::invalid(os.str());
  }
  if (p.batch > kMaxGridZ) {
    std::ostringstream os;
    os << "batch must be at most " << kMaxGridZ << " (got " << p.batch << ")";
    return detail::invalid(os.str());
  }
  if (Status s = detail::check_paged_kv(p); !s) return s;
  if (Status s = detail::check_kv_append(p); !s) return s;
  if (Status s = detail::check_variable_lengths(p); !s) return s;
  for (const detail::TensorArgument& tensor : detail::forward_tensors(p)) {
    if (Status s = detail::check_tensor(tensor); !s) return s;
  }
  if (p.lse != nullptr && reinterpret_cast<std::uintptr_t>(p.lse) % alignof(float) != 0) {
    return detail::invalid(std::string("lse must be 4-byte aligned (an fp32 ") +
                           (packed_queries(p) ? "[heads_q, total_q]" : "[batch, heads_q, seqlen_q]") +
                           " array)");
  }
  if (!std::isnan(p.softmax_scale) && !(std::isfinite(p.softmax_scale) && p.softmax_scale > 0.f)) {
    std::ostringstream os;
    os << "softmax_scale must be a positive finite number, or NaN for 1/sqrt(head_dim) (got "
       << p.softmax_scale << ")";
    return detail::invalid(os.str());
  }
  if (p.mask != MaskKind::kNone && p.mask != MaskKind::kCausal) {
    return detail::invalid("mask must be MaskKind::kNone or MaskKind::kCausal");
  }
  if (p.num_splits < 0 || p.num_splits > kMaxSplits) {
    std::ostringstream os;
    os << "num_splits must be 0 (automatic), 1 (no split) or 2 to " << kMaxSplits << " (got "
       << p.num_splits << ")";
    return detail::invalid(os.str());
  }
  if (p.workspace != nullptr &&
      reinterpret_cast<std::uintptr_t>(p.workspace) % kWorkspaceAlignment != 0) {
    return detail::invalid("workspace must be 256-byte aligned (cudaMalloc's pointers are)");
  }
  if (Status s = detail::check_dropout(p); !s) return s;
  return detail::check_variant(p);
}

// Checks that a kernel configuration can serve the call.
[[nodiscard]] inline Status validate_for_kernel(const ForwardParams& p,
                                              const KernelRequirements& kernel) {
  if (p.dtype != kernel.dtype) {
    return detail::invalid(std::string("dtype is ") + scalar_type_name(p.dtype) +
                           " but the config was built for " + scalar_type_name(kernel.dtype));
  }
  if (p.head_dim > kernel.head_dim) {
    std::ostringstream os;
    os << "head_dim " << p.head_dim << " exceeds the config's HeadDim " << kernel.head_dim
       << "; use a config with HeadDim >= " << p.head_dim;
    return detail::invalid(os.str());
  }
  if (!kernel.variable_lengths && p.block_table == nullptr && detail::runs_on_split_kernel(p)) {
    return detail::invalid(
        "cu_seqlens_q, cu_seqlens_k, seqused_k, kv_batch_index and k_new (a KV append) are not "
        "available on the sm_90a kernel yet (Sm90TileConfig): use a TileConfig, or "
        "forward(params), which runs them on one");
  }
  if (!kernel.paged_kv && p.block_table != nullptr) {
    return detail::invalid(
        "block_table (a paged KV cache) is not available on the sm_90a kernel yet "
        "(Sm90TileConfig): use a TileConfig, or forward(params), which runs it on one");
  }
  if (!kernel.dropout && uses_dropout(p)) {
    std::ostringstream os;
    os << "dropout_p = " << p.dropout_p
       << " needs a kernel compiled with dropout: forward_with_dropout<Config> or "
          "backward_with_dropout<Config> (TileConfig, BackwardTileConfig), or the default "
          "forward(params) and backward(params)";
    return detail::invalid(os.str());
  }
  if (kernel.block_m <= 0) {
    return detail::invalid(
        "the kernel requirements have no block_m (use kernel_requirements<Config>())");
  }
  return Status::success();
}

// Checks that the device can run the kernel.
[[nodiscard]] inline Status validate_for_device(const DeviceInfo& device,
                                              const KernelRequirements& kernel) {
  if (device.compute_capability < kernel.min_compute_capability) {
    std::ostringstream os;
    os << "the device has compute capability " << device.compute_capability / 10 << "."
       << device.compute_capability % 10 << "; flashmma needs "
       << kernel.min_compute_capability / 10 << "." << kernel.min_compute_capability % 10
       << " or newer (mma.sync m16n8k16, ldmatrix, cp.async)";
    return Status::error(ErrorCode::kUnsupportedDevice, "flashmma: " + os.str());
  }
  if (kernel.smem_bytes > device.smem_per_block_optin) {
    std::ostringstream os;
    os << "the config needs " << kernel.smem_bytes << " bytes of shared memory per block but the "
       << "device allows " << device.smem_per_block_optin
       << "; choose smaller BlockM, BlockN or Stages";
    return Status::error(ErrorCode::kUnsupportedDevice, "flashmma: " + os.str());
  }
  return Status::success();
}

// All of the above, in order.
[[nodiscard]] inline Status validate(const ForwardParams& p, const KernelRequirements& kernel,
                       const DeviceInfo& device) {
  if (Status s = validate_params(p); !s) return s;
  if (Status s = validate_for_kernel(p, kernel); !s) return s;
  return validate_for_device(device, kernel);
}

}  // namespace flashmma
