// SPDX-License-Identifier: Apache-2.0
// What flashmma_torch's operators share (flashmma_torch.cpp): the checks and preparation of the
// operands, FlashAttention-2's window and ALiBi arguments in flashmma's terms, and the launch.
//
// What flashmma itself does not take is adapted here rather than refused: a head dim that is not
// a multiple of 8 is zero-padded (the padding adds nothing to Q.K^T, and its output columns are
// sliced off, so that `out` is a view with a row stride of the padded head dim), and an operand
// whose pointer or strides break cp.async's 16-byte alignment is copied to a contiguous tensor.
#pragma once

#include <ATen/cuda/CUDAContext.h>
#include <torch/extension.h>

#include <cmath>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "flashmma/launch_plan.hpp"  // forward_workspace_bytes
#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/validate.hpp"
#include "forward_launch.hpp"

namespace flashmma_torch {

inline constexpr int64_t kHeadDimMultiple = 8;  // flashmma takes head dims in multiples of 8
inline constexpr int64_t kStrideMultiple = static_cast<int64_t>(flashmma::kCpAsyncAlignment) / 2;

inline bool is_half_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

// q, k or v: `dims` dimensions (4: (batch, seq, heads, head_dim); 3: packed (total, heads,
// head_dim)), described by `layout` in messages.
inline void check_operand(const at::Tensor& t, const char* name, const char* layout,
                          int64_t dims = 4) {
  TORCH_CHECK_VALUE(t.defined(), "flashmma_torch: ", name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda(), "flashmma_torch: ", name,
                    " must be a CUDA tensor (got a tensor on ", t.device(), ")");
  TORCH_CHECK_TYPE(is_half_precision(t), "flashmma_torch: ", name,
                   " must be torch.float16 or torch.bfloat16 (got ", t.scalar_type(), ")");
  TORCH_CHECK_VALUE(t.dim() == dims, "flashmma_torch: ", name, " must have ", dims,
                    " dimensions ", layout, " (got ", t.dim(), ": ", t.sizes(), ")");
  TORCH_CHECK_VALUE(t.stride(-1) == 1 || t.size(-1) <= 1, "flashmma_torch: ", name,
                    " must have a contiguous last dimension (stride(-1) == 1, got ", t.stride(-1),
                    "); call .contiguous() first");
}

// q, k and v: one dtype, one device, and k shaped as v.
inline void check_same_kind(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v) {
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
                   "flashmma_torch: q, k and v must share one dtype (got ", q.scalar_type(), ", ",
                   k.scalar_type(), " and ", v.scalar_type(), ")");
  TORCH_CHECK_VALUE(k.device() == q.device() && v.device() == q.device(),
                    "flashmma_torch: q, k and v must be on the same device (got ", q.device(),
                    ", ", k.device(), " and ", v.device(), ")");
  TORCH_CHECK_VALUE(k.sizes() == v.sizes(), "flashmma_torch: k and v must have the same shape (got ",
                    k.sizes(), " and ", v.sizes(), ")");
}

inline void check_heads(int64_t heads_q, int64_t heads_kv, int64_t head_dim) {
  TORCH_CHECK_VALUE(head_dim >= 1 && head_dim <= flashmma::kMaxHeadDim,
                    "flashmma_torch: head dim must be between 1 and ", flashmma::kMaxHeadDim,
                    " (got ", head_dim, ")");
  TORCH_CHECK_VALUE(heads_kv >= 1 && heads_q % heads_kv == 0, "flashmma_torch: heads_q (", heads_q,
                    ") must be a multiple of heads_kv (", heads_kv, ")");
}

// cp.async moves 16 bytes at a time: the base address and every stride that matters must be a
// multiple of 16 bytes (8 elements). A broadcast along some dimensions (stride 0) stays as it is.
inline bool meets_alignment(const at::Tensor& t) {
  if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % flashmma::kCpAsyncAlignment != 0) {
    return false;
  }
  const int64_t last = t.dim() - 1;
  if (t.size(last) > 1 && t.stride(last) != 1) return false;
  bool steps = false;     // some dimension longer than 1 ...
  bool all_zero = true;   // ... and all of them broadcast (stride 0)
  for (int64_t dim = 0; dim < last; ++dim) {
    if (t.size(dim) <= 1) continue;
    if (t.stride(dim) % kStrideMultiple != 0) return false;
    steps = true;
    all_zero = all_zero && t.stride(dim) == 0;
  }
  // One row expanded along every dimension: flashmma reads all-zero strides as unset
  // (validate_tensor.hpp), so such an operand is copied.
  return !(steps && all_zero);
}

// Zero-pads the head dim to padded_dim, then copies if the result is still not aligned.
inline at::Tensor prepare_operand(const at::Tensor& t, int64_t padded_dim) {
  at::Tensor prepared = t;
  if (t.size(-1) != padded_dim) {
    const std::vector<int64_t> pad_last_dim = {0, padded_dim - t.size(-1)};  // (left, right)
    prepared = at::constant_pad_nd(t, pad_last_dim, 0);
  }
  if (!meets_alignment(prepared)) prepared = prepared.clone(at::MemoryFormat::Contiguous);
  return prepared;
}

// flashmma's strides are {batch, head, row} in elements; the tensors are (batch, seq, head, dim),
// or packed sequences (total, head, dim), whose batch stride is 0.
inline flashmma::TensorStrides strides_of(const at::Tensor& t) {
  if (t.dim() == 3) return flashmma::TensorStrides{0, t.stride(1), t.stride(0)};
  return flashmma::TensorStrides{t.stride(0), t.stride(2), t.stride(1)};
}

// The head dim flashmma runs for a caller's head dim: the next multiple of 8.
inline int64_t padded_head_dim(int64_t head_dim) {
  return (head_dim + kHeadDimMultiple - 1) / kHeadDimMultiple * kHeadDimMultiple;
}

// FlashAttention-2's ALiBi slopes: fp32 on q's device, one per query head ((heads_q,)) or one per
// batch entry and query head ((batch, heads_q)), contiguous along the heads.
struct AlibiSlopes {
  at::Tensor slopes;         // what the kernel reads
  int64_t batch_stride = 0;  // ForwardParams::alibi_batch_stride: 0 shares one row of slopes
};

inline AlibiSlopes prepare_alibi_slopes(const at::Tensor& slopes, const at::Tensor& q,
                                        int64_t batch, int64_t heads_q) {
  TORCH_CHECK_VALUE(slopes.defined(), "flashmma_torch: alibi_slopes is an undefined tensor");
  TORCH_CHECK_VALUE(slopes.is_cuda() && slopes.device() == q.device(),
                    "flashmma_torch: alibi_slopes must be a CUDA tensor on q's device (",
                    q.device(), "; got a tensor on ", slopes.device(), ")");
  TORCH_CHECK_TYPE(slopes.scalar_type() == at::kFloat,
                   "flashmma_torch: alibi_slopes must be torch.float32 (got ", slopes.scalar_type(),
                   ")");
  const bool per_head = slopes.dim() == 1 && slopes.size(0) == heads_q;
  const bool per_batch_and_head =
      slopes.dim() == 2 && slopes.size(0) == batch && slopes.size(1) == heads_q;
  TORCH_CHECK_VALUE(per_head || per_batch_and_head,
                    "flashmma_torch: alibi_slopes must have shape (heads_q,) = (", heads_q,
                    ",) or (batch, heads_q) = (", batch, ", ", heads_q, ") (got ", slopes.sizes(),
                    ")");
  TORCH_CHECK_VALUE(slopes.stride(-1) == 1 || slopes.size(-1) <= 1,
                    "flashmma_torch: alibi_slopes must have a contiguous last dimension "
                    "(stride(-1) == 1, got ", slopes.stride(-1), "); call .contiguous() first");
  // The slope of (b, h) is at b * batch_stride + h: 0 for (heads_q,), stride(0) for
  // (batch, heads_q) (0 too for an expanded row, or a batch of one). flashmma takes no batch
  // stride between 0 and heads_q (rows that overlap, which only as_strided makes): those are
  // copied.
  if (per_head || batch <= 1) return {slopes, 0};
  if (slopes.stride(0) == 0 || slopes.stride(0) >= heads_q) return {slopes, slopes.stride(0)};
  return {slopes.contiguous(), heads_q};
}

// The mask and window flashmma runs for FlashAttention-2's causal and window_size.
struct Window {
  bool causal = false;  // MaskKind::kCausal: key j visible to query i iff j <= i + d
  int64_t left = -1;    // ForwardParams::window_left
  int64_t right = -1;   // ForwardParams::window_right; -1 when causal (the mask bounds it)
};

// As FlashAttention-2 reads them: a negative side is unbounded, causal sets the right side to 0,
// and a window whose right side is 0 and left side unbounded is the causal mask. A side that
// reaches every key from every query bounds nothing and becomes -1, so that windows wider than the
// sequences run as plain (or causal) attention: with d = seqlen_k - seqlen_q, the last query's
// left bound seqlen_k - 1 - left is <= 0 once left >= seqlen_k - 1, and the first query's right
// bound d + right is >= seqlen_k - 1 once right >= seqlen_q - 1. (FlashAttention-2 makes a side
// >= seqlen_k unbounded: the same whenever seqlen_q <= seqlen_k + 1. For longer queries a right
// side in [seqlen_k, seqlen_q - 1) still hides keys from the first rows, as its formula says.)
inline Window normalize_window(bool causal, int64_t left, int64_t right, int64_t seqlen_q,
                        int64_t seqlen_k) {
  if (causal) right = 0;
  if (left < 0 || left >= seqlen_k - 1) left = -1;
  if (right < 0 || right >= seqlen_q - 1) right = -1;
  Window window;
  window.causal = right == 0;
  window.left = left;
  window.right = window.causal ? -1 : right;
  return window;
}

inline flashmma::Status launch(const flashmma::ForwardParams& params, cudaStream_t stream) {
  if (flashmma::Status s = flashmma::validate_params(params); !s) return s;
  const int kernel_dim = flashmma::kernel_head_dim_for(params.head_dim);
  std::size_t index = 0;
  while (index < kHeadDimCount && flashmma::kSupportedHeadDims[index] != kernel_dim) ++index;
  const bool upper = index >= kUpperHalfStart;
  if (params.dtype == flashmma::ScalarType::kFloat16) {
    return upper ? forward_fp16_upper(params, stream) : forward_fp16_lower(params, stream);
  }
  return upper ? forward_bf16_upper(params, stream) : forward_bf16_lower(params, stream);
}

inline void raise_on_error(const flashmma::Status& status) {
  if (status.ok()) return;
  if (status.code() == flashmma::ErrorCode::kInvalidArgument) {
    TORCH_CHECK_VALUE(false, status.message());
  }
  TORCH_CHECK(false, status.message());
}

// The tensors of a call into params: dtype, pointers and strides of q, k, v and out (prepared:
// aligned, head dim padded), and the LSE's pointer when it is returned (nullptr: not written).
inline void set_tensors(flashmma::ForwardParams& params, const at::Tensor& q, const at::Tensor& k,
                        const at::Tensor& v, const at::Tensor& out, const at::Tensor* lse) {
  params.dtype = q.scalar_type() == at::kHalf ? flashmma::ScalarType::kFloat16
                                              : flashmma::ScalarType::kBFloat16;
  params.q = q.data_ptr();
  params.k = k.data_ptr();
  params.v = v.data_ptr();
  params.o = out.data_ptr();
  params.lse = lse != nullptr ? lse->data_ptr<float>() : nullptr;
  params.q_strides = strides_of(q);
  params.k_strides = strides_of(k);
  params.v_strides = strides_of(v);
  params.o_strides = strides_of(out);
}

// FlashAttention-2's variant arguments into params (after the sizes are set).
inline void set_variant(flashmma::ForwardParams& params, bool causal, int64_t window_left,
                        int64_t window_right, double softcap, const AlibiSlopes& alibi) {
  const Window window =
      normalize_window(causal, window_left, window_right, params.seqlen_q, params.seqlen_k);
  params.mask = window.causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;
  params.window_left = window.left;
  params.window_right = window.right;
  params.softcap = static_cast<float>(softcap);
  if (alibi.slopes.defined()) {
    params.alibi_slopes = alibi.slopes.data_ptr<float>();
    params.alibi_batch_stride = alibi.batch_stride;
  }
}

// Dropout's probability, seed and offset into params (flashmma validates p in [0, 1)). The seed
// arrives as a signed 64-bit int (the schema's int) and is used as its bits.
inline void set_dropout(flashmma::ForwardParams& params, double dropout_p, int64_t seed,
                        int64_t offset) {
  TORCH_CHECK_VALUE(dropout_p >= 0.0 && dropout_p < 1.0,
                    "flashmma_torch: dropout_p must be in [0, 1) (got ", dropout_p, ")");
  TORCH_CHECK_VALUE(offset >= 0 && offset <= 0xFFFFFFFFll,
                    "flashmma_torch: dropout_offset must be in [0, 2^32) (got ", offset, ")");
  params.dropout_p = static_cast<float>(dropout_p);
  params.dropout_seed = static_cast<uint64_t>(seed);
  params.dropout_offset = static_cast<uint32_t>(offset);
}

inline void check_scale_and_softcap(std::optional<double> softmax_scale, double softcap) {
  TORCH_CHECK_VALUE(!softmax_scale || (std::isfinite(*softmax_scale) && *softmax_scale > 0),
                    "flashmma_torch: softmax_scale must be a positive finite number or None (got ",
                    softmax_scale.value_or(0.0), ")");
  TORCH_CHECK_VALUE(std::isfinite(softcap) && softcap >= 0,
                    "flashmma_torch: softcap must be a finite number >= 0 (0 turns it off; got ",
                    softcap, ")");
}

// Runs a filled params on PyTorch's current stream for `device`. Split-KV's partials (calls with
// few query tiles, such as decoding, split their keys across blocks) get the bytes the call asks
// for from PyTorch's caching allocator, so that nothing is allocated inside the library and a
// captured call replays with the same buffer.
inline void run_forward(flashmma::ForwardParams& params, const at::TensorOptions& options) {
  std::size_t workspace_bytes = 0;
  raise_on_error(flashmma::forward_workspace_bytes(params, workspace_bytes));
  at::Tensor workspace;
  if (workspace_bytes > 0) {
    workspace = at::empty({static_cast<int64_t>(workspace_bytes)}, options.dtype(at::kByte));
    params.workspace = workspace.data_ptr();
    params.workspace_bytes = workspace_bytes;
  }
  raise_on_error(launch(params, at::cuda::getCurrentCUDAStream(options.device().index()).stream()));
}

}  // namespace flashmma_torch
