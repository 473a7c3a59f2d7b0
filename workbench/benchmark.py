"""wb.bench(): is my kernel fast? The kernel beside eager PyTorch and torch.compile of the same
reference (and a vendor library where the spec names one), in one run, on the spec's sizes.

    report = wb.bench("relu_scale")                          # default sizes, every dtype
    report = wb.bench("relu_scale", dtypes=["bf16"], sizes=[(1 << 26,)])
    report = wb.bench(k.square, lambda x: x * x, inputs=[(x,)])   # a function of your own
    report.rows                                              # what bench.csv holds
    report.save("benchmarks/results")                        # appends to <root>/<device>/bench.csv

Each (op, dtype, size): inputs from the spec's make_inputs; every provider's output is
validated against the float64 reference before it is timed (the kernel to its tolerance,
the baselines to ten times it: they round in more places); then workbench.timing measures it.
A row per provider carries the median and p20/p80, GB/s from the spec's bytes model and its
share of the copy ceiling measured at the start of the run, TFLOP/s where the spec counts
flops, and the speedup over eager and torch.compile. When a size runs under ~10 us, every
provider is also timed as CUDA-graph replays (method "cuda_graph"), which removes launch gaps.
"""
from __future__ import annotations

import contextlib
import functools
import math
import types
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import torch

from . import results, timing
from .correctness import (case_seed, dtype_name, error_text, first_tensor, input_sets, kernel_and_device, new_seed,
                          output_label, parse_dtypes, poisoned_outputs, select_dtypes, select_ops, spec_of,
                          tolerance_for)
from .compare import compare
from .spec import OpSpec, Tolerance, numel, upcast

KWB, EAGER, COMPILE = "kwb", "eager", "torch.compile"
BASELINES = ("eager", "compile", "vendor")
MAX_INPUT_COPIES = 256  # graph timing rotates over this many input copies at most
GRAPH_CALLS_S = 1e-3  # a graph holds about this much work


def parse_baselines(value) -> tuple[str, ...]:
    if value is None:
        return BASELINES
    items = [v.strip() for v in (value.split(",") if isinstance(value, str) else value) if v.strip()]
    if items == ["none"]:
        return ()
    bad = [v for v in items if v not in BASELINES]
    if bad:
        raise ValueError(f"baselines: {', '.join(bad)} is not one of {', '.join(BASELINES)} (or none)")
    return tuple(items)


@dataclass
class BenchReport:
    env: results.Environment
    ceiling: float  # bytes/s of the device's copy
    rows: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    def save(self, root) -> Path:
        """Append the rows to <root>/<device slug>/bench.csv; returns the file's path."""
        return results.append(Path(root) / self.env.slug / "bench.csv", self.rows)

    @property
    def ok(self) -> bool:
        return all(r["status"] == "ok" for r in self.rows)

    @property
    def failures(self) -> list[dict]:
        return kwb_failures(self.rows)



    def __str__(self) -> str:
        from .render import bench_text

        return bench_text(self)

    def _repr_markdown_(self) -> str:
        from .render import bench_markdown

        return bench_markdown(self.rows, self.env)


def kwb_failures(rows: list[dict]) -> list[dict]:
    """The kernel's own rows that did not time: a wrong result or an error (a baseline that
    fails to compile is reported, but is not the kernel's failure)."""
    return [r for r in rows if r["provider"] == KWB and r["status"] != "ok"]


def _clone_args(args):
    return tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in args)


class _Session:
    """What one bench run shares: the device, its timer, its copy ceiling, the environment."""

    def __init__(self, device: str, env: results.Environment | None = None, ceiling: float | None = None):
        self.device = device
        self.timer = timing.timer_for(device)
        self.env = env or results.environment(device)
        self.ceiling = ceiling or timing.copy_ceiling(device, self.timer)
        # The CPU is timed with fewer samples: a 2-core machine must finish `kwb run` in minutes.
        self.limits = dict(min_samples=timing.MIN_SAMPLES, max_samples=timing.MAX_SAMPLES, budget_s=timing.BUDGET_S) \
            if device == "cuda" else dict(min_samples=5, max_samples=50, budget_s=0.1)
        self.l2 = (getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or (50 << 20)) \
            if device == "cuda" else 0


def _compiled(fn: Callable) -> Callable:
    """torch.compile of fn with a dynamo cache of its own. Dynamo keeps compiled code (and its
    recompile limit of 8) on the code object it enters: every size and dtype on one function
    would pile up there and, past the limit, silently run eager code. A copy of a small
    wrapper's code object per measurement starts empty, and leaves everyone else's compiled
    code alone (torch._dynamo.reset() would not). fullgraph: a graph break would time
    half-eager code under torch.compile's name."""
    def compiled_reference(*args):
        return fn(*args)

    code = compiled_reference.__code__.replace()  # a new object: a new cache
    fresh = types.FunctionType(code, compiled_reference.__globals__, "compiled_reference", None, compiled_reference.__closure__)
    return torch.compile(fresh, fullgraph=True, dynamic=False)


def _row(kernel, op, provider, dtype, shape, method, stats, nbytes, flops, s: _Session, status="ok") -> dict:
    row = dict.fromkeys(results.BENCH_COLUMNS)  # every column, None where nothing was measured
    row.update(kernel=kernel, op=op, provider=provider, dtype=dtype_name(dtype) if isinstance(dtype, torch.dtype) else dtype,
               shape="x".join(map(str, shape)), numel=numel(shape), method=method, status=status,
               ceiling_gbps=round(s.ceiling / 1e9, 1), **s.env.columns())
    if stats is None:
        return row
    sec = stats.median
    row.update(median_us=stats.median * 1e6, p20_us=stats.p20 * 1e6, p80_us=stats.p80 * 1e6, samples=stats.n)
    if nbytes:
        row.update(gbps=nbytes / sec / 1e9, pct_of_ceiling=100 * nbytes / sec / s.ceiling)
    if flops:
        row.update(tflops=flops / sec / 1e12)
    return row


def _add_speedups(rows: list[dict], vendor: str | None) -> None:
    """Each row's speedup over each baseline timed with the same method (events or graphs)."""
    for r in rows:
        if r.get("median_us") is None:
            continue
        for provider, column in ((EAGER, "speedup_vs_eager"), (COMPILE, "speedup_vs_compile"), (vendor, "speedup_vs_vendor")):
            base = next((b for b in rows if b["provider"] == provider and b["method"] == r["method"] and b.get("median_us")), None)
            if base is not None:
                r[column] = base["median_us"] / r["median_us"]


def _error_rows(kernel, op, providers, dtype, shape, s: "_Session", message: str) -> list[dict]:
    return [_row(kernel, op, p, dtype, shape, s.timer.method, None, None, None, s, status=f"error: {message}"[:300]) for p in providers]


def _bench_one(kernel: str, op: str, providers: dict[str, Callable], args, reference: Callable, tol: Tolerance,
               nbytes: int | None, flops: float | None, dtype, shape, s: _Session, graphs: bool, progress,
               vendor: str | None = None, baseline_tol: Tolerance | None = None) -> list[dict]:
    try:
        with torch.no_grad():
            refs = _as_list(reference(*[upcast(a) for a in args]))
            try:  # the dtypes the plain PyTorch op returns, which the kernel's outputs must have
                wants = [getattr(t, "dtype", None) for t in _as_list(reference(*args))]
            except Exception:
                wants = [None] * len(refs)
    except Exception as e:
        if progress:
            for _ in providers:
                progress()
        return _error_rows(kernel, op, providers, dtype, shape, s, f"the reference raised {error_text(e)}")
    loose = baseline_tol or Tolerance(10 * tol.atol, 10 * tol.rtol, 10 * (tol.rel_l2 or tol.rtol))
    rows, timed = [], {}
    for provider, fn in providers.items():
        call = functools.partial(fn, *args)
        try:
            with torch.no_grad():
                # The validation run (and torch.compile's compile). The kernel's runs poisoned, as
                # in wb.check: unpoisoned, an element it never wrote can hold the right value by
                # luck (seen on torch 2.11: the output reused the block the reference just freed).
                # Baselines run as they are: deterministic mode is in torch.compile's guards.
                with poisoned_outputs() if provider == KWB else contextlib.nullcontext():
                    outs = _as_list(call())
                wrong = next((v for v in (compare(o, r, tol if provider == KWB else loose, output_label(i, len(refs)), w)
                                          for i, (o, r, w) in enumerate(zip(outs, refs, wants))) if not v.passed), None)
                if len(outs) != len(refs):
                    wrong = f"{len(outs)} outputs, the reference {len(refs)}"
                del outs
                if wrong is not None:
                    reason = wrong if isinstance(wrong, str) else \
                        (wrong.reason if wrong.what == "output" else f"{wrong.what}: {wrong.reason}")
                    rows.append(_row(kernel, op, provider, dtype, shape, s.timer.method, None, nbytes, flops, s,
                                     status=f"wrong result, not timed: {reason}"))
                    continue
                stats = timing.measure(call, s.timer, **s.limits)
        except Exception as e:  # one provider failing (a compile error, say) must not end the run
            rows.append(_row(kernel, op, provider, dtype, shape, s.timer.method, None, nbytes, flops, s,
                             status=f"error: {error_text(e)}"[:300]))
            continue
        finally:
            if progress:
                progress()
        rows.append(_row(kernel, op, provider, dtype, shape, s.timer.method, stats, nbytes, flops, s))
        timed[provider] = (fn, stats.median)
    fastest = min((r["median_us"] for r in rows if r.get("median_us") is not None), default=math.inf)
    if graphs and s.device == "cuda" and fastest < timing.GRAPH_THRESHOLD_US:
        rows += _graph_rows(kernel, op, timed, args, nbytes, flops, dtype, shape, s)
    _add_speedups(rows, vendor)
    return rows


def _as_list(out) -> list:
    return list(out) if isinstance(out, (tuple, list)) else [out]


def _graph_rows(kernel, op, providers, args, nbytes, flops, dtype, shape, s: _Session) -> list[dict]:
    """Replays of a CUDA graph of k calls per provider, rotating over enough input copies that
    together they overflow the L2 (up to MAX_INPUT_COPIES), so the data still comes from HBM."""
    copies = max(1, min(MAX_INPUT_COPIES, math.ceil(2 * s.l2 / max(nbytes or 1, 1))))
    sets = [args] + [_clone_args(args) for _ in range(copies - 1)]
    rows = []
    for provider, (fn, seconds) in providers.items():
        try:
            with torch.no_grad():
                k = max(copies, min(2000, int(GRAPH_CALLS_S / max(seconds, 1e-7))))
                k = math.ceil(k / copies) * copies
                replay = timing.graph_call([functools.partial(fn, *sets[i % copies]) for i in range(k)])
                stats = timing.measure(replay, s.timer, per_call=k, **s.limits)
        except Exception as e:
            rows.append(_row(kernel, op, provider, dtype, shape, "cuda_graph", None, nbytes, flops, s,
                             status=f"error: CUDA graph capture: {type(e).__name__}: {str(e).strip()[:200]}"))
            continue
        rows.append(_row(kernel, op, provider, dtype, shape, "cuda_graph", stats, nbytes, flops, s))
    return rows


FWD_BWD = " fwd+bwd"  # the op column of a training-step row: "bias_gelu fwd+bwd"


def _training_step(fn: Callable, grad_inputs, grad_outputs: list) -> Callable:
    """fn(*args) as one training step: the forward, then the backward of fixed output
    gradients; returns the outputs and the input gradients, so a step is validated like a
    forward. Each call starts from fresh leaves (a detach, no copy): nothing accumulates."""
    def step(*args):
        with torch.enable_grad():
            leaves = list(args)
            for i in grad_inputs:
                leaves[i] = args[i].detach().requires_grad_(True)
            outs = _as_list(fn(*leaves))
            diff = [(o, g) for o, g in zip(outs, grad_outputs) if isinstance(o, torch.Tensor) and o.requires_grad]
            grads = torch.autograd.grad([o for o, _ in diff], [leaves[i] for i in grad_inputs],
                                        [g.to(o.dtype) for o, g in diff], allow_unused=True)
        return [o.detach() for o in outs] + list(grads)
    return step


def _output_gradients(op: OpSpec, args, gen: torch.Generator) -> list:
    """A random gradient for each floating output of the plain op (fixed for the whole
    measurement: drawing it per step would time the random generator)."""
    with torch.no_grad():
        outs = _as_list(op.reference(*args))
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64).to(o.device, o.dtype)
            if isinstance(o, torch.Tensor) and o.is_floating_point() else None for o in outs]


def _bench_kernel(kernel, device, ops, dtypes, sizes, sweep, baselines, s: _Session, graphs, progress, seed,
                  backward: bool = False) -> list[dict]:
    spec = spec_of(kernel)
    rows = []
    for op in select_ops(spec, ops, kernel.name):
        vendor = op.vendor_name if "vendor" in baselines and op.vendor_on(device) else None
        passes = [False, True] if backward and op.grad_inputs else [False]
        for dtype in select_dtypes(spec, dtypes, device, kernel.name):
            for size in [tuple(x) for x in (sizes or spec.sizes_for(device, sweep))]:
                for train in passes:
                    rows += _bench_case(kernel, op, device, dtype, size, baselines, vendor, s, graphs, progress, seed, train)
    return rows


def _bench_case(kernel, op: OpSpec, device, dtype, size, baselines, vendor, s: _Session, graphs, progress, seed,
                train: bool) -> list[dict]:
    """One (op, dtype, size): its forward, or (train) its forward and backward together."""
    providers = {KWB: getattr(kernel, op.kernel_op)}
    if "eager" in baselines:
        providers[EAGER] = op.eager_fn
    if "compile" in baselines:
        providers[COMPILE] = _compiled(op.eager_fn)
    if vendor and not train:
        providers[vendor] = op.vendor
    name = op.name + (FWD_BWD if train else "")
    gen = torch.Generator().manual_seed(case_seed(seed, name, dtype_name(dtype), size))
    try:  # a spec that cannot set up this size fails its rows, not the run
        tol = op.tolerance(dtype)
        args = op.make_inputs(size, dtype, device, gen)
        nbytes = op.bytes_moved(size, dtype) if op.bytes_moved and not train else None
        flops = op.flops(size, dtype) if op.flops and not train else None
        reference = op.reference
        if train:  # every provider (and the float64 reference) runs forward + backward
            grad_tol = op.tolerance(dtype, grad=True)
            tol = Tolerance(max(tol.atol, grad_tol.atol), max(tol.rtol, grad_tol.rtol),
                            max(tol.rel_l2 or tol.rtol, grad_tol.rel_l2 or grad_tol.rtol))
            grads = _output_gradients(op, args, gen)
            providers = {p: _training_step(fn, op.grad_inputs, grads) for p, fn in providers.items()}
            reference = _training_step(op.reference, op.grad_inputs, grads)
    except Exception as e:
        if progress:
            for _ in providers:
                progress()
        return _error_rows(kernel.name, name, providers, dtype, size, s, f"spec: {error_text(e)}")
    # Baselines' steps are held to the norm-wise bound only: eager bf16 sums gradients it has
    # rounded (bias_gelu's grad_bias at 8192 x 8192: 24 of 8192 sums off by ~0.3 where they
    # cancel), a real difference in accuracy, not a different function.
    baseline_tol = Tolerance(10 * tol.atol, 10 * tol.rtol, 10 * (tol.rel_l2 or tol.rtol), elementwise=False) if train else None
    # No CUDA-graph rows for a training step: autograd's backward runs on its own threads.
    return _bench_one(kernel.name, name, providers, args, reference, tol, nbytes, flops, dtype, size, s,
                      graphs and not train, progress, vendor, baseline_tol)


def _bench_function(fn, reference, inputs, label, name, baselines, bytes_moved, flops, tolerance, s: _Session, graphs, progress) -> list[dict]:
    rows = []
    for args in input_sets(inputs):
        first = first_tensor(args)
        dtype = first.dtype if first is not None else torch.float32
        shape = tuple(first.shape) if first is not None else ()
        providers = {label: fn}
        if reference is not None and "eager" in baselines:
            providers[EAGER] = reference
        if reference is not None and "compile" in baselines:
            providers[COMPILE] = _compiled(reference)
        if bytes_moved is None:  # each tensor argument read once, the output written once
            with torch.no_grad():  # the output's size from the reference: the kernel's first run is the poisoned check
                out = (reference or fn)(*args)
            outs = out if isinstance(out, (tuple, list)) else [out]
            nbytes = sum(a.numel() * a.element_size() for a in list(args) + list(outs) if isinstance(a, torch.Tensor))
        else:
            nbytes = bytes_moved(shape, dtype) if callable(bytes_moved) else bytes_moved
        nflops = flops(shape, dtype) if callable(flops) else flops
        tol = tolerance_for(tolerance, dtype)
        ref = reference or fn
        rows += _bench_one(name, name, providers, args, ref, tol, nbytes, nflops, dtype, shape, s, graphs, progress)
    return rows


def bench(target, reference: Callable | None = None, *, inputs=None, device=None, ops=None, dtypes=None, sizes=None,
          sweep: bool = False, baselines=None, graphs: bool = True, bytes_moved=None, flops=None, tolerance=None,
          name: str | None = None, label: str = KWB, seed: int | None = None, session: _Session | None = None,
          progress: Callable[[], None] | None = None, backward: bool = False) -> BenchReport:
    """Time a kernel (or a function) beside its baselines; returns a BenchReport.

    target: a kernel name or folder, a loaded Kernel, or a function (then give `inputs`, and
        `reference` for the eager and torch.compile baselines).
    device: "cpu" or "cuda" (default: the kernel's build device when a GPU is visible).
    ops, dtypes: subsets of the spec's; sizes: a list of size tuples (default: the spec's
        bench_sizes for the device; sweep=True: its sweep_sizes).
    baselines: any of "eager", "compile", "vendor" (a list or "eager,compile"); "none" for none.
    graphs: also time CUDA-graph replays for sizes under ~10 us.
    backward: also time each op that has gradients as a training step, forward then backward
        of a random output gradient, beside eager and torch.compile doing the same (rows whose
        op is "<op> fwd+bwd"; the step's outputs and gradients are validated first).
    For a function: inputs is a tuple of arguments or a list of them (one row set each);
    bytes_moved / flops are numbers or (shape, dtype) -> number (default bytes: every tensor
    argument read once and the output written once).
    """
    chosen = parse_baselines(baselines)
    if sizes is not None:
        sizes = [tuple(x) if isinstance(x, (tuple, list)) else (int(x),) for x in sizes]
    dtypes = parse_dtypes(dtypes)
    seed = new_seed() if seed is None else int(seed)
    if callable(target) and (inputs is not None or reference is not None):
        if inputs is None:
            raise ValueError("inputs: timing a function needs inputs=: a tuple of arguments, or a list of them")
        first = first_tensor(input_sets(inputs)[0])
        dev = str(first.device.type) if first is not None else "cpu"
        s = session or _Session(dev)
        rows = _bench_function(target, reference, inputs, label, name or getattr(target, "__name__", "function"), chosen,
                               bytes_moved, flops, tolerance, s, graphs, progress)
        return BenchReport(s.env, s.ceiling, rows)
    kernel, device = kernel_and_device(target, device)
    s = session or _Session(device)
    rows = _bench_kernel(kernel, device, ops, dtypes, sizes, sweep, chosen, s, graphs, progress, seed, backward)
    return BenchReport(s.env, s.ceiling, rows)


def count_measurements(kernel, device: str, ops=None, dtypes=None, sizes=None, sweep=False, baselines=None,
                       backward: bool = False) -> int:
    spec = spec_of(kernel)
    chosen = parse_baselines(baselines)
    total = 0
    for op in select_ops(spec, ops, kernel.name):
        n_prov = 1 + ("eager" in chosen) + ("compile" in chosen) + ("vendor" in chosen and op.vendor_on(device))
        if backward and op.grad_inputs:
            n_prov += 1 + ("eager" in chosen) + ("compile" in chosen)
        total += n_prov * len(select_dtypes(spec, dtypes, device, kernel.name)) * len(sizes or spec.sizes_for(device, sweep))
    return total


def new_session(device: str, env: results.Environment | None = None) -> _Session:
    return _Session(device, env)

