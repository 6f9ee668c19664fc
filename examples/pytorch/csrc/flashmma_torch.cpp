// SPDX-License-Identifier: Apache-2.0
// PyTorch binding of flashmma's forward pass, registered as two operators with FlashAttention-2's
// conventions:
//
//   out, lse = torch.ops.flashmma.forward(q, k, v, softmax_scale, causal, window_left,
//                                         window_right, softcap, alibi_slopes, return_lse,
//                                         deterministic=False)
//   q: (batch, seqlen_q, heads_q, head_dim), k and v: (batch, seqlen_k, heads_kv, head_dim),
//   fp16 or bf16 CUDA tensors on one device, any strides with a contiguous last dimension.
//   softmax_scale: None means 1 / sqrt(head_dim).
//   causal, window_left, window_right: FlashAttention-2's causal and window_size. Query i sees
//   key j iff i + d - window_left <= j <= i + d + window_right, d = seqlen_k - seqlen_q (aligned
//   to the bottom-right corner); a negative side is unbounded, and causal sets the right side
//   to 0.
//   softcap: 0 is off; > 0 turns each scaled score s into softcap * tanh(s / softcap).
//   alibi_slopes: None, or fp32 on q's device, (heads_q,) or (batch, heads_q), contiguous last
//   dimension; adds -slope * |i + d - j| to the score of (i, j), after the softcap.
//   out: (batch, seqlen_q, heads_q, head_dim) in the input dtype; lse: (batch, heads_q, seqlen_q)
//   fp32 (natural log) when return_lse, else an empty fp32 tensor of shape (0,). A query row that
//   sees no key gets O = 0 and LSE = -inf.
//
//   out, lse = torch.ops.flashmma.varlen_forward(q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k,
//                                                max_seqlen_q, max_seqlen_k, softmax_scale,
//                                                causal, window_left, window_right, softcap,
//                                                alibi_slopes, return_lse, deterministic=False)
//   the same over packed sequences of variable lengths (flash_attn_varlen_func): q (total_q,
//   heads_q, head_dim), k and v (total_k, heads_kv, head_dim), sequence b at rows
//   [cu_seqlens[b], cu_seqlens[b + 1]) (int32 on q's device, batch + 1 entries); seqused_k:
//   None, or int32 (batch,), the keys each sequence uses. d, the window and ALiBi are per
//   sequence. out: (total_q, heads_q, head_dim); lse: (heads_q, total_q).
//
//   dq, dk, dv = torch.ops.flashmma.varlen_backward(dout, q, k, v, out, lse, cu_seqlens_q,
//                                                   cu_seqlens_k, max_seqlen_q, max_seqlen_k,
//                                                   softmax_scale, causal, window_left,
//                                                   window_right, softcap, alibi_slopes,
//                                                   deterministic)
//   the same for varlen_forward (without seqused_k): flash_attn_varlen_func's autograd formula.
//
//   out, lse = torch.ops.flashmma.kvcache_forward(q, k_cache, v_cache, k, v, rotary_cos,
//                                                 rotary_sin, cache_seqlens, cache_batch_idx,
//                                                 block_table, softmax_scale, causal,
//                                                 window_left, window_right, softcap,
//                                                 rotary_interleaved, alibi_slopes, num_splits,
//                                                 return_lse)
//   flash_attn_with_kvcache: attention of q over a KV cache, contiguous or paged, after writing
//   the new rows k and v (if given) into it in place (k_cache and v_cache are mutated).
//
//   dq, dk, dv = torch.ops.flashmma.backward(dout, q, k, v, out, lse, softmax_scale, causal,
//                                            window_left, window_right, softcap, alibi_slopes,
//                                            deterministic)
//   the gradients of forward's out for the same arguments, out and lse being forward's outputs
//   (lse returned): flash_attn_func's autograd formula (flashmma_torch/_ops.py) calls it, with
//   forward's `deterministic` (dQ summed in a fixed order: the same bits in every run).
//
// The operators' fake (meta) implementations and autograd registrations are in Python
// (flashmma_torch/_ops.py); the fake ones must give `out` and `lse` the same sizes and strides
// as these, including the padded row stride of `out` (operands.hpp). Errors raise Python
// exceptions that carry flashmma's message.
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
#include <torch/extension.h>

#include <cmath>
#include <cstdint>
#include <limits>
#include <optional>
#include <tuple>

#include "backward_launch.hpp"
#include "flashmma/attention/philox.hpp"
#include "flashmma/backward_params.hpp"
#include "flashmma/params.hpp"
#include "operands.hpp"

namespace flashmma_torch {
namespace {

std::tuple<at::Tensor, at::Tensor> forward(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v,
                                           std::optional<double> softmax_scale, bool causal,
                                           int64_t window_left, int64_t window_right,
                                           double softcap,
                                           const std::optional<at::Tensor>& alibi_slopes,
                                           bool return_lse, bool deterministic, double dropout_p,
                                           int64_t dropout_seed, int64_t dropout_offset) {
  (void)deterministic;  // for the backward pass (the autograd formula reads it); forward always is
  check_operand(q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  check_operand(k, "k", "(batch, seqlen_k, heads_kv, head_dim)");
  check_operand(v, "v", "(batch, seqlen_k, heads_kv, head_dim)");
  check_same_kind(q, k, v);

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
  check_heads(heads_q, heads_kv, head_dim);
  check_scale_and_softcap(softmax_scale, softcap);
  const AlibiSlopes alibi = alibi_slopes.has_value()
                                ? prepare_alibi_slopes(*alibi_slopes, q, batch, heads_q)
                                : AlibiSlopes{};

  const c10::cuda::CUDAGuard device_guard(q.device());
  // The scale follows the caller's head dim, not the padded one.
  const double scale = softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const at::TensorOptions lse_options = q.options().dtype(at::kFloat);

  // `out` is allocated with the padded head dim in every case, so that its strides depend on the
  // shapes only (the fake implementation computes the same ones).
  const int64_t padded_dim = padded_head_dim(head_dim);
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
  set_tensors(params, q_ready, k_ready, v_ready, out, return_lse ? &lse : nullptr);
  params.batch = batch;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = padded_dim;
  params.softmax_scale = static_cast<float>(scale);
  set_variant(params, causal, window_left, window_right, softcap, alibi);
  set_dropout(params, dropout_p, dropout_seed, dropout_offset);
  run_forward(params, q.options());
  return {out.narrow(3, 0, head_dim), lse};
}


// A packed int32 [batch + 1] (or [batch]) array of lengths on q's device, as the kernels read it.
void check_lengths_array(const at::Tensor& t, const char* name, int64_t size, const at::Tensor& q) {
  TORCH_CHECK_VALUE(t.defined(), "flashmma_torch: ", name, " is an undefined tensor");
  TORCH_CHECK_VALUE(t.is_cuda() && t.device() == q.device(), "flashmma_torch: ", name,
                    " must be a CUDA tensor on q's device (", q.device(), "; got a tensor on ",
                    t.device(), ")");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kInt, "flashmma_torch: ", name,
                   " must be torch.int32 (got ", t.scalar_type(), ")");
  TORCH_CHECK_VALUE(t.dim() == 1 && t.size(0) == size, "flashmma_torch: ", name,
                    " must have shape (", size, ",) (got ", t.sizes(), ")");
  TORCH_CHECK_VALUE(t.is_contiguous(), "flashmma_torch: ", name, " must be contiguous");
}

// FlashAttention-2's flash_attn_varlen_func: q (total_q, heads_q, d), k and v (total_k, heads_kv,
// d), sequence b at rows [cu_seqlens[b], cu_seqlens[b + 1]); out (total_q, heads_q, d), lse
// (heads_q, total_q).
std::tuple<at::Tensor, at::Tensor> varlen_forward(
    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, const at::Tensor& cu_seqlens_q,
    const at::Tensor& cu_seqlens_k, const std::optional<at::Tensor>& seqused_k,
    int64_t max_seqlen_q, int64_t max_seqlen_k, std::optional<double> softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap,
    const std::optional<at::Tensor>& alibi_slopes, bool return_lse, bool deterministic,
    double dropout_p, int64_t dropout_seed, int64_t dropout_offset) {
  (void)deterministic;  // for the backward pass (the autograd formula reads it)
  check_operand(q, "q", "(total_q, heads_q, head_dim)", 3);
  check_operand(k, "k", "(total_k, heads_kv, head_dim)", 3);
  check_operand(v, "v", "(total_k, heads_kv, head_dim)", 3);
  check_same_kind(q, k, v);
  const int64_t total_q = q.size(0);
  const int64_t heads_q = q.size(1);
  const int64_t head_dim = q.size(2);
  const int64_t heads_kv = k.size(1);
  TORCH_CHECK_VALUE(k.size(2) == head_dim, "flashmma_torch: q and k must have the same head dim (got ",
                    head_dim, " and ", k.size(2), ")");
  check_heads(heads_q, heads_kv, head_dim);
  TORCH_CHECK_VALUE(cu_seqlens_q.defined() && cu_seqlens_q.dim() == 1 && cu_seqlens_q.size(0) >= 1,
                    "flashmma_torch: cu_seqlens_q must have shape (batch + 1,)");
  const int64_t batch = cu_seqlens_q.size(0) - 1;
  check_lengths_array(cu_seqlens_q, "cu_seqlens_q", batch + 1, q);
  check_lengths_array(cu_seqlens_k, "cu_seqlens_k", batch + 1, q);
  if (seqused_k.has_value()) check_lengths_array(*seqused_k, "seqused_k", batch, q);
  TORCH_CHECK_VALUE(max_seqlen_q >= 0 && max_seqlen_k >= 0,
                    "flashmma_torch: max_seqlen_q and max_seqlen_k must be >= 0 (got ",
                    max_seqlen_q, " and ", max_seqlen_k, ")");
  check_scale_and_softcap(softmax_scale, softcap);
  const AlibiSlopes alibi = alibi_slopes.has_value()
                                ? prepare_alibi_slopes(*alibi_slopes, q, batch, heads_q)
                                : AlibiSlopes{};

  const c10::cuda::CUDAGuard device_guard(q.device());
  const double scale = softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t padded_dim = padded_head_dim(head_dim);
  at::Tensor out = at::empty({total_q, heads_q, padded_dim}, q.options());
  at::Tensor lse = return_lse ? at::empty({heads_q, total_q}, q.options().dtype(at::kFloat))
                              : at::empty({0}, q.options().dtype(at::kFloat));
  if (batch == 0 || total_q == 0 || heads_q == 0 || max_seqlen_q == 0) {
    return {out.narrow(2, 0, head_dim), lse};
  }
  if (max_seqlen_k == 0 || k.size(0) == 0) {  // no sequence has a key
    out.zero_();
    lse.fill_(-std::numeric_limits<float>::infinity());
    return {out.narrow(2, 0, head_dim), lse};
  }

  const at::Tensor q_ready = prepare_operand(q, padded_dim);
  const at::Tensor k_ready = prepare_operand(k, padded_dim);
  const at::Tensor v_ready = prepare_operand(v, padded_dim);
  flashmma::ForwardParams params;
  set_tensors(params, q_ready, k_ready, v_ready, out, return_lse ? &lse : nullptr);
  params.batch = batch;
  params.seqlen_q = max_seqlen_q;
  params.seqlen_k = max_seqlen_k;
  params.total_q = total_q;
  params.total_k = k.size(0);  // lets the sm_90a kernel map packed K and V (TMA)
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = padded_dim;
  params.cu_seqlens_q = cu_seqlens_q.data_ptr<int32_t>();
  params.cu_seqlens_k = cu_seqlens_k.data_ptr<int32_t>();
  if (seqused_k.has_value()) params.seqused_k = seqused_k->data_ptr<int32_t>();
  params.softmax_scale = static_cast<float>(scale);
  set_variant(params, causal, window_left, window_right, softcap, alibi);
  set_dropout(params, dropout_p, dropout_seed, dropout_offset);
  run_forward(params, q.options());
  return {out.narrow(2, 0, head_dim), lse};
}

// Packed sequences of variable lengths for the backward pass (varlen_backward).
struct PackedSequences {
  const at::Tensor& cu_seqlens_q;
  const at::Tensor& cu_seqlens_k;
  int64_t max_seqlen_q;
  int64_t max_seqlen_k;
};

// The gradients of forward's (packed == nullptr: q (batch, seqlen_q, heads_q, d)) or of
// varlen_forward's (q (total_q, heads_q, d)) output for the same q, k, v and variant arguments,
// out and lse being what that call returned (lse: (batch, heads_q, seqlen_q) or (heads_q,
// total_q) fp32). A head dim that is not a multiple of 8 is zero-padded as in the forward (the
// padding's gradients are zero) and the gradients come back as views of the padded buffers.
std::tuple<at::Tensor, at::Tensor, at::Tensor> run_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, const PackedSequences* packed,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const std::optional<at::Tensor>& alibi_slopes, bool deterministic,
    double dropout_p, int64_t dropout_seed, int64_t dropout_offset) {
  const int64_t dims = packed != nullptr ? 3 : 4;
  const char* q_layout = packed != nullptr ? "(total_q, heads_q, head_dim)"
                                           : "(batch, seqlen_q, heads_q, head_dim)";
  const char* kv_layout = packed != nullptr ? "(total_k, heads_kv, head_dim)"
                                            : "(batch, seqlen_k, heads_kv, head_dim)";
  check_operand(q, "q", q_layout, dims);
  check_operand(k, "k", kv_layout, dims);
  check_operand(v, "v", kv_layout, dims);
  check_operand(out, "out", q_layout, dims);
  check_operand(dout, "dout", q_layout, dims);
  check_same_kind(q, k, v);
  TORCH_CHECK_VALUE(out.sizes() == q.sizes() && dout.sizes() == q.sizes(),
                    "flashmma_torch: out and dout must have q's shape ", q.sizes(), " (got ",
                    out.sizes(), " and ", dout.sizes(), ")");
  TORCH_CHECK_TYPE(out.scalar_type() == q.scalar_type() && dout.scalar_type() == q.scalar_type(),
                   "flashmma_torch: out and dout must have q's dtype");
  TORCH_CHECK_VALUE(out.device() == q.device() && dout.device() == q.device() &&
                        lse.device() == q.device(),
                    "flashmma_torch: out, dout and lse must be on q's device");
  const int64_t heads_q = q.size(dims - 2);
  const int64_t head_dim = q.size(dims - 1);
  const int64_t heads_kv = k.size(dims - 2);
  TORCH_CHECK_VALUE(k.size(dims - 1) == head_dim && (packed != nullptr || k.size(0) == q.size(0)),
                    "flashmma_torch: k must be ", kv_layout, " with q's ",
                    packed != nullptr ? "head dim" : "batch and head dim", " (got ", k.sizes(),
                    " for q ", q.sizes(), ")");
  int64_t batch, seqlen_q, seqlen_k, total_q = 0;
  if (packed != nullptr) {
    TORCH_CHECK_VALUE(packed->cu_seqlens_q.defined() && packed->cu_seqlens_q.dim() == 1 &&
                          packed->cu_seqlens_q.size(0) >= 1,
                      "flashmma_torch: cu_seqlens_q must have shape (batch + 1,)");
    batch = packed->cu_seqlens_q.size(0) - 1;
    check_lengths_array(packed->cu_seqlens_q, "cu_seqlens_q", batch + 1, q);
    check_lengths_array(packed->cu_seqlens_k, "cu_seqlens_k", batch + 1, q);
    TORCH_CHECK_VALUE(packed->max_seqlen_q >= 0 && packed->max_seqlen_k >= 0,
                      "flashmma_torch: max_seqlen_q and max_seqlen_k must be >= 0");
    seqlen_q = packed->max_seqlen_q;
    seqlen_k = packed->max_seqlen_k;
    total_q = q.size(0);
  } else {
    batch = q.size(0);
    seqlen_q = q.size(1);
    seqlen_k = k.size(1);
  }
  const std::vector<int64_t> lse_shape =
      packed != nullptr ? std::vector<int64_t>{heads_q, total_q}
                        : std::vector<int64_t>{batch, heads_q, seqlen_q};
  TORCH_CHECK_VALUE(lse.scalar_type() == at::kFloat && lse.sizes() == at::IntArrayRef(lse_shape) &&
                        lse.is_contiguous(),
                    "flashmma_torch: lse must be the forward's contiguous float32 ",
                    at::IntArrayRef(lse_shape), " tensor (got ", lse.scalar_type(), " ",
                    lse.sizes(), ")");
  check_heads(heads_q, heads_kv, head_dim);
  check_scale_and_softcap(softmax_scale, softcap);
  const AlibiSlopes alibi = alibi_slopes.has_value()
                                ? prepare_alibi_slopes(*alibi_slopes, q, batch, heads_q)
                                : AlibiSlopes{};

  const c10::cuda::CUDAGuard device_guard(q.device());
  const double scale = softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim)));
  const int64_t padded_dim = padded_head_dim(head_dim);
  const auto padded_like = [&](const at::Tensor& t) {
    std::vector<int64_t> sizes = t.sizes().vec();
    sizes.back() = padded_dim;
    return at::empty(sizes, q.options());
  };
  at::Tensor dq = padded_like(q);
  at::Tensor dk = padded_like(k);
  at::Tensor dv = padded_like(v);
  const auto narrowed = [&] {
    return std::make_tuple(dq.narrow(dims - 1, 0, head_dim), dk.narrow(dims - 1, 0, head_dim),
                           dv.narrow(dims - 1, 0, head_dim));
  };
  if (dq.numel() == 0 && dk.numel() == 0) return narrowed();
  if (batch == 0 || heads_q == 0 || seqlen_q == 0 || seqlen_k == 0 || dq.numel() == 0 ||
      dk.numel() == 0) {
    dq.zero_();
    dk.zero_();
    dv.zero_();
    return narrowed();
  }

  const at::Tensor q_ready = prepare_operand(q, padded_dim);
  const at::Tensor k_ready = prepare_operand(k, padded_dim);
  const at::Tensor v_ready = prepare_operand(v, padded_dim);
  const at::Tensor out_ready = prepare_operand(out, padded_dim);
  const at::Tensor dout_ready = prepare_operand(dout, padded_dim);

  flashmma::BackwardParams params;
  set_tensors(params, q_ready, k_ready, v_ready, out_ready, &lse);
  params.batch = batch;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = padded_dim;
  if (packed != nullptr) {
    params.cu_seqlens_q = packed->cu_seqlens_q.data_ptr<int32_t>();
    params.cu_seqlens_k = packed->cu_seqlens_k.data_ptr<int32_t>();
    params.total_q = total_q;
  }
  params.softmax_scale = static_cast<float>(scale);
  set_variant(params, causal, window_left, window_right, softcap, alibi);
  set_dropout(params, dropout_p, dropout_seed, dropout_offset);
  params.d_o = dout_ready.data_ptr();
  params.dq = dq.data_ptr();
  params.dk = dk.data_ptr();
  params.dv = dv.data_ptr();
  params.do_strides = strides_of(dout_ready);
  params.dq_strides = strides_of(dq);
  params.dk_strides = strides_of(dk);
  params.dv_strides = strides_of(dv);
  // The fp32 dQ accumulator and two values per query row, from PyTorch's caching allocator.
  const std::size_t workspace_bytes = flashmma::backward_workspace_bytes(params);
  at::Tensor workspace =
      at::empty({static_cast<int64_t>(workspace_bytes)}, q.options().dtype(at::kByte));
  params.workspace = workspace.data_ptr();
  params.workspace_bytes = workspace_bytes;
  params.deterministic = deterministic;
  raise_on_error(
      launch_backward(params, at::cuda::getCurrentCUDAStream(q.device().index()).stream()));
  return narrowed();
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, std::optional<double> softmax_scale, bool causal,
    int64_t window_left, int64_t window_right, double softcap,
    const std::optional<at::Tensor>& alibi_slopes, bool deterministic, double dropout_p,
    int64_t dropout_seed, int64_t dropout_offset) {
  return run_backward(dout, q, k, v, out, lse, nullptr, softmax_scale, causal, window_left,
                      window_right, softcap, alibi_slopes, deterministic, dropout_p, dropout_seed,
                      dropout_offset);
}

std::tuple<at::Tensor, at::Tensor, at::Tensor> varlen_backward(
    const at::Tensor& dout, const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
    const at::Tensor& out, const at::Tensor& lse, const at::Tensor& cu_seqlens_q,
    const at::Tensor& cu_seqlens_k, int64_t max_seqlen_q, int64_t max_seqlen_k,
    std::optional<double> softmax_scale, bool causal, int64_t window_left, int64_t window_right,
    double softcap, const std::optional<at::Tensor>& alibi_slopes, bool deterministic,
    double dropout_p, int64_t dropout_seed, int64_t dropout_offset) {
  const PackedSequences packed{cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k};
  return run_backward(dout, q, k, v, out, lse, &packed, softmax_scale, causal, window_left,
                      window_right, softcap, alibi_slopes, deterministic, dropout_p, dropout_seed,
                      dropout_offset);
}

// FlashAttention-2's flash_attn_with_kvcache: q (batch, seqlen_q, heads_q, d) over a cache
// k_cache, v_cache (batch_cache, seqlen_cache, heads_kv, d), or pages (num_pages, page_size,
// heads_kv, d) through block_table (batch, pages per sequence); with k and v (batch, seqlen_new,
// heads_kv, d) the new rows are written into the cache in place at cache_seqlens first, rotated
// by rotary_cos / rotary_sin when given. out (batch, seqlen_q, heads_q, d), lse (batch, heads_q,
// seqlen_q).
std::tuple<at::Tensor, at::Tensor> kvcache_forward(
    const at::Tensor& q, const at::Tensor& k_cache, const at::Tensor& v_cache,
    const std::optional<at::Tensor>& k, const std::optional<at::Tensor>& v,
    const std::optional<at::Tensor>& rotary_cos, const std::optional<at::Tensor>& rotary_sin,
    const std::optional<at::Tensor>& cache_seqlens,
    const std::optional<at::Tensor>& cache_batch_idx,
    const std::optional<at::Tensor>& block_table, std::optional<double> softmax_scale,
    bool causal, int64_t window_left, int64_t window_right, double softcap,
    bool rotary_interleaved, const std::optional<at::Tensor>& alibi_slopes, int64_t num_splits,
    bool return_lse) {
  const bool paged = block_table.has_value();
  check_operand(q, "q", "(batch, seqlen_q, heads_q, head_dim)");
  const char* cache_layout = paged ? "(num_pages, page_size, heads_kv, head_dim)"
                                   : "(batch_cache, seqlen_cache, heads_kv, head_dim)";
  check_operand(k_cache, "k_cache", cache_layout);
  check_operand(v_cache, "v_cache", cache_layout);
  check_same_kind(q, k_cache, v_cache);
  const int64_t batch = q.size(0);
  const int64_t seqlen_q = q.size(1);
  const int64_t heads_q = q.size(2);
  const int64_t head_dim = q.size(3);
  const int64_t heads_kv = k_cache.size(2);
  TORCH_CHECK_VALUE(k_cache.size(3) == head_dim,
                    "flashmma_torch: q and k_cache must have the same head dim (got ", head_dim,
                    " and ", k_cache.size(3), ")");
  check_heads(heads_q, heads_kv, head_dim);
  // The cache is read and written where it is: it cannot be padded or copied.
  TORCH_CHECK_VALUE(head_dim % kHeadDimMultiple == 0,
                    "flashmma_torch: flash_attn_with_kvcache needs a head dim that is a multiple "
                    "of 8 (got ", head_dim, "): the cache is used in place and cannot be padded");
  TORCH_CHECK_VALUE(meets_alignment(k_cache) && meets_alignment(v_cache),
                    "flashmma_torch: k_cache and v_cache must be 16-byte aligned, with strides "
                    "that are multiples of 8 elements (the cache is used in place and cannot be "
                    "copied)");
  TORCH_CHECK_VALUE(k.has_value() == v.has_value(),
                    "flashmma_torch: k and v go together: give both new rows or neither");
  TORCH_CHECK_VALUE(rotary_cos.has_value() == rotary_sin.has_value(),
                    "flashmma_torch: rotary_cos and rotary_sin go together");
  TORCH_CHECK_VALUE(!rotary_cos.has_value() || k.has_value(),
                    "flashmma_torch: rotary_cos and rotary_sin apply to new keys: give k and v");
  TORCH_CHECK_VALUE(!k.has_value() || cache_seqlens.has_value(),
                    "flashmma_torch: k and v need cache_seqlens (where the new rows go)");
  TORCH_CHECK_VALUE(num_splits >= 0, "flashmma_torch: num_splits must be >= 0 (got ", num_splits,
                    ")");
  if (cache_seqlens.has_value()) check_lengths_array(*cache_seqlens, "cache_seqlens", batch, q);
  if (cache_batch_idx.has_value()) {
    TORCH_CHECK_VALUE(!paged, "flashmma_torch: cache_batch_idx cannot be used with block_table");
    check_lengths_array(*cache_batch_idx, "cache_batch_idx", batch, q);
  }
  int64_t pages_per_sequence = 0;
  if (paged) {
    const at::Tensor& table = *block_table;
    TORCH_CHECK_VALUE(table.dim() == 2 && table.size(0) == batch,
                      "flashmma_torch: block_table must have shape (batch, pages per sequence) = (",
                      batch, ", ...) (got ", table.sizes(), ")");
    TORCH_CHECK_VALUE(table.is_cuda() && table.device() == q.device(),
                      "flashmma_torch: block_table must be a CUDA tensor on q's device");
    TORCH_CHECK_TYPE(table.scalar_type() == at::kInt,
                     "flashmma_torch: block_table must be torch.int32 (got ", table.scalar_type(),
                     ")");
    TORCH_CHECK_VALUE(table.stride(1) == 1, "flashmma_torch: block_table's rows must be contiguous");
    pages_per_sequence = table.size(1);
  }
  check_scale_and_softcap(softmax_scale, softcap);
  const AlibiSlopes alibi = alibi_slopes.has_value()
                                ? prepare_alibi_slopes(*alibi_slopes, q, batch, heads_q)
                                : AlibiSlopes{};

  const c10::cuda::CUDAGuard device_guard(q.device());
  at::Tensor out = at::empty({batch, seqlen_q, heads_q, head_dim}, q.options());
  at::Tensor lse = return_lse ? at::empty({batch, heads_q, seqlen_q}, q.options().dtype(at::kFloat))
                              : at::empty({0}, q.options().dtype(at::kFloat));
  const int64_t seqlen_k = paged ? pages_per_sequence * k_cache.size(1) : k_cache.size(1);
  if (batch == 0 || seqlen_q == 0 || heads_q == 0) return {out, lse};

  const at::Tensor q_ready = prepare_operand(q, head_dim);
  at::Tensor k_ready, v_ready;
  flashmma::ForwardParams params;
  set_tensors(params, q_ready, k_cache, v_cache, out, return_lse ? &lse : nullptr);
  params.batch = batch;
  params.seqlen_q = seqlen_q;
  params.seqlen_k = seqlen_k;
  params.heads_q = heads_q;
  params.heads_kv = heads_kv;
  params.head_dim = head_dim;
  params.softmax_scale =
      static_cast<float>(softmax_scale.value_or(1.0 / std::sqrt(static_cast<double>(head_dim))));
  params.num_splits = static_cast<int>(num_splits);
  if (paged) {
    params.block_table = block_table->data_ptr<int32_t>();
    params.block_table_batch_stride = block_table->stride(0);
    params.page_size = k_cache.size(1);
    params.num_pages = k_cache.size(0);
  }
  if (cache_batch_idx.has_value()) {
    params.kv_batch_index = cache_batch_idx->data_ptr<int32_t>();
    params.kv_batch_entries = k_cache.size(0);
  }
  if (k.has_value()) {
    check_operand(*k, "k", "(batch, seqlen_new, heads_kv, head_dim)");
    check_operand(*v, "v", "(batch, seqlen_new, heads_kv, head_dim)");
    check_same_kind(q, *k, *v);
    TORCH_CHECK_VALUE(k->size(0) == batch && k->size(2) == heads_kv && k->size(3) == head_dim,
                      "flashmma_torch: k must have shape (batch, seqlen_new, heads_kv, head_dim) = (",
                      batch, ", seqlen_new, ", heads_kv, ", ", head_dim, ") (got ", k->sizes(), ")");
    k_ready = prepare_operand(*k, head_dim);
    v_ready = prepare_operand(*v, head_dim);
    params.k_new = k_ready.data_ptr();
    params.v_new = v_ready.data_ptr();
    params.k_new_strides = strides_of(k_ready);
    params.v_new_strides = strides_of(v_ready);
    params.seqlen_new = k->size(1);
    params.cache_seqlens = cache_seqlens->data_ptr<int32_t>();
  } else if (cache_seqlens.has_value()) {
    params.seqused_k = cache_seqlens->data_ptr<int32_t>();
  }
  at::Tensor cos_ready, sin_ready;
  if (rotary_cos.has_value()) {
    for (const at::Tensor* table : {&*rotary_cos, &*rotary_sin}) {
      TORCH_CHECK_VALUE(table->dim() == 2 && table->is_cuda() && table->device() == q.device(),
                        "flashmma_torch: rotary_cos and rotary_sin must be 2-D CUDA tensors "
                        "(seqlen_ro, rotary_dim / 2) on q's device");
      TORCH_CHECK_TYPE(table->scalar_type() == q.scalar_type(),
                       "flashmma_torch: rotary_cos and rotary_sin must have q's dtype (",
                       q.scalar_type(), "; got ", table->scalar_type(), ")");
    }
    TORCH_CHECK_VALUE(rotary_cos->sizes() == rotary_sin->sizes(),
                      "flashmma_torch: rotary_cos and rotary_sin must have the same shape");
    cos_ready = rotary_cos->contiguous();
    sin_ready = rotary_sin->contiguous();
    params.rotary_cos = cos_ready.data_ptr();
    params.rotary_sin = sin_ready.data_ptr();
    params.rotary_dim = 2 * cos_ready.size(1);
    params.rotary_positions = cos_ready.size(0);
    params.rotary_interleaved = rotary_interleaved;
  }
  set_variant(params, causal, window_left, window_right, softcap, alibi);
  run_forward(params, q.options());
  return {out, lse};
}

// The dropout mask that forward and backward draw for (dropout_p, seed, offset): (batch, heads_q,
// seqlen_q, seqlen_k) bool on the CPU, True where a probability is kept (attention/philox.hpp; a
// packed sequence b's mask is entry b, cut to its lengths). For tests and for reproducing a call.
at::Tensor dropout_mask(int64_t batch, int64_t heads, int64_t seqlen_q, int64_t seqlen_k,
                        double dropout_p, int64_t seed, int64_t offset) {
  TORCH_CHECK_VALUE(batch >= 0 && heads >= 0 && seqlen_q >= 0 && seqlen_k >= 0,
                    "flashmma_torch: dropout_mask's sizes must be >= 0");
  TORCH_CHECK_VALUE(dropout_p >= 0.0 && dropout_p < 1.0,
                    "flashmma_torch: dropout_p must be in [0, 1) (got ", dropout_p, ")");
  TORCH_CHECK_VALUE(offset >= 0 && offset <= 0xFFFFFFFFll,
                    "flashmma_torch: dropout_offset must be in [0, 2^32) (got ", offset, ")");
  at::Tensor mask = at::empty({batch, heads, seqlen_q, seqlen_k}, at::TensorOptions().dtype(at::kBool));
  bool* kept = mask.data_ptr<bool>();
  const uint32_t threshold = flashmma::dropout_threshold(static_cast<float>(dropout_p));
  for (int64_t b = 0; b < batch; ++b) {
    for (int64_t h = 0; h < heads; ++h) {
      for (int64_t i = 0; i < seqlen_q; ++i) {
        for (int64_t j = 0; j < seqlen_k; ++j) {
          *kept++ = flashmma::dropout_keep(static_cast<uint64_t>(seed), static_cast<uint32_t>(offset),
                                           b, heads, h, static_cast<int32_t>(i),
                                           static_cast<int32_t>(j), threshold);
        }
      }
    }
  }
  return mask;
}

}  // namespace
}  // namespace flashmma_torch

TORCH_LIBRARY(flashmma, m) {
  m.def(
      "forward(Tensor q, Tensor k, Tensor v, float? softmax_scale, bool causal, int window_left,"
      " int window_right, float softcap, Tensor? alibi_slopes, bool return_lse,"
      " bool deterministic=False, float dropout_p=0., int dropout_seed=0, int dropout_offset=0)"
      " -> (Tensor out, Tensor lse)");
  m.def(
      "varlen_forward(Tensor q, Tensor k, Tensor v, Tensor cu_seqlens_q, Tensor cu_seqlens_k,"
      " Tensor? seqused_k, int max_seqlen_q, int max_seqlen_k, float? softmax_scale, bool causal,"
      " int window_left, int window_right, float softcap, Tensor? alibi_slopes, bool return_lse,"
      " bool deterministic=False, float dropout_p=0., int dropout_seed=0, int dropout_offset=0)"
      " -> (Tensor out, Tensor lse)");
  m.def(
      "kvcache_forward(Tensor q, Tensor(a!) k_cache, Tensor(b!) v_cache, Tensor? k, Tensor? v,"
      " Tensor? rotary_cos, Tensor? rotary_sin, Tensor? cache_seqlens, Tensor? cache_batch_idx,"
      " Tensor? block_table, float? softmax_scale, bool causal, int window_left,"
      " int window_right, float softcap, bool rotary_interleaved, Tensor? alibi_slopes,"
      " int num_splits, bool return_lse) -> (Tensor out, Tensor lse)");
  m.def(
      "backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,"
      " float? softmax_scale, bool causal, int window_left, int window_right, float softcap,"
      " Tensor? alibi_slopes, bool deterministic, float dropout_p=0., int dropout_seed=0,"
      " int dropout_offset=0) -> (Tensor dq, Tensor dk, Tensor dv)");
  m.def(
      "varlen_backward(Tensor dout, Tensor q, Tensor k, Tensor v, Tensor out, Tensor lse,"
      " Tensor cu_seqlens_q, Tensor cu_seqlens_k, int max_seqlen_q, int max_seqlen_k,"
      " float? softmax_scale, bool causal, int window_left, int window_right, float softcap,"
      " Tensor? alibi_slopes, bool deterministic, float dropout_p=0., int dropout_seed=0,"
      " int dropout_offset=0) -> (Tensor dq, Tensor dk, Tensor dv)");
  // No tensor argument: one kernel for every backend.
  m.def(
      "dropout_mask(int batch, int heads, int seqlen_q, int seqlen_k, float dropout_p,"
      " int dropout_seed, int dropout_offset=0) -> Tensor",
      &flashmma_torch::dropout_mask);
}

// CPU tensors reach the same checks, which refuse them with a message naming the argument.
TORCH_LIBRARY_IMPL(flashmma, CUDA, m) {
  m.impl("forward", &flashmma_torch::forward);
  m.impl("varlen_forward", &flashmma_torch::varlen_forward);
  m.impl("kvcache_forward", &flashmma_torch::kvcache_forward);
  m.impl("backward", &flashmma_torch::backward);
  m.impl("varlen_backward", &flashmma_torch::varlen_backward);
}
TORCH_LIBRARY_IMPL(flashmma, CPU, m) {
  m.impl("forward", &flashmma_torch::forward);
  m.impl("varlen_forward", &flashmma_torch::varlen_forward);
  m.impl("kvcache_forward", &flashmma_torch::kvcache_forward);
  m.impl("backward", &flashmma_torch::backward);
  m.impl("varlen_backward", &flashmma_torch::varlen_backward);
}

// Importing the module (flashmma_torch._C) is what loads the library and registers the operator.
PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "flashmma's attention, registered as torch.ops.flashmma.forward, "
            "varlen_forward, kvcache_forward and backward (use flashmma_torch.flash_attn_func, "
            "flash_attn_varlen_func and flash_attn_with_kvcache)";
}
