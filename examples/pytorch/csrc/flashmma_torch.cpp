// SPDX-License-Identifier: Apache-2.0
// PyTorch binding of flashmma's forward pass, registered as the operator flashmma::forward with
// FlashAttention's conventions:
//
//   out, lse = torch.ops.flashmma.forward(q, k, v, softmax_scale, causal, return_lse)
//   q: (batch, seqlen_q, heads_q, head_dim), k and v: (batch, seqlen_k, heads_kv, head_dim),
//   fp16 or bf16 CUDA tensors on one device, any strides with a contiguous last dimension.
//   softmax_scale: None means 1 / sqrt(head_dim).
//   out: (batch, seqlen_q, heads_q, head_dim) in the input dtype; lse: (batch, heads_q, seqlen_q)
//   fp32 (natural log) when return_lse, else an empty fp32 tensor of shape (0,).
//
// The operator's fake (meta) implementation and its autograd registration are in Python
// (flashmma_torch/_ops.py); the fake one must give `out` and `lse` the same sizes and strides as
// this one, including the padded row stride of `out` described below.
//
// What flashmma itself does not take is adapted here rather than refused: a head dim that is not
// a multiple of 8 is zero-padded (the padding adds nothing to Q.K^T, and its output columns are
// sliced off, so that `out` is a view with a row stride of the padded head dim), and an operand
// whose pointer or strides break cp.async's 16-byte alignment is copied to a contiguous tensor.
// Everything else is checked, and errors raise Python exceptions that carry flashmma's message.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>
#include <vector>

#include "flashmma/params.hpp"
#include "flashmma/status.hpp"
#include "flashmma/validate.hpp"
#include "forward_launch.hpp"

namespace flashmma_torch {
namespace {

constexpr int64_t kHeadDimMultiple = 8;  // flashmma takes head dims in multiples of 8
constexpr int64_t kStrideMultiple = static_cast<int64_t>(flashmma::kCpAsyncAlignment) / 2;

bool is_half_precision(const at::Tensor& t) {
  return t.scalar_type() == at::kHalf || t.scalar_type() == at::kBFloat16;
}

void check_operand(const at::Tensor& t, const char* name, const char* layout) {
  TORCH_CHECK_VALUE(t.defined(), "flashmma_torch: ", name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda(), "flashmma_torch: ", name,
                    " must be a CUDA tensor (got a tensor on ", t.device(), ")");
  TORCH_CHECK_TYPE(is_half_precision(t), "flashmma_torch: ", name,
                   " must be torch.float16 or torch.bfloat16 (got ", t.scalar_type(), ")");
  TORCH_CHECK_VALUE(t.dim() == 4, "flashmma_torch: ", name, " must have 4 dimensions ", layout,
                    " (got ", t.dim(), ": ", t.sizes(), ")");
  TORCH_CHECK_VALUE(t.stride(3) == 1 || t.size(3) <= 1, "flashmma_torch: ", name,
                    " must have a contiguous last dimension (stride(-1) == 1, got ", t.stride(3),
                    "); call .contiguous() first");
}

// cp.async moves 16 bytes at a time: the base address and every stride that matters must be a
// multiple of 16 bytes (8 elements).
bool meets_alignment(const at::Tensor& t) {
  if (reinterpret_cast<std::uintptr_t>(t.data_ptr()) % flashmma::kCpAsyncAlignment != 0) {
    return false;
  }
  if (t.size(3) > 1 && t.stride(3) != 1) return false;
  for (int64_t dim = 0; dim < 3; ++dim) {
    if (t.size(dim) > 1 && t.stride(dim) % kStrideMultiple != 0) return false;
  }
  return true;
}

// Zero-pads the head dim to padded_dim, then copies if the result is still not aligned.
at::Tensor prepare_operand(const at::Tensor& t, int64_t padded_dim) {
  at::Tensor prepared = t;
  if (t.size(3) != padded_dim) {
    const std::vector<int64_t> pad_last_dim = {0, padded_dim - t.size(3)};  // (left, right)
    prepared = at::constant_pad_nd(t, pad_last_dim, 0);
  }
  if (!meets_alignment(prepared)) prepared = prepared.clone(at::MemoryFormat::Contiguous);
  return prepared;
}

// flashmma's strides are {batch, head, row} in elements; the tensors are (batch, seq, head, dim).
flashmma::TensorStrides strides_of(const at::Tensor& t) {
  return flashmma::TensorStrides{t.stride(0), t.stride(2), t.stride(1)};
}

flashmma::Status launch(const flashmma::ForwardParams& params, cudaStream_t stream) {
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

void raise_on_error(const flashmma::Status& status) {
  if (status.ok()) return;
  if (status.code() == flashmma::ErrorCode::kInvalidArgument) {
    TORCH_CHECK_VALUE(false, status.message());
  }
  TORCH_CHECK(false, status.message());
}

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v,
                                           std::optional<double> softmax_scale, bool causal,
                                           bool return_lse) {
  check_operand(q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_operand(k, "k", "(batch, seqlen_k, heads_kv, head_dim)");
  check_operand(v, "v", "(batch, seqlen_k, heads_kv, head_dim)");
  TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type(),
                   "flashmma_torch: q, k and v must share one dtype (got ", q.scalar_type(), ", ",
                   k.scalar_type(), " and ", v.scalar_type(), ")");
  TORCH_CHECK_VALUE(k.device() == q.device() && v.device() == q.device(),
                    "flashmma_torch: q, k and v must be on the same device (got ", q.device(),
                    ", ", k.device(), " and ", v.device(), ")");
  TORCH_CHECK_VALUE(k.sizes() == v.sizes(), "flashmma_torch: k and v must have the same shape (got ",
                    k.sizes(), " and ", v.sizes(), ")");

  const int64_t batch = q.size(0);
  const int64_t seqlen_q = q.size(1);
  const int64_t heads_q = q.size(2);
  const int64_t head_dim = q.size(3);
  const int64_t seqlen_k = k.size(1);
  const int64_t heads_kv = k.size(2);
  TORCH_CHECK_VALUE(k.size(0) == batch, "flashmma_torch: q and k must have the same batch size (got ",
                    batch, " and ", k.size(0), ")");
  TORCH_CHECK_VALUE(k.size(3) == head_dim, "flashmma_torch: q and k must have the same head dim (got ",
                    head_dim, " and ", k.size(3), ")");
  TORCH_CHECK_VALUE(head_dim >= 1 && head_dim <= flashmma::kMaxHeadDim,
                    "flashmma_torch: head dim must be between 1 and ", flashmma::kMaxHeadDim,
                    " (got ", head_dim, ")");
  TORCH_CHECK_VALUE(heads_kv >= 1 && heads_q % heads_kv == 0, "flashmma_torch: heads_q (", heads_q,
                    ") must be a multiple of heads_kv (", heads_kv, ")");
  TORCH_CHECK_VALUE(!softmax_scale || (std::isfinite(*softmax_scale) && *softmax_scale > 0),
                    "flashmma_torch: softmax_scale must be a positive finite number or None (got ",
                    softmax_scale.value_or(0.0), ")");

  const c10::cuda::CUDAGuard device_guard(q.device());
  // The scale follows the caller's head dim, not the padded one.
  const double scale = softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const at::TensorOptions lse_options = q.options().dtype(at::kFloat);

  // `out` is allocated with the padded head dim in every case, so that its strides depend on the
  // shapes only (the fake implementation computes the same ones).
  const int64_t padded_dim = (head_dim + kHeadDimMultiple - 1) / kHeadDimMultiple * kHeadDimMultiple;
  at::Tensor out = at::empty({batch, seqlen_q, heads_q, padded_dim}, q.options());
  at::Tensor lse = return_lse ? at::empty({batch, heads_q, seqlen_q}, lse_options)
                              : at::empty({0}, lse_options);

  // Problems with nothing to compute. A query row that sees no key gets O = 0 and LSE = -inf.
  if (batch == 0 || seqlen_q == 0 || heads_q == 0) return {out.narrow(3, 0, head_dim), lse};
  if (seqlen_k == 0) {
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out.narrow(3, 0, head_dim), lse};
  }

  const at::Tensor q_ready = prepare_operand(q, padded_dim);
  const at::Tensor k_ready = prepare_operand(k, padded_dim);
  const at::Tensor v_ready = prepare_operand(v, padded_dim);

  flashmma::ForwardParams params;
  params.dtype = q.scalar_type() == at::kHalf ? flashmma::ScalarType::kFloat16
                                              : flashmma::ScalarType::kBFloat16;
  params.q = q_ready.data_ptr();
  params.k = k_ready.data_ptr();
  params.v = v_ready.data_ptr();
  params.o = out.data_ptr();
  params.lse = return_lse ? lse.data_ptr<float>() : nullptr;
  params.batch = batch;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = padded_dim;
  params.q_strides = strides_of(q_ready);
  params.k_strides = strides_of(k_ready);
  params.v_strides = strides_of(v_ready);
  params.o_strides = strides_of(out);
  params.softmax_scale = static_cast<float>(scale);
  params.mask = causal ? flashmma::MaskKind::kCausal : flashmma::MaskKind::kNone;

  raise_on_error(launch(params, at::cuda::getCurrentCUDAStream(q.get_device()).stream()));

  return {out.narrow(3, 0, head_dim), lse};
}

}  // namespace
}  // namespace flashmma_torch

TORCH_LIBRARY(flashmma, m) {
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, float? softmax_scale, bool causal, bool return_lse)"
      " -> (Tensor out, Tensor lse)");
}

// CPU tensors reach the same checks, which refuse them with a message naming the argument.
TORCH_LIBRARY_IMPL(flashmma, CUDA, m) { m.impl("forward", &flashmma_torch::forward); }
TORCH_LIBRARY_IMPL(flashmma, CPU, m) { m.impl("forward", &flashmma_torch::forward); }

// Importing the module (flashmma_torch._C) is what loads the library and registers the operator.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "flashmma's forward attention, registered as torch.ops.flashmma.forward "
            "(use flashmma_torch.flash_attn_func)";
}
