"""What bench/compare.py and bench/compare_variants.py share: the round-robin CUDA-event timing,
the CSV and JSON files of a run (NaN as "nan" in the CSV, null in the JSON), the numbers'
formatting, and the commit and command line a run records.
"""

from __future__ import annotations

import csv
import json
import math
import shlex
import statistics
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def time_interleaved(torch, runners, warmup, iters):
    """Round-robin: every round calls each implementation once, so that all of them run under
    the same clock and power state (a block of one implementation's calls right after a
    power-hungry one can start at lowered clocks, which skews the short rows). Each call gets its
    own pair of events.

    runners: {name: (call, call_sets)}; round i calls call(call_sets[i % len(call_sets)]). The
    first `warmup` rounds are not timed. Returns {name: median milliseconds}."""
    events = {name: [] for name in runners}
    for i in range(warmup + iters):
        for name, (call, call_sets) in runners.items():
            inputs = call_sets[i % len(call_sets)]
            if i < warmup:
                call(inputs)
                continue
            start = torch.cuda.Event(enable_timing=True)
            stop = torch.cuda.Event(enable_timing=True)
            start.record()
            call(inputs)
            stop.record()
            events[name].append((start, stop))
    torch.cuda.synchronize()
    return {name: statistics.median(start.elapsed_time(stop) for start, stop in pairs)
            for name, pairs in events.items()}


def sdpa_bshd(torch, q, k, v, causal, gqa):
    """PyTorch SDPA on (B, S, H, D) tensors: it takes (B, H, S, D), so transposed views (no
    copy) go in and the output comes back the same way."""
    out = torch.nn.functional.scaled_dot_product_attention(
        q.transpose(1, 2), k.transpose(1, 2), v.transpose(1, 2), is_causal=causal, enable_gqa=gqa)
    return out.transpose(1, 2)


def sdpa_backend_call(torch, backend):
    """call(inputs): sdpa_bshd(*inputs) on one SDPA backend (inputs: q, k, v, causal, gqa)."""
    from torch.nn.attention import sdpa_kernel

    def call(inputs):
        with sdpa_kernel(backend):
            return sdpa_bshd(torch, *inputs)
    return call


def median_ms(torch, call, iters: int) -> float:
    """Median milliseconds of `iters` calls of `call` after 3 untimed ones, each between its own
    CUDA events."""
    times = []
    for i in range(iters + 3):
        start = torch.cuda.Event(enable_timing=True)
        stop = torch.cuda.Event(enable_timing=True)
        start.record()
        call()
        stop.record()
        stop.synchronize()
        if i >= 3:
            times.append(start.elapsed_time(stop))
    return statistics.median(times)


def print_ratio_table(rows: list[dict]) -> None:
    """The markdown table of flashmma against FA2 and cuDNN (keys dtype, d, seqlen, causal,
    flashmma_tflops, fa2_tflops, cudnn_tflops, over_fa2, over_cudnn), then the geometric means
    and the minimum against FA2."""
    print("| dtype | d | N | causal | flashmma | FA2 | cuDNN | / FA2 | / cuDNN |")
    print("|---|---:|---:|---|---:|---:|---:|---:|---:|")
    for r in rows:
        print(f"| {r['dtype']} | {r['d']} | {r['seqlen']} | {'yes' if r['causal'] else 'no'} | "
              f"{fmt(r['flashmma_tflops'], 1)} | {fmt(r['fa2_tflops'], 1)} | "
              f"{fmt(r['cudnn_tflops'], 1)} | {fmt(r['over_fa2'], 3)} | {fmt(r['over_cudnn'], 3)} |")
    print(f"flashmma / FA2: geometric mean {fmt(geometric_mean([r['over_fa2'] for r in rows]), 3)}, "
          f"minimum {fmt(min(r['over_fa2'] for r in rows), 3)}")
    print(f"flashmma / cuDNN: geometric mean "
          f"{fmt(geometric_mean([r['over_cudnn'] for r in rows]), 3)}")


def ratio(numerator: float, denominator: float) -> float:
    if numerator != numerator or denominator != denominator or denominator <= 0:
        return math.nan
    return numerator / denominator


def geometric_mean(values: list[float]) -> float:
    values = [v for v in values if v == v and v > 0]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else math.nan


def fmt(value, digits: int) -> str:
    return "n/a" if value is None or value != value else f"{value:.{digits}f}"


def git_commit() -> str:
    try:
        result = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", "HEAD"],
                                capture_output=True, text=True, timeout=10)
        return result.stdout.strip() if result.returncode == 0 and result.stdout.strip() else "unknown"
    except (OSError, subprocess.SubprocessError):
        return "unknown"


def portable_command(argv, without=()) -> str:
    """The command line as run from the repository root, without the machine's own paths: the
    script relative to the repository, output paths by their file name under OUTDIR. The options
    named in `without` are left out with their values (a run records some on their own)."""
    argv = list(argv)
    for option in without:
        argv = [word for word in argv if not word.startswith(option + "=")]
        if option in argv:
            at = argv.index(option)
            del argv[at:at + 2]
    words = ["python3"]
    for word in argv:
        path = Path(word)
        if path.is_absolute():
            try:
                word = str(path.resolve().relative_to(REPO))
            except ValueError:
                word = f"OUTDIR/{path.name}"
        words.append(word)
    return shlex.join(words)


def write_csv(path: Path, rows: list[dict], columns: list[str]) -> None:
    with open(path, "w", newline="") as file:
        writer = csv.DictWriter(file, fieldnames=columns, extrasaction="ignore")
        writer.writeheader()
        for row in rows:
            writer.writerow({key: ("nan" if isinstance(row.get(key), float) and math.isnan(row[key])
                                   else row.get(key, "")) for key in columns})


def write_json(path: Path, meta: dict, rows: list[dict], columns: list[str]) -> None:
    def value(v):
        return None if isinstance(v, float) and math.isnan(v) else v
    document = {"meta": meta, "rows": [{key: value(row.get(key)) for key in columns} for row in rows]}
    path.write_text(json.dumps(document, indent=1) + "\n")


def read_json(path: Path) -> tuple[dict, list[dict]]:
    document = json.loads(path.read_text())
    rows = [{key: (math.nan if value is None else value) for key, value in row.items()}
            for row in document["rows"]]
    return document["meta"], rows
