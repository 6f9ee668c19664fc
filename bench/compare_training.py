#!/usr/bin/env python3
"""A training step's attention, forward and backward together, through the PyTorch extension:
flash_attn_func under autograd against PyTorch SDPA's FlashAttention-2 (FLASH_ATTENTION) and
cuDNN (CUDNN_ATTENTION) backends on the same inputs, over FlashAttention-2's sweep
(B * N = 16384, H * d = 2048, N 1k-16k, causal and not).

    python3 bench/compare_training.py --head-dims 64,128,256 --out training.csv

One timed call is the forward and torch.autograd.grad of its output: the median of --iters calls
after 3 untimed ones, each between its own CUDA events. TFLOP/s count 3.5x the forward's FLOPs
(4 B H N^2 d, halved for causal): the forward's two GEMMs and the backward's five. Prints a
markdown table and the geometric means of flashmma / FA2 and flashmma / cuDNN.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

import comparison  # bench/comparison.py
from comparison import ratio

REPO = Path(__file__).resolve().parent.parent
COLUMNS = ["dtype", "d", "seqlen", "batch", "heads", "causal", "flashmma_tflops", "fa2_tflops",
           "cudnn_tflops", "over_fa2", "over_cudnn"]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--head-dims", default="64,128,256")
    parser.add_argument("--seqlens", default="1024,2048,4096,8192,16384")
    parser.add_argument("--dtypes", default="bf16")
    parser.add_argument("--iters", type=int, default=10)
    parser.add_argument("--out", type=Path)
    parser.add_argument("--commit", default=None)
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    sys.path.insert(0, str(REPO / "examples" / "pytorch"))
    from flashmma_torch import flash_attn_func

    rows = []
    for dtype_name in args.dtypes.split(","):
        dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[dtype_name]
        for d in (int(x) for x in args.head_dims.split(",")):
            for n in (int(x) for x in args.seqlens.split(",")):
                batch, heads = 16384 // n, 2048 // d
                generator = torch.Generator(device="cuda").manual_seed(1)
                q, k, v = (torch.randn(batch, n, heads, d, device="cuda", dtype=dtype,
                                       generator=generator, requires_grad=True)
                           for _ in range(3))
                d_o = torch.randn(batch, n, heads, d, device="cuda", dtype=dtype,
                                  generator=generator)
                qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
                d_ot = d_o.transpose(1, 2)
                for causal in (False, True):
                    def ours():
                        out = flash_attn_func(q, k, v, causal=causal)
                        torch.autograd.grad(out, (q, k, v), d_o)

                    def sdpa(backend):
                        def call():
                            with sdpa_kernel(backend):
                                out = torch.nn.functional.scaled_dot_product_attention(
                                    qt, kt, vt, is_causal=causal)
                            torch.autograd.grad(out, (qt, kt, vt), d_ot)
                        return call

                    flops = 3.5 * 4.0 * batch * heads * n * n * d * (0.5 if causal else 1.0)
                    tflops = [flops / comparison.median_ms(torch, call, args.iters) * 1e-9
                              for call in (ours, sdpa(SDPBackend.FLASH_ATTENTION),
                                           sdpa(SDPBackend.CUDNN_ATTENTION))]
                    rows.append({"dtype": dtype_name, "d": d, "seqlen": n, "batch": batch,
                                 "heads": heads, "causal": int(causal),
                                 "flashmma_tflops": tflops[0], "fa2_tflops": tflops[1],
                                 "cudnn_tflops": tflops[2],
                                 "over_fa2": ratio(tflops[0], tflops[1]),
                                 "over_cudnn": ratio(tflops[0], tflops[2])})

    print(f"commit {args.commit or comparison.git_commit()}, {torch.cuda.get_device_name()}, "
          f"torch {torch.__version__}; forward + backward, TFLOP/s at 3.5x the forward's FLOPs")
    comparison.print_ratio_table(rows)
    if args.out:
        comparison.write_csv(args.out, rows, COLUMNS)


if __name__ == "__main__":
    main()
