"""flashmma_torch: flashmma's FlashAttention forward pass for PyTorch tensors.

    from flashmma_torch import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)            # (batch, seqlen_q, heads_q, head_dim)
    out, lse = flash_attn_func(q, k, v, return_lse=True)   # lse: (batch, heads_q, seqlen_q) fp32

Importing the package loads the compiled extension; from a source checkout without a prior
`pip install`, the first import compiles it (a few minutes) and later imports reuse that build.
Forward only: the outputs carry no autograd history.
"""

import math

from ._extension import load_extension

_C = load_extension()

__all__ = ["flash_attn_func"]


def flash_attn_func(q, k, v, softmax_scale=None, causal=False, return_lse=False):
    """Scaled dot-product attention, forward pass, in FlashAttention's conventions.

    Args:
        q: (batch, seqlen_q, heads_q, head_dim) torch.float16 or torch.bfloat16 CUDA tensor.
        k, v: (batch, seqlen_k, heads_kv, head_dim), same dtype and device as q. heads_q must be
            a multiple of heads_kv: query head h reads key/value head h // (heads_q // heads_kv)
            (multi-query and grouped-query attention).
            Any strides are accepted as long as the last dimension is contiguous
            (stride(-1) == 1); head_dim may be anything from 1 to 256.
        softmax_scale: multiplies q.k before the softmax; None means 1 / sqrt(head_dim).
        causal: if True, key j is visible to query i iff j <= i + seqlen_k - seqlen_q (the mask
            is aligned to the bottom-right corner, as in FlashAttention >= 2.1). A query row that
            sees no key gets zeros.
        return_lse: also return the log-sum-exp of the scaled scores.

    Returns:
        out, (batch, seqlen_q, heads_q, head_dim) in q's dtype; with return_lse=True the pair
        (out, lse), lse being (batch, heads_q, seqlen_q) float32 in natural log (-inf for a row
        that sees no key).

    Raises:
        ValueError, TypeError or RuntimeError naming the offending argument, for inputs on the
        CPU or on different devices, other dtypes, a wrong number of dimensions, mismatched
        shapes, heads_q not a multiple of heads_kv or head_dim above 256.

    The kernel runs on PyTorch's current CUDA stream for q's device.
    """
    scale = math.nan if softmax_scale is None else float(softmax_scale)
    out, lse = _C.forward(q, k, v, scale, bool(causal), bool(return_lse))
    return (out, lse) if return_lse else out
