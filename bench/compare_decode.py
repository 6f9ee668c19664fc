#!/usr/bin/env python3
"""Times decoding (one query per sequence against a KV cache) with flashmma (through
flashmma_torch) against PyTorch SDPA's FLASH_ATTENTION ("FA2") and CUDNN_ATTENTION ("cuDNN")
backends, in one process on the same inputs, and prints a markdown table (and writes CSV).

    python3 bench/compare_decode.py --out decode.csv

Rows: issue 14's decode shapes: 32 query heads over 8 K/V heads, d = 128, one query per
sequence, batch x cache length in {1 x 128k, 1 x 32k, 8 x 16k, 32 x 4k, 64 x 8k, 128 x 2k},
non-causal (one query sees every key), contiguous caches. flashmma runs flash_attn_func, which
plans its split count automatically (the workspace is allocated by the binding); SDPA gets
grouped-query heads through enable_gqa=True where the backend takes it, else K and V repeated
to 32 heads (noted; the repeated tensors are not what it reads per byte counted).

With --flashmma-bench PATH (a built flashmma_bench), flashmma is timed by that program's decode
preset instead, in a process of its own run first (the same shapes, bf16, 2 rounds, the median
round), so that the comparison needs no PyTorch extension build; its max_abs_diff_vs_fa2 is then
not measured (the bench checks each row against its fp64 reference instead).

Metric: GB/s of K and V read (2 * batch * cache * heads_kv * d * 2 bytes over the median time),
the number a decoding kernel is bound by. Timing as bench/compare.py: implementations
interleaved, one call each per round, input sets rotated past twice the L2.
"""

from __future__ import annotations

import argparse
import math
import sys
from pathlib import Path

import comparison  # bench/comparison.py
from comparison import fmt, geometric_mean, git_commit, ratio

REPO = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = ("flashmma", "fa2", "cudnn")
ROTATION_BYTES = 120 * 1000 * 1000
HEADS_Q, HEADS_KV, HEAD_DIM = 32, 8, 128
SHAPES = ((1, 131072), (1, 32768), (8, 16384), (32, 4096), (64, 8192), (128, 2048))
COLUMNS = ["dtype", "batch", "cache", "flashmma_ms", "fa2_ms", "cudnn_ms", "flashmma_gbs",
           "fa2_gbs", "cudnn_gbs", "flashmma_over_fa2", "flashmma_over_cudnn",
           "max_abs_diff_vs_fa2", "sdpa_gqa", "notes"]


def kv_bytes(batch: int, cache: int) -> int:
    return 2 * batch * cache * HEADS_KV * HEAD_DIM * 2


def bench_times(path: Path, dtype: str, iters: int) -> dict:
    """{(batch, cache): median ms} of flashmma_bench's decode preset (each row checked by it)."""
    import csv
    import subprocess
    import tempfile

    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "decode.csv"
        subprocess.run([str(path), "--preset", "decode", "--dtype", dtype, "--iters", str(iters),
                        "--rounds", "2", "--format", "csv", "--out", str(out)], check=True,
                       stdout=subprocess.DEVNULL)
        with out.open() as f:
            rows = list(csv.DictReader(f))
    times = {}
    for r in rows:
        if r["status"] != "ok":
            raise RuntimeError(f"flashmma_bench row {r['batch']} x {r['seqlen_k']}: {r['status']}")
        times[(int(r["batch"]), int(r["seqlen_k"]))] = float(r["ms_median"])
    return times


def measure(args) -> list[dict]:
    import torch
    from torch.nn.attention import SDPBackend

    from_bench = bench_times(args.flashmma_bench, args.dtype, args.iters) if args.flashmma_bench else None
    if from_bench is None:
        sys.path.insert(0, str(REPO / "examples" / "pytorch"))
        import flashmma_torch

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    backends = {"fa2": SDPBackend.FLASH_ATTENTION, "cudnn": SDPBackend.CUDNN_ATTENTION}

    rows = []
    for batch, cache in SHAPES:
        row = dict(dtype=args.dtype, batch=batch, cache=cache, sdpa_gqa="", notes="")
        notes = []
        shape_q = (batch, 1, HEADS_Q, HEAD_DIM)
        shape_kv = (batch, cache, HEADS_KV, HEAD_DIM)
        set_count = max(2, math.ceil(ROTATION_BYTES / kv_bytes(batch, cache)))
        generator = torch.Generator(device="cuda").manual_seed(1234)
        sets = [tuple(torch.randn(s, generator=generator, device="cuda", dtype=dtype)
                      for s in (shape_q, shape_kv, shape_kv)) for _ in range(set_count)]
        outputs, runners = {}, {}
        for name in IMPLEMENTATIONS:
            row[f"{name}_ms"] = math.nan
            if name == "flashmma" and from_bench is not None:
                notes.append("flashmma: flashmma_bench")
                continue
            try:
                with torch.no_grad():
                    if name == "flashmma":
                        call = lambda inputs: flashmma_torch.flash_attn_func(*inputs)  # noqa: E731
                        call_sets = sets
                    else:
                        call = comparison.sdpa_backend_call(torch, backends[name])
                        try:
                            call((*sets[0], False, True))
                            call_sets, mode = [(q, k, v, False, True) for q, k, v in sets], "native"
                        except Exception:
                            call_sets = [(q, k.repeat_interleave(HEADS_Q // HEADS_KV, dim=2),
                                          v.repeat_interleave(HEADS_Q // HEADS_KV, dim=2), False,
                                          False)
                                         for q, k, v in sets[:2]]
                            mode = "repeat"
                        row["sdpa_gqa"] += (" " if row["sdpa_gqa"] else "") + f"{name}:{mode}"
                    outputs[name] = call(call_sets[0])
                    runners[name] = (call, call_sets)
            except Exception as error:
                notes.append(f"{name}: {type(error).__name__}: {str(error).splitlines()[0][:160]}")
        if runners:
            with torch.no_grad():
                for name, ms in comparison.time_interleaved(torch, runners, args.warmup,
                                                            args.iters).items():
                    row[f"{name}_ms"] = ms
        if from_bench is not None:
            row["flashmma_ms"] = from_bench[(batch, cache)]
        for name in IMPLEMENTATIONS:
            ms = row[f"{name}_ms"]
            row[f"{name}_gbs"] = kv_bytes(batch, cache) / (ms * 1e-3) / 1e9 if ms == ms else math.nan
        row["flashmma_over_fa2"] = ratio(row["flashmma_gbs"], row["fa2_gbs"])
        row["flashmma_over_cudnn"] = ratio(row["flashmma_gbs"], row["cudnn_gbs"])
        if "flashmma" in outputs and "fa2" in outputs:
            row["max_abs_diff_vs_fa2"] = float(
                (outputs["flashmma"].float() - outputs["fa2"].float()).abs().max())
        else:
            row["max_abs_diff_vs_fa2"] = math.nan
        row["notes"] = "; ".join(notes)
        rows.append(row)
        print(f"{batch} x {cache}: " + ", ".join(f"{n} {fmt(row[n + '_gbs'], 0)} GB/s"
                                                for n in IMPLEMENTATIONS), flush=True)
        del sets, outputs, runners
        torch.cuda.empty_cache()
    return rows


def table(rows: list[dict], meta: str) -> str:
    lines = [meta, "",
             "| batch x cache | flashmma | FA2 | cuDNN | flashmma / FA2 | flashmma / cuDNN |",
             "|---|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['batch']} x {r['cache'] // 1024}k | {fmt(r['flashmma_gbs'], 0)} | "
                     f"{fmt(r['fa2_gbs'], 0)} | {fmt(r['cudnn_gbs'], 0)} | "
                     f"{fmt(r['flashmma_over_fa2'], 2)} | {fmt(r['flashmma_over_cudnn'], 2)} |")
    lines.append("")
    lines.append(f"geomean flashmma / FA2 {fmt(geometric_mean([r['flashmma_over_fa2'] for r in rows]), 3)}, "
                 f"flashmma / cuDNN {fmt(geometric_mean([r['flashmma_over_cudnn'] for r in rows]), 3)}; "
                 f"SDPA GQA: {rows[0]['sdpa_gqa'] if rows else ''}")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="CSV path")
    parser.add_argument("--commit", help="git commit to record (default: git rev-parse --short HEAD)")
    parser.add_argument("--dtype", choices=("fp16", "bf16"), default="bf16")
    parser.add_argument("--warmup", type=int, default=10)
    parser.add_argument("--iters", type=int, default=30)
    parser.add_argument("--flashmma-bench", type=Path,
                        help="time flashmma with this flashmma_bench (its decode preset) instead of "
                             "the PyTorch extension")
    args = parser.parse_args(argv)
    rows = measure(args)
    import torch
    commit = args.commit or git_commit()
    meta = (f"{torch.cuda.get_device_name()}, commit {commit}, torch {torch.__version__}, "
            f"`{comparison.portable_command(sys.argv)}`; GB/s of K and V read")
    print(table(rows, meta))
    if args.out:
        comparison.write_csv(args.out, rows, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
