"""The Python side of the operators torch.ops.flashmma.forward, varlen_forward and kvcache_forward
(defined and run on CUDA by the compiled extension, csrc/flashmma_torch.cpp):

- their fake implementations, which give torch.compile and torch.export the outputs' shapes,
  dtypes and strides without running the kernel;
- their autograd formula. There is no backward pass yet, so the formula refuses as soon as the
  forward is called with an input that requires grad in grad mode, rather than returning an output
  that silently has no gradient. The backward pass will replace _setup_context and _backward here,
  on the same operators. kvcache_forward writes the cache in place, which PyTorch gives no
  autograd formula: flash_attn_with_kvcache refuses inputs that require grad itself
  (refuse_grad below).

Imported by flashmma_torch/__init__.py once the extension is loaded.
"""

import torch

OPERATOR = "flashmma::forward"
VARLEN_OPERATOR = "flashmma::varlen_forward"
KVCACHE_OPERATOR = "flashmma::kvcache_forward"

# flashmma takes head dims in multiples of 8: the extension pads the head dim and returns a view
# of the padded output, so `out` has a row stride of the padded head dim (see the C++ binding).
HEAD_DIM_MULTIPLE = 8


def _padded(head_dim):
    return (head_dim + HEAD_DIM_MULTIPLE - 1) // HEAD_DIM_MULTIPLE * HEAD_DIM_MULTIPLE


BACKWARD_MISSING = (
    "flashmma_torch: the backward pass is not implemented yet, and flash_attn_func (or "
    "flash_attn_varlen_func, flash_attn_with_kvcache) was called "
    "with q, k or v requiring grad while grad mode is enabled. Call it without grad: under "
    "`with torch.no_grad():` (or torch.inference_mode()), or on q.detach(), k.detach(), v.detach()."
)


@torch.library.register_fake(OPERATOR)
def _forward_fake(q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, return_lse):
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
    window_left, window_right, softcap, alibi_slopes, return_lse,
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


def _setup_context(ctx, inputs, output):
    # Runs in the forward call, only when grad mode is on and q, k or v requires grad.
    raise NotImplementedError(BACKWARD_MISSING)


def _backward(ctx, grad_out, grad_lse):
    raise NotImplementedError(BACKWARD_MISSING)


torch.library.register_autograd(OPERATOR, _backward, setup_context=_setup_context)
torch.library.register_autograd(VARLEN_OPERATOR, _backward, setup_context=_setup_context)


def refuse_grad(*tensors):
    """Raises NotImplementedError(BACKWARD_MISSING) when grad mode is on and a tensor requires grad:
    for the operators without an autograd formula."""
    if torch.is_grad_enabled() and any(t is not None and t.requires_grad for t in tensors):
        raise NotImplementedError(BACKWARD_MISSING)
