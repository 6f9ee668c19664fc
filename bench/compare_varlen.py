#!/usr/bin/env python3
"""Times a variable-length prefill (a batch of sequences of mixed lengths, packed) with flashmma's
flash_attn_varlen_func against the same tokens run two other ways with flashmma: one dense
flash_attn_func call per sequence (the sum of their median times), and one dense call padded to
the longest sequence. Prints a markdown table (and writes CSV).

    python3 bench/compare_varlen.py --out varlen.csv

Rows: 16 sequences of lengths drawn from 1..8192 (a fixed seed; the lengths are printed), 16
heads, d in {64, 128}, causal and not, fp16 and bf16. TFLOP/s count the pairs each sequence
computes (4 * len_q * len_k * d per head, halved for causal), the padded call included, so that
the three columns compare times of the same useful work. The varlen output is checked against
the per-sequence calls (max |difference|). Timing as bench/compare.py: the calls interleaved,
one each per round, the median of the rounds.
"""

from __future__ import annotations

import argparse
import random
import sys
from pathlib import Path

import comparison  # bench/comparison.py
from comparison import fmt, git_commit

REPO = Path(__file__).resolve().parent.parent
HEADS = 16
COLUMNS = ["dtype", "d", "causal", "lengths", "varlen_ms", "separate_ms", "padded_ms",
           "varlen_tflops", "varlen_over_separate", "varlen_over_padded", "max_abs_diff"]


def lengths_for(seed: int, count: int, longest: int) -> list[int]:
    rng = random.Random(seed)
    lengths = [rng.randint(1, longest) for _ in range(count - 2)] + [1, longest]
    rng.shuffle(lengths)
    return lengths


def measure(args) -> list[dict]:
    import torch

    sys.path.insert(0, str(REPO / "examples" / "pytorch"))
    import flashmma_torch

    lengths = lengths_for(args.seed, args.sequences, args.longest)
    rows = []
    for dtype_name in ("fp16", "bf16"):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        for d in (64, 128):
            for causal in (False, True):
                generator = torch.Generator(device="cuda").manual_seed(7)
                total = sum(lengths)
                q, k, v = (torch.randn(total, HEADS, d, generator=generator, device="cuda",
                                       dtype=dtype) for _ in range(3))
                cu = torch.tensor([0] + list(torch.tensor(lengths).cumsum(0).tolist()),
                                  dtype=torch.int32, device="cuda")
                longest = max(lengths)
                starts = cu.tolist()
                pieces = [(q[a:b].unsqueeze(0), k[a:b].unsqueeze(0), v[a:b].unsqueeze(0))
                          for a, b in zip(starts[:-1], starts[1:])]
                padded = [torch.zeros(len(lengths), longest, HEADS, d, device="cuda", dtype=dtype)
                          for _ in range(3)]
                for i, (a, b) in enumerate(zip(starts[:-1], starts[1:])):
                    for dst, src in zip(padded, (q, k, v)):
                        dst[i, : b - a] = src[a:b]

                runners = {
                    "varlen": (lambda _: flashmma_torch.flash_attn_varlen_func(
                        q, k, v, cu, cu, longest, longest, causal=causal), [None]),
                    "padded": (lambda _: flashmma_torch.flash_attn_func(*padded, causal=causal),
                               [None]),
                }
                for i, piece in enumerate(pieces):
                    runners[f"seq{i}"] = (
                        lambda _, piece=piece: flashmma_torch.flash_attn_func(*piece, causal=causal),
                        [None])
                with torch.no_grad():
                    out = flashmma_torch.flash_attn_varlen_func(q, k, v, cu, cu, longest, longest,
                                                                causal=causal)
                    separate = torch.cat([flashmma_torch.flash_attn_func(*p, causal=causal)[0]
                                          for p in pieces])
                    times = comparison.time_interleaved(torch, runners, args.warmup, args.iters)
                separate_ms = sum(ms for name, ms in times.items() if name.startswith("seq"))
                pairs = sum(n * n / (2 if causal else 1) for n in lengths)
                flops = 4.0 * HEADS * d * pairs
                row = dict(dtype=dtype_name, d=d, causal=causal,
                           lengths=" ".join(map(str, lengths)), varlen_ms=times["varlen"],
                           separate_ms=separate_ms, padded_ms=times["padded"],
                           varlen_tflops=flops / (times["varlen"] * 1e-3) / 1e12,
                           varlen_over_separate=separate_ms / times["varlen"],
                           varlen_over_padded=times["padded"] / times["varlen"],
                           max_abs_diff=float((out.float() - separate.float()).abs().max()))
                rows.append(row)
                print(f"{dtype_name} d={d} causal={int(causal)}: varlen {times['varlen']:.3f} ms, "
                      f"separate {separate_ms:.3f} ms, padded {times['padded']:.3f} ms", flush=True)
                torch.cuda.empty_cache()
    return rows


def table(rows: list[dict], meta: str) -> str:
    lines = [meta, "", f"lengths: {rows[0]['lengths'] if rows else ''}", "",
             "| dtype | d | causal | varlen ms | separate calls ms | padded ms | varlen TFLOP/s | "
             "speed vs separate | speed vs padded | max abs diff |",
             "|---|---:|---|---:|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['dtype']} | {r['d']} | {'yes' if r['causal'] else 'no'} | "
                     f"{fmt(r['varlen_ms'], 3)} | {fmt(r['separate_ms'], 3)} | "
                     f"{fmt(r['padded_ms'], 3)} | {fmt(r['varlen_tflops'], 1)} | "
                     f"{fmt(r['varlen_over_separate'], 2)} | {fmt(r['varlen_over_padded'], 2)} | "
                     f"{r['max_abs_diff']:.1e} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", type=Path, help="CSV path")
    parser.add_argument("--commit", help="git commit to record (default: git rev-parse --short HEAD)")
    parser.add_argument("--sequences", type=int, default=16)
    parser.add_argument("--longest", type=int, default=8192)
    parser.add_argument("--seed", type=int, default=2026)
    parser.add_argument("--warmup", type=int, default=5)
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args(argv)
    rows = measure(args)
    import torch
    commit = args.commit or git_commit()
    meta = (f"{torch.cuda.get_device_name()}, commit {commit}, torch {torch.__version__}, "
            f"`{comparison.portable_command(sys.argv)}`; {HEADS} heads, speeds are time ratios "
            f"(> 1: varlen faster)")
    print(table(rows, meta))
    if args.out:
        comparison.write_csv(args.out, rows, COLUMNS)
    return 0


if __name__ == "__main__":
    sys.exit(main())
