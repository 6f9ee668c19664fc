#!/usr/bin/env python3
"""What dropout costs, through the PyTorch extension: flash_attn_func's forward and forward +
backward with dropout_p = 0 and with --dropout, against SDPA's FlashAttention-2 (FLASH_ATTENTION)
with the same dropout_p, over B * N = 16384, H * d = 2048.

    python3 bench/compare_dropout.py --dropout 0.1 --head-dims 64,128 --seqlens 2048,8192

Times are the median of --iters calls after 3 untimed ones, each between its own CUDA events.
flashmma's dropout_p = 0 calls run the default route (the sm_90a kernel on an H200); its dropout
calls run the portable split kernel compiled with dropout (include/flashmma/forward.cuh).
Prints a markdown table of milliseconds.
"""

from __future__ import annotations

import argparse

import comparison  # bench/comparison.py


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dropout", type=float, default=0.1)
    parser.add_argument("--head-dims", default="64,128")
    parser.add_argument("--seqlens", default="2048,8192")
    parser.add_argument("--dtype", default="bf16", choices=["fp16", "bf16"])
    parser.add_argument("--iters", type=int, default=20)
    args = parser.parse_args()

    import torch
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from flashmma_torch import flash_attn_func

    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}[args.dtype]
    p = args.dropout
    print(f"{torch.cuda.get_device_name()}, torch {torch.__version__}, {args.dtype}, dropout_p {p}")
    print("| d | N | causal | pass | flashmma p=0 | flashmma p | FA2 p=0 | FA2 p | FA2 p / flashmma p |")
    print("|---:|---:|---|---|---:|---:|---:|---:|---:|")
    for d in (int(x) for x in args.head_dims.split(",")):
        for n in (int(x) for x in args.seqlens.split(",")):
            batch, heads = 16384 // n, 2048 // d
            q, k, v = (torch.randn(batch, n, heads, d, device="cuda", dtype=dtype, requires_grad=True)
                       for _ in range(3))
            d_o = torch.randn_like(q)
            qt, kt, vt = (t.detach().transpose(1, 2).requires_grad_() for t in (q, k, v))
            for causal in (False, True):
                def ours(dropout, backward):
                    def call():
                        out = flash_attn_func(q, k, v, dropout, causal=causal, dropout_seed=1)
                        if backward:
                            torch.autograd.grad(out, (q, k, v), d_o)
                    return call

                def fa2(dropout, backward):
                    def call():
                        with sdpa_kernel(SDPBackend.FLASH_ATTENTION):
                            out = torch.nn.functional.scaled_dot_product_attention(
                                qt, kt, vt, is_causal=causal, dropout_p=dropout)
                        if backward:
                            torch.autograd.grad(out, (qt, kt, vt), d_o.transpose(1, 2))
                    return call

                for backward in (False, True):
                    with torch.set_grad_enabled(backward):
                        t = [comparison.median_ms(torch, f(x, backward), args.iters)
                             for f in (ours, fa2) for x in (0.0, p)]
                    print(f"| {d} | {n} | {'yes' if causal else 'no'} | "
                          f"{'fwd+bwd' if backward else 'fwd'} | {t[0]:.3f} | {t[1]:.3f} | "
                          f"{t[2]:.3f} | {t[3]:.3f} | {t[3] / t[1]:.3f} |")


if __name__ == "__main__":
    main()
