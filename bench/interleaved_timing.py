"""CUDA-event timing shared by bench/compare.py and bench/compare_variants.py.

Round-robin: every round calls each implementation once, so that all of them run under the same
clock and power state (a block of one implementation's calls right after a power-hungry one can
start at lowered clocks, which skews the short rows). Each call gets its own pair of events; the
result is the median time per implementation, in milliseconds.
"""

from __future__ import annotations

import statistics


def time_interleaved(torch, runners, warmup, iters):
    """runners: {name: (call, call_sets)}; round i calls call(call_sets[i % len(call_sets)]).
    The first `warmup` rounds are not timed. Returns {name: median milliseconds}."""
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
