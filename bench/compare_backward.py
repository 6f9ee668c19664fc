#!/usr/bin/env python3
"""The backward pass against PyTorch SDPA's FlashAttention-2 (FLASH_ATTENTION) and cuDNN backward,
over FlashAttention-2's sweep (B * N = 16384, H * d = 2048, N 1k-16k, causal and not).

    python3 bench/compare_backward.py --bench build/bench/flashmma_backward_bench --out bwd.csv

flashmma's times come from flashmma_backward_bench (run here as a subprocess, on the same GPU,
right before SDPA's); SDPA's from torch.autograd.grad on one forward graph (retain_graph), the
median of --iters calls after 3 untimed ones, each with its own CUDA events. TFLOP/s count 2.5x
the forward's FLOPs (4 B H N^2 d, halved for causal). Prints a markdown table and the geometric
means of flashmma / FA2 and flashmma / cuDNN.
"""

from __future__ import annotations

import argparse
import csv
import io
import subprocess
from pathlib import Path

import comparison  # bench/comparison.py
from comparison import git_commit, ratio

COLUMNS = ["dtype", "d", "seqlen", "batch", "heads", "causal", "flashmma_tflops", "fa2_tflops",
           "cudnn_tflops", "over_fa2", "over_cudnn"]


def sdpa_backward_ms(torch, backend, dtype, batch, seqlen, heads, d, causal, iters, dropout_p=0.0):
    from torch.nn.attention import sdpa_kernel
    generator = torch.Generator(device="cuda").manual_seed(1)
    q, k, v = (torch.randn(batch, heads, seqlen, d, device="cuda", dtype=dtype,
                           generator=generator, requires_grad=True) for _ in range(3))
    d_o = torch.randn(batch, heads, seqlen, d, device="cuda", dtype=dtype, generator=generator)
    try:
        with sdpa_kernel(backend):
            out = torch.nn.functional.scaled_dot_product_attention(q, k, v, is_causal=causal,
                                                                   dropout_p=dropout_p)
            return comparison.median_ms(
                torch, lambda: torch.autograd.grad(out, (q, k, v), d_o, retain_graph=True), iters)
    except RuntimeError as error:  # a backend that refuses the shape
        print(f"# {backend} refused d={d} N={seqlen}: {error}".splitlines()[0])
        return float("nan")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--bench", required=True, help="path of flashmma_backward_bench")
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--iters", type=int, default=20)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--commit", default=None)
    parser.add_argument("--dropout", type=float, default=0.0,
                        help="dropout_p of every call (flashmma's kernels compiled with dropout)")
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend

    result = subprocess.run([args.bench, "--head-dims", args.head_dims, "--iters", str(args.iters),
                             "--dropout", str(args.dropout)],
                            capture_output=True, text=True, check=True)
    ours = {(r["dtype"], int(r["d"]), int(r["seqlen"]), int(r["causal"])): float(r["tflops"])
            for r in csv.DictReader(io.StringIO(result.stdout))}

    rows = []
    for (dtype_name, d, seqlen, causal), tflops in ours.items():
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        batch, heads = 16384 // seqlen, 2048 // d
        flops = 2.5 * 4.0 * batch * heads * seqlen * seqlen * d * (0.5 if causal else 1.0)
        fa2 = sdpa_backward_ms(torch, SDPBackend.FLASH_ATTENTION, dtype, batch, seqlen, heads, d,
                               bool(causal), args.iters, args.dropout)
        cudnn = sdpa_backward_ms(torch, SDPBackend.CUDNN_ATTENTION, dtype, batch, seqlen, heads, d,
                                 bool(causal), args.iters, args.dropout)
        fa2_tflops = flops / fa2 * 1e-9 if fa2 == fa2 else float("nan")
        cudnn_tflops = flops / cudnn * 1e-9 if cudnn == cudnn else float("nan")
        rows.append({"dtype": dtype_name, "d": d, "seqlen": seqlen, "batch": batch,
                     "heads": heads, "causal": causal, "flashmma_tflops": tflops,
                     "fa2_tflops": fa2_tflops, "cudnn_tflops": cudnn_tflops,
                     "over_fa2": ratio(tflops, fa2_tflops),
                     "over_cudnn": ratio(tflops, cudnn_tflops)})

    print(f"commit {args.commit or git_commit()}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}, dropout_p {args.dropout}")
    comparison.print_ratio_table(rows)
    if args.out:
        comparison.write_csv(args.out, rows, COLUMNS)


if __name__ == "__main__":
    main()
