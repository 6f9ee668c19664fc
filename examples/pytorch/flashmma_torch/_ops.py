"""The Python side of the operators torch.ops.flashmma.forward, varlen_forward, kvcache_forward,
backward and varlen_backward (defined and run on CUDA by the compiled extension, csrc/flashmma_torch.cpp):

- their fake implementations, which give torch.compile and torch.export the outputs' shapes,
  dtypes and strides without running the kernel;
- forward's autograd formula: it saves q, k, v, out and lse (never the probabilities, nor the
  dropout mask: the backward regenerates it from dropout_p, the seed and the offset) and runs
  torch.ops.flashmma.backward. forward must then return its lse (flash_attn_func asks for it
  whenever a gradient may be needed); the lse output itself is not differentiable, as in
  FlashAttention. varlen_forward's formula does the same with torch.ops.flashmma.varlen_backward
  (and refuses seqused_k, which that backward does not take, as soon as the forward is called
  with an input that requires grad in grad mode, rather than returning an output that silently
  has no gradient). kvcache_forward writes the cache in place, which PyTorch gives no
  autograd formula: flash_attn_with_kvcache refuses inputs that require grad itself
  (refuse_grad below).

Imported by flashmma_torch/__init__.py once the extension is loaded.
"""

import torch

OPERATOR = "flashmma::forward"
BACKWARD_OPERATOR = "flashmma::backward"
VARLEN_BACKWARD_OPERATOR = "flashmma::varlen_backward"
VARLEN_OPERATOR = "flashmma::varlen_forward"
KVCACHE_OPERATOR = "flashmma::kvcache_forward"

# flashmma takes head dims in multiples of 8: the extension pads the head dim and returns a view
# of the padded output, so `out` has a row stride of the padded head dim (see the C++ binding).
HEAD_DIM_MULTIPLE = 8


def _padded(head_dim):
    return (head_dim + HEAD_DIM_MULTIPLE - 1) // HEAD_DIM_MULTIPLE * HEAD_DIM_MULTIPLE


BACKWARD_MISSING = (
    "flashmma_torch: the backward pass of KV caches is not implemented yet, and "
    "flash_attn_with_kvcache was called with q, k or v requiring grad while grad mode is enabled. "
    "Call it without grad: under `with torch.no_grad():` (or torch.inference_mode()), or on "
    "q.detach(), k.detach(), v.detach()."
)

SEQUSED_K_BACKWARD = (
    "flashmma_torch: the backward pass of flash_attn_varlen_func with seqused_k is not "
    "implemented yet, and it was called with q, k or v requiring grad while grad mode is enabled. "
    "Call it without grad (torch.no_grad(), or detached tensors), or without seqused_k."
)

LSE_NEEDED = (
    "flashmma_torch: torch.ops.flashmma.forward was called with return_lse=False on inputs that "
    "require grad; its backward pass needs the lse. Call it with return_lse=True (flash_attn_func "
    "does so whenever a gradient may be needed)."
)


@torch.library.register_fake(OPERATOR)
def _forward_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, return_lse,
                  deterministic=False, dropout_p=0.0, dropout_seed=0, dropout_offset=0):
    # The outputs' sizes and strides depend on q and return_lse alone; the CUDA implementation
    # checks the rest when it runs. The slopes' device is checked here too: the dispatcher picks
    # this implementation for any call that has a meta tensor among its inputs.
    torch._check(q.dim() == 4, lambda: f"flashmma_torch: q must have 4 dimensions (got {q.dim()})")
    torch._check(k.dim() == 4, lambda: f"flashmma_torch: k must have 4 dimensions (got {k.dim()})")
    torch._check(v.dim() == 4, lambda: f"flashmma_torch: v must have 4 dimensions (got {v.dim()})")
    if alibi_slopes is not None:
        torch._check_value(
            alibi_slopes.device == q.device,
            lambda: f"flashmma_torch: alibi_slopes must be a CUDA tensor on q's device ({q.device}; "
            f"got a tensor on {alibi_slopes.device})",
        )
    batch, seqlen_q, heads_q, head_dim = q.shape
    out = q.new_empty((batch, seqlen_q, heads_q, _padded(head_dim)))[..., :head_dim]
    lse_shape = (batch, heads_q, seqlen_q) if return_lse else (0,)
    lse = q.new_empty(lse_shape, dtype=torch.float32)
    return out, lse


@torch.library.register_fake(VARLEN_OPERATOR)
def _varlen_forward_fake(
    q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
    window_left, window_right, softcap, alibi_slopes, return_lse, deterministic=False, dropout_p=0.0,
    dropout_seed=0, dropout_offset=0,
):
    torch._check(q.dim() == 3, lambda: f"flashmma_torch: q must have 3 dimensions (got {q.dim()})")
    torch._check(k.dim() == 3, lambda: f"flashmma_torch: k must have 3 dimensions (got {k.dim()})")
    torch._check(v.dim() == 3, lambda: f"flashmma_torch: v must have 3 dimensions (got {v.dim()})")
    total_q, heads_q, head_dim = q.shape
    out = q.new_empty((total_q, heads_q, _padded(head_dim)))[..., :head_dim]
    lse_shape = (heads_q, total_q) if return_lse else (0,)
    lse = q.new_empty(lse_shape, dtype=torch.float32)
    return out, lse


@torch.library.register_fake(KVCACHE_OPERATOR)
def _kvcache_forward_fake(
    q, k_cache, v_cache, k, v, rotary_cos, rotary_sin, cache_seqlens, cache_batch_idx, block_table,
    softmax_scale, causal, window_left, window_right, softcap, rotary_interleaved, alibi_slopes,
    num_splits, return_lse,
):
    # The cache is written in place (the schema says so); the outputs are new tensors.
    torch._check(q.dim() == 4, lambda: f"flashmma_torch: q must have 4 dimensions (got {q.dim()})")
    batch, seqlen_q, heads_q, head_dim = q.shape
    out = q.new_empty((batch, seqlen_q, heads_q, head_dim))
    lse_shape = (batch, heads_q, seqlen_q) if return_lse else (0,)
    return out, q.new_empty(lse_shape, dtype=torch.float32)


@torch.library.register_fake(BACKWARD_OPERATOR)
def _backward_fake(dout, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
                   alibi_slopes, deterministic, dropout_p=0.0, dropout_seed=0, dropout_offset=0):
    # The gradients are views of buffers of the padded head dim, as out is (csrc/flashmma_torch.cpp).
    return _padded_gradient(q), _padded_gradient(k), _padded_gradient(v)


@torch.library.register_fake(VARLEN_BACKWARD_OPERATOR)
def _varlen_backward_fake(dout, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k,
                          softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
                          deterministic, dropout_p=0.0, dropout_seed=0, dropout_offset=0):
    return _padded_gradient(q), _padded_gradient(k), _padded_gradient(v)


def _padded_gradient(like):
    # A view of a buffer of the padded head dim, as out is (csrc/flashmma_torch.cpp).
    return like.new_empty(like.shape[:-1] + (_padded(like.shape[-1]),))[..., :like.shape[-1]]


def _trailing_arguments(given):
    """(deterministic, dropout_p, dropout_seed, dropout_offset): the schema's defaulted trailing
    arguments, as far as a call gave them."""
    return tuple(given) + (False, 0.0, 0, 0)[len(given):]


def _forward_setup_context(ctx, inputs, output):
    # Runs in the forward call, only when grad mode is on and q, k or v requires grad.
    q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, return_lse = inputs[:10]
    deterministic, dropout_p, dropout_seed, dropout_offset = _trailing_arguments(inputs[10:])
    out, lse = output
    if not return_lse:
        raise RuntimeError(LSE_NEEDED)
    ctx.save_for_backward(q, k, v, out, lse, alibi_slopes)
    ctx.arguments = (softmax_scale, causal, window_left, window_right, softcap, deterministic)
    # The mask is not saved: the backward regenerates it from these three.
    ctx.dropout = (dropout_p, dropout_seed, dropout_offset)
    ctx.mark_non_differentiable(lse)


def _forward_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, alibi_slopes = ctx.saved_tensors
    softmax_scale, causal, window_left, window_right, softcap, deterministic = ctx.arguments
    if grad_out.stride(-1) != 1:  # e.g. the expanded gradient of a sum
        grad_out = grad_out.contiguous()
    dq, dk, dv = torch.ops.flashmma.backward(
        grad_out, q, k, v, out, lse, softmax_scale, causal, window_left, window_right, softcap,
        alibi_slopes, deterministic, *ctx.dropout,
    )
    return (dq, dk, dv) + (None,) * (len(ctx.needs_input_grad) - 3)


def _varlen_setup_context(ctx, inputs, output):
    (q, k, v, cu_seqlens_q, cu_seqlens_k, seqused_k, max_seqlen_q, max_seqlen_k, softmax_scale, causal,
     window_left, window_right, softcap, alibi_slopes, return_lse) = inputs[:15]
    deterministic, dropout_p, dropout_seed, dropout_offset = _trailing_arguments(inputs[15:])
    if seqused_k is not None:
        raise NotImplementedError(SEQUSED_K_BACKWARD)
    out, lse = output
    if not return_lse:
        raise RuntimeError(LSE_NEEDED)
    ctx.save_for_backward(q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes)
    ctx.arguments = (max_seqlen_q, max_seqlen_k, softmax_scale, causal, window_left, window_right, softcap,
                     deterministic)
    ctx.dropout = (dropout_p, dropout_seed, dropout_offset)
    ctx.mark_non_differentiable(lse)


def _varlen_backward(ctx, grad_out, grad_lse):
    q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, alibi_slopes = ctx.saved_tensors
    if grad_out.stride(-1) != 1:
        grad_out = grad_out.contiguous()
    dq, dk, dv = torch.ops.flashmma.varlen_backward(
        grad_out, q, k, v, out, lse, cu_seqlens_q, cu_seqlens_k, *ctx.arguments[:7], alibi_slopes,
        ctx.arguments[7], *ctx.dropout,
    )
    return (dq, dk, dv) + (None,) * (len(ctx.needs_input_grad) - 3)


torch.library.register_autograd(OPERATOR, _forward_backward, setup_context=_forward_setup_context)
torch.library.register_autograd(VARLEN_OPERATOR, _varlen_backward, setup_context=_varlen_setup_context)


def refuse_grad(*tensors):
    """Raises NotImplementedError(BACKWARD_MISSING) when grad mode is on and a tensor requires grad:
    for the operators without an autograd formula."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise NotImplementedError(BACKWARD_MISSING)
