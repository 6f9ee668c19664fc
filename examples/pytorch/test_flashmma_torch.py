"""Checks flashmma_torch.flash_attn_func against PyTorch's scaled_dot_product_attention computed in
fp32 on upcast inputs. Needs a CUDA GPU; skipped without one.

    cd examples/pytorch && python3 -m pytest -q test_flashmma_torch.py

The first run compiles the extension (see flashmma_torch/_extension.py).
"""

import inspect
import math
import os
import re
import shutil
import sys
from pathlib import Path

import pytest

torch = pytest.importorskip("torch")
if not torch.cuda.is_available():
    pytest.skip("flashmma_torch needs a CUDA GPU", allow_module_level=True)

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import flashmma_torch  # noqa: E402  (after the skip: importing builds the extension)
from flashmma_torch import flash_attn_func  # noqa: E402
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


def visible_keys(seqlen_q, seqlen_k, causal):
    """Boolean (seqlen_q, seqlen_k): key j visible to query i (bottom-right aligned causal)."""
    if not causal:
        return torch.ones(seqlen_q, seqlen_k, dtype=torch.bool, device=DEVICE)
    rows = torch.arange(seqlen_q, device=DEVICE)[:, None]
    cols = torch.arange(seqlen_k, device=DEVICE)[None, :]
    return cols <= rows + (seqlen_k - seqlen_q)


def reference(q, k, v, causal=False, softmax_scale=None):
    """(out, lse) in fp32: out (B, Sq, Hq, D), lse (B, Hq, Sq). Rows that see no key: 0, -inf."""
    heads_q, heads_kv, head_dim = q.shape[2], k.shape[2], q.shape[3]
    scale = 1.0 / math.sqrt(head_dim) if softmax_scale is None else softmax_scale
    group = heads_q // heads_kv
    qf = q.float().transpose(1, 2)
    kf = k.float().transpose(1, 2).repeat_interleave(group, dim=1)
    vf = v.float().transpose(1, 2).repeat_interleave(group, dim=1)
    mask = visible_keys(q.shape[1], k.shape[1], causal)
    with sdpa_kernel(SDPBackend.MATH):
        out = torch.nn.functional.scaled_dot_product_attention(qf, kf, vf, attn_mask=mask, scale=scale)
    sees_a_key = mask.any(dim=-1)[None, None, :, None]
    out = torch.where(sees_a_key, out, torch.zeros_like(out))
    scores = torch.matmul(qf, kf.transpose(-1, -2)) * scale
    lse = torch.logsumexp(scores.masked_fill(~mask, -math.inf), dim=-1)
    return out.transpose(1, 2), lse


def relative_l2(actual, expected):
    difference = (actual.float() - expected).norm()
    return (difference / expected.norm().clamp_min(1e-12)).item()


def check(q, k, v, causal=False, softmax_scale=None):
    out = flash_attn_func(q, k, v, softmax_scale=softmax_scale, causal=causal)
    expected, _ = reference(q, k, v, causal, softmax_scale)
    assert out.shape == q.shape[:3] + (v.shape[3],)
    assert out.dtype == q.dtype and out.device == q.device
    assert torch.isfinite(out).all()
    error = relative_l2(out, expected)
    assert error < TOLERANCE[q.dtype], f"relative L2 error {error:.3e}"
    return out


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
    assert flashmma_torch.__all__ == ["flash_attn_func"]
    assert "bottom-right" in flash_attn_func.__doc__


# --- FlashAttention-2's signature ---------------------------------------------------------------


def test_signature_is_flash_attention_2s():
    parameters = inspect.signature(flash_attn_func).parameters
    assert list(parameters) == [
        "q", "k", "v", "dropout_p", "softmax_scale", "causal", "window_size", "softcap",
        "alibi_slopes", "deterministic", "return_attn_probs", "return_lse",
    ]  # fmt: skip
    assert parameters["return_lse"].kind is inspect.Parameter.KEYWORD_ONLY
    defaults = {name: p.default for name, p in parameters.items() if p.default is not p.empty}
    assert defaults == {
        "dropout_p": 0.0, "softmax_scale": None, "causal": False, "window_size": (-1, -1),
        "softcap": 0.0, "alibi_slopes": None, "deterministic": False, "return_attn_probs": False,
        "return_lse": False,
    }  # fmt: skip


def test_fourth_positional_argument_is_dropout_p():
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    with pytest.raises(NotImplementedError, match=r"dropout_p=0\.1 is not supported yet: .*no dropout"):
        flash_attn_func(q, k, v, 0.1)


@pytest.mark.parametrize("dtype", DTYPES, ids=["fp16", "bf16"])
def test_positional_softmax_scale_and_causal(dtype):
    q, k, v = make_inputs(1, 100, 300, 2, 1, 64, dtype)
    out = flash_attn_func(q, k, v, 0.0, 0.3, True)
    expected, _ = reference(q, k, v, causal=True, softmax_scale=0.3)
    assert relative_l2(out, expected) < TOLERANCE[dtype]


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({"dropout_p": 0.5}, r"dropout_p=0\.5 is not supported yet"),
        ({"softcap": 30.0}, r"softcap=30\.0 is not supported yet"),
        ({"alibi_slopes": "tensor"}, r"alibi_slopes is not supported yet"),
        ({"window_size": (128, 0)}, r"window_size=\(128, 0\) is not supported yet"),
        ({"window_size": (-1, 64)}, r"window_size=\(-1, 64\) is not supported yet"),
        ({"window_size": (64, -1), "causal": True}, r"window_size=\(64, -1\) is not supported yet"),
        ({"return_attn_probs": True}, r"return_attn_probs=True is not supported yet: .*return_lse=True"),
    ],
    ids=["dropout_p", "softcap", "alibi_slopes", "window_left", "window_right", "window_causal", "attn_probs"],
)
def test_unsupported_arguments_raise(kwargs, message):
    q, k, v = make_inputs(1, 16, 16, 2, 2, 64, torch.float16)
    if kwargs.get("alibi_slopes") == "tensor":
        kwargs = {"alibi_slopes": torch.zeros(2, device=DEVICE, dtype=torch.float32)}
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


# --- gradients ------------------------------------------------------------------------------------

BACKWARD_MESSAGE = r"backward pass is not implemented yet.*torch\.no_grad\(\).*\.detach\(\)"


def _message_chain(error):
    """str() of an exception and of every exception it was raised from or during."""
    messages = []
    while error is not None and len(messages) < 10:
        messages.append(str(error))
        error = error.__cause__ or error.__context__
    return "\n".join(messages)


@pytest.mark.parametrize("which", ["q", "k", "v"])
def test_requires_grad_raises(which):
    q, k, v = make_inputs(1, 32, 32, 2, 2, 64, torch.float16)
    inputs = {"q": q, "k": k, "v": v}
    inputs[which] = inputs[which].requires_grad_()
    with pytest.raises(NotImplementedError, match=BACKWARD_MESSAGE):
        flash_attn_func(**inputs)


def test_requires_grad_without_grad_mode_works():
    q, k, v = (t.requires_grad_() for t in make_inputs(1, 32, 48, 2, 2, 64, torch.float16))
    expected, _ = reference(q.detach(), k.detach(), v.detach())
    with torch.no_grad():
        out = flash_attn_func(q, k, v)
    assert not out.requires_grad and relative_l2(out, expected) < TOLERANCE[torch.float16]
    with torch.inference_mode():
        assert torch.equal(flash_attn_func(q, k, v), out)
    assert torch.equal(flash_attn_func(q.detach(), k.detach(), v.detach()), out)


def test_requires_grad_raises_when_compiled():
    torch._dynamo.reset()
    q, k, v = make_inputs(1, 32, 32, 2, 2, 64, torch.float16)
    q.requires_grad_()
    compiled = torch.compile(lambda q, k, v: flash_attn_func(q, k, v), fullgraph=True)
    with pytest.raises(Exception) as raised:
        compiled(q, k, v)
    assert re.search(BACKWARD_MESSAGE, _message_chain(raised.value), re.DOTALL), _message_chain(raised.value)


# --- the operator: torch.compile, torch.export, opcheck -------------------------------------------


class Attention(torch.nn.Module):
    """A small module around flash_attn_func, with ops before and after it to fuse."""

    def __init__(self, causal=False, return_lse=False):
        super().__init__()
        self.causal = causal
        self.return_lse = return_lse

    def forward(self, q, k, v):
        result = flash_attn_func(q * 0.5, k, v, causal=self.causal, return_lse=self.return_lse)
        if self.return_lse:
            out, lse = result
            return out.float() * 2.0, lse + 1.0
        return result.float() * 2.0


def _expected(q, k, v, causal):
    out, lse = reference(q * 0.5, k, v, causal)
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


@pytest.mark.parametrize("head_dim,return_lse", [(64, True), (100, False), (17, True)])
def test_opcheck(head_dim, return_lse):
    # Schema, fake implementation (sizes, strides, dtypes) and the autograd registration.
    q, k, v = make_inputs(2, 65, 130, 4, 2, head_dim, torch.bfloat16)
    torch.library.opcheck(torch.ops.flashmma.forward.default, (q, k, v, None, True, return_lse))
    torch.library.opcheck(torch.ops.flashmma.forward.default, (q, k, v, 0.2, False, return_lse))


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


@pytest.mark.skipif(shutil.which("g++") is None, reason="needs g++")
def test_compiler_check(monkeypatch):
    from flashmma_torch import _build

    monkeypatch.delenv(_build.SKIP_COMPILER_CHECK_VARIABLE, raising=False)
    # The compiler this run built the extension with links libstdc++ dynamically.
    assert _build.probe_compiler(_build.linking_compiler())[0] is True
    # One that links it statically is refused, by name, with the fix.
    static = f"{shutil.which('g++')} -static-libstdc++"
    if _build.probe_compiler(static)[0] is not False:
        pytest.skip("g++ cannot link libstdc++ statically here")
    monkeypatch.setenv("CXX", static)
    with pytest.raises(_build.CompilerError, match=r"links libstdc\+\+ statically.*Set CC and CXX"):
        _build.check_host_compiler()
    monkeypatch.setenv(_build.SKIP_COMPILER_CHECK_VARIABLE, "1")
    _build.check_host_compiler()
