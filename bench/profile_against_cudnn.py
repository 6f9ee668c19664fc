#!/usr/bin/env python3
"""Runs flashmma (through flashmma_torch) and PyTorch SDPA's CUDNN_ATTENTION backend once each on
the same inputs, for Nsight Compute to profile the two kernels side by side. It times nothing:
the profiler replays each kernel. On the GPU machine:

    ncu --clock-control none --kernel-name-base mangled -k regex:'flashmma|cudnn' \\
        --section SpeedOfLight --section ComputeWorkloadAnalysis --section SchedulerStats \\
        --section WarpStateStats --section LaunchStats --section Occupancy \\
        python3 bench/profile_against_cudnn.py [--shape B,H,N,D,causal ...] [--dtype bf16]

(`--kernel-name-base mangled`: flashmma's kernels are templates, and the mangled name is the one
that carries "flashmma"; cuDNN's carry "cudnn" under either base.) The default shapes are the
target sweep's rows furthest below cuDNN (docs/perf.md): d = 64 and 256 causal at N = 1k, and
d = 128 without a mask at N = 4k. Each shape launches one flashmma kernel and one cuDNN kernel,
in that order.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch.nn.attention import SDPBackend, sdpa_kernel

REPO = Path(__file__).resolve().parent.parent
DEFAULT_SHAPES = ("16,32,1024,64,1", "16,8,1024,256,1", "4,16,4096,128,0")
DTYPES = {"fp16": torch.float16, "bf16": torch.bfloat16}


def parse_shape(text: str) -> tuple[int, int, int, int, bool]:
    """B,H,N,D,causal (causal 0 or 1) into numbers, with the field that is wrong named."""
    fields = text.split(",")
    if len(fields) != 5:
        raise argparse.ArgumentTypeError(f"--shape takes B,H,N,D,causal (got {text!r})")
    try:
        batch, heads, seqlen, head_dim, causal = (int(field) for field in fields)
    except ValueError:
        raise argparse.ArgumentTypeError(f"--shape fields must be integers (got {text!r})") from None
    if min(batch, heads, seqlen, head_dim) < 1 or causal not in (0, 1):
        raise argparse.ArgumentTypeError(
            f"--shape needs B, H, N, D >= 1 and causal 0 or 1 (got {text!r})")
    return batch, heads, seqlen, head_dim, bool(causal)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--shape", type=parse_shape, action="append",
                        help="B,H,N,D,causal; repeat for more (default: the rows furthest below cuDNN)")
    parser.add_argument("--dtype", choices=sorted(DTYPES), default="bf16")
    args = parser.parse_args()
    if not torch.cuda.is_available():
        print("profile_against_cudnn: no CUDA device", file=sys.stderr)
        return 1
    shapes = args.shape or [parse_shape(text) for text in DEFAULT_SHAPES]
    # Imported once the arguments are good: the first import may build the extension (minutes).
    sys.path.insert(0, str(REPO / "examples" / "pytorch"))
    import flashmma_torch

    dtype = DTYPES[args.dtype]
    for batch, heads, seqlen, head_dim, causal in shapes:
        # flashmma reads (B, N, H, d); SDPA gets (B, H, N, d) views of the same storage.
        q, k, v = (torch.randn(batch, seqlen, heads, head_dim, device="cuda", dtype=dtype)
                   for _ in range(3))
        flashmma_torch.flash_attn_func(q, k, v, causal=causal)
        with sdpa_kernel(SDPBackend.CUDNN_ATTENTION):
            F.scaled_dot_product_attention(q.transpose(1, 2), k.transpose(1, 2),
                                           v.transpose(1, 2), is_causal=causal)
        torch.cuda.synchronize()
        print(f"launched: B {batch}, H {heads}, N {seqlen}, d {head_dim}, "
              f"{'causal' if causal else 'no mask'}, {args.dtype}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
