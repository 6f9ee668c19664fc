"""flashmma_torch: flashmma's FlashAttention for PyTorch tensors.

    from flashmma_torch import flash_attn_func
    out = flash_attn_func(q, k, v, causal=True)            # (batch, seqlen_q, heads_q, head_dim)
    out, lse = flash_attn_func(q, k, v, return_lse=True)   # lse: (batch, heads_q, seqlen_q) fp32
    out = flash_attn_func(q, k, v, window_size=(256, 0), softcap=30.0, alibi_slopes=slopes)
    out = flash_attn_varlen_func(q, k, v, cu_seqlens_q, cu_seqlens_k, max_seqlen_q, max_seqlen_k)
    out = flash_attn_with_kvcache(q, k_cache, v_cache, k=k_new, v=v_new, cache_seqlens=lengths)

flash_attn_func, flash_attn_varlen_func and flash_attn_with_kvcache have FlashAttention-2's
signatures and semantics (causal, sliding windows, softcap, ALiBi; packed sequences of variable
lengths; a KV cache, contiguous or paged, appended to in place with rotary embedding) and call the
operators torch.ops.flashmma.forward, varlen_forward and kvcache_forward, which
torch.compile(fullgraph=True) and torch.export trace. Importing the package loads the compiled extension; from a source checkout
without a prior `pip install`, the first import compiles it (a few minutes) and later imports
reuse that build.

flash_attn_func and flash_attn_varlen_func are differentiable (flashmma's backward pass);
flash_attn_with_kvcache is forward only: calling it with q, k or v requiring grad in grad mode
raises NotImplementedError.
"""

import math
import operator

# PyTorch first: the compiled extension links against its shared libraries (libc10.so, ...).
import torch

from ._extension import load_extension
from ._version import package_version

__version__ = package_version()

_C = load_extension()

from . import _ops  # noqa: E402  (registers the operator's fake and autograd implementations)

__all__ = ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache", "dropout_mask",
           "dropout_keep_rate"]


def _unsupported(argument: str, why: str) -> NotImplementedError:
    return NotImplementedError(f"{argument} is not supported yet: {why}")


def _window_sides(window_size):
    """(left, right) from FlashAttention-2's window_size, a pair of ints. A negative side is
    unbounded; the operator applies causal (which sets the right side to 0) and the rest of
    FlashAttention-2's reading."""
    try:
        left, right = window_size
        return operator.index(left), operator.index(right)
    except (TypeError, ValueError):
        raise ValueError(f"window_size must be a pair of ints (got {window_size!r})") from None


def _softcap_value(softcap) -> float:
    """softcap as a float: 0.0 (off) or a positive finite cap."""
    try:
        value = float(softcap)
    except (TypeError, ValueError):
        value = math.nan
    if not 0.0 <= value < math.inf:
        raise ValueError(f"softcap must be a finite number >= 0, 0.0 turning it off (got {softcap!r})")
    return value


def _needs_grad(q, k, v) -> bool:
    """Whether the call may be differentiated: then the operator must return its lse."""
    return torch.is_grad_enabled() and (q.requires_grad or k.requires_grad or v.requires_grad)


def _dropout_arguments(dropout_p, dropout_seed):
    """(dropout_p, seed) checked: p in [0, 1); with p > 0 and no seed given, a fresh 64-bit seed
    drawn from PyTorch's default (CPU) generator, so that torch.manual_seed makes calls
    reproducible and nothing waits on the GPU."""
    try:
        p = float(dropout_p)
    except (TypeError, ValueError):
        p = math.nan
    if not 0.0 <= p < 1.0:
        raise ValueError(f"dropout_p must be a number in [0, 1) (got {dropout_p!r})")
    if dropout_seed is None:
        if p == 0.0:
            return p, 0
        dropout_seed = int(torch.randint(-(2**63), 2**63 - 1, (), dtype=torch.int64))
    return p, operator.index(dropout_seed)


def _common_arguments(softmax_scale, window_size, softcap, alibi_slopes, return_attn_probs):
    """The arguments flash_attn_func and flash_attn_varlen_func share, checked and converted:
    (scale, window_left, window_right, softcap)."""
    if return_attn_probs:
        raise _unsupported(
            "return_attn_probs=True",
            "flashmma_torch does not return attention probabilities; return_lse=True returns "
            "(out, lse)",
        )
    window_left, window_right = _window_sides(window_size)
    softcap = _softcap_value(softcap)
    if alibi_slopes is not None and not isinstance(alibi_slopes, torch.Tensor):
        raise TypeError(
            "alibi_slopes must be None or a float32 tensor of shape (heads_q,) or (batch, heads_q) "
            f"(got {type(alibi_slopes).__name__})"
        )
    scale = None if softmax_scale is None else float(softmax_scale)
    return scale, window_left, window_right, softcap


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
    dropout_seed=None,
):
    """Scaled dot-product attention with FlashAttention-2's signature, differentiable in q, k, v.

    Args:
        q: (batch, seqlen_q, heads_q, head_dim) torch.float16 or torch.bfloat16 CUDA tensor.
        k, v: (batch, seqlen_k, heads_kv, head_dim), same dtype and device as q. heads_q must be
            a multiple of heads_kv: query head h reads key/value head h // (heads_q // heads_kv)
            (multi-query and grouped-query attention).
            Any strides are accepted as long as the last dimension is contiguous
            (stride(-1) == 1); head_dim may be anything from 1 to 256.
        dropout_p: dropout probability in [0, 1) (FlashAttention-2's semantics): each attention
            probability is dropped with probability dropout_p and the kept ones are scaled by
            the inverse keep rate; the backward pass regenerates the same mask (Philox, keyed by
            a seed and the (batch, head, query, key) of each probability; nothing is stored).
            Pass 0.0 at evaluation, as FlashAttention asks. dropout_p is taken to 2^-16.
        softmax_scale: multiplies q.k before the softmax; None means 1 / sqrt(head_dim).
        causal: if True, key j is visible to query i iff j <= i + seqlen_k - seqlen_q (the mask
            is aligned to the bottom-right corner, as in FlashAttention >= 2.1). Same as
            window_size=(-1, 0); with a window, it sets the window's right side to 0.
        window_size: (left, right), sliding-window (local) attention: key j is visible to query
            i iff i + seqlen_k - seqlen_q - left <= j <= i + seqlen_k - seqlen_q + right,
            aligned to the bottom-right corner like causal. A negative side is unbounded:
            (-1, -1) is no window, (-1, 0) is causal, (left, 0) a causal sliding window.
        softcap: 0.0 is off; > 0 replaces each scaled score s by softcap * tanh(s / softcap)
            (as in Gemma-2 and Grok), before the ALiBi bias and the mask.
        alibi_slopes: None, or a float32 tensor on q's device of shape (heads_q,) or
            (batch, heads_q) (contiguous last dimension): adds
            -slope * |i + seqlen_k - seqlen_q - j| to the score of query i and key j, after the
            softcap (ALiBi, bottom-right aligned).
        deterministic: if True, the backward pass sums dQ over the key tiles in a fixed order,
            so that the gradients are the same bits in every run (slower); if False (the
            default, as in FlashAttention-2), dQ is summed with atomics in any order and its last
            bits may differ from run to run. dK, dV and the forward pass are deterministic
            either way.
        return_attn_probs: must be False. FlashAttention then returns
            (out, softmax_lse, S_dmask); here return_lse=True gives (out, lse).
        return_lse (keyword only): also return the log-sum-exp of the scores (after the softcap
            and the ALiBi bias, over the visible keys).
        dropout_seed (keyword only): None draws the mask's seed from PyTorch's default
            generator (torch.manual_seed makes it reproducible); an int fixes it, and
            dropout_mask(..., dropout_seed) returns the mask it gives.

    Returns:
        out, (batch, seqlen_q, heads_q, head_dim) in q's dtype; with return_lse=True the pair
        (out, lse), lse being (batch, heads_q, seqlen_q) float32 in natural log. A query row that
        sees no key (causal or a window with seqlen_q > seqlen_k, or a window that ends before
        the first key) gets zeros in out and -inf in lse.

    Raises:
        NotImplementedError naming the argument and its value, for return_attn_probs=True.
        ValueError, TypeError or RuntimeError naming the offending argument, for inputs on the
        CPU or on different devices, other dtypes, a wrong number of dimensions, mismatched
        shapes, heads_q not a multiple of heads_kv, head_dim above 256, dropout_p outside
        [0, 1), a window_size that is
        not a pair of ints, a negative or non-finite softcap, and alibi_slopes that are not
        float32, not on q's device or not of shape (heads_q,) or (batch, heads_q).

    Gradients: out.backward() (or torch.autograd.grad) runs flashmma's backward pass, which
    recomputes the probabilities from q, k, v and the saved log-sum-exp (nothing of size
    seqlen_q x seqlen_k is stored). The lse output is not differentiable.

    The kernels run on PyTorch's current CUDA stream for q's device.
    """
    scale, window_left, window_right, softcap = _common_arguments(
        softmax_scale, window_size, softcap, alibi_slopes, return_attn_probs
    )
    dropout_p, dropout_seed = _dropout_arguments(dropout_p, dropout_seed)
    # The backward pass needs the lse: ask for it whenever a gradient may be taken.
    out, lse = torch.ops.flashmma.forward(
        q, k, v, scale, bool(causal), window_left, window_right, softcap, alibi_slopes,
        bool(return_lse or _needs_grad(q, k, v)), bool(deterministic), dropout_p, dropout_seed, 0,
    )
    return (out, lse) if return_lse else out


def flash_attn_varlen_func(
    q,
    k,
    v,
    cu_seqlens_q,
    cu_seqlens_k,
    max_seqlen_q,
    max_seqlen_k,
    dropout_p=0.0,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    alibi_slopes=None,
    deterministic=False,
    return_attn_probs=False,
    block_table=None,
    *,
    seqused_k=None,
    return_lse=False,
    dropout_seed=None,
):
    """flash_attn_func over a batch of sequences of different lengths, packed, with
    FlashAttention-2's signature.

    Args:
        q: (total_q, heads_q, head_dim), the queries of every sequence one after the other.
        k, v: (total_k, heads_kv, head_dim), likewise.
        cu_seqlens_q, cu_seqlens_k: torch.int32 on q's device, (batch + 1,): prefix sums of the
            sequences' lengths from 0; sequence b is rows [cu_seqlens[b], cu_seqlens[b + 1]).
        max_seqlen_q, max_seqlen_k: the longest sequence's lengths (ints). A sequence longer
            than these is an error that stops the kernel.
        dropout_p, softmax_scale, causal, window_size, softcap, alibi_slopes, deterministic,
            return_attn_probs: as in flash_attn_func, per sequence (the causal mask and windows
            are aligned to each sequence's bottom-right corner; alibi_slopes is (heads_q,) or
            (batch, heads_q)).
        block_table: must be None (no paged KV cache here yet).
        seqused_k (keyword only): None, or torch.int32 (batch,) on q's device: sequence b
            attends to its first seqused_k[b] keys only.
        return_lse (keyword only): also return the log-sum-exp, (heads_q, total_q) float32.
        dropout_seed (keyword only): as in flash_attn_func; sequence b's mask is entry b of
            dropout_mask(batch, ...), cut to its lengths.

    Returns:
        out, (total_q, heads_q, head_dim) in q's dtype; with return_lse=True, (out, lse).

    Differentiable in q, k and v as flash_attn_func is (without seqused_k: a call with
    seqused_k whose inputs require grad raises NotImplementedError).

    The lengths are read on the GPU only: nothing here synchronizes with the device.
    """
    if block_table is not None:
        raise _unsupported("block_table", "flash_attn_varlen_func takes contiguous K and V; pass None")
    scale, window_left, window_right, softcap = _common_arguments(
        softmax_scale, window_size, softcap, alibi_slopes, return_attn_probs
    )
    dropout_p, dropout_seed = _dropout_arguments(dropout_p, dropout_seed)
    out, lse = torch.ops.flashmma.varlen_forward(
        q,
        k,
        v,
        cu_seqlens_q,
        cu_seqlens_k,
        seqused_k,
        operator.index(max_seqlen_q),
        operator.index(max_seqlen_k),
        scale,
        bool(causal),
        window_left,
        window_right,
        softcap,
        alibi_slopes,
        bool(return_lse or _needs_grad(q, k, v)),
        bool(deterministic),
        dropout_p,
        dropout_seed,
        0,
    )
    return (out, lse) if return_lse else out


def flash_attn_with_kvcache(
    q,
    k_cache,
    v_cache,
    k=None,
    v=None,
    rotary_cos=None,
    rotary_sin=None,
    cache_seqlens=None,
    cache_batch_idx=None,
    cache_leftpad=None,
    block_table=None,
    softmax_scale=None,
    causal=False,
    window_size=(-1, -1),
    softcap=0.0,
    rotary_interleaved=True,
    alibi_slopes=None,
    num_splits=0,
    return_softmax_lse=False,
):
    """Attention of q over a KV cache, after appending new keys and values to it in place, with
    FlashAttention-2's signature (decoding and chunked prefill for serving engines).

    Args:
        q: (batch, seqlen_q, heads_q, head_dim), torch.float16 or torch.bfloat16; head_dim a
            multiple of 8 (the cache is used in place and cannot be padded).
        k_cache, v_cache: (batch_cache, seqlen_cache, heads_kv, head_dim), or with block_table a
            pool of pages (num_pages, page_size, heads_kv, head_dim), any page size; q's dtype,
            16-byte aligned. Written in place when k and v are given.
        k, v: None, or (batch, seqlen_new, heads_kv, head_dim): new keys and values, written into
            the cache at rows [cache_seqlens[b], cache_seqlens[b] + seqlen_new).
        rotary_cos, rotary_sin: None, or (seqlen_ro, rotary_dim / 2) in q's dtype (with k and v):
            rotary embedding of the new keys at their positions and of q (query i at
            cache_seqlens[b] + i when causal or windowed, else at cache_seqlens[b]).
        cache_seqlens: None (every cache full), an int, or torch.int32 (batch,): the cache rows
            before the call. Attention covers cache_seqlens + seqlen_new keys.
        cache_batch_idx: None, or torch.int32 (batch,): the cache entry of each sequence
            (contiguous caches only).
        cache_leftpad: must be None.
        block_table: None, or torch.int32 (batch, pages per sequence): the pages of each
            sequence in order.
        softmax_scale, causal, window_size, softcap, alibi_slopes: as in flash_attn_func, aligned
            to the bottom-right corner of each sequence's keys.
        rotary_interleaved: pairs (2i, 2i + 1) (GPT-J) if True, else (i, i + rotary_dim / 2)
            (GPT-NeoX).
        num_splits: 0 chooses the split-KV count automatically; 1 never splits; n splits n ways.
        return_softmax_lse: also return the log-sum-exp, (batch, heads_q, seqlen_q) float32.

    Returns:
        out (batch, seqlen_q, heads_q, head_dim); with return_softmax_lse=True, (out, lse).

    Everything that changes per step (lengths, table, new rows) is read on the GPU, so a call
    can be captured in a CUDA graph and replayed.
    """
    if cache_leftpad is not None:
        raise _unsupported("cache_leftpad", "flashmma_torch's caches start at row 0; pass None")
    _ops.refuse_grad(q, k_cache, v_cache, k, v)
    scale, window_left, window_right, softcap = _common_arguments(
        softmax_scale, window_size, softcap, alibi_slopes, False
    )
    if isinstance(cache_seqlens, int):
        cache_seqlens = torch.full((q.shape[0],), cache_seqlens, dtype=torch.int32, device=q.device)
    out, lse = torch.ops.flashmma.kvcache_forward(
        q,
        k_cache,
        v_cache,
        k,
        v,
        rotary_cos,
        rotary_sin,
        cache_seqlens,
        cache_batch_idx,
        block_table,
        scale,
        bool(causal),
        window_left,
        window_right,
        softcap,
        bool(rotary_interleaved),
        alibi_slopes,
        operator.index(num_splits),
        bool(return_softmax_lse),
    )
    return (out, lse) if return_softmax_lse else out


def dropout_mask(batch, heads, seqlen_q, seqlen_k, dropout_p, dropout_seed, dropout_offset=0):
    """The dropout mask flash_attn_func(..., dropout_p, dropout_seed=dropout_seed) draws, and its
    backward pass regenerates: a (batch, heads, seqlen_q, seqlen_k) bool CPU tensor, True where a
    probability is kept (kept ones are scaled by 1 / dropout_keep_rate(dropout_p)). Computed on
    the CPU, for tests and for reproducing a call; heads are the query heads."""
    return torch.ops.flashmma.dropout_mask(
        operator.index(batch), operator.index(heads), operator.index(seqlen_q),
        operator.index(seqlen_k), float(dropout_p), operator.index(dropout_seed),
        operator.index(dropout_offset),
    )


def dropout_keep_rate(dropout_p):
    """The probability that dropout_p keeps a pair: 1 - dropout_p, with dropout_p taken to 2^-16
    as the kernels draw it (16 random bits a pair)."""
    threshold = min(65535, int(float(dropout_p) * 65536.0 + 0.5)) if dropout_p > 0 else 0
    return (65536 - threshold) / 65536.0
