"""wb.bench(): is my kernel fast? The kernel beside eager PyTorch and torch.compile of the same
reference (and a vendor library where the spec names one), in one run, on the spec's sizes.

    report = wb.bench("relu_scale")                          # default sizes, every dtype
    report = wb.bench("relu_scale", dtypes=["bf16"], sizes=[(1 << 26,)])
    report = wb.bench(k.square, lambda x: x * x, inputs=[(x,)])   # a function of your own
    report.rows                                              # what bench.csv holds
    report.save("benchmarks/results")                        # appends to <root>/<device>/bench.csv

Each (op, dtype, size): inputs from the spec's make_inputs; every provider's output is
validated against the float64 reference before it is timed (the kernel to its tolerance,
the baselines to ten times it: they round in more places); then workbench.harness.timing measures it.
A row per provider carries the median and p20/p80, GB/s from the spec's bytes model and its
share of the copy ceiling measured at the start of the run, TFLOP/s where the spec counts
flops, and the speedup over eager and torch.compile. When a size runs under ~10 us, every
provider is also timed as CUDA-graph replays (method "cuda_graph"), which removes launch gaps.
"""
from __future__ import annotations

import collections
import contextlib
import functools
import logging
import math
import time
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import torch

from kwb_store.resources import functions_of

from ..jit import device as devices
from ..jit import notices
from . import intervals, launches, results, timing
from .cases import (
    Case,
    as_list,
    case_seed,
    draw_inputs,
    dtype_name,
    error_text,
    first_tensor,
    generator_for,
    input_sets,
    kernel_and_device,
    new_seed,
    output_label,
    parse_dtypes,
    poisoned_outputs,
    select_dtypes,
    select_ops,
    spec_of,
    tolerance_for,
)
from .compare import compare, compare_with_eager
from .spec import OpSpec, Tolerance, numel, upcast
from .views import Rendered

KWB, EAGER, COMPILE = "kwb", "eager", "torch.compile"
BASELINES = ("eager", "compile", "vendor")
FWD_BWD = " fwd+bwd"  # the op column of a training-step row: "bias_gelu fwd+bwd"
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
class BenchReport(Rendered):
    """What wb.bench measured: a row per (op, dtype, size, provider, method), as bench.csv holds
    them. print() it for a table (workbench.report renders it)."""

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


def kwb_failures(rows: list[dict]) -> list[dict]:
    """The kernel's own rows that did not time: a wrong result or an error (a baseline that
    fails to compile is reported, but is not the kernel's failure)."""
    return [r for r in rows if r["provider"] == KWB and r["status"] != "ok"]


class Session:
    """What one bench run shares across kernels: the device, its timer, its copy ceiling and
    the environment every row carries."""

    def __init__(self, device: str, env: results.Environment | None = None, ceiling: float | None = None,
                 in_turns: bool | None = None):
        self.device = device
        # kwb, eager and torch.compile timed in turns (timing.measure_interleaved) unless asked
        # one after the other: on the CPU other processes come and go; on the H200 the clocks drift
        # under load: of two `kwb run --full` one after the other, 1 row in 10 differed by 2.9-4.7%
        # (up to 10%), in turns by 1.3% (176 rows)
        self.in_turns = True if in_turns is None else bool(in_turns)
        self.timer = timing.timer_for(device)
        self.env = env or results.environment(device)
        self.ceiling = ceiling or timing.copy_ceiling(device, self.timer)
        # The CPU is timed with fewer samples: each one costs a 21 ms cache flush on the 2-core
        # machine, and half of `kwb run`'s rows there widened to the old cap of 50 (spread > 10%):
        # 37 s of a 90 s run with its builds cached; 10 samples of 0.05 s hold it to ~15 s.
        self.limits = {"min_samples": timing.MIN_SAMPLES, "max_samples": timing.MAX_SAMPLES, "budget_s": timing.BUDGET_S,
                       "wall_s": timing.WALL_S} \
            if device == devices.CUDA else {"min_samples": 5, "max_samples": 10, "budget_s": 0.05}
        self.l2 = (getattr(torch.cuda.get_device_properties(torch.cuda.current_device()), "L2_cache_size", 0) or (50 << 20)) \
            if device == devices.CUDA else 0
        # Where the timing phase's seconds go ('reference', 'compile', 'validate', 'samples',
        # 'graphs'): torch.compile's first call compiles, so its validation is its compile time.
        self.seconds: collections.Counter = collections.Counter()
        self.remeasured = 0  # measurements taken again because the first were not trusted
        self.load_before = timing.machine_load()

    def quietness(self, rows: list[dict]) -> str:
        """How quiet the machine was, for a report's head: the load per core at the start and
        now, the copy ceiling at the start and now, and the rows not trusted."""
        load_now = timing.machine_load()
        again = timing.copy_ceiling(self.device, self.timer)
        drift = abs(again / self.ceiling - 1) if self.ceiling else 0.0
        timed = [r for r in rows if r.get("median_us") is not None]
        noisy = [r for r in timed if r.get("trust")]
        # the load average counts kwb's own process (half of a 2-core machine): shown, not judged
        verdict = "busy" if noisy or drift > 0.10 else "quiet"
        load = (f"load {self.load_before:.2f} -> {load_now:.2f} a core; "
                if self.load_before is not None and load_now is not None else "")
        return (f"Machine {verdict}: {load}copy ceiling {self.ceiling / 1e9:.0f} GB/s at the start, {again / 1e9:.0f} at the end; "
                f"{len(noisy)} of {len(timed)} timings not trusted (shown as noisy, left out of speedups and plots), "
                f"{self.remeasured} measured twice.")


def new_session(device: str, env: results.Environment | None = None, in_turns: bool | None = None) -> Session:
    return Session(device, env, in_turns=in_turns)


@dataclass
class Plan:
    """How one bench call times its cases: in which session, beside which baselines."""

    session: Session
    baselines: tuple[str, ...] = BASELINES
    graphs: bool = True  # also time CUDA-graph replays of sizes under timing.GRAPH_THRESHOLD_US
    progress: Callable[[], None] | None = None  # called once per provider measured
    launches: bool = True  # profile one call of each kwb row on a GPU for its launch columns
    notes: list[str] = field(default_factory=list)  # rows passed by a yardstick's error, in words

    def advance(self, n: int = 1) -> None:
        for _ in range(n if self.progress else 0):
            self.progress()


def _compiled(fn: Callable) -> Callable:
    """torch.compile of fn with a dynamo cache of its own. Dynamo keeps compiled code (and its
    recompile limit of 8) on the code object it enters: every size and dtype on one function
    would pile up there and, past the limit, silently run eager code. A copy of a small
    wrapper's code object per measurement starts empty, and leaves everyone else's compiled
    code alone (torch._dynamo.reset() would not). fullgraph: a graph break would time
    half-eager code under torch.compile's name."""
    def compiled_reference(*args):
        return fn(*args)

    if not torch.cuda.is_available():
        # Inductor's CPU code imports torch.utils.cpp_extension, which warns on every run that
        # the machine has no CUDA runtime: the point of a CPU run, not news
        logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    code = compiled_reference.__code__.replace()  # a new object: a new cache
    fresh = types.FunctionType(code, compiled_reference.__globals__, "compiled_reference", None, compiled_reference.__closure__)
    return torch.compile(fresh, fullgraph=True, dynamic=False)


# ---- rows ------------------------------------------------------------------------------------


def _row(case: Case, provider: str, method: str, stats, plan: Plan, status: str = "ok", launch: dict | None = None) -> dict:
    s = plan.session
    row = dict.fromkeys(results.BENCH_COLUMNS)  # every column, None where nothing was measured
    row.update(kernel=case.kernel, op=case.op, provider=provider, dtype=dtype_name(case.dtype), shape="x".join(map(str, case.shape)),
               numel=numel(case.shape), method=method, status=status, ceiling_gbps=round(s.ceiling / 1e9, 1), **s.env.columns())
    row.update(launch or {})
    if stats is None:
        return row
    sec = stats.median
    row[_STATS] = stats  # for _add_speedups' intervals; not a column
    row.update(median_us=stats.median * 1e6, p20_us=stats.p20 * 1e6, p80_us=stats.p80 * 1e6, samples=stats.n,
               trust=timing.distrust(stats) or None)
    if case.nbytes:
        row.update(gbps=case.nbytes / sec / 1e9, pct_of_ceiling=100 * case.nbytes / sec / s.ceiling)
    if case.flops:
        row.update(tflops=case.flops / sec / 1e12)
    return row


_STATS = "_stats"  # a timed row's timing.Stats, until _add_speedups has used it


def _add_speedups(rows: list[dict], vendor: str | None) -> None:
    """Each row's speedup over each baseline timed with the same method (events or graphs);
    none where either timing is not trusted (timing.distrust). kwb's rows also get the 95%
    interval of their speedups over eager and torch.compile (intervals.speedup_interval)."""
    for r in rows:
        if r.get("median_us") is None or r.get("trust"):
            continue
        for provider, column in ((EAGER, "speedup_vs_eager"), (COMPILE, "speedup_vs_compile"), (vendor, "speedup_vs_vendor")):
            base = next((b for b in rows if b["provider"] == provider and b["method"] == r["method"] and b.get("median_us")
                         and not b.get("trust")), None)
            if base is None:
                continue
            r[column] = base["median_us"] / r["median_us"]
            if r["provider"] == KWB and provider in (EAGER, COMPILE) and _STATS in r and _STATS in base:
                interval = intervals.speedup_interval(base[_STATS], r[_STATS])
                if interval is not None:
                    r[f"{column}_lo"], r[f"{column}_hi"] = interval
    for r in rows:
        r.pop(_STATS, None)


def _error_rows(case: Case, providers, plan: Plan, message: str) -> list[dict]:
    plan.advance(len(providers))
    return [_row(case, p, plan.session.timer.method, None, plan, status=f"error: {message}"[:300]) for p in providers]


# ---- timing one case -------------------------------------------------------------------------


def _validation_error(provider: str, fn: Callable, case: Case, refs: list, wants: list) -> tuple[str | None, str]:
    """Why the provider's output is wrong (not timed then), or None; and, where the kernel's
    output passed only within a yardstick's own error, that yardstick's error in words. The
    kernel runs poisoned, as in wb.check: unpoisoned, an element it never wrote can hold the
    right value by luck (seen on torch 2.11: the output reused the block the reference just
    freed). Baselines run as they are (deterministic mode is in torch.compile's guards), judged
    by their looser tolerance; the yardsticks run as they are too, and the kernel is judged by its
    own tolerance widened to a yardstick's error (compare_with_eager)."""
    tol = case.tolerance if provider == KWB else case.baseline_tolerance
    with poisoned_outputs() if provider == KWB else contextlib.nullcontext():
        outs = as_list(fn(*case.args))
    if len(outs) != len(refs):
        return f"{len(outs)} outputs, the reference {len(refs)}", ""
    yardsticks = (("eager PyTorch", case.reference), *case.yardsticks) if provider == KWB else ()
    theirs: dict[str, list | None] = {}  # each yardstick's outputs, run once where needed; None where it raised
    excuses = []
    for i, (o, r, w) in enumerate(zip(outs, refs, wants)):
        label = output_label(i, len(refs))
        first = verdict = compare(o, r, tol, label, w)
        misses = []  # each yardstick's own error, where the kernel's is beyond it too
        # the kernel may be as far off as eager PyTorch itself, or as the vendor's op it may call
        for name, yardstick in yardsticks:
            if verdict.passed:
                break
            if name not in theirs:
                try:
                    theirs[name] = as_list(yardstick(*case.args))
                except Exception:  # noqa: BLE001 - a yardstick that cannot run excuses nothing
                    theirs[name] = None
            mine = theirs[name]
            if mine is None:
                continue
            verdict = compare_with_eager(o, mine[i] if i < len(mine) else None, r, tol, label, w, yardstick=name)
            if not verdict.passed and verdict.reason != first.reason:
                misses.append(verdict.reason[len(first.reason):].lstrip("; "))
                verdict = first
        if not verdict.passed:
            reason = "; ".join([first.reason, *misses])
            return (reason if first.what == "output" else f"{first.what}: {reason}"), ""
        if verdict.within_eager:
            excuses.append(f"{label} {verdict.within_eager}" if len(refs) > 1 else verdict.within_eager)
    return None, "; ".join(excuses)


def _time_case(case: Case, providers: dict[str, Callable], plan: Plan, vendor: str | None = None,
               graphs: bool = True) -> list[dict]:
    """Validate each provider on the case's arguments, then time it; a row each (and CUDA-graph
    rows where the case is small enough)."""
    s = plan.session
    started = time.perf_counter()
    try:
        with torch.no_grad():
            refs = as_list(case.reference(*[upcast(a) for a in case.args]))
            try:  # the dtypes the plain PyTorch op returns, which the kernel's outputs must have
                wants = [getattr(t, "dtype", None) for t in as_list(case.reference(*case.args))]
            except Exception:  # noqa: BLE001 - a reference without this dtype's support: then dtypes are not checked
                wants = [None] * len(refs)
    except Exception as e:  # noqa: BLE001 - the reference is the spec's code: whatever it raises fails these rows, not the run
        return _error_rows(case, providers, plan, f"the reference raised {error_text(e)}")
    s.seconds["reference"] += time.perf_counter() - started
    if s.in_turns and len(providers) > 1:  # validated one by one, then timed in turns
        return _time_together(case, providers, plan, refs, wants, vendor, graphs)
    rows, timed = [], {}
    for provider, fn in providers.items():
        rejected = _rejected(case, provider, fn, plan, refs, wants)
        if rejected is not None:
            rows.append(rejected)
            plan.advance()
            continue
        started, phase = time.perf_counter(), "samples"
        try:
            with torch.no_grad():
                launch = None
                if provider == KWB and s.device == devices.CUDA and plan.launches:
                    phase = "launches"
                    launch = _launch_columns(case, fn)
                    s.seconds[phase] += time.perf_counter() - started
                    started, phase = time.perf_counter(), "samples"
                stats = _measured(functools.partial(fn, *case.args), s)
        except Exception as e:  # noqa: BLE001 - one provider failing (a compile error, say) must not end the run
            rows.append(_row(case, provider, s.timer.method, None, plan, status=f"error: {error_text(e)}"[:300]))
            continue
        finally:
            s.seconds[phase] += time.perf_counter() - started
            plan.advance()
        rows.append(_row(case, provider, s.timer.method, stats, plan, launch=launch))
        timed[provider] = (fn, stats.median)
    rows += _small_case_graph_rows(case, timed, plan, graphs)
    _add_speedups(rows, vendor)
    return rows


def _rejected(case: Case, provider: str, fn: Callable, plan: Plan, refs: list, wants: list) -> dict | None:
    """Validates one provider on the case's arguments (torch.compile's first call compiles it
    here): None where its outputs match the reference, else the row that says why it is not timed."""
    s = plan.session
    started = time.perf_counter()
    try:
        with torch.no_grad():
            wrong, excuse = _validation_error(provider, fn, case, refs, wants)
    except Exception as e:  # noqa: BLE001 - one provider failing (a compile error, say) must not end the run
        return _row(case, provider, s.timer.method, None, plan, status=f"error: {error_text(e)}"[:300])
    finally:
        s.seconds["compile" if provider == COMPILE else "validate"] += time.perf_counter() - started
    if wrong is not None:
        return _row(case, provider, s.timer.method, None, plan, status=f"wrong result, not timed: {wrong}")
    if excuse:
        plan.notes.append(f"{case.kernel}.{case.op} {dtype_name(case.dtype)} {'x'.join(map(str, case.shape))}: "
                          f"kwb's output passed {excuse}")
    return None


def _time_together(case: Case, providers: dict[str, Callable], plan: Plan, refs: list, wants: list,
                   vendor: str | None, graphs: bool = True) -> list[dict]:
    """_time_case in turns (a session's default): each provider validated
    (torch.compile's compile included), then all of them timed in turns
    (timing.measure_interleaved), so the machine's drift lands on kwb, eager and torch.compile
    alike; a row each, in the providers' order, and on a GPU kwb's launch columns and the
    CUDA-graph rows as _time_case has them."""
    s = plan.session
    rows: dict[str, dict] = {}
    fns: dict[str, Callable[[], object]] = {}
    launch = None
    for provider, fn in providers.items():
        rejected = _rejected(case, provider, fn, plan, refs, wants)
        if rejected is not None:
            rows[provider] = rejected
            plan.advance()
        else:
            fns[provider] = functools.partial(fn, *case.args)
            if provider == KWB and s.device == devices.CUDA and plan.launches:
                started = time.perf_counter()
                with torch.no_grad():
                    launch = _launch_columns(case, fn)
                s.seconds["launches"] += time.perf_counter() - started
    started = time.perf_counter()
    try:
        stats = _measured_in_turns(fns, s)
    except Exception:  # noqa: BLE001 - a provider that raised while timed: each timed alone, so only its row says so
        stats = {}
        for provider, fn in fns.items():
            try:
                with torch.no_grad():
                    stats[provider] = _measured(fn, s)
            except Exception as e:  # noqa: BLE001 - this provider's row says so; the others are timed
                rows[provider] = _row(case, provider, s.timer.method, None, plan, status=f"error: {error_text(e)}"[:300])
    finally:
        s.seconds["samples"] += time.perf_counter() - started
        plan.advance(len(fns))
    for provider, st in stats.items():
        rows[provider] = _row(case, provider, s.timer.method, st, plan, launch=launch if provider == KWB else None)
    ordered = [rows[p] for p in providers if p in rows]
    ordered += _small_case_graph_rows(case, {p: (providers[p], st.median) for p, st in stats.items()}, plan, graphs)
    _add_speedups(ordered, vendor)
    return ordered


def _measured_in_turns(fns: dict[str, Callable[[], object]], s: Session) -> dict[str, timing.Stats]:
    """timing.measure_interleaved, once more where any provider's samples are not to be trusted."""
    with torch.no_grad():
        stats = timing.measure_interleaved(fns, s.timer, **s.limits)
        if any(timing.distrust(st) for st in stats.values()):
            s.remeasured += len(fns)
            stats = timing.measure_interleaved(fns, s.timer, **s.limits)
    return stats


def _measured(fn: Callable[[], object], s: Session, per_call: float = 1.0) -> timing.Stats:
    """timing.measure, once more where the first samples are not to be trusted (other
    processes on the cores, a spread that would not narrow); the row says so if the second
    are not either."""
    stats = timing.measure(fn, s.timer, per_call=per_call, **s.limits)
    if timing.distrust(stats):
        s.remeasured += 1
        stats = timing.measure(fn, s.timer, per_call=per_call, **s.limits)
    return stats


def _launch_columns(case: Case, fn: Callable) -> dict:
    """What one call of the kwb op launched (block, registers, shared memory, occupancy), or
    nothing where the profiler is not there to ask: the columns stay blank, the row is timed."""
    try:
        with torch.no_grad():
            return launches.bench_columns(launches.profile(fn, case.args), case.functions, launches.device_arch())
    except Exception as e:  # noqa: BLE001 - profiler unavailable (CUPTI missing, another profiler running)
        notices.once("bench-launches", f"kwb bench: no launch columns (block, registers, occupancy): {error_text(e)}")
        return {}


def _small_case_graph_rows(case: Case, timed: dict, plan: Plan, graphs: bool) -> list[dict]:
    """_graph_rows where the case's fastest provider (timed: provider -> (fn, median seconds))
    ran under timing.GRAPH_THRESHOLD_US on a GPU and graphs are wanted; else none."""
    s = plan.session
    fastest = min((seconds * 1e6 for _, seconds in timed.values()), default=math.inf)
    if not (graphs and plan.graphs and s.device == devices.CUDA and fastest < timing.GRAPH_THRESHOLD_US):
        return []
    started = time.perf_counter()
    rows = _graph_rows(case, timed, plan)
    s.seconds["graphs"] += time.perf_counter() - started
    return rows


def _graph_rows(case: Case, providers, plan: Plan) -> list[dict]:
    """Replays of a CUDA graph of k calls per provider, rotating over enough input copies that
    together they overflow the L2 (up to MAX_INPUT_COPIES), so the data still comes from HBM;
    every provider's graph captured first, then the replays timed in turns where the session
    times in turns (one after the other, torch.compile's replays of vector_add at 2^20 floats ran
    2.7% ahead of kwb's and eager's in two H100 full runs; timed in turns, within 0.1-0.4%)."""
    s = plan.session
    copies = max(1, min(MAX_INPUT_COPIES, math.ceil(2 * s.l2 / max(case.nbytes or 1, 1))))
    sets = timing.input_copies(case.args, copies)
    rows: dict[str, dict] = {}
    replays: dict[str, tuple[Callable[[], None], int]] = {}
    # one memory pool for every provider's graph: their outputs at the same addresses, one pool's
    # memory rather than one each (capturing kwb's last, or in a shared pool, moved no row: 2.70 /
    # 2.70 / 2.71 us, benchmarks/graph_timeline.py, H200)
    pool = torch.cuda.graph_pool_handle()
    for provider, (fn, seconds) in providers.items():
        try:
            with torch.no_grad():
                k = max(copies, min(2000, int(GRAPH_CALLS_S / max(seconds, 1e-7))))
                k = math.ceil(k / copies) * copies
                replays[provider] = (timing.graph_call([functools.partial(fn, *sets[i % copies]) for i in range(k)], pool), k)
        except Exception as e:  # noqa: BLE001 - any capture failure fails this row, not the run
            rows[provider] = _row(case, provider, "cuda_graph", None, plan,
                                  status=f"error: CUDA graph capture: {type(e).__name__}: {str(e).strip()[:200]}")
            # a capture that failed can leave its pool still recording: the others get a new one
            pool = torch.cuda.graph_pool_handle()
    for provider, outcome in _replay_stats(replays, s).items():
        rows[provider] = _row(case, provider, "cuda_graph", outcome, plan) if isinstance(outcome, timing.Stats) else \
            _row(case, provider, "cuda_graph", None, plan, status=f"error: {outcome}"[:300])
    return [rows[p] for p in providers if p in rows]


def _replay_stats(replays: dict[str, tuple[Callable[[], None], int]], s: Session) -> dict[str, timing.Stats | str]:
    """Each provider's seconds a call from its replays (replay, calls in it): in turns where the
    session times in turns, else one after the other; a provider whose replay raised gets the
    error's text instead."""
    if s.in_turns and len(replays) > 1:
        fns = {p: replay for p, (replay, _) in replays.items()}
        try:
            stats = _measured_in_turns(fns, s)
            return {p: timing.per_call(stats[p], k) for p, (_, k) in replays.items()}
        except Exception as e:  # noqa: BLE001 - a replay that raised: each timed alone below, so only its row says so
            notices.once("bench-replays-in-turns", f"kwb bench: graph replays timed one after the other: {error_text(e)}")
    out: dict[str, timing.Stats | str] = {}
    for provider, (replay, k) in replays.items():
        try:
            with torch.no_grad():
                out[provider] = _measured(replay, s, per_call=k)
        except Exception as e:  # noqa: BLE001 - this provider's row says so; the others are timed
            out[provider] = error_text(e)
    return out


# ---- training steps --------------------------------------------------------------------------


def _training_step(fn: Callable, grad_inputs, grad_outputs: list) -> Callable:
    """fn(*args) as one training step: the forward, then the backward of fixed output
    gradients; returns the outputs and the input gradients, so a step is validated like a
    forward. Each call starts from fresh leaves (a detach, no copy): nothing accumulates."""
    def step(*args):
        with torch.enable_grad():
            leaves = list(args)
            for i in grad_inputs:
                leaves[i] = args[i].detach().requires_grad_(True)
            outs = as_list(fn(*leaves))
            diff = [(o, g) for o, g in zip(outs, grad_outputs) if isinstance(o, torch.Tensor) and o.requires_grad]
            grads = torch.autograd.grad([o for o, _ in diff], [leaves[i] for i in grad_inputs],
                                        [g.to(o.dtype) for o, g in diff], allow_unused=True)
        return [o.detach() for o in outs] + list(grads)
    return step


def _output_gradients(op: OpSpec, args, gen: torch.Generator) -> list:
    """A random gradient for each floating output of the plain op (fixed for the whole
    measurement: drawing it per step would time the random generator)."""
    with torch.no_grad():
        outs = as_list(op.reference(*args))
    return [torch.randn(o.shape, generator=gen, dtype=torch.float64, device=gen.device).to(o.device, o.dtype)
            if isinstance(o, torch.Tensor) and o.is_floating_point() else None for o in outs]


# ---- kernels with a spec ---------------------------------------------------------------------


def _kernel_case(kernel, op: OpSpec, device: str, dtype, size, seed: int, train: bool, providers: dict) -> Case:
    """The case of one (op, dtype, size), forward or (train) forward and backward; providers
    (name -> the function timed) are turned into training steps in place when train is set."""
    name = op.name + (FWD_BWD if train else "")
    s = case_seed(seed, name, dtype_name(dtype), size)
    case = Case(kernel.name, name, providers[KWB], op.reference, (), dtype, tuple(size), s, op.tolerance(dtype))
    case.functions = tuple(functions_of(kernel.build.manifest.resources)) if device == devices.CUDA else ()
    if op.vendor is not None and op.vendor_on(device) and not train:
        case.yardsticks = ((op.vendor_name, op.vendor),)
    case.args = draw_inputs(op.make_inputs, size, dtype, device, s)
    gen = generator_for(device, s ^ 0x5EED)
    tol = case.tolerance
    if train:  # every provider (and the float64 reference) runs forward + backward
        grad_tol = op.tolerance(dtype, grad=True)
        tol = case.tolerance = Tolerance(max(tol.atol, grad_tol.atol), max(tol.rtol, grad_tol.rtol),
                                         max(tol.rel_l2 or tol.rtol, grad_tol.rel_l2 or grad_tol.rtol))
        grads = _output_gradients(op, case.args, gen)
        for p, fn in providers.items():
            providers[p] = _training_step(fn, op.grad_inputs, grads)
        case.fn, case.reference = providers[KWB], _training_step(op.reference, op.grad_inputs, grads)
        # Baselines' steps are held to the norm-wise bound only: eager bf16 sums gradients it has
        # rounded (bias_gelu's grad_bias at 8192 x 8192: 24 of 8192 sums off by ~0.3 where they
        # cancel), a real difference in accuracy, not a different function.
        case.baseline_tolerance = Tolerance(10 * tol.atol, 10 * tol.rtol, 10 * (tol.rel_l2 or tol.rtol), elementwise=False)
        case.nbytes = op.step_bytes(size, dtype) if op.step_bytes else None
    else:
        case.nbytes = op.bytes_moved(size, dtype) if op.bytes_moved else None
        case.flops = op.flops(size, dtype) if op.flops else None
        case.baseline_tolerance = Tolerance(10 * tol.atol, 10 * tol.rtol, 10 * (tol.rel_l2 or tol.rtol))
    return case


def _bench_op(kernel, op: OpSpec, device: str, dtype, size, seed: int, train: bool, plan: Plan) -> list[dict]:
    """One (op, dtype, size): its forward, or (train) its forward and backward together."""
    vendor = op.vendor_name if "vendor" in plan.baselines and op.vendor_on(device) and not train else None
    providers = {KWB: getattr(kernel, op.kernel_op)}
    if "eager" in plan.baselines:
        providers[EAGER] = op.eager_fn
    if "compile" in plan.baselines:
        providers[COMPILE] = _compiled(op.eager_fn)
    if vendor:
        providers[vendor] = op.vendor
    try:  # a spec that cannot set up this size fails its rows, not the run
        case = _kernel_case(kernel, op, device, dtype, size, seed, train, providers)
    except Exception as e:  # noqa: BLE001 - the spec's code may raise anything
        failed = Case(kernel.name, op.name + (FWD_BWD if train else ""), providers[KWB], op.reference, (), dtype, tuple(size),
                      0, Tolerance(0, 0))
        return _error_rows(failed, providers, plan, f"spec: {error_text(e)}")
    # No CUDA-graph rows for a training step: autograd's backward runs on its own threads.
    return _time_case(case, providers, plan, vendor, graphs=not train)


def _bench_kernel(kernel, device, ops, dtypes, sizes, sweep, seed, backward: bool, plan: Plan) -> list[dict]:
    spec = spec_of(kernel)
    rows = []
    for op in select_ops(spec, ops, kernel.name):
        passes = [False, True] if backward and op.grad_inputs else [False]
        for dtype in select_dtypes(spec, dtypes, device, kernel.name):
            for size in [tuple(x) for x in (sizes or spec.sizes_for(device, sweep))]:
                for train in passes:
                    rows += _bench_op(kernel, op, device, dtype, size, seed, train, plan)
    return rows


# ---- a function of your own ----------------------------------------------------------------


def _bench_function(fn, reference, inputs, label, name, bytes_moved, flops, tolerance, plan: Plan) -> list[dict]:
    rows = []
    for args in input_sets(inputs):
        first = first_tensor(args)
        dtype = first.dtype if first is not None else torch.float32
        shape = tuple(first.shape) if first is not None else ()
        providers = {label: fn}
        if reference is not None and "eager" in plan.baselines:
            providers[EAGER] = reference
        if reference is not None and "compile" in plan.baselines:
            providers[COMPILE] = _compiled(reference)
        if bytes_moved is None:  # each tensor argument read once, the output written once
            with torch.no_grad():  # the output's size from the reference: the kernel's first run is the poisoned check
                outs = as_list((reference or fn)(*args))
            nbytes = sum(a.numel() * a.element_size() for a in list(args) + outs if isinstance(a, torch.Tensor))
        else:
            nbytes = bytes_moved(shape, dtype) if callable(bytes_moved) else bytes_moved
        tol = tolerance_for(tolerance, dtype)
        case = Case(name, name, fn, reference or fn, tuple(args), dtype, shape, 0, tol,
                    nbytes=nbytes, flops=flops(shape, dtype) if callable(flops) else flops,
                    baseline_tolerance=Tolerance(10 * tol.atol, 10 * tol.rtol, 10 * (tol.rel_l2 or tol.rtol)))
        rows += _time_case(case, providers, plan)
    return rows


def bench(target, reference: Callable | None = None, *, inputs=None, device=None, ops=None, dtypes=None, sizes=None,
          sweep: bool = False, baselines=None, graphs: bool = True, bytes_moved=None, flops=None, tolerance=None,
          name: str | None = None, label: str = KWB, seed: int | None = None, session: Session | None = None,
          progress: Callable[[], None] | None = None, backward: bool = False, launches: bool = True,
          in_turns: bool | None = None) -> BenchReport:
    """Time a kernel (or a function) beside its baselines; returns a BenchReport.

    target: a kernel name or folder, a loaded Kernel, or a function (then give `inputs`, and
        `reference` for the eager and torch.compile baselines).
    device: "cpu" or "cuda" (default: the kernel's build device when a GPU is visible).
    ops, dtypes: subsets of the spec's; sizes: a list of size tuples (default: the spec's
        bench_sizes for the device; sweep=True: its sweep_sizes).
    baselines: any of "eager", "compile", "vendor" (a list or "eager,compile"); "none" for none.
    graphs: also time CUDA-graph replays for sizes under ~10 us.
    launches: on a GPU, profile one call of each kwb row (not timed; its seconds are their own
        line in kwb run's account) for its launch columns: kernel, block, registers, occupancy.
    in_turns: time kwb and its baselines in turns, a few samples of each a round (the default;
        False: one after the other; a given session keeps its own).
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
        plan = Plan(session or Session(str(first.device.type) if first is not None else devices.CPU, in_turns=in_turns), chosen,
                    graphs, progress, launches)
        rows = _bench_function(target, reference, inputs, label, name or getattr(target, "__name__", "function"),
                               bytes_moved, flops, tolerance, plan)
        return BenchReport(plan.session.env, plan.session.ceiling, rows, plan.notes)
    kernel, device = kernel_and_device(target, device)
    plan = Plan(session or Session(device, in_turns=in_turns), chosen, graphs, progress, launches)
    rows = _bench_kernel(kernel, device, ops, dtypes, sizes, sweep, seed, backward, plan)
    return BenchReport(plan.session.env, plan.session.ceiling, rows, plan.notes)


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
