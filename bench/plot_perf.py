#!/usr/bin/env python3
"""Draws docs/perf.png from the CSV that bench/compare.py writes: TFLOP/s against sequence length,
one panel per (head dim, mask), one line per implementation and dtype. Needs matplotlib only.

    python3 bench/plot_perf.py OUTDIR/compare.csv [--out docs/perf.png] [--target-only]

Grouped-query rows are left out (their FLOP count per head is not comparable across panels).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
IMPLEMENTATIONS = (("flashmma", "flashmma", "tab:red"), ("fa2", "FA2", "tab:blue"), ("cudnn", "cuDNN", "tab:green"))
LINE_STYLES = {"fp16": "-", "bf16": "--"}
MARKERS = {"fp16": "o", "bf16": "s"}


def read_rows(path: Path, target_only: bool) -> list[dict]:
    rows = []
    with open(path, newline="") as file:
        for raw in csv.DictReader(file):
            if raw["group"] == "gqa" or raw["heads_q"] != raw["heads_kv"]:
                continue
            if target_only and raw["group"] != "target":
                continue
            row = dict(raw)
            row["d"] = int(raw["d"])
            row["n"] = int(raw["n"])
            row["causal"] = raw["causal"].strip().lower() in ("true", "1", "yes")
            for name, _, _ in IMPLEMENTATIONS:
                text = raw.get(f"{name}_tflops", "")
                row[name] = float(text) if text not in ("", None) else math.nan
            rows.append(row)
    return rows


def plot(rows: list[dict], out: Path, title: str) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    head_dims = sorted({row["d"] for row in rows})
    masks = (False, True)
    header_inches = 0.7  # title and legend above the panels
    height = 2.8 * len(head_dims) + header_inches
    figure, axes = plt.subplots(len(head_dims), len(masks), figsize=(11, height), squeeze=False,
                                sharex=True)
    seqlens = sorted({row["n"] for row in rows})
    dtypes = [dtype for dtype in LINE_STYLES if any(row["dtype"] == dtype for row in rows)]
    for i, d in enumerate(head_dims):
        for j, causal in enumerate(masks):
            axis = axes[i][j]
            panel = [row for row in rows if row["d"] == d and row["causal"] == causal]
            for name, label, color in IMPLEMENTATIONS:
                for dtype in dtypes:
                    points = sorted((row["n"], row[name]) for row in panel
                                    if row["dtype"] == dtype and not math.isnan(row[name]))
                    if not points:
                        continue
                    axis.plot([p[0] for p in points], [p[1] for p in points], color=color,
                              linestyle=LINE_STYLES[dtype], marker=MARKERS[dtype], markersize=4,
                              label=f"{label} {dtype}")
            axis.set_xscale("log", base=2)
            axis.set_xticks(seqlens)
            axis.set_xticklabels([f"{n // 1024}k" if n % 1024 == 0 else str(n) for n in seqlens])
            axis.minorticks_off()
            axis.set_title(f"d = {d}, {'causal' if causal else 'non-causal'}", fontsize=10)
            axis.set_ylim(bottom=0)
            axis.grid(True, alpha=0.3)
            if j == 0:
                axis.set_ylabel("TFLOP/s")
            if i == len(head_dims) - 1:
                axis.set_xlabel("sequence length N (Sq = Sk)")
            if not panel:
                axis.text(0.5, 0.5, "no data", ha="center", va="center", transform=axis.transAxes)
    handles, labels = [], []
    for axis in axes.flat:
        for handle, label in zip(*axis.get_legend_handles_labels()):
            if label not in labels:
                handles.append(handle)
                labels.append(label)
    figure.suptitle(title, y=1 - 0.1 / height, fontsize=12)
    figure.legend(handles, labels, loc="upper center", ncol=max(1, len(labels)), fontsize=9,
                  bbox_to_anchor=(0.5, 1 - 0.35 / height))
    figure.tight_layout(rect=(0, 0, 1, 1 - header_inches / height))
    out.parent.mkdir(parents=True, exist_ok=True)
    figure.savefig(out, dpi=110, bbox_inches="tight")
    plt.close(figure)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("csv", type=Path, help="CSV written by bench/compare.py --out")
    parser.add_argument("--out", type=Path, default=REPO / "docs" / "perf.png")
    parser.add_argument("--target-only", action="store_true", help="only d in {64, 128, 256}")
    parser.add_argument("--title", default="flashmma forward vs PyTorch SDPA (FA2, cuDNN)")
    args = parser.parse_args(sys.argv[1:] if argv is None else argv)
    rows = read_rows(args.csv, args.target_only)
    if not rows:
        print(f"plot_perf.py: no plottable rows in {args.csv}", file=sys.stderr)
        return 1
    plot(rows, args.out, args.title)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
