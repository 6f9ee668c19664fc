"""Checks flashmma_torch.flash_attn_func against an fp32 reference on upcast inputs, written here with
FlashAttention-2's semantics (causal mask, sliding window, softcap, ALiBi) and itself checked against
PyTorch's scaled_dot_product_attention. Needs a CUDA GPU; skipped without one.

    cd examples/pytorch && python3 -m pytest -q test_flashmma_torch.py

The first run compiles the extension (see flashmma_torch/_extension.py).
"""

import inspect
import math
import os
import re
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("flashmma_torch needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashmma_torch  # noqa: E402  (after the skip: importing builds the extension)
from flashmma_torch import flash_attn_func, flash_attn_varlen_func, flash_attn_with_kvcache  # noqa: E402
from torch.nn.attention import SDPBackend, sdpa_kernel  # noqa: E402

DTYPES = [torch.float16, torch.bfloat16]
# Relative L2 error of the output against the fp32 reference.
TOLERANCE = {torch.float16: 2e-3, torch.bfloat16: 1.6e-2}
DEVICE = "cuda"


def make_inputs(batch, seqlen_q, seqlen_k, heads_q, heads_kv, head_dim, dtype, seed=0):
    generator = torch.Generator(device=DEVICE).manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=generator, device=DEVICE, dtype=torch.float32).to(dtype)

    return (
        normal(batch, seqlen_q, heads_q, head_dim),
        normal(batch, seqlen_k, heads_kv, head_dim),
        normal(batch, seqlen_k, heads_kv, head_dim),
    )


def visible_keys(seqlen_q, seqlen_k, causal=False, window=(-1, -1)):
    """Boolean (seqlen_q, seqlen_k): key j visible to query i, as FlashAttention-2 has it, aligned to
    the bottom-right corner: i + d - left <= j <= i + d + right with d = seqlen_k - seqlen_q and
    (left, right) = window, a negative side unbounded, causal setting the right side to 0. Nothing
    is normalised here: a window wider than the sequences is taken as written."""
    left, right = window
    if causal:
        right = 0
    diagonal = torch.arange(seqlen_q, device=DEVICE)[:, None] + (seqlen_k - seqlen_q)
    keys = torch.arange(seqlen_k, device=DEVICE)[None, :]
    visible = torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=DEVICE)
    if left >= 0:
        visible &= keys >= diagonal - left
    if right >= 0:
        visible &= keys <= diagonal + right
    return visible


def alibi_bias(slopes, batch, heads_q, seqlen_q, seqlen_k):
    """(batch, heads_q, seqlen_q, seqlen_k) fp32: -slope(b, h) * |i + seqlen_k - seqlen_q - j|, slopes
    of shape (heads_q,) (shared by the batch) or (batch, heads_q)."""
    slopes = slopes.float().expand(batch, heads_q)
    diagonal = torch.arange(seqlen_q, device=DEVICE)[:, None] + (seqlen_k - seqlen_q)
    distance = (diagonal - torch.arange(seqlen_k, device=DEVICE)[None, :]).abs().float()
    return -slopes[:, :, None, None] * distance


def reference(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0, alibi_slopes=None,
              dropout=None):
    """(out, lse) in fp32: out (B, Sq, Hq, D), lse (B, Hq, Sq), with FlashAttention-2's semantics:
    score = scale * q.k; if softcap > 0, softcap * tanh(score / softcap); then the ALiBi bias; -inf
    where the mask or the window hides the key. Rows that see no key: out 0, lse -inf. dropout:
    None, or (kept, keep_rate): the probabilities where `kept` (B, Hq, Sq, Sk) is True are divided
    by keep_rate, the others dropped (the lse is that before dropout)."""
    batch, seqlen_q, heads_q, head_dim = q.shape
    seqlen_k, heads_kv = k.shape[1], k.shape[2]
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else softmax_scale
    group = heads_q // heads_kv
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(group, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    if softcap > 0:
        scores = softcap * torch.tanh(scores / softcap)
    if alibi_slopes is not None:
        scores = scores + alibi_bias(alibi_slopes, batch, heads_q, seqlen_q, seqlen_k)
    mask = visible_keys(seqlen_q, seqlen_k, causal, window)
    lse = torch.logsumexp(scores.masked_fill(~mask, -math.inf), dim=-1)
    # A row that sees no key: its softmax runs over its unmasked scores and is multiplied by 0, so
    # that autograd through this reference (the gradient tests) never meets exp(-inf - -inf).
    sees_a_key = mask.any(dim=-1, keepdim=True)
    probs = torch.softmax(scores.masked_fill(~mask & sees_a_key, -math.inf), dim=-1) * sees_a_key
    if dropout is not None:
        kept, keep_rate = dropout
        probs = probs * kept.to(probs.device, probs.dtype) / keep_rate
    out = torch.matmul(probs, vf)
    return out.transpose(1, 2), lse


def sdpa_reference(q, k, v, causal=False, softmax_scale=None):
    """The plain and causal reference by PyTorch's own attention (math backend, fp32)."""
    group = q.shape[2] // k.shape[2]
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(group, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
    mask = visible_keys(q.shape[1], k.shape[1], causal)
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=softmax_scale)
    out = torch.where(mask.any(dim=-1)[None, None, :, None], out, torch.zeros_like(out))
    return out.transpose(1, 2)


def alibi_slopes_per_head(heads_q):
    """The ALiBi paper's slopes, 2^(-8 (h + 1) / heads_q), fp32 on the GPU: shape (heads_q,)."""
    return torch.tensor([2.0 ** (-8.0 * (h + 1) / heads_q) for h in range(heads_q)], device=DEVICE)


def alibi_slopes_per_batch_and_head(batch, heads_q, seed=0):
    """Different slopes for every batch entry and head, in [0.01, 1): shape (batch, heads_q)."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    return 0.01 + 0.99 * torch.rand(batch, heads_q, generator=generator, device=DEVICE)


def make_alibi_slopes(kind, batch, heads_q):
    return alibi_slopes_per_head(heads_q) if kind == "per_head" else alibi_slopes_per_batch_and_head(batch, heads_q)


def relative_l2(actual, expected):
    difference = (actual.float() - expected).norm()
    return (difference / expected.norm().clamp_min(1e-12)).item()


def check(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0, alibi_slopes=None, return_lse=False):
    """Checks flash_attn_func's out against the reference; with return_lse, its lse too. Returns
    what flash_attn_func returned."""
    result = flash_attn_func(
        q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window, softcap=softcap,
        alibi_slopes=alibi_slopes, return_lse=return_lse,
    )  # fmt: skip
    out, lse = result if return_lse else (result, None)
    expected, expected_lse = reference(q, k, v, causal, softmax_scale, window, softcap, alibi_slopes)
    assert out.shape == q.shape[:3] + (v.shape[3],)
    assert out.dtype == q.dtype and out.device == q.device
    assert torch.isfinite(out).all()
    error = relative_l2(out, expected)
    assert error < TOLERANCE[q.dtype], f"relative L2 error {error:.3e}"
    if return_lse:
        assert lse.shape == (q.shape[0], q.shape[2], q.shape[1]) and lse.dtype == torch.float32
        # Rows that see no key must be -inf in both.
        torch.testing.assert_close(lse, expected_lse, rtol=1e-4, atol=1e-3)
    return result


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(17, 1000), (257, 257), (1000, 17)])
def test_reference_matches_sdpa(seqlen_q, seqlen_k, causal):
    # The reference's own softmax, against PyTorch's, where PyTorch has the same attention.
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 64, torch.float16)
    expected = sdpa_reference(q, k, v, causal, softmax_scale=0.2)
    out, _ = reference(q, k, v, causal, softmax_scale=0.2)
    torch.testing.assert_close(out, expected, rtol=1e-5, atol=1e-5)


SEQLEN_PAIRS = [(1, 17), (17, 1), (17, 1000), (127, 128), (128, 257), (257, 127), (1000, 17), (1000, 257), (257, 257)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", SEQLEN_PAIRS)
def test_sequence_lengths(seqlen_q, seqlen_k, causal, dtype):
    check(*make_inputs(2, seqlen_q, seqlen_k, 3, 3, 64, dtype), causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("head_dim", [17, 32, 40, 64, 100, 128, 200, 256])
def test_head_dims(head_dim, causal, dtype):
    # 17 and 100 are zero-padded to 24 and 104; the default scale must still be 1/sqrt(head_dim).
    check(*make_inputs(2, 127, 257, 2, 2, head_dim, dtype), causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_grouped_query(group, causal, dtype):
    check(*make_inputs(2, 257, 1000, 8, 8 // group, 128, dtype), causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q", [1, 3])
def test_decoding_shapes(seqlen_q, causal, dtype):
    # A few queries against a long cache: too few query tiles to fill the GPU, so the op hands
    # flashmma a workspace and the keys are split across blocks, then merged (split-KV).
    check(*make_inputs(2, seqlen_q, 8195, 8, 2, 128, dtype), causal=causal, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_softmax_scale(dtype):
    check(*make_inputs(1, 128, 300, 2, 1, 64, dtype), softmax_scale=0.3)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_transposed_storage(causal, dtype):
    # Stored (B, H, S, D), viewed as (B, S, H, D): strided, last dimension contiguous.
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in make_inputs(2, 200, 333, 4, 2, 64, dtype))
    assert not q.is_contiguous() and q.stride(-1) == 1
    check(q, k, v, causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_unaligned_slices(dtype):
    # A base pointer 2 bytes off 16-byte alignment, and a row stride that is not a multiple of 8:
    # both are copied internally rather than refused.
    q, k, v = make_inputs(2, 65, 129, 2, 2, 72, dtype)
    q_offset = q[..., 1:65]
    k_odd = torch.cat([k, k[..., :1]], dim=-1)[..., :64]  # stride(2) == 73
    v_plain = v[..., :64]
    assert q_offset.data_ptr() % 16 != 0 and k_odd.stride(2) % 8 != 0
    check(q_offset, k_odd, v_plain)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("seqlen_q,seqlen_k,causal", [(127, 1000, False), (1000, 257, True), (257, 257, True)])
def test_lse(seqlen_q, seqlen_k, causal, dtype):
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 100, dtype)
    out, lse = flash_attn_func(q, k, v, causal=causal, return_lse=True)
    expected_out, expected_lse = reference(q, k, v, causal)
    assert lse.shape == (2, 4, seqlen_q) and lse.dtype == torch.float32
    assert relative_l2(out, expected_out) < TOLERANCE[dtype]
    # Rows that see no key (causal, Sq > Sk) must be -inf in both.
    torch.testing.assert_close(lse, expected_lse, rtol=1e-4, atol=1e-3)


def test_rows_that_see_no_key_are_zero():
    q, k, v = make_inputs(1, 300, 100, 2, 2, 64, torch.float16)
    out, lse = flash_attn_func(q, k, v, causal=True, return_lse=True)
    hidden_rows = 300 - 100  # rows i < Sq - Sk see no key
    assert torch.all(out[:, :hidden_rows] == 0)
    assert torch.all(lse[:, :, :hidden_rows] == -math.inf)


def test_current_stream():
    q, k, v = make_inputs(2, 257, 513, 4, 4, 128, torch.bfloat16)
    expected = flash_attn_func(q, k, v)
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        out = flash_attn_func(q, k, v)
    stream.synchronize()
    assert torch.equal(out, expected)


def test_empty_problems():
    q, k, v = make_inputs(2, 0, 16, 2, 2, 64, torch.float16)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    assert out.shape == (2, 0, 2, 64) and lse.shape == (2, 2, 0)
    q, k, v = make_inputs(2, 16, 0, 2, 2, 64, torch.float16)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    assert torch.all(out == 0) and torch.all(lse == -math.inf)


def _invalid_cases():
    q, k, v = make_inputs(1, 16, 16, 4, 2, 64, torch.float16)
    return [
        ("cpu", (q.cpu(), k.cpu(), v.cpu()), "CUDA tensor"),
        ("float32", (q.float(), k.float(), v.float()), "float16 or torch.bfloat16"),
        ("mixed dtypes", (q, k.bfloat16(), v), "share one dtype"),
        ("3 dims", (q[0], k[0], v[0]), "4 dimensions"),
        ("heads", (q[:, :, :3], k, v), "multiple of heads_kv"),
        ("head dim > 256", (torch.zeros(1, 4, 1, 264, dtype=torch.float16, device=DEVICE),) * 3, "between 1 and 256"),
        ("head dims differ", (q, k[..., :32], v[..., :32]), "same head dim"),
        ("k and v differ", (q, k, v[:, :8]), "same shape"),
        ("batch", (q, torch.cat([k, k]), torch.cat([v, v])), "same batch size"),
        ("last dim strided", (q, k.transpose(1, 3).contiguous().transpose(1, 3), v), "contiguous last dimension"),
    ]


@pytest.mark.parametrize("case", range(len(_invalid_cases())), ids=[c[0] for c in _invalid_cases()])
def test_invalid_inputs_raise(case):
    _, (q, k, v), message = _invalid_cases()[case]
    with pytest.raises((ValueError, TypeError, RuntimeError), match=message):
        flash_attn_func(q, k, v)


def test_invalid_softmax_scale():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises((ValueError, RuntimeError), match="softmax_scale"):
        flash_attn_func(q, k, v, softmax_scale=-1.0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_different_devices_raise():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises((ValueError, RuntimeError), match="same device"):
        flash_attn_func(q, k.to("cuda:1"), v)


def test_module_exports():
    assert flashmma_torch.__all__ == ["flash_attn_func", "flash_attn_varlen_func", "flash_attn_with_kvcache",
                                      "dropout_mask", "dropout_keep_rate"]
    assert "bottom-right" in flash_attn_func.__doc__


# --- FlashAttention-2's signature ---------------------------------------------------------------


def test_signature_is_flash_attention_2s():
    parameters = inspect.signature(flash_attn_func).parameters
    assert list(parameters) == [
        "q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
        "alibi_slopes", "deterministic", "return_attn_probs", "return_lse", "dropout_seed",
    ]  # fmt: skip
    assert parameters["return_lse"].kind is inspect.Parameter.KEYWORD_ONLY
    assert parameters["dropout_seed"].kind is inspect.Parameter.KEYWORD_ONLY
    defaults = {name: p.default for name, p in parameters.items() if p.default is not p.empty}
    assert defaults == {
        "dropout_p": 0.0, "softmax_scale": None, "causal": False, "window_size": (-1, -1),
        "softcap": 0.0, "alibi_slopes": None, "deterministic": False, "return_attn_probs": False,
        "return_lse": False, "dropout_seed": None,
    }  # fmt: skip


def test_fourth_positional_argument_is_dropout_p():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    out = flash_attn_func(q, k, v, 0.3, dropout_seed=7)
    assert torch.equal(out, flash_attn_func(q, k, v, dropout_p=0.3, dropout_seed=7))
    assert not torch.equal(out, flash_attn_func(q, k, v))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_positional_softmax_scale_and_causal(dtype):
    q, k, v = make_inputs(1, 100, 300, 2, 1, 64, dtype)
    out = flash_attn_func(q, k, v, 0.0, 0.3, True)
    expected, _ = reference(q, k, v, causal=True, softmax_scale=0.3)
    assert relative_l2(out, expected) < TOLERANCE[dtype]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"return_attn_probs": True}, r"return_attn_probs=True is not supported yet: .*return_lse=True"),
    ],
    ids=["attn_probs"],
)
def test_unsupported_arguments_raise(kwargs, message):
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises(NotImplementedError, match=message):
        flash_attn_func(q, k, v, **kwargs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {"window_size": (-1, 0)},
        {"window_size": [-1, 0], "causal": True},
        {"window_size": (-1, -1), "causal": True},
        {"window_size": (-1, 5), "causal": True},  # causal sets the right side to 0
        {"causal": True, "deterministic": True},
    ],
    ids=["window", "window_list", "causal", "causal_right", "deterministic"],
)
def test_supported_spellings_of_causal(kwargs):
    q, k, v = make_inputs(2, 200, 150, 2, 2, 64, torch.bfloat16)
    assert torch.equal(flash_attn_func(q, k, v, **kwargs), flash_attn_func(q, k, v, causal=True))


def test_full_attention_spellings():
    q, k, v = make_inputs(2, 200, 150, 2, 2, 64, torch.float16)
    expected = flash_attn_func(q, k, v)
    for kwargs in ({"window_size": (-1, -1)}, {"window_size": (-5, -3)}, {"deterministic": True}):
        assert torch.equal(flash_attn_func(q, k, v, **kwargs), expected)


# --- FlashAttention-2's variants: sliding windows, softcap, ALiBi ---------------------------------

# (window_size, causal)
WINDOWS = [
    ((0, 0), False),  # the key on the diagonal alone
    ((64, 0), False),  # a causal sliding window, spelled as a window
    ((64, -1), True),  # the same through causal=True, which sets the right side to 0
    ((32, 16), False),  # two-sided
    ((100, -1), False),  # left side only
    ((-1, 50), False),  # right side only
    ((5000, 5000), False),  # wider than both sequences: plain attention
    ((5000, 7), True),  # wider than the keys, with causal: causal attention
]
WINDOW_IDS = ["diagonal", "causal_window", "causal_left", "two_sided", "left", "right", "wide", "wide_causal"]
# Odd lengths, seqlen_q above and below seqlen_k.
WINDOW_SEQLEN_PAIRS = [(1, 17), (17, 1), (77, 131), (131, 77), (127, 1000), (1000, 257), (257, 257)]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("window,causal", WINDOWS, ids=WINDOW_IDS)
@pytest.mark.parametrize("seqlen_q,seqlen_k", WINDOW_SEQLEN_PAIRS)
def test_windows(seqlen_q, seqlen_k, window, causal, dtype):
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 64, dtype)
    check(q, k, v, causal=causal, window=window, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "window,causal", [((32, 16), False), ((48, 0), False), ((48, 3), True)], ids=["two_sided", "causal_window", "causal_left"]
)
@pytest.mark.parametrize("head_dim", [64, 72, 100, 128])
def test_window_head_dims(head_dim, window, causal, dtype):
    # 100 is zero-padded to 104 by the extension; 72 runs on a larger kernel head dim.
    q, k, v = make_inputs(2, 200, 333, 4, 2, head_dim, dtype)
    check(q, k, v, causal=causal, window=window)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("window", [(64, 0), (100, 100)], ids=["causal_window", "two_sided"])
@pytest.mark.parametrize("group", [1, 4, 8])
def test_window_grouped_query(group, window, dtype):
    check(*make_inputs(2, 257, 1000, 8, 8 // group, 128, dtype), window=window)


@pytest.mark.parametrize(
    "seqlen_q,seqlen_k,window",
    [(300, 100, (0, 0)), (300, 100, (10, 150)), (100, 300, (5, -1)), (131, 77, (-1, 3)), (77, 131, (20, 20))],
    ids=["diagonal_long_queries", "right_past_the_keys", "left_long_keys", "right_long_queries", "two_sided_long_keys"],
)
def test_window_rows_that_see_no_key(seqlen_q, seqlen_k, window):
    # Query i sees nothing when its window ends before key 0 (i + d + right < 0) or starts after
    # the last key. (10, 150) with 300 queries and 100 keys: the right side is longer than the keys
    # but rows i < 50 still see none, as the formula says. The last two cases hide no row.
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 64, torch.float16)
    out, lse = check(q, k, v, window=window, return_lse=True)
    hidden = ~visible_keys(seqlen_q, seqlen_k, window=window).any(dim=-1)
    assert torch.all(out[:, hidden] == 0)
    assert torch.all(lse[:, :, hidden] == -math.inf)
    assert torch.all(lse[:, :, ~hidden] > -math.inf)


@pytest.mark.parametrize("seqlen_q,seqlen_k", [(200, 150), (150, 200), (1, 17), (17, 1)])
def test_windows_that_hide_nothing(seqlen_q, seqlen_k):
    # A side that reaches every key from every query (left >= seqlen_k - 1, right >= seqlen_q - 1)
    # hides nothing: the same kernel as no window runs, so the results are identical.
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 2, 2, 64, torch.bfloat16)
    full = flash_attn_func(q, k, v)
    causal = flash_attn_func(q, k, v, causal=True)
    for window in [(seqlen_k - 1, seqlen_q - 1), (seqlen_k, seqlen_q), (10**6, 10**6)]:
        assert torch.equal(flash_attn_func(q, k, v, window_size=window), full), window
        assert torch.equal(flash_attn_func(q, k, v, window_size=window, causal=True), causal), window
        assert torch.equal(flash_attn_func(q, k, v, window_size=(window[0], 0)), causal), window


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("softcap", [0.5, 5.0, 30.0])
def test_softcap(softcap, causal, dtype):
    # 0.5 is a tiny cap: every score lands in (-0.5, 0.5).
    q, k, v = make_inputs(2, 257, 513, 4, 2, 64, dtype)
    check(q, k, v, causal=causal, softcap=softcap, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_softcap_with_softmax_scale(dtype):
    # The cap applies to the scaled score.
    q, k, v = make_inputs(2, 130, 300, 2, 1, 100, dtype)
    check(q, k, v, softmax_scale=0.7, softcap=2.0, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("kind", ["per_head", "per_batch_and_head"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(257, 257), (127, 1000), (1000, 257), (17, 1)])
def test_alibi(seqlen_q, seqlen_k, kind, causal, dtype):
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 4, 2, 64, dtype)
    check(q, k, v, causal=causal, alibi_slopes=make_alibi_slopes(kind, 2, 4), return_lse=True)


def test_alibi_slope_layouts():
    q, k, v = make_inputs(3, 100, 230, 4, 4, 64, torch.float16)
    per_head = alibi_slopes_per_head(4)
    expected = flash_attn_func(q, k, v, alibi_slopes=per_head)
    # (batch, heads_q) rows that repeat one row, by expand (batch stride 0) or by copying.
    assert torch.equal(flash_attn_func(q, k, v, alibi_slopes=per_head.expand(3, 4)), expected)
    assert torch.equal(flash_attn_func(q, k, v, alibi_slopes=per_head.repeat(3, 1)), expected)
    # (batch, heads_q) columns of a wider tensor: a batch stride of 10.
    wide = alibi_slopes_per_batch_and_head(3, 10)
    check(q, k, v, alibi_slopes=wide[:, 3:7], return_lse=True)
    # Rows that overlap (batch stride 2 < heads_q) are copied by the extension.
    overlapping = wide.flatten()[:10].as_strided((3, 4), (2, 1))
    check(q, k, v, alibi_slopes=overlapping, return_lse=True)
    # A batch of one, per batch entry and head.
    check(q[:1], k[:1], v[:1], alibi_slopes=wide[:1, :4], return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("softcap", [0.5, 20.0])
@pytest.mark.parametrize("head_dim", [100, 128])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(257, 257), (131, 77), (77, 1000)])
def test_window_softcap_alibi(seqlen_q, seqlen_k, head_dim, softcap, causal, dtype):
    # Everything at once, with grouped-query attention; causal sets the window's right side to 0.
    q, k, v = make_inputs(2, seqlen_q, seqlen_k, 8, 2, head_dim, dtype)
    slopes = alibi_slopes_per_batch_and_head(2, 8)
    check(q, k, v, causal=causal, window=(48, 16), softcap=softcap, alibi_slopes=slopes, return_lse=True)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_alibi_with_causal_window_and_transposed_storage(dtype):
    q, k, v = (t.transpose(1, 2).contiguous().transpose(1, 2) for t in make_inputs(2, 200, 333, 4, 2, 72, dtype))
    check(q, k, v, window=(40, 0), alibi_slopes=alibi_slopes_per_head(4), softcap=10.0, return_lse=True)


def _invalid_variant_cases():
    """(id, flash_attn_func's keyword arguments, the exception, a pattern of its message), for
    q (2, 16, 4, 64) and k, v (2, 16, 2, 64)."""
    slopes = alibi_slopes_per_head(4)
    return [
        ("alibi_fp16", {"alibi_slopes": slopes.half()}, TypeError, r"alibi_slopes must be torch\.float32 \(got Half\)"),
        ("alibi_fp64", {"alibi_slopes": slopes.double()}, TypeError, r"alibi_slopes must be torch\.float32"),
        ("alibi_heads", {"alibi_slopes": torch.ones(5, device=DEVICE)}, ValueError,
         r"alibi_slopes must have shape \(heads_q,\) = \(4,\) or \(batch, heads_q\) = \(2, 4\) \(got \[5\]\)"),
        ("alibi_batch", {"alibi_slopes": torch.ones(3, 4, device=DEVICE)}, ValueError, r"alibi_slopes must have shape"),
        ("alibi_transposed", {"alibi_slopes": torch.ones(4, 2, device=DEVICE)}, ValueError, r"alibi_slopes must have shape"),
        ("alibi_3d", {"alibi_slopes": torch.ones(2, 4, 1, device=DEVICE)}, ValueError, r"alibi_slopes must have shape"),
        ("alibi_scalar", {"alibi_slopes": torch.tensor(0.5, device=DEVICE)}, ValueError, r"alibi_slopes must have shape"),
        ("alibi_strided", {"alibi_slopes": torch.ones(8, device=DEVICE)[::2]}, ValueError,
         r"alibi_slopes must have a contiguous last dimension \(stride\(-1\) == 1, got 2\)"),
        ("alibi_cpu", {"alibi_slopes": slopes.cpu()}, ValueError, r"alibi_slopes must be a CUDA tensor on q's device \(cuda:0; got a tensor on cpu\)"),
        ("alibi_list", {"alibi_slopes": slopes.tolist()}, TypeError, r"alibi_slopes must be None or a float32 tensor .*\(got list\)"),
        ("softcap_negative", {"softcap": -1.0}, ValueError, r"softcap must be a finite number >= 0, 0\.0 turning it off \(got -1\.0\)"),
        ("softcap_nan", {"softcap": math.nan}, ValueError, r"softcap must be a finite number >= 0"),
        ("softcap_inf", {"softcap": math.inf}, ValueError, r"softcap must be a finite number >= 0"),
        ("softcap_none", {"softcap": None}, ValueError, r"softcap must be a finite number >= 0"),
        ("window_three", {"window_size": (1, 2, 3)}, ValueError, r"window_size must be a pair of ints \(got \(1, 2, 3\)\)"),
        ("window_one", {"window_size": (4,)}, ValueError, r"window_size must be a pair of ints"),
        ("window_int", {"window_size": 4}, ValueError, r"window_size must be a pair of ints"),
        ("window_none", {"window_size": None}, ValueError, r"window_size must be a pair of ints"),
        ("window_float", {"window_size": (1.5, 0)}, ValueError, r"window_size must be a pair of ints"),
        ("window_str", {"window_size": "ab"}, ValueError, r"window_size must be a pair of ints"),
    ]  # fmt: skip


@pytest.mark.parametrize("case", range(len(_invalid_variant_cases())), ids=[c[0] for c in _invalid_variant_cases()])
def test_invalid_variant_arguments_raise(case):
    _, kwargs, error, message = _invalid_variant_cases()[case]
    q, k, v = make_inputs(2, 16, 16, 4, 2, 64, torch.float16)
    with pytest.raises(error, match=message):
        flash_attn_func(q, k, v, **kwargs)


def test_operator_checks_softcap():
    # The operator's own check, for callers that skip flash_attn_func.
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises(ValueError, match=r"softcap must be a finite number >= 0 \(0 turns it off; got -2\)"):
        torch.ops.flashmma.forward(q, k, v, None, False, -1, -1, -2.0, None, False)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs")
def test_alibi_slopes_on_another_device_raise():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    slopes = alibi_slopes_per_head(2).to("cuda:1")
    message = r"alibi_slopes must be a CUDA tensor on q's device \(cuda:0; got a tensor on cuda:1\)"
    with pytest.raises(ValueError, match=message):
        flash_attn_func(q, k, v, alibi_slopes=slopes)


# --- gradients ------------------------------------------------------------------------------------

BACKWARD_MESSAGE = r"backward pass of KV caches is not implemented yet.*torch\.no_grad\(\).*\.detach\(\)"
# Relative L2 error of each gradient against the reference: four times the output's bound (the
# backward rounds P, dS and dO to the input dtype before its GEMMs, as FlashAttention's does).
GRAD_TOLERANCE = {torch.float16: 8e-3, torch.bfloat16: 6.4e-2}


def _message_chain(error):
    """str() of an exception and of every exception it was raised from or during."""
    messages = []
    while error is not None and len(messages) < 10:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(messages)


def reference_gradients(q, k, v, d_out, precision=torch.float32, **variant):
    """dq, dk, dv of sum(out * d_out) by autograd through reference() on q, k, v in `precision`
    (float32, or float64 for the tightest reference)."""
    inputs = [t.detach().to(precision).requires_grad_() for t in (q, k, v)]
    out, _ = reference(*inputs, **variant)
    out = out.to(precision)
    # Rows that see no key have no gradient (reference's torch.where keeps them out of the graph).
    return torch.autograd.grad(out, inputs, d_out.to(precision))


def check_gradients(q, k, v, causal=False, softmax_scale=None, window=(-1, -1), softcap=0.0, alibi_slopes=None,
                    precision=torch.float32):
    """flash_attn_func's dq, dk, dv (through out.backward) against the reference's; returns them."""
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    generator = torch.Generator(device=DEVICE).manual_seed(99)
    d_out = torch.randn(q.shape[:3] + (v.shape[3],), generator=generator, device=DEVICE).to(q.dtype)
    out = flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal, window_size=window,
                          softcap=softcap, alibi_slopes=alibi_slopes)
    out.backward(d_out)
    expected = reference_gradients(q, k, v, d_out, precision, causal=causal, softmax_scale=softmax_scale,
                                   window=window, softcap=softcap, alibi_slopes=alibi_slopes)
    # A gradient that vanishes (one key per row: the softmax has no slope) is compared with 1% of
    # the upstream gradient's norm instead of its own, which is rounding noise.
    floor = 1e-2 * d_out.float().norm().item()
    for name, got, want in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), expected):
        assert got.shape == want.shape and got.dtype == q.dtype, name
        assert torch.isfinite(got).all(), name
        error = (got.float() - want.float()).norm().item() / max(want.float().norm().item(), floor)
        assert error < GRAD_TOLERANCE[q.dtype], f"{name}: relative L2 error {error:.3e}"
    return q.grad, k.grad, v.grad


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k", [(1, 1), (17, 300), (128, 128), (300, 17), (513, 257)])
def test_gradients(seqlen_q, seqlen_k, causal, dtype):
    check_gradients(*make_inputs(2, seqlen_q, seqlen_k, 4, 2, 64, dtype), causal=causal)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("head_dim", [8, 17, 40, 72, 96, 128, 160, 256])
def test_gradient_head_dims(head_dim, dtype):
    check_gradients(*make_inputs(1, 100, 130, 2, 1, head_dim, dtype), causal=True)


@pytest.mark.parametrize("group", [1, 3, 8])
def test_gradient_grouped_query(group):
    check_gradients(*make_inputs(2, 90, 110, 2 * group, 2, 64, torch.float16))


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "window,causal,softcap,alibi",
    [((32, 8), False, 0.0, None), ((-1, 16), False, 0.0, None), ((64, 0), True, 0.0, None),
     ((-1, -1), False, 5.0, None), ((-1, -1), True, 0.0, "per_head"),
     ((48, 4), False, 2.0, "per_batch_and_head")],
)
def test_gradient_variants(window, causal, softcap, alibi, dtype):
    q, k, v = make_inputs(2, 150, 170, 4, 2, 64, dtype)
    slopes = None if alibi is None else make_alibi_slopes(alibi, 2, 4)
    check_gradients(q, k, v, causal=causal, window=window, softcap=softcap, alibi_slopes=slopes)


def test_gradients_against_float64():
    # The tightest reference: the same rounded inputs, the whole computation in float64.
    q, k, v = make_inputs(1, 70, 90, 2, 1, 32, torch.float16, seed=3)
    check_gradients(q, k, v, causal=True, softmax_scale=0.3, precision=torch.float64)


@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_gradients_match_sdpa(causal):
    # PyTorch's own attention backward (math backend, fp32) on the same inputs.
    q, k, v = make_inputs(2, 200, 200, 4, 4, 64, torch.bfloat16, seed=5)
    dq, dk, dv = check_gradients(q, k, v, causal=causal)
    inputs = [t.detach().float().transpose(1, 2).requires_grad_() for t in (q, k, v)]
    generator = torch.Generator(device=DEVICE).manual_seed(99)
    d_out = torch.randn(q.shape, generator=generator, device=DEVICE).to(q.dtype)
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(*inputs, is_causal=causal)
    expected = torch.autograd.grad(out, inputs, d_out.float().transpose(1, 2))
    for got, want in zip((dq, dk, dv), expected):
        assert relative_l2(got, want.transpose(1, 2)) < GRAD_TOLERANCE[torch.bfloat16]


def test_gradients_of_transposed_and_unaligned_storage():
    # q in (batch, heads, seq, dim) storage, k a slice at an odd offset, v non-contiguous rows.
    q0, k0, v0 = make_inputs(2, 64, 80, 4, 2, 64, torch.float16, seed=7)
    q = q0.transpose(1, 2).contiguous().transpose(1, 2)
    k = torch.cat([torch.zeros_like(k0[..., :1]), k0], dim=-1)[..., 1:]
    v = torch.cat([v0, v0], dim=1)[:, ::2]
    check_gradients(q, k, v, causal=True)


def test_lse_output_is_not_differentiable():
    q, k, v = (t.requires_grad_() for t in make_inputs(1, 32, 48, 2, 2, 64, torch.float16))
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    assert out.requires_grad and not lse.requires_grad
    (out.float().sum() + lse.sum()).backward()
    assert q.grad is not None and k.grad is not None and v.grad is not None


def test_gradient_of_a_sum_uses_an_expanded_grad():
    # out.sum() hands the backward an expanded (stride 0) gradient.
    q, k, v = (t.requires_grad_() for t in make_inputs(1, 40, 40, 2, 2, 64, torch.float16))
    flash_attn_func(q, k, v, causal=True).sum().backward()
    expected = reference_gradients(q, k, v, torch.ones(1, 40, 2, 64, device=DEVICE), causal=True)
    assert relative_l2(q.grad, expected[0]) < GRAD_TOLERANCE[torch.float16]


def test_deterministic_gradients_are_the_same_bits():
    q0, k0, v0 = make_inputs(2, 700, 900, 8, 2, 64, torch.bfloat16, seed=11)
    d_out = torch.randn(q0.shape, device=DEVICE).to(q0.dtype)
    runs = []
    for _ in range(5):
        q, k, v = (t.detach().clone().requires_grad_() for t in (q0, k0, v0))
        flash_attn_func(q, k, v, causal=True, deterministic=True).backward(d_out)
        runs.append((q.grad, k.grad, v.grad))
    for run in runs[1:]:
        for got, first in zip(run, runs[0]):
            assert torch.equal(got, first)
    check_gradients(q0, k0, v0, causal=True)  # and the same values as the default order


def test_requires_grad_without_grad_mode_works():
    q, k, v = (t.requires_grad_() for t in make_inputs(1, 32, 48, 2, 2, 64, torch.float16))
    expected, _ = reference(q.detach(), k.detach(), v.detach())
    with torch.no_grad():
        out = flash_attn_func(q, k, v)
    assert not out.requires_grad and relative_l2(out, expected) < TOLERANCE[torch.float16]
    with torch.inference_mode():
        assert torch.equal(flash_attn_func(q, k, v), out)
    assert torch.equal(flash_attn_func(q.detach(), k.detach(), v.detach()), out)


def test_gradients_when_compiled():
    torch._dynamo.reset()
    q, k, v = make_inputs(1, 64, 64, 2, 2, 64, torch.float16)
    eager = check_gradients(q, k, v, causal=True)
    q, k, v = (t.detach().clone().requires_grad_() for t in (q, k, v))
    compiled = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, causal=True), fullgraph=True)
    generator = torch.Generator(device=DEVICE).manual_seed(99)
    d_out = torch.randn(q.shape, generator=generator, device=DEVICE).to(q.dtype)
    compiled(q, k, v).backward(d_out)
    for got, want in zip((q.grad, k.grad, v.grad), eager):
        assert relative_l2(got, want.float()) < 1e-2


def test_backward_opcheck():
    # Schema and fake implementation of the backward operator. Arguments: dout, q, k, v, out, lse,
    # softmax_scale, causal, window_left, window_right, softcap, alibi_slopes, deterministic.
    for head_dim in (64, 17):
        q, k, v = make_inputs(2, 65, 130, 4, 2, head_dim, torch.bfloat16)
        out, lse = flash_attn_func(q, k, v, causal=True, return_lse=True)
        d_out = torch.randn_like(out)
        backward = torch.ops.flashmma.backward.default
        torch.library.opcheck(backward, (d_out, q, k, v, out, lse, None, True, -1, -1, 0.0, None, False))
        torch.library.opcheck(backward, (d_out, q, k, v, out, lse, 0.2, True, -1, -1, 0.0, None, True))
        out, lse = flash_attn_func(q, k, v, window_size=(32, 16), softcap=5.0,
                                   alibi_slopes=alibi_slopes_per_head(4), return_lse=True)
        torch.library.opcheck(backward, (d_out, q, k, v, out, lse, None, False, 32, 16, 5.0,
                                         alibi_slopes_per_head(4), False))


def test_backward_operator_checks_its_arguments():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    out, lse = flash_attn_func(q, k, v, return_lse=True)
    backward = torch.ops.flashmma.backward
    with pytest.raises(ValueError, match="lse must be the forward's contiguous float32"):
        backward(out, q, k, v, out, lse[:, :1], None, False, -1, -1, 0.0, None, False)
    with pytest.raises(ValueError, match="out and dout must have q's shape"):
        backward(out[:, :8], q, k, v, out, lse, None, False, -1, -1, 0.0, None, False)


# --- the operator: torch.compile, torch.export, opcheck -------------------------------------------


class Attention(torch.nn.Module):
    """A small module around flash_attn_func, with ops before and after it to fuse."""

    def __init__(self, causal=False, return_lse=False, window=(-1, -1), softcap=0.0):
        super().__init__()
        self.causal = causal
        self.return_lse = return_lse
        self.window = window
        self.softcap = softcap

    def forward(self, q, k, v, alibi_slopes=None):
        result = flash_attn_func(
            q * 0.5, k, v, causal=self.causal, window_size=self.window, softcap=self.softcap,
            alibi_slopes=alibi_slopes, return_lse=self.return_lse,
        )  # fmt: skip
        if self.return_lse:
            out, lse = result
            return out.float() * 2.0, lse + 1.0
        return result.float() * 2.0


def _expected(q, k, v, causal, window=(-1, -1), softcap=0.0, alibi_slopes=None):
    out, lse = reference(q * 0.5, k, v, causal, None, window, softcap, alibi_slopes)
    return out * 2.0, lse + 1.0


@pytest.mark.parametrize("head_dim", [64, 100], ids=["d64", "d100_padded"])
@pytest.mark.parametrize("causal,return_lse", [(False, False), (True, True)], ids=["full", "causal_lse"])
def test_torch_compile_fullgraph(causal, return_lse, head_dim):
    torch._dynamo.reset()
    q, k, v = make_inputs(2, 129, 257, 4, 2, head_dim, torch.bfloat16)
    compiled = torch.compile(Attention(causal, return_lse), fullgraph=True)
    result = compiled(q, k, v)
    expected_out, expected_lse = _expected(q, k, v, causal)
    out = result[0] if return_lse else result
    assert out.shape == (2, 129, 4, head_dim)
    assert relative_l2(out, expected_out) < TOLERANCE[torch.bfloat16]
    if return_lse:
        torch.testing.assert_close(result[1], expected_lse, rtol=1e-4, atol=1e-3)


def test_torch_compile_dynamic_shapes():
    torch._dynamo.reset()
    compiled = torch.compile(Attention(causal=True), fullgraph=True, dynamic=True)
    for seqlen_q, seqlen_k, head_dim in [(64, 100, 40), (200, 77, 40), (33, 300, 17)]:
        q, k, v = make_inputs(2, seqlen_q, seqlen_k, 2, 1, head_dim, torch.float16)
        expected_out, _ = _expected(q, k, v, causal=True)
        assert relative_l2(compiled(q, k, v), expected_out) < TOLERANCE[torch.float16]


def test_torch_export():
    q, k, v = make_inputs(2, 100, 160, 4, 2, 72, torch.float16)
    module = Attention(causal=True, return_lse=True)
    exported = torch.export.export(module, (q, k, v))
    assert "flashmma.forward" in str(exported.graph)
    out, lse = exported.module()(q, k, v)
    eager_out, eager_lse = module(q, k, v)
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)
    # The exported program runs on other inputs of the same shapes.
    q2, k2, v2 = make_inputs(2, 100, 160, 4, 2, 72, torch.float16, seed=1)
    expected_out, _ = _expected(q2, k2, v2, causal=True)
    assert relative_l2(exported.module()(q2, k2, v2)[0], expected_out) < TOLERANCE[torch.float16]


# (window_size, causal, softcap, ALiBi slopes: None, "per_head" or "per_batch_and_head", return_lse)
COMPILED_VARIANTS = [
    ((32, 8), False, 0.0, None, False),
    ((64, -1), True, 5.0, None, True),
    ((-1, -1), False, 0.0, "per_head", True),
    ((48, 16), True, 0.5, "per_batch_and_head", True),
    ((40, 40), False, 30.0, "per_head", False),
]
COMPILED_VARIANT_IDS = ["window", "causal_window_softcap", "alibi", "all_causal", "all"]


@pytest.mark.parametrize("head_dim", [64, 100], ids=["d64", "d100_padded"])
@pytest.mark.parametrize("window,causal,softcap,alibi,return_lse", COMPILED_VARIANTS, ids=COMPILED_VARIANT_IDS)
def test_torch_compile_fullgraph_variants(window, causal, softcap, alibi, return_lse, head_dim):
    # The window, softcap and slopes go through the operator: no graph break.
    torch._dynamo.reset()
    q, k, v = make_inputs(2, 129, 257, 4, 2, head_dim, torch.bfloat16)
    slopes = None if alibi is None else make_alibi_slopes(alibi, 2, 4)
    compiled = torch.compile(Attention(causal, return_lse, window, softcap), fullgraph=True)
    result = compiled(q, k, v, slopes)
    expected_out, expected_lse = _expected(q, k, v, causal, window, softcap, slopes)
    out = result[0] if return_lse else result
    assert out.shape == (2, 129, 4, head_dim)
    assert relative_l2(out, expected_out) < TOLERANCE[torch.bfloat16]
    if return_lse:
        torch.testing.assert_close(result[1], expected_lse, rtol=1e-4, atol=1e-3)


def test_torch_compile_dynamic_shapes_variants():
    torch._dynamo.reset()
    compiled = torch.compile(Attention(True, False, (16, 4), 5.0), fullgraph=True, dynamic=True)
    slopes = alibi_slopes_per_head(2)
    for seqlen_q, seqlen_k, head_dim in [(64, 100, 40), (200, 77, 40), (33, 300, 17)]:
        q, k, v = make_inputs(2, seqlen_q, seqlen_k, 2, 1, head_dim, torch.float16)
        expected_out, _ = _expected(q, k, v, True, (16, 4), 5.0, slopes)
        assert relative_l2(compiled(q, k, v, slopes), expected_out) < TOLERANCE[torch.float16]


def test_torch_export_variants():
    q, k, v = make_inputs(2, 100, 160, 4, 2, 72, torch.float16)
    slopes = alibi_slopes_per_batch_and_head(2, 4)
    module = Attention(causal=False, return_lse=True, window=(40, 8), softcap=5.0)
    exported = torch.export.export(module, (q, k, v, slopes))
    assert "flashmma.forward" in str(exported.graph)
    out, lse = exported.module()(q, k, v, slopes)
    eager_out, eager_lse = module(q, k, v, slopes)
    assert torch.equal(out, eager_out) and torch.equal(lse, eager_lse)
    # The exported program runs on other inputs (and slopes) of the same shapes.
    q2, k2, v2 = make_inputs(2, 100, 160, 4, 2, 72, torch.float16, seed=1)
    slopes2 = alibi_slopes_per_batch_and_head(2, 4, seed=1)
    expected_out, _ = _expected(q2, k2, v2, False, (40, 8), 5.0, slopes2)
    assert relative_l2(exported.module()(q2, k2, v2, slopes2)[0], expected_out) < TOLERANCE[torch.float16]


@pytest.mark.parametrize("head_dim,return_lse", [(64, True), (100, False), (17, True)])
def test_opcheck(head_dim, return_lse):
    # Schema, fake implementation (sizes, strides, dtypes) and the autograd registration.
    # Arguments: q, k, v, softmax_scale, causal, window_left, window_right, softcap, alibi_slopes,
    # return_lse.
    q, k, v = make_inputs(2, 65, 130, 4, 2, head_dim, torch.bfloat16)
    forward = torch.ops.flashmma.forward.default
    torch.library.opcheck(forward, (q, k, v, None, True, -1, -1, 0.0, None, return_lse))
    torch.library.opcheck(forward, (q, k, v, 0.2, False, -1, -1, 0.0, None, return_lse))
    torch.library.opcheck(forward, (q, k, v, None, False, 32, 16, 5.0, alibi_slopes_per_head(4), return_lse))
    slopes = alibi_slopes_per_batch_and_head(2, 4)
    torch.library.opcheck(forward, (q, k, v, 0.2, True, 48, -1, 0.5, slopes, return_lse))


# --- variable-length batches (flash_attn_varlen_func) -------------------------------------------


def make_varlen_inputs(seqlens_q, seqlens_k, heads_q, heads_kv, head_dim, dtype, seed=0):
    """Packed q (total_q, Hq, D), k and v (total_k, Hkv, D), and the int32 prefix sums."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)

    def normal(*shape):
        return torch.randn(*shape, generator=generator, device=DEVICE, dtype=torch.float32).to(dtype)

    def prefix_sums(lengths):
        return torch.tensor([0] + list(lengths), device=DEVICE).cumsum(0).to(torch.int32)

    q = normal(sum(seqlens_q), heads_q, head_dim)
    k = normal(sum(seqlens_k), heads_kv, head_dim)
    v = normal(sum(seqlens_k), heads_kv, head_dim)
    return q, k, v, prefix_sums(seqlens_q), prefix_sums(seqlens_k)


def varlen_reference(q, k, v, cu_q, cu_k, causal=False, window=(-1, -1), softcap=0.0, alibi_slopes=None, used_k=None):
    """(out, lse) in fp32 by the dense reference, one sequence at a time: out (total_q, Hq, D),
    lse (Hq, total_q)."""
    out = torch.zeros(q.shape, dtype=torch.float32, device=DEVICE)
    lse = torch.full((q.shape[1], q.shape[0]), -math.inf, device=DEVICE)
    for b in range(cu_q.numel() - 1):
        q0, q1 = int(cu_q[b]), int(cu_q[b + 1])
        k0, k1 = int(cu_k[b]), int(cu_k[b + 1])
        if used_k is not None:
            k1 = k0 + int(used_k[b])
        if q1 == q0 or k1 == k0:
            continue  # no query, or no key: out 0, lse -inf
        slopes = None
        if alibi_slopes is not None:
            slopes = alibi_slopes if alibi_slopes.dim() == 1 else alibi_slopes[b : b + 1]
        o, l = reference(q[None, q0:q1], k[None, k0:k1], v[None, k0:k1], causal, None, window, softcap, slopes)
        out[q0:q1] = o[0]
        lse[:, q0:q1] = l[0]
    return out, lse


VARLEN_LENGTHS = [
    ([1, 17, 0, 130, 64], [5, 1, 200, 130, 300]),  # a sequence without queries; fewer keys than queries
    ([1, 1, 1, 1], [1000, 1, 4097, 17]),  # decoding
    ([129, 77, 256], [129, 77, 256]),
]


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "causal,window,softcap,alibi",
    [(False, (-1, -1), 0.0, None), (True, (-1, -1), 0.0, None), (False, (32, 8), 0.0, None),
     (True, (-1, -1), 30.0, "per_batch"), (False, (-1, -1), 0.0, "per_head")],
    ids=["full", "causal", "window", "causal-softcap-alibi", "alibi"],
)  # fmt: skip
@pytest.mark.parametrize("lengths", VARLEN_LENGTHS, ids=["mixed", "decode", "prefill"])
def test_varlen_matches_each_sequence(lengths, causal, window, softcap, alibi, dtype):
    seqlens_q, seqlens_k = lengths
    q, k, v, cu_q, cu_k = make_varlen_inputs(seqlens_q, seqlens_k, 8, 2, 128, dtype)
    slopes = None if alibi is None else make_alibi_slopes(alibi, len(seqlens_q), 8)
    out, lse = flash_attn_varlen_func(
        q, k, v, cu_q, cu_k, max(seqlens_q), max(seqlens_k), causal=causal, window_size=window,
        softcap=softcap, alibi_slopes=slopes, return_lse=True,
    )  # fmt: skip
    expected, expected_lse = varlen_reference(q, k, v, cu_q, cu_k, causal, window, softcap, slopes)
    assert out.shape == q.shape and lse.shape == (8, q.shape[0])
    assert relative_l2(out, expected) < TOLERANCE[dtype]
    torch.testing.assert_close(lse, expected_lse, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("head_dim", [40, 100, 256])
def test_varlen_head_dims_and_seqused_k(head_dim):
    seqlens_q, seqlens_k = [3, 1, 50], [400, 64, 9]
    q, k, v, cu_q, cu_k = make_varlen_inputs(seqlens_q, seqlens_k, 4, 4, head_dim, torch.float16)
    used = torch.tensor([300, 0, 9], dtype=torch.int32, device=DEVICE)
    out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 50, 400, causal=True, seqused_k=used)
    expected, _ = varlen_reference(q, k, v, cu_q, cu_k, causal=True, used_k=used)
    assert out.shape == q.shape
    assert relative_l2(out, expected) < TOLERANCE[torch.float16]


def test_varlen_equals_dense_on_equal_lengths():
    q, k, v = make_inputs(3, 70, 90, 4, 2, 64, torch.bfloat16)
    cu_q = torch.arange(4, device=DEVICE, dtype=torch.int32) * 70
    cu_k = torch.arange(4, device=DEVICE, dtype=torch.int32) * 90
    dense = flash_attn_func(q, k, v, causal=True)
    packed = flash_attn_varlen_func(q.flatten(0, 1), k.flatten(0, 1), v.flatten(0, 1), cu_q, cu_k, 70, 90, causal=True)
    # On Hopper both run the Hopper default (the packed call on its kernel for variable lengths),
    # elsewhere the packed one runs the split kernel: the same results up to rounding.
    assert relative_l2(packed.view_as(dense), dense.float()) < TOLERANCE[torch.bfloat16]


def test_varlen_rejects_what_it_cannot_run():
    q, k, v, cu_q, cu_k = make_varlen_inputs([4, 5], [6, 7], 2, 2, 64, torch.float16)
    with pytest.raises(TypeError, match="cu_seqlens_q must be torch.int32"):
        flash_attn_varlen_func(q, k, v, cu_q.long(), cu_k, 5, 7)
    with pytest.raises(ValueError, match=r"cu_seqlens_k must have shape \(3,\)"):
        flash_attn_varlen_func(q, k, v, cu_q, cu_k[:2], 5, 7)
    with pytest.raises(ValueError, match="cu_seqlens_q must be a CUDA tensor on q's device"):
        flash_attn_varlen_func(q, k, v, cu_q.cpu(), cu_k, 5, 7)
    with pytest.raises(ValueError, match="q must have 3 dimensions"):
        flash_attn_varlen_func(q[None], k, v, cu_q, cu_k, 5, 7)
    with pytest.raises(NotImplementedError, match="block_table is not supported yet"):
        flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, block_table=cu_q)
    with pytest.raises(ValueError, match=r"dropout_p must be a number in \[0, 1\)"):
        flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, 1.5)


def test_varlen_signature_is_flash_attention_2s():
    parameters = list(inspect.signature(flash_attn_varlen_func).parameters)
    assert parameters[:16] == [
        "q", "k", "v", "cu_seqlens_q", "cu_seqlens_k", "max_seqlen_q", "max_seqlen_k", "dropout_p",
        "softmax_scale", "causal", "window_size", "softcap", "alibi_slopes", "deterministic",
        "return_attn_probs", "block_table",
    ]  # fmt: skip


def test_varlen_opcheck_and_compile():
    q, k, v, cu_q, cu_k = make_varlen_inputs([4, 33, 1], [60, 33, 2], 4, 2, 72, torch.bfloat16)
    varlen = torch.ops.flashmma.varlen_forward.default
    torch.library.opcheck(varlen, (q, k, v, cu_q, cu_k, None, 33, 60, None, True, -1, -1, 0.0, None, True))
    torch.library.opcheck(varlen, (q, k, v, cu_q, cu_k, None, 33, 60, 0.2, False, 8, 2, 5.0, None, False))
    compiled = torch.compile(
        lambda *a: flash_attn_varlen_func(*a, causal=True, return_lse=True), fullgraph=True
    )
    out, lse = compiled(q, k, v, cu_q, cu_k, 33, 60)
    expected, expected_lse = varlen_reference(q, k, v, cu_q, cu_k, causal=True)
    assert relative_l2(out, expected) < TOLERANCE[torch.bfloat16]
    torch.testing.assert_close(lse, expected_lse, rtol=1e-4, atol=1e-3)


def test_kvcache_requires_grad_raises():
    q, _, _ = make_inputs(1, 1, 1, 2, 2, 64, torch.float16)
    k_cache, v_cache, _ = make_cache(1, 64, 2, 64, torch.float16)
    with pytest.raises(NotImplementedError, match=BACKWARD_MESSAGE):
        flash_attn_with_kvcache(q.requires_grad_(), k_cache, v_cache)
    with torch.no_grad():
        flash_attn_with_kvcache(q, k_cache, v_cache)


def varlen_reference_gradients(q, k, v, cu_q, cu_k, d_out, **variant):
    """dq, dk, dv of sum(out * d_out) for packed sequences, each through reference() alone, fp32."""
    inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    starts_q, starts_k = cu_q.tolist(), cu_k.tolist()
    slopes = variant.pop("alibi_slopes", None)
    outs = []
    for b in range(len(starts_q) - 1):
        pieces = [inputs[0][starts_q[b]:starts_q[b + 1]], inputs[1][starts_k[b]:starts_k[b + 1]],
                  inputs[2][starts_k[b]:starts_k[b + 1]]]
        sequence_slopes = None if slopes is None else (slopes if slopes.dim() == 1 else slopes[b:b + 1])
        out, _ = reference(*(t.unsqueeze(0) for t in pieces), alibi_slopes=sequence_slopes, **variant)
        outs.append(out[0])
    return torch.autograd.grad(torch.cat(outs), inputs, d_out.float())


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize(
    "causal,window,softcap,alibi",
    [(False, (-1, -1), 0.0, None), (True, (-1, -1), 0.0, None), (False, (32, 8), 5.0, "per_batch_and_head")],
    ids=["full", "causal", "window_softcap_alibi"],
)
def test_varlen_gradients(causal, window, softcap, alibi, dtype):
    lengths_q, lengths_k = [5, 77, 130, 1, 33], [64, 200, 130, 9, 33]
    q, k, v, cu_q, cu_k = make_varlen_inputs(lengths_q, lengths_k, 4, 2, 64, dtype)
    slopes = None if alibi is None else make_alibi_slopes(alibi, len(lengths_q), 4)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    d_out = torch.randn(q.shape, generator=torch.Generator(device=DEVICE).manual_seed(5), device=DEVICE).to(dtype)
    out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), causal=causal,
                                 window_size=window, softcap=softcap, alibi_slopes=slopes)
    out.backward(d_out)
    expected = varlen_reference_gradients(q, k, v, cu_q, cu_k, d_out, causal=causal, window=window,
                                          softcap=softcap, alibi_slopes=slopes)
    floor = 1e-2 * d_out.float().norm().item()
    for name, got, want in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), expected):
        assert got.shape == want.shape and torch.isfinite(got).all(), name
        error = (got.float() - want).norm().item() / max(want.norm().item(), floor)
        assert error < GRAD_TOLERANCE[dtype], f"{name}: relative L2 error {error:.3e}"


def test_varlen_gradients_with_seqused_k_raise():
    q, k, v, cu_q, cu_k = make_varlen_inputs([4, 5], [6, 7], 2, 2, 64, torch.float16)
    used = torch.tensor([3, 7], dtype=torch.int32, device=DEVICE)
    with pytest.raises(NotImplementedError, match=r"with seqused_k is not implemented yet"):
        flash_attn_varlen_func(q.requires_grad_(), k, v, cu_q, cu_k, 5, 7, seqused_k=used)
    with torch.no_grad():
        flash_attn_varlen_func(q, k, v, cu_q, cu_k, 5, 7, seqused_k=used)


def test_varlen_backward_opcheck():
    q, k, v, cu_q, cu_k = make_varlen_inputs([5, 40, 17], [30, 40, 1], 4, 2, 72, torch.bfloat16)
    out, lse = flash_attn_varlen_func(q, k, v, cu_q, cu_k, 40, 40, causal=True, return_lse=True)
    torch.library.opcheck(
        torch.ops.flashmma.varlen_backward.default,
        (torch.randn_like(out), q, k, v, out, lse, cu_q, cu_k, 40, 40, None, True, -1, -1, 0.0, None, False),
    )


# --- KV cache (flash_attn_with_kvcache) ----------------------------------------------------------


def rotary_tables(positions, rotary_dim, dtype):
    """cos and sin (positions, rotary_dim / 2) with angle p * 10000^(-2i / rotary_dim)."""
    inverse = 10000.0 ** (-torch.arange(0, rotary_dim, 2, device=DEVICE).float() / rotary_dim)
    angles = torch.arange(positions, device=DEVICE).float()[:, None] * inverse[None, :]
    return angles.cos().to(dtype), angles.sin().to(dtype)


def apply_rotary(x, cos, sin, positions, interleaved):
    """x (..., rows, d) in fp32 with its first 2 * cos.shape[1] columns rotated at positions
    (rows,): pairs (2i, 2i + 1) if interleaved, else (i, i + rotary_dim / 2)."""
    half = cos.shape[1]
    c = cos.float()[positions][..., None, :] if x.dim() == 3 else cos.float()[positions]
    s = sin.float()[positions][..., None, :] if x.dim() == 3 else sin.float()[positions]
    x = x.float().clone()
    first = slice(0, 2 * half, 2) if interleaved else slice(0, half)
    second = slice(1, 2 * half, 2) if interleaved else slice(half, 2 * half)
    x0, x1 = x[..., first].clone(), x[..., second].clone()
    x[..., first] = x0 * c - x1 * s
    x[..., second] = x0 * s + x1 * c
    return x


def kvcache_reference(q, k_cache, v_cache, k=None, v=None, cos=None, sin=None, cache_seqlens=None,
                      cache_batch_idx=None, block_table=None, causal=False, window=(-1, -1), softcap=0.0,
                      alibi_slopes=None, interleaved=True):  # fmt: skip
    """(out, lse, k_cache, v_cache) with FlashAttention-2's flash_attn_with_kvcache semantics: the
    caches are updated copies; out and lse in fp32."""
    k_cache, v_cache = k_cache.clone(), v_cache.clone()
    batch, seqlen_q, heads_q, head_dim = q.shape
    out = torch.zeros(q.shape, device=DEVICE)
    lse = torch.full((batch, heads_q, seqlen_q), -math.inf, device=DEVICE)
    for b in range(batch):
        if block_table is not None:
            rows_k = k_cache[block_table[b].long()].flatten(0, 1)  # views of the pages, in order
            rows_v = v_cache[block_table[b].long()].flatten(0, 1)
        else:
            entry = int(cache_batch_idx[b]) if cache_batch_idx is not None else b
            rows_k, rows_v = k_cache[entry], v_cache[entry]
        cached = int(cache_seqlens[b]) if cache_seqlens is not None else rows_k.shape[0]
        new = 0 if k is None else k.shape[1]
        positions = torch.arange(cached, cached + new, device=DEVICE)
        if new:
            new_k = k[b].float()
            if cos is not None:
                new_k = apply_rotary(new_k, cos, sin, positions, interleaved)
            rows_k[cached : cached + new] = new_k.to(k_cache.dtype)
            rows_v[cached : cached + new] = v[b]
            if block_table is not None:  # write the pages back
                pages = block_table[b].long()
                k_cache[pages] = rows_k.view(len(pages), -1, *rows_k.shape[1:])
                v_cache[pages] = rows_v.view(len(pages), -1, *rows_v.shape[1:])
        qb = q[b].float()
        if cos is not None:
            per_row = causal or window != (-1, -1)
            query_positions = cached + (torch.arange(seqlen_q, device=DEVICE) if per_row else torch.zeros(seqlen_q, dtype=torch.long, device=DEVICE))
            # Rounded to q's dtype, as the kernels keep rotated queries.
            qb = apply_rotary(qb, cos, sin, query_positions, interleaved).to(q.dtype).float()
        keys = cached + new
        if keys == 0:
            continue
        slopes = None
        if alibi_slopes is not None:
            slopes = alibi_slopes if alibi_slopes.dim() == 1 else alibi_slopes[b : b + 1]
        o, l = reference(qb[None], rows_k[None, :keys], rows_v[None, :keys], causal, None, window, softcap, slopes)
        out[b], lse[b] = o[0], l[0]
    return out, lse, k_cache, v_cache


def make_cache(batch, capacity, heads_kv, head_dim, dtype, page_size=None, seed=3):
    """k_cache, v_cache and block_table (None when contiguous), pages in a shuffled order."""
    generator = torch.Generator(device=DEVICE).manual_seed(seed)
    if page_size is None:
        shape = (batch, capacity, heads_kv, head_dim)
        table = None
    else:
        pages_per_sequence = capacity // page_size
        pages = batch * pages_per_sequence + 3
        shape = (pages, page_size, heads_kv, head_dim)
        order = torch.randperm(pages, generator=generator, device=DEVICE)[: batch * pages_per_sequence]
        table = order.view(batch, pages_per_sequence).to(torch.int32)
    k_cache = torch.randn(*shape, generator=generator, device=DEVICE).to(dtype)
    v_cache = torch.randn(*shape, generator=generator, device=DEVICE).to(dtype)
    return k_cache, v_cache, table


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("page_size", [None, 1, 16, 256], ids=["contiguous", "page1", "page16", "page256"])
@pytest.mark.parametrize("rotary", [None, "interleaved", "halves"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
def test_kvcache_append_and_attend(causal, rotary, page_size, dtype):
    batch, capacity, heads_q, heads_kv, head_dim, seqlen_new = 3, 512, 8, 2, 128, 2
    q, _, _ = make_inputs(batch, seqlen_new, 1, heads_q, heads_kv, head_dim, dtype, seed=5)
    k_new, v_new, _ = make_inputs(batch, seqlen_new, seqlen_new, heads_kv, heads_kv, head_dim, dtype, seed=6)
    k_cache, v_cache, table = make_cache(batch, capacity, heads_kv, head_dim, dtype, page_size)
    lengths = torch.tensor([0, 17, capacity - seqlen_new], dtype=torch.int32, device=DEVICE)
    cos = sin = None
    if rotary is not None:
        cos, sin = rotary_tables(capacity, 64, dtype)
    interleaved = rotary != "halves"
    expected, expected_lse, expected_k, expected_v = kvcache_reference(
        q, k_cache, v_cache, k_new, v_new, cos, sin, lengths, None, table, causal, interleaved=interleaved
    )
    out, lse = flash_attn_with_kvcache(
        q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lengths,
        block_table=table, causal=causal, rotary_interleaved=interleaved, return_softmax_lse=True,
    )  # fmt: skip
    assert out.shape == q.shape
    assert relative_l2(out, expected) < TOLERANCE[dtype]
    torch.testing.assert_close(lse, expected_lse, rtol=1e-4, atol=1e-3)
    # The caches were written in place: the values exactly, the rotated keys up to one rounding.
    torch.testing.assert_close(v_cache, expected_v, rtol=0, atol=0)
    torch.testing.assert_close(k_cache.float(), expected_k.float(), rtol=1e-2, atol=1e-2)


@pytest.mark.parametrize("kwargs", [{}, {"window_size": (64, 0)}, {"softcap": 20.0}, {"alibi": True}],
                         ids=["plain", "window", "softcap", "alibi"])  # fmt: skip
def test_kvcache_without_new_rows(kwargs):
    batch, capacity = 4, 300
    q, _, _ = make_inputs(batch, 3, 1, 8, 8, 64, torch.bfloat16, seed=8)
    k_cache, v_cache, _ = make_cache(batch, capacity, 8, 64, torch.bfloat16)
    lengths = torch.tensor([300, 1, 0, 129], dtype=torch.int32, device=DEVICE)
    slopes = alibi_slopes_per_batch_and_head(batch, 8) if kwargs.pop("alibi", False) else None
    window = kwargs.get("window_size", (-1, -1))
    softcap = kwargs.get("softcap", 0.0)
    expected, _, _, _ = kvcache_reference(q, k_cache, v_cache, cache_seqlens=lengths, window=window,
                                          softcap=softcap, alibi_slopes=slopes)  # fmt: skip
    out = flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=lengths, alibi_slopes=slopes, **kwargs)
    assert relative_l2(out, expected) < TOLERANCE[torch.bfloat16]
    # Every cache full (no lengths), and an int length.
    expected, _, _, _ = kvcache_reference(q, k_cache, v_cache)
    assert relative_l2(flash_attn_with_kvcache(q, k_cache, v_cache), expected) < TOLERANCE[torch.bfloat16]
    expected, _, _, _ = kvcache_reference(q, k_cache, v_cache, cache_seqlens=[77] * batch)
    assert relative_l2(flash_attn_with_kvcache(q, k_cache, v_cache, cache_seqlens=77), expected) < TOLERANCE[torch.bfloat16]


def test_kvcache_batch_index_and_splits():
    q, _, _ = make_inputs(2, 1, 1, 4, 1, 128, torch.float16, seed=9)
    k_new, v_new, _ = make_inputs(2, 1, 1, 1, 1, 128, torch.float16, seed=10)
    k_cache, v_cache, _ = make_cache(5, 4096, 1, 128, torch.float16)
    index = torch.tensor([4, 2], dtype=torch.int32, device=DEVICE)
    lengths = torch.tensor([4000, 7], dtype=torch.int32, device=DEVICE)
    expected, _, expected_k, _ = kvcache_reference(q, k_cache, v_cache, k_new, v_new, cache_seqlens=lengths,
                                                   cache_batch_idx=index)  # fmt: skip
    for splits in (0, 1, 7):
        k_copy, v_copy = k_cache.clone(), v_cache.clone()
        out = flash_attn_with_kvcache(q, k_copy, v_copy, k_new, v_new, cache_seqlens=lengths,
                                      cache_batch_idx=index, num_splits=splits)  # fmt: skip
        assert relative_l2(out, expected) < TOLERANCE[torch.float16], f"num_splits={splits}"
        torch.testing.assert_close(k_copy, expected_k, rtol=0, atol=0)


def test_kvcache_replays_in_a_cuda_graph():
    batch, capacity = 2, 256
    q, _, _ = make_inputs(batch, 1, 1, 4, 2, 64, torch.float16, seed=11)
    k_new, v_new, _ = make_inputs(batch, 1, 1, 2, 2, 64, torch.float16, seed=12)
    k_cache, v_cache, table = make_cache(batch, capacity, 2, 64, torch.float16, page_size=16)
    lengths = torch.tensor([5, 100], dtype=torch.int32, device=DEVICE)
    cos, sin = rotary_tables(capacity, 64, torch.float16)
    step = lambda: flash_attn_with_kvcache(  # noqa: E731
        q, k_cache, v_cache, k_new, v_new, rotary_cos=cos, rotary_sin=sin, cache_seqlens=lengths,
        block_table=table, causal=True,
    )  # fmt: skip
    step()  # warm up outside the capture (the caching allocator's first blocks)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        out = step()
    for advance in range(3):
        lengths += 1
        q.normal_()
        k_new.normal_()
        before_k, before_v = k_cache.clone(), v_cache.clone()
        expected, _, expected_k, _ = kvcache_reference(q, before_k, before_v, k_new, v_new, cos, sin, lengths,
                                                       None, table, causal=True)  # fmt: skip
        graph.replay()
        torch.cuda.synchronize()
        assert relative_l2(out, expected) < TOLERANCE[torch.float16], f"replay {advance}"
        torch.testing.assert_close(k_cache.float(), expected_k.float(), rtol=1e-2, atol=1e-2)


def test_kvcache_rejects_what_it_cannot_run():
    q, _, _ = make_inputs(1, 1, 1, 2, 2, 64, torch.float16)
    k_cache, v_cache, _ = make_cache(1, 64, 2, 64, torch.float16)
    with pytest.raises(NotImplementedError, match="cache_leftpad is not supported yet"):
        flash_attn_with_kvcache(q, k_cache, v_cache, cache_leftpad=torch.zeros(1, dtype=torch.int32, device=DEVICE))
    with pytest.raises(ValueError, match="k and v need cache_seqlens"):
        flash_attn_with_kvcache(q, k_cache, v_cache, q[:, :, :2], q[:, :, :2])
    with pytest.raises(ValueError, match="rotary_cos and rotary_sin apply to new keys"):
        cos, sin = rotary_tables(64, 64, torch.float16)
        flash_attn_with_kvcache(q, k_cache, v_cache, rotary_cos=cos, rotary_sin=sin)
    q100, _, _ = make_inputs(1, 1, 1, 2, 2, 100, torch.float16)
    cache100, _, _ = make_cache(1, 64, 2, 100, torch.float16)
    with pytest.raises(ValueError, match="multiple of 8"):
        flash_attn_with_kvcache(q100, cache100, cache100.clone())


def test_kvcache_signature_is_flash_attention_2s():
    parameters = list(inspect.signature(flash_attn_with_kvcache).parameters)
    assert parameters == [
        "q", "k_cache", "v_cache", "k", "v", "rotary_cos", "rotary_sin", "cache_seqlens", "cache_batch_idx",
        "cache_leftpad", "block_table", "softmax_scale", "causal", "window_size", "softcap", "rotary_interleaved",
        "alibi_slopes", "num_splits", "return_softmax_lse",
    ]  # fmt: skip


def test_kvcache_opcheck():
    q, _, _ = make_inputs(2, 2, 1, 4, 2, 64, torch.bfloat16)
    k_new, v_new, _ = make_inputs(2, 2, 2, 2, 2, 64, torch.bfloat16, seed=1)
    k_cache, v_cache, table = make_cache(2, 64, 2, 64, torch.bfloat16, page_size=16)
    lengths = torch.tensor([3, 40], dtype=torch.int32, device=DEVICE)
    op = torch.ops.flashmma.kvcache_forward.default
    args = (q, k_cache, v_cache, k_new, v_new, None, None, lengths, None, table, None, True, -1, -1, 0.0, True,
            None, 0, True)  # fmt: skip
    torch.library.opcheck(op, args)


# --- packaging ------------------------------------------------------------------------------------

REPOSITORY = Path(__file__).resolve().parents[2]


def test_version_matches_the_header():
    header = (REPOSITORY / "include" / "flashmma" / "version.hpp").read_text()
    parts = [
        re.search(rf"#define FLASHMMA_VERSION_{name} (\d+)", header).group(1) for name in ("MAJOR", "MINOR", "PATCH")
    ]
    assert flashmma_torch.__version__ == ".".join(parts)


def test_extension_that_fails_to_load_is_reported(monkeypatch):
    from flashmma_torch import _extension

    def broken_import(name):
        raise ImportError("libc10.so: cannot open shared object file: No such file or directory")

    monkeypatch.setattr(_extension.importlib.util, "find_spec", lambda name: object())
    monkeypatch.setattr(_extension.importlib, "import_module", broken_import)
    with pytest.raises(ImportError, match="installed but failed to load: libc10.so") as raised:
        _extension.load_extension()
    assert isinstance(raised.value.__cause__, ImportError)


# The host-compiler check, the architecture list and the metadata: test_packaging.py (no GPU needed).


# --- Dropout ------------------------------------------------------------------------------------


def dropout_reference(q, k, v, dropout_p, seed, **variant):
    """(out, lse) of reference() with the mask flash_attn_func draws for (dropout_p, seed)."""
    kept = flashmma_torch.dropout_mask(q.shape[0], q.shape[2], q.shape[1], k.shape[1], dropout_p, seed)
    return reference(q, k, v, dropout=(kept, flashmma_torch.dropout_keep_rate(dropout_p)), **variant)


def test_dropout_mask_keeps_one_minus_p():
    for p in (0.1, 0.5):
        kept = flashmma_torch.dropout_mask(2, 4, 64, 128, p, 12345)
        assert kept.shape == (2, 4, 64, 128) and kept.dtype == torch.bool
        rate = kept.float().mean().item()
        assert abs(rate - (1 - p)) < 5 * math.sqrt(p * (1 - p) / kept.numel())
    assert flashmma_torch.dropout_mask(1, 1, 8, 8, 0.0, 1).all()
    assert not torch.equal(flashmma_torch.dropout_mask(1, 2, 32, 32, 0.5, 1),
                           flashmma_torch.dropout_mask(1, 2, 32, 32, 0.5, 2))
    assert flashmma_torch.dropout_keep_rate(0.5) == 0.5 and flashmma_torch.dropout_keep_rate(0.0) == 1.0


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
@pytest.mark.parametrize("causal", [False, True], ids=["full", "causal"])
@pytest.mark.parametrize("seqlen_q,seqlen_k,head_dim", [(128, 128, 64), (77, 200, 128), (200, 33, 96), (65, 65, 256)])
def test_dropout_forward_and_gradients(seqlen_q, seqlen_k, head_dim, causal, dtype):
    # The mask is the same in out and in the gradients: both against the reference with that mask.
    q, k, v = (t.requires_grad_() for t in make_inputs(2, seqlen_q, seqlen_k, 4, 2, head_dim, dtype, seed=3))
    p, seed = 0.2, 0x5EED
    out, lse = flash_attn_func(q, k, v, p, causal=causal, return_lse=True, dropout_seed=seed)
    inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    expected, expected_lse = dropout_reference(*inputs, p, seed, causal=causal)
    assert relative_l2(out, expected.detach()) < TOLERANCE[dtype]
    finite = torch.isfinite(expected_lse)
    assert torch.allclose(lse[finite], expected_lse.detach()[finite], atol=1e-3)
    d_out = torch.randn(out.shape, generator=torch.Generator(device=DEVICE).manual_seed(9), device=DEVICE).to(dtype)
    out.backward(d_out)
    want = torch.autograd.grad(expected, inputs, d_out.float())
    floor = 1e-2 * d_out.float().norm().item()
    for name, got, w in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), want):
        assert torch.isfinite(got).all(), name
        error = (got.float() - w).norm().item() / max(w.norm().item(), floor)
        assert error < GRAD_TOLERANCE[dtype], f"{name}: relative L2 error {error:.3e}"


def test_dropout_with_variants_and_determinism():
    q0, k0, v0 = make_inputs(1, 300, 400, 4, 1, 64, torch.bfloat16, seed=4)
    slopes = alibi_slopes_per_head(4)
    variant = dict(window=(64, 16), softcap=8.0, alibi_slopes=slopes)
    runs = []
    for _ in range(3):
        q, k, v = (t.detach().clone().requires_grad_() for t in (q0, k0, v0))
        out = flash_attn_func(q, k, v, 0.1, window_size=(64, 16), softcap=8.0, alibi_slopes=slopes,
                              deterministic=True, dropout_seed=42)
        out.backward(torch.ones_like(out))
        runs.append((out, q.grad, k.grad, v.grad))
    for run in runs[1:]:
        for got, first in zip(run, runs[0]):
            assert torch.equal(got, first)
    expected, _ = dropout_reference(q0, k0, v0, 0.1, 42, **variant)
    assert relative_l2(runs[0][0], expected) < TOLERANCE[torch.bfloat16]


def test_dropout_seed_comes_from_torch_manual_seed():
    q, k, v = make_inputs(1, 64, 64, 2, 2, 64, torch.float16)
    torch.manual_seed(1)
    a = flash_attn_func(q, k, v, 0.5)
    b = flash_attn_func(q, k, v, 0.5)
    torch.manual_seed(1)
    assert torch.equal(flash_attn_func(q, k, v, 0.5), a) and not torch.equal(a, b)


def test_varlen_dropout():
    lengths_q, lengths_k = [5, 77, 0, 130, 1], [64, 200, 9, 130, 33]
    q, k, v, cu_q, cu_k = make_varlen_inputs(lengths_q, lengths_k, 4, 2, 64, torch.float16, seed=6)
    q, k, v = (t.requires_grad_() for t in (q, k, v))
    p, seed = 0.25, 1234
    out = flash_attn_varlen_func(q, k, v, cu_q, cu_k, max(lengths_q), max(lengths_k), p, causal=True,
                                 dropout_seed=seed)
    d_out = torch.randn(q.shape, generator=torch.Generator(device=DEVICE).manual_seed(5), device=DEVICE).half()
    out.backward(d_out)
    # Sequence b's mask is entry b of the batch's mask, cut to its lengths.
    kept = flashmma_torch.dropout_mask(len(lengths_q), 4, max(lengths_q), max(lengths_k), p, seed)
    rate = flashmma_torch.dropout_keep_rate(p)
    inputs = [t.detach().float().requires_grad_() for t in (q, k, v)]
    starts_q, starts_k = cu_q.tolist(), cu_k.tolist()
    outs = []
    for b in range(len(lengths_q)):
        sq, sk = lengths_q[b], lengths_k[b]
        pieces = [inputs[0][starts_q[b]:starts_q[b] + sq], inputs[1][starts_k[b]:starts_k[b] + sk],
                  inputs[2][starts_k[b]:starts_k[b] + sk]]
        o, _ = reference(*(t.unsqueeze(0) for t in pieces), causal=True,
                         dropout=(kept[b:b + 1, :, :sq, :sk], rate))
        outs.append(o[0])
    expected = torch.cat(outs)
    assert relative_l2(out, expected.detach()) < TOLERANCE[torch.float16]
    want = torch.autograd.grad(expected, inputs, d_out.float())
    floor = 1e-2 * d_out.float().norm().item()
    for name, got, w in zip(("dq", "dk", "dv"), (q.grad, k.grad, v.grad), want):
        error = (got.float() - w).norm().item() / max(w.norm().item(), floor)
        assert error < GRAD_TOLERANCE[torch.float16], f"{name}: relative L2 error {error:.3e}"


def test_dropout_opcheck_and_compile():
    q, k, v = make_inputs(2, 65, 130, 4, 2, 64, torch.float16)
    forward = torch.ops.flashmma.forward.default
    torch.library.opcheck(forward, (q, k, v, None, True, -1, -1, 0.0, None, True, False, 0.3, 77, 0))
    out, lse = forward(q, k, v, None, True, -1, -1, 0.0, None, True, False, 0.3, 77, 0)
    backward = torch.ops.flashmma.backward.default
    torch.library.opcheck(backward, (torch.randn_like(out), q, k, v, out, lse, None, True, -1, -1, 0.0, None,
                                     False, 0.3, 77, 0))
    torch._dynamo.reset()
    compiled = torch.compile(lambda q, k, v: flash_attn_func(q, k, v, 0.3, causal=True, dropout_seed=77),
                             fullgraph=True)
    assert torch.equal(compiled(q, k, v), flash_attn_func(q, k, v, 0.3, causal=True, dropout_seed=77))


@pytest.mark.parametrize("dropout_p", [-0.1, 1.0, float("nan"), "x"])
def test_invalid_dropout_p_raises(dropout_p):
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises(ValueError, match=r"dropout_p must be a number in \[0, 1\)"):
        flash_attn_func(q, k, v, dropout_p)
