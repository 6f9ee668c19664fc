#!/usr/bin/env python3
"""Times flashmma (through flashmma_torch) against PyTorch SDPA's FLASH_ATTENTION backend
(FlashAttention-2 code, "FA2") and CUDNN_ATTENTION backend ("cuDNN"), in one process on the same
inputs, and writes the results as CSV, JSON and a markdown page (docs/perf.md).

    python3 bench/compare.py --out results.csv --markdown docs/perf.md
    python3 bench/compare.py --from-json results.json --markdown docs/perf.md   (re-render only)
    python3 bench/compare.py --template --markdown docs/perf.md                 (no measurement)

Rows: the target sweep (fp16 and bf16, d in {64, 128, 256}, N = Sq = Sk in {1k, 2k, 4k, 8k, 16k},
B * N = 16384, H * d = 2048, causal and not), other head dims (d in {32, 96, 160, 192},
H = 2048 // d, N in {1k, 4k, 16k}) and grouped-query rows (Hq / Hkv = 8, d = 128).

Timing: one pair of torch.cuda.Event around each call, warm-up calls first, the median of the
timed calls, input sets used in turn so that the working set exceeds 120 MB (twice the L2). By
default the implementations are interleaved, one call each per round, so that every one of them
runs under the same clock and power state; --schedule blocked times each in one block instead.
TFLOP/s = 4 * B * H * N^2 * d / time, halved for causal. A backend that fails on a row is
recorded as NaN with a note, and the run goes on.
"""

from __future__ import annotations

import argparse
import datetime
import math
import statistics
import sys
from pathlib import Path

import comparison  # bench/comparison.py: the directory of this script is on sys.path
from comparison import fmt, geometric_mean, git_commit, ratio

REPO = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = ("flashmma", "fa2", "cudnn")
LABELS = {"flashmma": "flashmma", "fa2": "FA2", "cudnn": "cuDNN"}
ROTATION_BYTES = 120 * 1000 * 1000
SCHEDULES = {"interleaved": "implementations interleaved (one call each per round)",
             "blocked": "each implementation timed in one block"}
TOKENS = 16384       # B * N in the target sweep
MODEL_WIDTH = 2048   # H * d
TARGET_HEAD_DIMS = (64, 128, 256)
TARGET_SEQLENS = (1024, 2048, 4096, 8192, 16384)
EXTRA_HEAD_DIMS = (32, 96, 160, 192)
EXTRA_SEQLENS = (1024, 4096, 16384)
GQA_GROUP = 8
GQA_HEAD_DIM = 128

COLUMNS = [
    "group", "dtype", "causal", "d", "n", "batch", "heads_q", "heads_kv", "input_sets",
    "flashmma_ms", "fa2_ms", "cudnn_ms", "flashmma_tflops", "fa2_tflops", "cudnn_tflops",
    "flashmma_over_fa2", "flashmma_over_cudnn", "max_abs_diff_vs_fa2", "sdpa_gqa", "notes",
]


# ------------------------------------------------------------------------------------------------
# Rows


def sweep(dtypes: list[str], quick: bool) -> list[dict]:
    """The rows to measure, each a dict of group, dtype, causal, d, n, batch, heads_q, heads_kv."""
    rows = []

    def add(group, dtype, causal, d, n, heads_q, heads_kv):
        rows.append(dict(group=group, dtype=dtype, causal=causal, d=d, n=n, batch=max(1, TOKENS // n),
                         heads_q=heads_q, heads_kv=heads_kv))

    target_seqlens = (TARGET_SEQLENS[0], TARGET_SEQLENS[-1]) if quick else TARGET_SEQLENS
    extra_seqlens = (EXTRA_SEQLENS[1],) if quick else EXTRA_SEQLENS
    for dtype in dtypes:
        for causal in (False, True):
            for d in TARGET_HEAD_DIMS:
                for n in target_seqlens:
                    add("target", dtype, causal, d, n, MODEL_WIDTH // d, MODEL_WIDTH // d)
    for dtype in dtypes:
        for causal in (False, True):
            for d in EXTRA_HEAD_DIMS:
                for n in extra_seqlens:
                    add("head_dim", dtype, causal, d, n, MODEL_WIDTH // d, MODEL_WIDTH // d)
    for dtype in dtypes:
        for causal in (False, True):
            for n in extra_seqlens:
                heads_q = MODEL_WIDTH // GQA_HEAD_DIM
                add("gqa", dtype, causal, GQA_HEAD_DIM, n, heads_q, heads_q // GQA_GROUP)
    return rows


def forward_flops(row: dict) -> float:
    flops = 4.0 * row["batch"] * row["heads_q"] * row["n"] * row["n"] * row["d"]
    return flops / 2 if row["causal"] else flops


# ------------------------------------------------------------------------------------------------
# Measurement (imports torch lazily: rendering needs no GPU)


def measure_rows(rows: list[dict], args) -> dict:
    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, str(REPO / "examples" / "pytorch"))
    import flashmma_torch

    dtypes = {"fp16": torch.float16, "bf16": torch.bfloat16}
    backends = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}

    def time_blocked(runners):
        """Each implementation in turn: its warm-up calls, then its timed calls."""
        times = {}
        for name, (call, call_sets) in runners.items():
            for i in range(args.warmup):
                call(call_sets[i % len(call_sets)])
            torch.cuda.synchronize()
            events = [(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True))
                      for _ in range(args.iters)]
            for i, (start, stop) in enumerate(events):
                start.record()
                call(call_sets[(args.warmup + i) % len(call_sets)])
                stop.record()
            torch.cuda.synchronize()
            times[name] = statistics.median(start.elapsed_time(stop) for start, stop in events)
        return times

    def time_interleaved(runners):
        return comparison.time_interleaved(torch, runners, args.warmup, args.iters)

    def flashmma_call(inputs):
        q, k, v, causal = inputs
        return flashmma_torch.flash_attn_func(q, k, v, causal=causal)

    def sdpa_call(q, k, v, causal, gqa):
        return comparison.sdpa_bshd(torch, q, k, v, causal, gqa)

    def backend_call(backend):
        return comparison.sdpa_backend_call(torch, backend)

    time_calls = time_interleaved if args.schedule == "interleaved" else time_blocked

    for row in rows:
        dtype = dtypes[row["dtype"]]
        causal = row["causal"]
        shape_q = (row["batch"], row["n"], row["heads_q"], row["d"])
        shape_kv = (row["batch"], row["n"], row["heads_kv"], row["d"])
        element_bytes = 2
        set_bytes = element_bytes * (2 * math.prod(shape_q) + 2 * math.prod(shape_kv))
        set_count = max(2, math.ceil(ROTATION_BYTES / set_bytes))
        row.update(input_sets=set_count, sdpa_gqa="", notes="")
        notes = []
        sets = []
        try:
            generator = torch.Generator(device="cuda").manual_seed(1234)
            for _ in range(set_count):
                sets.append(tuple(
                    torch.randn(shape, generator=generator, device="cuda", dtype=dtype)
                    for shape in (shape_q, shape_kv, shape_kv)))
        except torch.cuda.OutOfMemoryError as error:
            notes.append(f"inputs: {error}".splitlines()[0])
            sets = []

        # One untimed call per implementation gives its output (checked against FA2's below) and
        # drops an implementation that cannot run this row; the others are then timed together.
        outputs = {}
        runners = {}
        for name in IMPLEMENTATIONS:
            row[f"{name}_ms"] = math.nan
            if not sets:
                continue
            try:
                with torch.no_grad():
                    if name == "flashmma":
                        call, call_sets = flashmma_call, [(q, k, v, causal) for q, k, v in sets]
                    else:
                        with sdpa_kernel(backends[name]):
                            call_sets, mode = sdpa_sets(sets, row, backends[name], causal, sdpa_call)
                        if mode:
                            row["sdpa_gqa"] = (row["sdpa_gqa"] + " " if row["sdpa_gqa"] else "") + f"{name}:{mode}"
                        call = backend_call(backends[name])
                    outputs[name] = call(call_sets[0])
                    runners[name] = (call, call_sets)
            except Exception as error:  # a backend that cannot run this row: NaN, note, go on
                notes.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
                if isinstance(error, torch.cuda.OutOfMemoryError):
                    torch.cuda.empty_cache()
        if runners:
            try:
                with torch.no_grad():
                    for name, ms in time_calls(runners).items():
                        row[f"{name}_ms"] = ms
            except Exception as error:  # a failure while timing: every time of the row is NaN
                notes.append(f"timing: {type(error).__name__}: {str(error).splitlines()[0][:160]}")

        flops = forward_flops(row)
        for name in IMPLEMENTATIONS:
            ms = row[f"{name}_ms"]
            row[f"{name}_tflops"] = flops / (ms * 1e-3) / 1e12 if ms == ms else math.nan
        row["flashmma_over_fa2"] = ratio(row["flashmma_tflops"], row["fa2_tflops"])
        row["flashmma_over_cudnn"] = ratio(row["flashmma_tflops"], row["cudnn_tflops"])
        reference = outputs.get("fa2", outputs.get("cudnn"))
        row["max_abs_diff_vs_fa2"] = math.nan
        if "flashmma" in outputs and reference is not None:
            row["max_abs_diff_vs_fa2"] = (outputs["flashmma"].float() - reference.float()).abs().max().item()
            if "fa2" not in outputs:
                notes.append("max_abs_diff against cuDNN (FA2 failed)")
        row["notes"] = "; ".join(notes)
        del sets, outputs
        torch.cuda.empty_cache()
        print(format_progress(row), flush=True)

    return collect_metadata(torch)


def sdpa_sets(sets, row, backend, causal, sdpa_call):
    """The call arguments for SDPA, and how grouped-query heads are given to it: '' without GQA,
    'native' through enable_gqa=True, 'repeat' with k and v repeated to heads_q (not timed)."""
    if row["heads_q"] == row["heads_kv"]:
        return [(q, k, v, causal, False) for q, k, v in sets], ""
    q, k, v = sets[0]
    try:
        sdpa_call(q, k, v, causal, True)
        return [(q, k, v, causal, True) for q, k, v in sets], "native"
    except Exception:
        group = row["heads_q"] // row["heads_kv"]
        repeated = [(q, k.repeat_interleave(group, dim=2), v.repeat_interleave(group, dim=2), causal, False)
                    for q, k, v in sets]
        return repeated, "repeat"




def format_progress(row: dict) -> str:
    def tf(name):
        value = row[f"{name}_tflops"]
        return f"{value:6.1f}" if value == value else "   nan"

    shape = f"{row['dtype']} {'causal' if row['causal'] else 'full  '} d={row['d']:<3} N={row['n']:<5} " \
            f"B={row['batch']:<2} H={row['heads_q']}/{row['heads_kv']}"
    diff = row["max_abs_diff_vs_fa2"]
    text = f"{shape:44s} flashmma {tf('flashmma')}  FA2 {tf('fa2')}  cuDNN {tf('cudnn')} TFLOP/s" \
           f"  max|diff| {diff:.2e}"
    return text + (f"  [{row['notes']}]" if row["notes"] else "")




def collect_metadata(torch) -> dict:
    properties = torch.cuda.get_device_properties(torch.cuda.current_device())
    return {
        "gpu": properties.name,
        "compute_capability": f"{properties.major}.{properties.minor}",
        "sms": properties.multi_processor_count,
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "cudnn": torch.backends.cudnn.version(),
    }


# ------------------------------------------------------------------------------------------------
# Output














def row_label(row: dict) -> str:
    return f"{row['dtype']}, {'causal' if row['causal'] else 'non-causal'}, d={row['d']}, N={row['n']}"


def summary_lines(rows: list[dict]) -> list[str]:
    target = [row for row in rows if row["group"] == "target"]
    lines = []
    for key, label in (("flashmma_over_fa2", "FA2"), ("flashmma_over_cudnn", "cuDNN")):
        valid = [row for row in target if row[key] == row[key]]
        if not valid:
            lines.append(f"- flashmma / {label} over the target rows: not measured.")
            continue
        worst = min(valid, key=lambda row: row[key])
        missing = len(target) - len(valid)
        lines.append(
            f"- flashmma / {label} over the {len(valid)} target rows"
            + (f" ({missing} without a number)" if missing else "")
            + f": geometric mean **{geometric_mean([row[key] for row in valid]):.3f}**, "
              f"minimum **{worst[key]:.3f}** ({row_label(worst)}).")
    diffs = [row["max_abs_diff_vs_fa2"] for row in rows if row["max_abs_diff_vs_fa2"] == row["max_abs_diff_vs_fa2"]]
    if diffs:
        lines.append(f"- Largest max |flashmma - FA2| over all rows: {max(diffs):.2e} "
                     "(same inputs, outputs compared element-wise).")
    return lines


def table(rows: list[dict]) -> list[str]:
    lines = [
        "| dtype | causal | d | N | B | H | flashmma TFLOP/s | FA2 TFLOP/s | cuDNN TFLOP/s "
        "| flashmma/FA2 | flashmma/cuDNN |",
        "|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    for row in rows:
        heads = str(row["heads_q"]) if row["heads_q"] == row["heads_kv"] else f"{row['heads_q']}/{row['heads_kv']}"
        lines.append(
            f"| {row['dtype']} | {'yes' if row['causal'] else 'no'} | {row['d']} | {row['n']} | {row['batch']} "
            f"| {heads} | {fmt(row['flashmma_tflops'], 1)} | {fmt(row['fa2_tflops'], 1)} "
            f"| {fmt(row['cudnn_tflops'], 1)} | {fmt(row['flashmma_over_fa2'], 2)} "
            f"| {fmt(row['flashmma_over_cudnn'], 2)} |")
    return lines


SECTIONS = (
    ("target", "Target sweep",
     "B * N = 16384, H * d = 2048, Sq = Sk = N: the shapes FlashAttention-2 reports."),
    ("head_dim", "Other head dims", "H = 2048 // d, B * N = 16384."),
    ("gqa", "Grouped-query attention",
     f"Hq / Hkv = {GQA_GROUP} (H column: Hq/Hkv), d = {GQA_HEAD_DIM}, B * N = 16384."),
)


def render_markdown(meta: dict | None, rows: list[dict]) -> str:
    lines = ["# flashmma forward performance", ""]
    lines.append("Generated by `bench/compare.py`; do not edit by hand. To regenerate on the GPU "
                 "machine: `bash bench/run_gpu.sh OUTDIR`, then copy `OUTDIR/perf.md` here "
                 "(`bench/plot_perf.py OUTDIR/compare.csv` draws `docs/perf.png`).")
    lines.append("")
    if meta is None:
        lines += ["No measurement is recorded yet: this page is the template that "
                  "`bench/compare.py` fills in.", ""]
    else:
        lines += [
            "| | |",
            "|---|---|",
            f"| GPU | {meta.get('gpu', 'unknown')} (compute capability {meta.get('compute_capability', '?')}, "
            f"{meta.get('sms', '?')} SMs) |",
            f"| date | {meta.get('date', 'unknown')} |",
            f"| commit | {meta.get('commit', 'unknown')} |",
            f"| command | `{meta.get('command', '')}` |",
            f"| PyTorch | {meta.get('torch', '?')} (CUDA {meta.get('cuda', '?')}), cuDNN {meta.get('cudnn', '?')} |",
            f"| timing | CUDA events around each call, {meta.get('warmup', '?')} warm-up calls, median of "
            f"{meta.get('iters', '?')}, inputs rotated over >= {ROTATION_BYTES // 1000000} MB, "
            f"{SCHEDULES.get(meta.get('schedule', 'blocked'), '?')} |",
            "",
        ]
    lines += [
        "FLOPs = 4 * B * H * N^2 * d, halved for causal (FlashAttention's convention). "
        "FA2 is PyTorch SDPA's FLASH_ATTENTION backend (FlashAttention-2 code), cuDNN its "
        "CUDNN_ATTENTION backend, each given (B, H, N, d) views of the same (B, N, H, d) inputs "
        "flashmma reads; every implementation allocates its output in the timed call.",
        "",
    ]
    gqa_modes = sorted({row.get("sdpa_gqa", "") for row in rows if row.get("sdpa_gqa")})
    if gqa_modes:
        lines += ["Grouped-query rows: SDPA took the key/value heads as "
                  + ", ".join(f"`{mode}`" for mode in gqa_modes)
                  + " (native: `enable_gqa=True`; repeat: k and v repeated to Hq heads before timing).", ""]
    lines += ["## Summary", ""]
    lines += summary_lines(rows) if rows else ["- Not measured yet."]
    lines.append("")
    for group, title, description in SECTIONS:
        group_rows = [row for row in rows if row["group"] == group]
        lines += [f"## {title}", "", description, ""]
        lines += table(group_rows) if group_rows else ["Not measured yet."]
        lines.append("")
    notes = [row for row in rows if row.get("notes")]
    if notes:
        lines += ["## Notes", ""]
        lines += [f"- {row_label(row)}: {row['notes']}" for row in notes]
        lines.append("")
    return "\n".join(lines)


# ------------------------------------------------------------------------------------------------




def parse_args(argv):
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="CSV path; the JSON goes beside it (.json)")
    parser.add_argument("--markdown", type=Path, help="markdown page to write (e.g. docs/perf.md)")
    parser.add_argument("--dtype", choices=("fp16", "bf16", "both"), default="both")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--schedule", choices=("interleaved", "blocked"), default="interleaved",
                        help="one call of each implementation per round, or each in one block")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--quick", action="store_true", help="fewer sequence lengths (smoke test)")
    parser.add_argument("--commit", help="git commit to record (default: git rev-parse --short HEAD)")
    parser.add_argument("--from-json", type=Path, help="render --markdown from a previous run's JSON")
    parser.add_argument("--template", action="store_true", help="render --markdown with no results")
    args = parser.parse_args(argv)
    if args.warmup < 0 or args.iters < 1:
        parser.error("--warmup must be >= 0 and --iters >= 1")
    if not (args.out or args.markdown):
        parser.error("give --out and/or --markdown")
    return args


def main(argv=None) -> int:
    args = parse_args(sys.argv[1:] if argv is None else argv)
    if args.template:
        if args.markdown:
            args.markdown.write_text(render_markdown(None, []))
        return 0
    if args.from_json:
        meta, rows = comparison.read_json(args.from_json)
    else:
        dtypes = ["fp16", "bf16"] if args.dtype == "both" else [args.dtype]
        rows = sweep(dtypes, args.quick)
        meta = measure_rows(rows, args)
        meta.update(
            date=datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
            commit=args.commit or git_commit(),
            command=comparison.portable_command(sys.argv),
            warmup=args.warmup,
            iters=args.iters,
            schedule=args.schedule,
        )
    if args.out:
        args.out.parent.mkdir(parents=True, exist_ok=True)
        comparison.write_csv(args.out, rows, COLUMNS)
        comparison.write_json(args.out.with_suffix(".json"), meta, rows, COLUMNS)
    if args.markdown:
        args.markdown.parent.mkdir(parents=True, exist_ok=True)
        args.markdown.write_text(render_markdown(meta, rows))
    missing = [row for row in rows if row.get("flashmma_tflops") != row.get("flashmma_tflops")]
    if missing:
        print(f"compare.py: flashmma has no number for {len(missing)} of {len(rows)} rows", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
