"""The variant scripts' timing in turns: every variant (checked already) timed a batch at a time,
the variants in turn (timing.measure_interleaved), so a drift of the GPU's clocks lands on all alike. One after
the other, linear_gelu's shipped op's first and last timings of one variants run were 1663.6 and
1820.2 us (H200)."""
from __future__ import annotations

from collections.abc import Callable

import torch


def graph_replay(fn: Callable, inputs: tuple, calls: int, copies: int = 0) -> Callable[[], None]:
    """A CUDA graph of `calls` calls of fn, rotating over `copies` copies of inputs (0: enough that
    together they are twice the L2), returned as its replay. One copy keeps the inputs in the L2,
    as a call on what the previous op just wrote finds them."""
    import math

    from workbench.harness import timing

    nbytes = sum(a.numel() * a.element_size() for a in inputs if isinstance(a, torch.Tensor)) or 1
    l2 = getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or (50 << 20)
    copies = max(1, min(calls, copies or math.ceil(2 * l2 / nbytes)))
    sets = timing.input_copies(inputs, copies)
    with torch.no_grad():
        return timing.graph_call([lambda s=sets[i % copies]: fn(*s) for i in range(calls)])


def time_in_turns(variants: dict[str, Callable], inputs: tuple, seconds: float, case: str,
                  flops: float | None = None, nbytes: float | None = None, graph_calls: int = 0,
                  copies: int = 0) -> dict:
    """Times each variant on inputs in turns, about `seconds` of samples each (1000 samples at
    most, timing.MAX_SAMPLES), prints them fastest first
    (with TFLOP/s or GB/s where flops or nbytes is given) and returns name -> median seconds a call.
    graph_calls > 0: each sample is a replay of a CUDA graph of that many calls (graph_replay),
    for calls of a few microseconds, where launches would be what events time."""
    from workbench.harness import timing

    if graph_calls:
        calls = {name: graph_replay(fn, inputs, graph_calls, copies) for name, fn in variants.items()}
    else:
        calls = {name: (lambda fn=fn: fn(*inputs)) for name, fn in variants.items()}
    per = max(graph_calls, 1)
    with torch.no_grad():
        stats = timing.measure_interleaved(calls, timing.timer_for("cuda"), budget_s=seconds)
    print(f"{case}, in turns" + (f", CUDA graphs of {graph_calls} calls" if graph_calls else "")
          + (f" over {copies} input copies" if graph_calls and copies else "") + ":", flush=True)
    for name, st in sorted(stats.items(), key=lambda kv: kv[1].median):
        median = st.median / per
        rate = (f" {flops / median / 1e12:6.1f} TFLOP/s" if flops else "") + \
               (f" {nbytes / median / 1e9:7.1f} GB/s" if nbytes else "")
        print(f"  {name:>18} {median * 1e6:9.3f} us (p20 {st.p20 / per * 1e6:.3f}, p80 {st.p80 / per * 1e6:.3f}, "
              f"{st.n} samples){rate}", flush=True)
    return {name: st.median / per for name, st in stats.items()}


def time_each_way(variants: dict[str, Callable], inputs: tuple, seconds: float, case: str, ways: str,
                  graph_calls: int, flops: float | None = None, nbytes: float | None = None) -> None:
    """time_in_turns once for each of `ways`, comma-separated (a --copies option): 'events' (calls
    back to back) or N (CUDA-graph replays of graph_calls calls over N input copies; 0: twice the L2)."""
    for how in (w for w in ways.split(",") if w):
        events = how == "events"
        time_in_turns(variants, inputs, seconds, case, flops=flops, nbytes=nbytes,
                      graph_calls=0 if events else graph_calls, copies=0 if events else int(how))
