"""flashmma_torch: flashmma's FlashAttention forward pass for PyTorch tensors.

    from flashmma_torch import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)            # (batch, seqlen_q, heads_q, head_dim)
    out, lse = flash_attn_func(q, k, v, return_lse=True)   # lse: (batch, heads_q, seqlen_q) fp32

flash_attn_func has FlashAttention-2's signature and calls the operator torch.ops.flashmma.forward,
which torch.compile(fullgraph=True) and torch.export trace. Importing the package loads the
compiled extension; from a source checkout without a prior `pip install`, the first import
compiles it (a few minutes) and later imports reuse that build.

Forward only: calling it with q, k or v requiring grad in grad mode raises NotImplementedError.
"""

# PyTorch first: the compiled extension links against its shared libraries (libc10.so, ...).
import torch

from ._extension import load_extension
from ._version import package_version

__version__ = package_version()

_C = load_extension()

from . import _ops  # noqa: E402  (registers the operator's fake and autograd implementations)

__all__ = ["flash_attn_func"]


def _unsupported(argument: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"{argument} is not supported yet: {why}")


def _is_causal(causal, window_size) -> bool:
    """Whether the mask is causal, from causal and window_size as FlashAttention-2 reads them: a
    negative side is unbounded, and causal=True sets the right side to 0, so causal=True or
    window_size=(-1, 0) is causal attention and (-1, -1) is none. Other windows are refused."""
    try:
        left, right = (int(side) for side in window_size)
    except (TypeError, ValueError):
        raise ValueError(f"window_size must be a pair of ints (got {window_size!r})") from None
    if causal:
        right = 0
    if left < 0 and right < 0:
        return False
    if left < 0 and right == 0:
        return True
    raise _unsupported(
        f"window_size={tuple(window_size)!r}",
        "flashmma_torch has no sliding-window (local) attention; pass (-1, -1), or causal=True",
    )


def flash_attn_func(
    q,
    k,
    v,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    *,
    return_lse=False,
):
    """Scaled dot-product attention, forward pass, with FlashAttention-2's signature.

    Args:
        q: (batch, seqlen_q, heads_q, head_dim) torch.float16 or torch.bfloat16 CUDA tensor.
        k, v: (batch, seqlen_k, heads_kv, head_dim), same dtype and device as q. heads_q must be
            a multiple of heads_kv: query head h reads key/value head h // (heads_q // heads_kv)
            (multi-query and grouped-query attention).
            Any strides are accepted as long as the last dimension is contiguous
            (stride(-1) == 1); head_dim may be anything from 1 to 256.
        dropout_p: must be 0.0 (no dropout yet).
        softmax_scale: multiplies q.k before the softmax; None means 1 / sqrt(head_dim).
        causal: if True, key j is visible to query i iff j <= i + seqlen_k - seqlen_q (the mask
            is aligned to the bottom-right corner, as in FlashAttention >= 2.1). A query row that
            sees no key gets zeros.
        window_size: (-1, -1), no window; (-1, 0) is the same as causal=True. Other windows
            (sliding-window attention) are not supported yet.
        softcap: must be 0.0 (no soft-capping yet).
        alibi_slopes: must be None (no ALiBi yet).
        deterministic: accepted and ignored: the forward pass is deterministic already.
        return_attn_probs: must be False. FlashAttention then returns
            (out, softmax_lse, S_dmask); here return_lse=True gives (out, lse).
        return_lse (keyword only): also return the log-sum-exp of the scaled scores.

    Returns:
        out, (batch, seqlen_q, heads_q, head_dim) in q's dtype; with return_lse=True the pair
        (out, lse), lse being (batch, heads_q, seqlen_q) float32 in natural log (-inf for a row
        that sees no key).

    Raises:
        NotImplementedError naming the argument and its value, for the options above that are
        not supported yet; and when q, k or v requires grad while grad mode is enabled (there is
        no backward pass yet: call it under torch.no_grad() or on detached tensors).
        ValueError, TypeError or RuntimeError naming the offending argument, for inputs on the
        CPU or on different devices, other dtypes, a wrong number of dimensions, mismatched
        shapes, heads_q not a multiple of heads_kv or head_dim above 256.

    The kernel runs on PyTorch's current CUDA stream for q's device.
    """
    if dropout_p != 0.0:
        raise _unsupported(f"dropout_p={dropout_p!r}", "flashmma_torch has no dropout; pass 0.0")
    if softcap != 0.0:
        raise _unsupported(f"softcap={softcap!r}", "flashmma_torch has no soft-capping; pass 0.0")
    if alibi_slopes is not None:
        raise _unsupported("alibi_slopes", "flashmma_torch has no ALiBi; pass None")
    if return_attn_probs:
        raise _unsupported(
            "return_attn_probs=True",
            "flashmma_torch does not return attention probabilities; return_lse=True returns "
            "(out, lse)",
        )
    causal = _is_causal(causal, window_size)
    scale = None if softmax_scale is None else float(softmax_scale)
    out, lse = torch.ops.flashmma.forward(q, k, v, scale, causal, bool(return_lse))
    return (out, lse) if return_lse else out
