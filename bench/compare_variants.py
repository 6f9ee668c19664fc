#!/usr/bin/env python3
"""Times attention variants (a causal sliding window, ALiBi, a softcap) in FlexAttention and in
FlashAttention-2 where it can express them, on the rows of `flashmma_bench --preset variants`,
takes flashmma's numbers for the same rows from that run's CSV, and writes one table of all of
them as CSV, JSON and a markdown section for docs/perf.md.

    python3 bench/compare_variants.py --bench-csv OUTDIR/bench_variants.csv \\
        --out OUTDIR/compare_variants.csv --markdown OUTDIR/perf_variants.md
    python3 bench/compare_variants.py --from-json OUTDIR/compare_variants.json \\
        --markdown perf_variants.md                                         (re-render only)

Rows (H * d = 2048), each variant beside the plain row it is compared with:
  window   causal, and causal with the window (4096, 0) (FlashAttention-2's window_size), at
           N = 16384, B = 1, d in {128, 64}
  alibi    ALiBi with the slopes 2^(-8 (h + 1) / H), d = 128, N in {4096, 16384}, B * N = 16384,
           causal and not
  softcap  a softcap of 50 (Gemma 2's), d = 128, N = 4096, B = 4, causal and not

FlexAttention is torch.nn.attention.flex_attention.flex_attention under
torch.compile(dynamic=False), compiled by one untimed call per row before its timing starts; the
window and the causal mask are block masks built once per row by create_block_mask, ALiBi and the
softcap score_mods (ALiBi's reading a tensor of slopes). FlashAttention-2 is the flash_attn
package's flash_attn_func (window_size, softcap, alibi_slopes) where it is importable, else
PyTorch SDPA's FLASH_ATTENTION backend, which expresses the plain rows only (n/a on the others).

Timing as bench/compare.py: one pair of torch.cuda.Event around each call, warm-up calls, the
median of the timed calls, input sets used in turn so that the working set exceeds 120 MB, the
implementations interleaved one call each per round. flashmma's times come from flashmma_bench
(its own harness, the same rules, another process). Every implementation's output is compared
with an fp32 recomputation of 64 of its query rows (all heads of batch entry 0) under the row's
variant.

FLOPs = 4 * B * H * d * (visible (query, key) pairs): N^2 without a mask, N^2 / 2 under the
causal mask (FlashAttention's convention), and the exact count of visible pairs under a window,
as flashmma_bench counts them, so that a window's TFLOP/s counts only the scores it keeps.
"""

from __future__ import annotations

import argparse
import csv
import datetime
import math
import sys
import time
from pathlib import Path

import comparison  # bench/comparison.py: the directory of this script is on sys.path
from comparison import fmt, geometric_mean, git_commit, ratio

REPO = Path(__file__).resolve().parent.parent
ROTATION_BYTES = 120 * 1000 * 1000  # 2 x the H200's L2, as compare.py and flashmma_bench
TOKENS = 16384        # B * N
MODEL_WIDTH = 2048    # H * d
WINDOW = (4096, 0)
WINDOW_SEQLEN = 16384
WINDOW_HEAD_DIMS = (128, 64)
ALIBI_SEQLENS = (4096, 16384)
SOFTCAP = 50.0
SOFTCAP_SEQLEN = 4096
CHECKED_ROWS = 64
WINDOW_GOAL = 0.9       # window TFLOP/s (visible scores) over the causal row's
ALIBI_USER_GOAL = 0.05  # |user functor / built-in time - 1|

COLUMNS = [
    "dtype", "causal", "d", "n", "batch", "heads", "variant", "window_left", "window_right",
    "softcap", "alibi", "visible_pairs", "input_sets",
    "flashmma_ms", "flashmma_tflops", "flashmma_status", "flashmma_kernel",
    "flashmma_user_ms", "flashmma_user_config", "flashmma_policy_ms", "flashmma_policy_config",
    "flex_ms", "flex_tflops", "flex_compile_s", "flex_max_abs_err",
    "fa2_ms", "fa2_tflops", "fa2_max_abs_err",
    "flashmma_over_flex", "flashmma_over_fa2", "notes",
]


# ------------------------------------------------------------------------------------------------
# Rows


def problem(dtype, causal, d, n, window=(-1, -1), softcap=0.0, alibi=False) -> dict:
    return dict(dtype=dtype, causal=causal, d=d, n=n, batch=max(1, TOKENS // n),
                heads=MODEL_WIDTH // d, window_left=window[0], window_right=window[1],
                softcap=float(softcap), alibi=alibi)


def has_window(row: dict) -> bool:
    return row["window_left"] >= 0 or row["window_right"] >= 0


def is_plain(row: dict) -> bool:
    return not has_window(row) and row["softcap"] == 0 and not row["alibi"]


def variant_name(row: dict) -> str:
    """As flashmma_bench names it: '-', or 'window(4096,0)', 'softcap=50', 'alibi' joined by '+'."""
    parts = []
    if has_window(row):
        parts.append(f"window({row['window_left']},{row['window_right']})")
    if row["softcap"]:
        parts.append(f"softcap={row['softcap']:g}")
    if row["alibi"]:
        parts.append("alibi")
    return "+".join(parts) or "-"


def row_key(row: dict) -> tuple:
    return (row["dtype"], bool(row["causal"]), int(row["d"]), int(row["n"]), int(row["batch"]),
            int(row["heads"]), int(row["window_left"]), int(row["window_right"]),
            float(row["softcap"]), bool(row["alibi"]))


def sweep(dtypes: list[str], groups: list[str], quick: bool) -> list[dict]:
    """The rows of `flashmma_bench --preset variants`, each problem once, in its order."""
    rows, seen = [], set()

    def add(row):
        if row_key(row) not in seen:
            seen.add(row_key(row))
            rows.append(row)

    for dtype in dtypes:
        if "window" in groups:
            for d in WINDOW_HEAD_DIMS[:1] if quick else WINDOW_HEAD_DIMS:
                add(problem(dtype, True, d, WINDOW_SEQLEN))
                add(problem(dtype, True, d, WINDOW_SEQLEN, window=WINDOW))
        if "alibi" in groups:
            for causal in (False, True):
                for n in ALIBI_SEQLENS:
                    add(problem(dtype, causal, 128, n))
                    add(problem(dtype, causal, 128, n, alibi=True))
        if "softcap" in groups:
            for causal in (False, True):
                add(problem(dtype, causal, 128, SOFTCAP_SEQLEN))
                add(problem(dtype, causal, 128, SOFTCAP_SEQLEN, softcap=SOFTCAP))
    for row in rows:
        row["variant"] = variant_name(row)
        row["visible_pairs"] = visible_pairs(row)
    return rows


def times_flex(row: dict) -> bool:
    """FlexAttention runs the variant rows and the causal rows the windows are compared with; its
    plain non-causal rows would cost a compile each and compare nothing."""
    return not is_plain(row) or (row["causal"] and row["n"] == WINDOW_SEQLEN
                                 and row["d"] in WINDOW_HEAD_DIMS)


def visible_pairs(row: dict) -> int:
    """Visible (query, key) pairs of one (batch, head), Sq = Sk = n: query i sees keys
    [i - left, i + right], a side of -1 unbounded, the causal mask being right = 0."""
    n, left = row["n"], row["window_left"]
    right = 0 if row["causal"] else row["window_right"]
    pairs = 0
    for i in range(n):
        first = 0 if left < 0 else max(0, i - left)
        last = n - 1 if right < 0 else min(n - 1, i + right)
        pairs += max(0, last - first + 1)
    return pairs


def forward_flops(row: dict) -> float:
    """flashmma_bench's count: exact visible pairs under a window, FlashAttention's convention
    (N^2, halved for causal) otherwise."""
    per_pair = 4.0 * row["batch"] * row["heads"] * row["d"]
    if has_window(row):
        return per_pair * row["visible_pairs"]
    return per_pair * row["n"] * row["n"] / (2 if row["causal"] else 1)


def alibi_slopes(heads: int) -> list[float]:
    """ALiBi's slopes, as flashmma_bench gives them: 2^(-8 (h + 1) / heads)."""
    return [2.0 ** (-8.0 * (h + 1) / heads) for h in range(heads)]


# ------------------------------------------------------------------------------------------------
# flashmma's numbers, from flashmma_bench's CSV


def read_bench_csv(path: Path) -> dict:
    """(row_key, entry) -> the CSV row of flashmma_bench --preset variants --format csv."""
    table = {}
    with open(path, newline="") as file:
        for raw in csv.DictReader(file):
            if raw.get("entry") is None:
                raise SystemExit(f"{path}: no 'entry' column; is it a flashmma_bench --format csv "
                                 "of this tree?")
            if raw["seqlen_q"] != raw["seqlen_k"] or raw["heads_q"] != raw["heads_kv"]:
                continue
            key = (raw["dtype"], raw["causal"] == "1", int(raw["head_dim"]), int(raw["seqlen_q"]),
                   int(raw["batch"]), int(raw["heads_q"]), int(raw["window_left"]),
                   int(raw["window_right"]), float(raw["softcap"]), raw["alibi"] == "1")
            table[(key, raw["entry"])] = raw
    return table


def number(text: str | None) -> float:
    try:
        return float(text) if text not in (None, "") else math.nan
    except ValueError:
        return math.nan


def attach_flashmma(rows: list[dict], bench: dict) -> None:
    """flashmma's median times: the default dispatch's, and on ALiBi rows the alibi-user and
    alibi-policy entries' with the config each ran. A row that failed is NaN, its status noted."""
    for row in rows:
        key = row_key(row)
        notes = []
        found = bench.get((key, "default"))
        row["flashmma_status"] = found["status"] if found else "not in the flashmma_bench CSV"
        row["flashmma_kernel"] = found.get("kernel", "") if found else ""
        ok = found is not None and found["status"] == "ok"
        row["flashmma_ms"] = number(found["ms_median"]) if ok else math.nan
        for entry, name in (("alibi-user", "user"), ("alibi-policy", "policy")):
            other = bench.get((key, entry))
            usable = other is not None and other["status"] == "ok"
            row[f"flashmma_{name}_ms"] = number(other["ms_median"]) if usable else math.nan
            row[f"flashmma_{name}_config"] = other["config"] if usable else ""
            if row["alibi"] and not usable:
                notes.append(f"flashmma {entry}: "
                             + (other["status"] if other else "not in the flashmma_bench CSV"))
        row["notes"] = "; ".join(notes)


# ------------------------------------------------------------------------------------------------
# Measurement (imports torch lazily: rendering needs no GPU)


def measure_rows(rows: list[dict], args) -> dict:
    import torch
    import torch._dynamo
    from torch.nn.attention import SDPBackend, sdpa_kernel
    from torch.nn.attention.flex_attention import create_block_mask, flex_attention

    # Every row is a new shape or score_mod, so a new compile; past dynamo's recompile limit the
    # calls would silently run unfused, eager.
    for name in ("recompile_limit", "cache_size_limit", "accumulated_recompile_limit",
                 "accumulated_cache_size_limit"):
        if hasattr(torch._dynamo.config, name):
            setattr(torch._dynamo.config, name, max(getattr(torch._dynamo.config, name), 1024))
    compiled_flex = torch.compile(flex_attention, dynamic=False)

    try:
        import flash_attn
        from flash_attn import flash_attn_func
        fa2_source = f"flash_attn {flash_attn.__version__}"
    except Exception:  # not installed, or built for another torch: SDPA's backend instead
        flash_attn_func = None
        fa2_source = "sdpa"

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    sdpa = torch.nn.functional.scaled_dot_product_attention

    def time_interleaved(runners):
        return comparison.time_interleaved(torch, runners, args.warmup, args.iters)

    for row in rows:
        dtype = dtypes[row["dtype"]]
        b, n, h, d = row["batch"], row["n"], row["heads"], row["d"]
        causal, left, cap = row["causal"], row["window_left"], row["softcap"]
        right = 0 if causal else row["window_right"]
        offset = 0  # seqlen_k - seqlen_q: every row is square
        notes = [row["notes"]] if row.get("notes") else []
        slopes = torch.tensor(alibi_slopes(h), device="cuda", dtype=torch.float32)

        # q, k, v in FlashAttention's (B, N, H, d) layout, and contiguous (B, H, N, d) copies of
        # the same values for FlexAttention, its native layout.
        set_bytes = 2 * 4 * b * n * h * d * 2  # q, k, v, o in both layouts
        set_count = max(2, math.ceil(ROTATION_BYTES / set_bytes))
        row["input_sets"] = set_count
        generator = torch.Generator(device="cuda").manual_seed(1234)
        bshd_sets = [tuple(torch.randn((b, n, h, d), generator=generator, device="cuda",
                                       dtype=dtype) for _ in range(3)) for _ in range(set_count)]
        bhsd_sets = [tuple(t.transpose(1, 2).contiguous() for t in s) for s in bshd_sets]

        def mask_mod(batch, head, q_idx, kv_idx):
            diagonal = q_idx + offset
            visible = kv_idx <= diagonal + right if right >= 0 else kv_idx >= 0
            if left >= 0:
                visible = visible & (kv_idx >= diagonal - left)
            return visible

        def alibi_mod(score, batch, head, q_idx, kv_idx):
            return score - slopes[head] * (q_idx + offset - kv_idx).abs()

        def softcap_mod(score, batch, head, q_idx, kv_idx):
            return cap * torch.tanh(score / cap)

        score_mod = alibi_mod if row["alibi"] else softcap_mod if row["softcap"] else None
        masked = causal or has_window(row)

        runners, outputs = {}, {}
        row["flex_compile_s"] = math.nan
        if times_flex(row):
            try:
                block_mask = create_block_mask(mask_mod, None, None, n, n, device="cuda") \
                    if masked else None

                def flex_call(inputs, block_mask=block_mask, score_mod=score_mod):
                    return compiled_flex(*inputs, score_mod=score_mod, block_mask=block_mask)

                with torch.no_grad():
                    torch.cuda.synchronize()
                    started = time.perf_counter()
                    outputs["flex"] = flex_call(bhsd_sets[0]).transpose(1, 2)
                    torch.cuda.synchronize()
                row["flex_compile_s"] = time.perf_counter() - started
                runners["flex"] = (flex_call, bhsd_sets)
            except Exception as error:  # FlexAttention cannot run this row: n/a, note, go on
                notes.append(f"flex: {type(error).__name__}: {str(error).splitlines()[0][:160]}")

        fa2_call = None
        if flash_attn_func is not None:
            def fa2_call(inputs):
                q, k, v = inputs
                return flash_attn_func(q, k, v, causal=causal,
                                       window_size=(row["window_left"], row["window_right"]),
                                       softcap=cap,
                                       alibi_slopes=slopes if row["alibi"] else None)
        elif is_plain(row):
            def fa2_call(inputs):
                q, k, v = inputs
                with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                    out = sdpa(q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2),
                               is_causal=causal)
                return out.transpose(1, 2)
        if fa2_call is not None:
            try:
                with torch.no_grad():
                    outputs["fa2"] = fa2_call(bshd_sets[0])
                runners["fa2"] = (fa2_call, bshd_sets)
            except Exception as error:
                notes.append(f"fa2: {type(error).__name__}: {str(error).splitlines()[0][:160]}")

        for name in ("flex", "fa2"):
            row[f"{name}_ms"] = math.nan
        if runners:
            try:
                with torch.no_grad():
                    for name, ms in time_interleaved(runners).items():
                        row[f"{name}_ms"] = ms
            except Exception as error:
                notes.append(f"timing: {type(error).__name__}: {str(error).splitlines()[0][:160]}")

        reference, checked = reference_rows(torch, bshd_sets[0], row, slopes)
        for name in ("flex", "fa2"):
            out = outputs.get(name)
            row[f"{name}_max_abs_err"] = math.nan if out is None else \
                (out[0, checked].float() - reference).abs().max().item()

        flops = forward_flops(row)
        for name in ("flashmma", "flex", "fa2"):
            ms = row.get(f"{name}_ms", math.nan)
            row[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12 if ms == ms else math.nan
        row["flashmma_over_flex"] = ratio(row["flex_ms"], row["flashmma_ms"])
        row["flashmma_over_fa2"] = ratio(row["fa2_ms"], row["flashmma_ms"])
        row["notes"] = "; ".join(notes)
        del bshd_sets, bhsd_sets, outputs, runners
        torch.cuda.empty_cache()
        print(format_progress(row), flush=True)

    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    try:
        import triton
        triton_version = triton.__version__
    except Exception:
        triton_version = "?"
    return {
        "gpu": properties.name,
        "compute_capability": f"{properties.major}.{properties.minor}",
        "sms": properties.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "triton": triton_version,
        "fa2_source": fa2_source,
    }


def reference_rows(torch, inputs, row, slopes):
    """O of CHECKED_ROWS query rows of batch entry 0, every head, recomputed in fp32 from the
    (B, N, H, d) inputs under the row's mask, window, softcap and ALiBi, as params.hpp defines
    them. Returns (reference [rows, H, d], the query indices)."""
    q, k, v = (t[0].float() for t in inputs)  # [N, H, d]
    n = row["n"]
    queries = torch.linspace(0, n - 1, CHECKED_ROWS, device=q.device).round().long()
    keys = torch.arange(n, device=q.device)
    scale = 1.0 / math.sqrt(row["d"])
    scores = torch.einsum("rhd,nhd->hrn", q[queries], k) * scale  # [H, rows, N]
    if row["softcap"]:
        scores = row["softcap"] * torch.tanh(scores / row["softcap"])
    distance = (queries[:, None] - keys[None, :])  # query minus key, Sq = Sk
    if row["alibi"]:
        scores = scores - slopes[:, None, None] * distance.abs()[None].float()
    right = 0 if row["causal"] else row["window_right"]
    visible = torch.ones_like(distance, dtype=torch.bool)
    if right >= 0:
        visible &= -distance <= right
    if row["window_left"] >= 0:
        visible &= distance <= row["window_left"]
    scores = scores.masked_fill(~visible[None], -math.inf)
    reference = torch.einsum("hrn,nhd->rhd", torch.softmax(scores, dim=-1), v)
    return reference, queries




def format_progress(row: dict) -> str:
    def tf(name):
        value = row.get(f"{name}_tflops", math.nan)
        return f"{value:6.1f}" if value == value else "   n/a"

    shape = f"{row['dtype']} {'causal' if row['causal'] else 'full  '} d={row['d']:<3} " \
            f"N={row['n']:<5} B={row['batch']:<2} H={row['heads']:<2} {row['variant']:<15}"
    text = f"{shape} flashmma {tf('flashmma')}  Flex {tf('flex')}  FA2 {tf('fa2')} TFLOP/s"
    if row.get("flex_compile_s") == row.get("flex_compile_s"):
        text += f"  (Flex compile {row['flex_compile_s']:.1f} s)"
    return text + (f"  [{row['notes']}]" if row.get("notes") else "")




# ------------------------------------------------------------------------------------------------
# Output












def find(rows: list[dict], like: dict, **changes) -> dict | None:
    """The row of `like`'s problem with `changes` to its variant fields."""
    wanted = dict(like, **changes)
    return next((row for row in rows if row_key(row) == row_key(wanted)), None)


def plain_of(rows: list[dict], row: dict) -> dict | None:
    return find(rows, row, window_left=-1, window_right=-1, softcap=0.0, alibi=False)


def label(row: dict) -> str:
    return f"{row['dtype']}, {'causal' if row['causal'] else 'non-causal'}, d={row['d']}, " \
           f"N={row['n']}, {row['variant']}"


def summary_lines(rows: list[dict]) -> list[str]:
    lines = []
    windows = [row for row in rows if has_window(row)]
    for row in windows:
        plain = plain_of(rows, row)
        parts = []
        for name, title in (("flashmma", "flashmma"), ("flex", "FlexAttention"), ("fa2", "FA2")):
            value = ratio(row[f"{name}_tflops"], plain[f"{name}_tflops"]) if plain else math.nan
            if value == value:
                parts.append(f"{title} {value:.3f}")
        flashmma = ratio(row["flashmma_tflops"], plain["flashmma_tflops"]) if plain else math.nan
        verdict = "n/a" if flashmma != flashmma else ("met" if flashmma >= WINDOW_GOAL else "NOT met")
        lines.append(f"- Sliding window ({row['window_left']}, {row['window_right']}) / causal, "
                     f"TFLOP/s on visible scores, {row['dtype']} d={row['d']} N={row['n']}: "
                     + (", ".join(parts) or "n/a")
                     + f" (goal for flashmma >= {WINDOW_GOAL}: **{verdict}**).")
    for row in rows:
        if not row["alibi"]:
            continue
        user = ratio(row["flashmma_user_ms"], row["flashmma_ms"])
        policy = ratio(row["flashmma_user_ms"], row["flashmma_policy_ms"])
        verdict = "n/a" if user != user else ("met" if abs(user - 1) <= ALIBI_USER_GOAL else "NOT met")
        lines.append(f"- ALiBi user functor / built-in time, {row['dtype']} "
                     f"{'causal' if row['causal'] else 'non-causal'} N={row['n']}: "
                     f"**{fmt(user, 3)}** (goal within {ALIBI_USER_GOAL:.0%}: {verdict}); "
                     f"user functor / flashmma::AlibiBias on the same tile: {fmt(policy, 3)}.")
    variant_rows = [row for row in rows if not is_plain(row)]
    valid = [row for row in variant_rows if row["flashmma_over_flex"] == row["flashmma_over_flex"]]
    if valid:
        worst = min(valid, key=lambda row: row["flashmma_over_flex"])
        lines.append(f"- flashmma / FlexAttention over the {len(valid)} variant rows: geometric "
                     f"mean **{geometric_mean([row['flashmma_over_flex'] for row in valid]):.3f}**, "
                     f"minimum **{worst['flashmma_over_flex']:.3f}** ({label(worst)}).")
    else:
        lines.append("- flashmma / FlexAttention: no variant row has both numbers.")
    return lines


def window_table(rows: list[dict]) -> list[str]:
    lines = ["| dtype | d | H | mask | visible pairs per head | flashmma ms | flashmma TFLOP/s "
             "| Flex TFLOP/s | FA2 TFLOP/s | flashmma/Flex | flashmma/FA2 |",
             "|---|---:|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if row["n"] != WINDOW_SEQLEN or not row["causal"] or row["softcap"] or row["alibi"] \
                or row["d"] not in WINDOW_HEAD_DIMS:
            continue
        mask = f"causal, window {WINDOW}" if has_window(row) else "causal"
        lines.append(f"| {row['dtype']} | {row['d']} | {row['heads']} | {mask} "
                     f"| {row['visible_pairs']} | {fmt(row['flashmma_ms'], 3)} "
                     f"| {fmt(row['flashmma_tflops'], 1)} | {fmt(row['flex_tflops'], 1)} "
                     f"| {fmt(row['fa2_tflops'], 1)} | {fmt(row['flashmma_over_flex'], 2)} "
                     f"| {fmt(row['flashmma_over_fa2'], 2)} |")
    return lines


def alibi_table(rows: list[dict]) -> list[str]:
    lines = ["| dtype | causal | N | B | plain ms | built-in ms | user functor ms | user/built-in "
             "| AlibiBias ms | flashmma TFLOP/s | Flex TFLOP/s | FA2 TFLOP/s | flashmma/Flex "
             "| flashmma/FA2 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if not row["alibi"]:
            continue
        plain = plain_of(rows, row)
        lines.append(f"| {row['dtype']} | {'yes' if row['causal'] else 'no'} | {row['n']} "
                     f"| {row['batch']} | {fmt(plain['flashmma_ms'] if plain else math.nan, 3)} "
                     f"| {fmt(row['flashmma_ms'], 3)} | {fmt(row['flashmma_user_ms'], 3)} "
                     f"| {fmt(ratio(row['flashmma_user_ms'], row['flashmma_ms']), 3)} "
                     f"| {fmt(row['flashmma_policy_ms'], 3)} | {fmt(row['flashmma_tflops'], 1)} "
                     f"| {fmt(row['flex_tflops'], 1)} | {fmt(row['fa2_tflops'], 1)} "
                     f"| {fmt(row['flashmma_over_flex'], 2)} | {fmt(row['flashmma_over_fa2'], 2)} |")
    kernels = sorted({row["flashmma_kernel"] for row in rows if row["alibi"] and row["flashmma_kernel"]})
    configs = sorted({row[key] for row in rows if row["alibi"]
                      for key in ("flashmma_user_config", "flashmma_policy_config") if row[key]})
    lines.append("")
    lines.append("Built-in: `params.alibi_slopes` through the default dispatch, which ran "
                 + (", ".join(f"`{k}`" for k in kernels) or "(no kernel described)") + ". "
                 "User functor: a `ScorePolicyBase` with `kTransformsScores` whose transform adds "
                 "`-slope * |i + sk - sq - j|`, and AlibiBias: `flashmma::AlibiBias`, both through "
                 "`forward<Config, Policy>` (with `CausalMask` combined in for the causal rows) on "
                 "the config the dispatch names for the row: "
                 + (", ".join(f"`{c}`" for c in configs) or "n/a") + ".")
    return lines


def softcap_table(rows: list[dict]) -> list[str]:
    lines = ["| dtype | causal | N | B | plain ms | softcap ms | softcap/plain | flashmma TFLOP/s "
             "| Flex TFLOP/s | FA2 TFLOP/s | flashmma/Flex | flashmma/FA2 |",
             "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for row in rows:
        if not row["softcap"]:
            continue
        plain = plain_of(rows, row)
        plain_ms = plain["flashmma_ms"] if plain else math.nan
        lines.append(f"| {row['dtype']} | {'yes' if row['causal'] else 'no'} | {row['n']} "
                     f"| {row['batch']} | {fmt(plain_ms, 3)} | {fmt(row['flashmma_ms'], 3)} "
                     f"| {fmt(ratio(row['flashmma_ms'], plain_ms), 3)} "
                     f"| {fmt(row['flashmma_tflops'], 1)} | {fmt(row['flex_tflops'], 1)} "
                     f"| {fmt(row['fa2_tflops'], 1)} | {fmt(row['flashmma_over_flex'], 2)} "
                     f"| {fmt(row['flashmma_over_fa2'], 2)} |")
    return lines


def render_markdown(meta: dict, rows: list[dict]) -> str:
    fa2 = meta.get("fa2_source", "?")
    fa2_text = (f"`flash_attn_func` of {fa2} (window_size, softcap, alibi_slopes)"
                if fa2.startswith("flash_attn") else
                "PyTorch SDPA's FLASH_ATTENTION backend (FlashAttention-2 code); it expresses no "
                "window, softcap or ALiBi, so those rows are n/a (the flash_attn package was not "
                "importable)")
    lines = [
        "## Attention variants",
        "",
        "Generated by `bench/compare_variants.py` from `flashmma_bench --preset variants` and its "
        "own FlexAttention and FlashAttention-2 runs; do not edit by hand. To regenerate on the "
        "GPU machine: `ONLY_VARIANTS=1 bash bench/run_gpu.sh OUTDIR` (or the full run), then "
        "paste `perf_variants.md` here.",
        "",
        "| | |",
        "|---|---|",
        f"| GPU | {meta.get('gpu', '?')} (compute capability {meta.get('compute_capability', '?')}, "
        f"{meta.get('sms', '?')} SMs) |",
        f"| date | {meta.get('date', '?')} |",
        f"| commit | {meta.get('commit', '?')} |",
        f"| commands | `{meta.get('bench_command') or 'flashmma_bench --preset variants'}`; "
        f"`{meta.get('command', '')}` |",
        f"| PyTorch | {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}), Triton "
        f"{meta.get('triton', '?')} |",
        "| FlexAttention | `torch.compile(flex_attention, dynamic=False)`, default kernel options, "
        "compiled by one untimed call per row; block masks from `create_block_mask`, built once "
        "per row; ALiBi and the softcap as `score_mod`s |",
        f"| FA2 | {fa2_text} |",
        f"| timing | CUDA events around each call, {meta.get('warmup', '?')} warm-up calls, median "
        f"of {meta.get('iters', '?')}, inputs rotated over >= {ROTATION_BYTES // 1000000} MB, "
        "FlexAttention and FA2 interleaved one call each per round; flashmma timed by "
        "flashmma_bench in its own process under the same rules |",
        "",
        "FLOPs = 4 * B * H * d * (visible (query, key) pairs): N^2 without a mask, N^2 / 2 under "
        "the causal mask (FlashAttention's convention), the exact count under a window (the "
        "visible-pairs column), so a window's TFLOP/s counts only the scores it keeps; ALiBi and "
        "the softcap change no count (the causal rows' N^2 / 2 is 0.006% under their exact "
        "N (N + 1) / 2 at N = 16384). flashmma/Flex and flashmma/FA2 are time ratios "
        "(> 1: flashmma faster). Each implementation's output was checked against an fp32 "
        "recomputation of the row's variant (flashmma's by flashmma_bench, in fp64).",
        "",
        "### Summary",
        "",
    ]
    lines += summary_lines(rows)
    lines += ["", "### Sliding window", "",
              f"B = 1, N = {WINDOW_SEQLEN}, H * d = {MODEL_WIDTH}; the window is FlashAttention-2's "
              f"`window_size={WINDOW}` with `causal=True`.", ""]
    lines += window_table(rows)
    lines += ["", "### ALiBi", "",
              f"d = 128, H = 16, B * N = {TOKENS}, slopes 2^(-8 (h + 1) / H). The times are "
              "flashmma's; TFLOP/s and the ratios to FlexAttention and FA2 are the built-in's.", ""]
    lines += alibi_table(rows)
    lines += ["", "### Softcap", "",
              f"d = 128, H = 16, N = {SOFTCAP_SEQLEN}, B = {TOKENS // SOFTCAP_SEQLEN}, "
              f"softcap {SOFTCAP:g} (Gemma 2's): `softcap * tanh(s / softcap)` on the scaled "
              "score. The times are flashmma's.", ""]
    lines += softcap_table(rows)
    errors = [(name, row[f"{name}_max_abs_err"]) for row in rows for name in ("flex", "fa2")
              if row.get(f"{name}_max_abs_err") == row.get(f"{name}_max_abs_err")]
    notes = [f"- {label(row)}: {row['notes']}" for row in rows if row.get("notes")]
    notes += [f"- {label(row)}: flashmma {row['flashmma_status']}" for row in rows
              if row.get("flashmma_status") not in ("ok", None)]
    if errors:
        worst = {name: max(err for n, err in errors if n == name) for name, _ in errors}
        notes.append("- Largest max |O - fp32 reference| over the checked rows: "
                     + ", ".join(f"{'FlexAttention' if n == 'flex' else 'FA2'} {e:.2e}"
                                 for n, e in sorted(worst.items())) + ".")
    compile_times = [row["flex_compile_s"] for row in rows
                     if row.get("flex_compile_s") == row.get("flex_compile_s")]
    if compile_times:
        notes.append(f"- FlexAttention compile (first call) per row: {min(compile_times):.1f} to "
                     f"{max(compile_times):.1f} s, {sum(compile_times):.0f} s in all, not timed.")
    if notes:
        lines += ["", "### Notes", ""] + notes
    lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------




def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--bench-csv", type=Path,
                        help="flashmma_bench --preset variants --format csv output")
    parser.add_argument("--bench-command", help="the flashmma_bench command line, to record")
    parser.add_argument("--out", type=Path, help="CSV path; the JSON goes beside it (.json)")
    parser.add_argument("--markdown", type=Path, help="markdown section to write")
    parser.add_argument("--dtype", choices=("fp16", "bf16", "both"), default="both")
    parser.add_argument("--groups", default="window,alibi,softcap",
                        help="comma-separated: window, alibi, softcap (default all)")
    parser.add_argument("--quick", action="store_true",
                        help="windows at d = 128 only (fewer FlexAttention compiles)")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--commit", help="git commit to record (default: git rev-parse --short HEAD)")
    parser.add_argument("--from-json", type=Path, help="render --markdown from a previous run's JSON")
    args = parser.parse_args(argv)
    if args.warmup < 0 or args.iters < 1:
        parser.error("--warmup must be >= 0 and --iters >= 1")
    groups = [group for group in args.groups.split(",") if group]
    unknown = set(groups) - {"window", "alibi", "softcap"}
    if unknown or not groups:
        parser.error(f"--groups: unknown {sorted(unknown)}; known: window, alibi, softcap")
    args.groups = groups
    if not (args.out or args.markdown):
        parser.error("give --out and/or --markdown")
    if not args.from_json and not args.bench_csv:
        parser.error("give --bench-csv (flashmma's numbers) or --from-json")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.from_json:
        meta, rows = comparison.read_json(args.from_json)
    else:
        dtypes = ["fp16", "bf16"] if args.dtype == "both" else [args.dtype]
        rows = sweep(dtypes, args.groups, args.quick)
        attach_flashmma(rows, read_bench_csv(args.bench_csv))
        meta = measure_rows(rows, args)
        meta.update(
            date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            commit=args.commit or git_commit(),
            command=comparison.portable_command(sys.argv, without=("--bench-command",)),
            bench_command=args.bench_command or "",
            warmup=args.warmup,
            iters=args.iters,
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        comparison.write_csv(args.out, rows, COLUMNS)
        comparison.write_json(args.out.with_suffix(".json"), meta, rows, COLUMNS)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(render_markdown(meta, rows))
    for line in summary_lines(rows):
        print(line)
    missing = [row for row in rows if row.get("flashmma_ms") != row.get("flashmma_ms")]
    flexless = [row for row in rows if times_flex(row) and row.get("flex_ms") != row.get("flex_ms")]
    if missing or flexless:
        print(f"compare_variants.py: flashmma has no number for {len(missing)} and FlexAttention "
              f"for {len(flexless)} of {len(rows)} rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
