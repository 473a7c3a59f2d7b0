"""The variant scripts' timing in turns: every variant (checked already) timed a batch at a time,
the variants in turn (timing.measure_interleaved), so a drift of the GPU's clocks lands on all alike. One after
the other, linear_gelu's shipped op's first and last timings of one variants run were 1663.6 and
1820.2 us (H200)."""
from __future__ import annotations

from collections.abc import Callable

import torch


def time_in_turns(variants: dict[str, Callable], inputs: tuple, seconds: float, case: str,
                  flops: float | None = None, nbytes: float | None = None) -> dict:
    """Times each variant on inputs in turns, about `seconds` of samples each (1000 samples at
    most, timing.MAX_SAMPLES), prints them fastest first
    (with TFLOP/s or GB/s where flops or nbytes is given) and returns name -> timing.Stats."""
    from workbench.harness import timing

    calls = {name: (lambda fn=fn: fn(*inputs)) for name, fn in variants.items()}
    with torch.no_grad():
        stats = timing.measure_interleaved(calls, timing.timer_for("cuda"), budget_s=seconds)
    print(f"{case}, in turns:", flush=True)
    for name, st in sorted(stats.items(), key=lambda kv: kv[1].median):
        rate = (f" {flops / st.median / 1e12:6.1f} TFLOP/s" if flops else "") + \
               (f" {nbytes / st.median / 1e9:7.1f} GB/s" if nbytes else "")
        print(f"  {name:>18} {st.median * 1e6:9.2f} us (p20 {st.p20 * 1e6:.2f}, p80 {st.p80 * 1e6:.2f}, "
              f"{st.n} samples){rate}", flush=True)
    return stats
