"""Where a CUDA-graph row's time goes: each provider's graph (as the harness's CUDA-graph rows
capture it: k calls over input copies) replayed under torch.profiler, and the trace's kernels split
into each kernel's own duration and the gap from one kernel's end to the next one's start.

The graphs are captured kwb, eager, torch.compile, then kwb's again, then kwb's and compile's in
one shared memory pool, and timed in turns as well.

Timed in turns, torch.compile's graphs of fp32 two-input maps at 2^20 ran 2.5-3% ahead of every kwb
shape and of eager's ATen add, with the inputs from HBM; under ncu, one launch at a time with the L2
flushed, the kernels took the same time. Whether the replays' difference is in the kernels or
between them decides what to change: the code, or how it is launched.

    python benchmarks/graph_timeline.py [--cases vector_add:vector_add:float32:1048576,...] [--copies 1,32]
        [--calls 200] [--replays 5] [--out DIR]                                   # a CUDA GPU

A case is kernel:op:dtype:size (size as the spec's: 1048576 or 4096x1024).
"""
from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
from pathlib import Path

import torch

import workbench as wb
from workbench.harness import timing
from workbench.harness.benchmark import _compiled
from workbench.harness.cases import case_seed, draw_inputs, dtype_name, spec_of

DEFAULT_CASES = "vector_add:vector_add:float32:1048576,rmsnorm:rmsnorm:bfloat16:4096x1024"


def providers_of(kernel_name: str, op_name: str, dtype: torch.dtype, size: tuple) -> tuple[dict, tuple]:
    """kwb's op, eager's and torch.compile's, as the harness times them, and the case's inputs."""
    kernel = wb.load(kernel_name)
    op = next(o for o in spec_of(kernel).ops if o.name == op_name)
    args = draw_inputs(op.make_inputs, size, dtype, "cuda", case_seed(0, op_name, dtype_name(dtype), size))
    fns = {"kwb": getattr(kernel, op.kernel_op), "eager": op.eager_fn, "torch.compile": _compiled(op.eager_fn)}
    with torch.no_grad():
        for fn in fns.values():
            fn(*args)  # compiled and warm before capture
    return fns, args


def replay_of(fn, sets: list[tuple], calls: int, pool=None):
    picked = [sets[i % len(sets)] for i in range(calls)]
    with torch.no_grad():
        return timing.graph_call([lambda s=s: fn(*s) for s in picked], pool)


def kernel_spans(replay, replays: int) -> list[tuple[float, float, str]]:
    """(start us, duration us, name) of every GPU kernel in `replays` replays, in start order."""
    replay()
    torch.cuda.synchronize()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        for _ in range(replays):
            replay()
        torch.cuda.synchronize()
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "trace.json"
        prof.export_chrome_trace(str(path))
        events = json.loads(path.read_text()).get("traceEvents", [])
    spans = [(float(e["ts"]), float(e["dur"]), e.get("name", "")) for e in events
             if e.get("ph") == "X" and e.get("cat") == "kernel"]
    return sorted(spans)


def summary(spans: list[tuple[float, float, str]]) -> dict:
    durations = [d for _, d, _ in spans]
    gaps = [b[0] - (a[0] + a[1]) for a, b in itertools.pairwise(spans)]
    gaps = [g for g in gaps if g < 5.0]  # between replays the host's launch sits in the gap: left out
    period = [b[0] - a[0] for a, b in itertools.pairwise(spans) if b[0] - (a[0] + a[1]) < 5.0]
    return {"kernels": len(spans), "names": sorted({n for _, _, n in spans})[:3],
            "duration_us": statistics.median(durations) if durations else None,
            "duration_mean_us": statistics.fmean(durations) if durations else None,
            "gap_us": statistics.median(gaps) if gaps else None,
            "gap_mean_us": statistics.fmean(gaps) if gaps else None,
            "period_us": statistics.median(period) if period else None}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--cases", default=DEFAULT_CASES, help="kernel:op:dtype:size, comma-separated")
    parser.add_argument("--copies", default="1,32", help="input copies each graph rotates over, comma-separated")
    parser.add_argument("--calls", type=int, default=200, help="calls a graph holds")
    parser.add_argument("--replays", type=int, default=5, help="replays profiled a graph")
    parser.add_argument("--seconds", type=float, default=0.5, help="then the replays timed in turns, about this long each")
    parser.add_argument("--out", help="write DIR/graph_timeline.json")
    args = parser.parse_args()
    found = []
    for text in (c for c in args.cases.split(",") if c):
        kernel_name, op_name, dtype_text, size_text = text.split(":")
        size = tuple(int(n) for n in size_text.lower().split("x"))
        fns, inputs = providers_of(kernel_name, op_name, getattr(torch, dtype_text), size)
        for copies in (int(c) for c in args.copies.split(",") if c):
            # captured in this order, kwb's twice (first, and after torch.compile's: a difference that
            # follows the order of capture shows as kwb against kwb), then kwb's and compile's again
            # in one memory pool, where their outputs land in the same block
            sets = timing.input_copies(inputs, copies)
            replays = {name: replay_of(fn, sets, args.calls) for name, fn in fns.items()}
            replays["kwb, captured last"] = replay_of(fns["kwb"], sets, args.calls)
            pool = torch.cuda.graph_pool_handle()
            replays["kwb, shared pool"] = replay_of(fns["kwb"], sets, args.calls, pool)
            replays["compile, shared pool"] = replay_of(fns["torch.compile"], sets, args.calls, pool)
            for turn in range(2):  # each provider profiled twice, in turns
                for name, replay in replays.items():
                    s = summary(kernel_spans(replay, args.replays))
                    if not s["kernels"]:
                        print(f"{text:40s} copies {copies:3d} {name:>20} no kernels in the profiler's trace", flush=True)
                        continue
                    s.update(case=text, copies=copies, provider=name, turn=turn)
                    found.append(s)
                    print(f"{text:40s} copies {copies:3d} {name:>20} kernel {s['duration_us']:7.3f} us "
                          f"(mean {s['duration_mean_us']:7.3f}) gap {s['gap_us']:6.3f} us (mean {s['gap_mean_us']:6.3f}) "
                          f"period {s['period_us']:7.3f} us  {s['kernels']} kernels {s['names'][0][:60]}", flush=True)
            with torch.no_grad():
                stats = timing.measure_interleaved(replays, timing.timer_for("cuda"), budget_s=args.seconds)
            for name, st in stats.items():
                found.append({"case": text, "copies": copies, "provider": name, "in_turns_us": st.median / args.calls * 1e6,
                              "p20_us": st.p20 / args.calls * 1e6, "p80_us": st.p80 / args.calls * 1e6})
                print(f"{text:40s} copies {copies:3d} {name:>20} in turns {st.median / args.calls * 1e6:7.3f} us a call "
                      f"(p20 {st.p20 / args.calls * 1e6:.3f}, p80 {st.p80 / args.calls * 1e6:.3f})", flush=True)
    if args.out:
        Path(args.out).mkdir(parents=True, exist_ok=True)
        (Path(args.out) / "graph_timeline.json").write_text(json.dumps(found, indent=1))


if __name__ == "__main__":
    main()
