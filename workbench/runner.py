"""`kwb run`: build every kernel, check each, time each against eager PyTorch and
torch.compile, and leave a report folder (workbench.report.folder) to read.

With no GPU it does all of this on the CPU and says so first. The result's exit code is 1
when a build or a check failed (or the kernel's own output was wrong at a timed size), else 0.
"""
from __future__ import annotations

import contextlib
import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from .harness import results
from .harness.benchmark import kwb_failures
from .report import folder as report_files
from .report.render import counted, standings_line

CPU_NOTICE = ("No GPU on this machine: kwb run builds, checks and times the CPU implementations. "
              "CUDA code is not compiled; `kwb build --all --device cuda` compiles it without a GPU. "
              "CPU timings include the caches: a size that fits in the last-level cache can pass the copy ceiling.")


@dataclass
class RunResult:
    folder: Path
    index: Path | None = None
    builds: list = field(default_factory=list)
    checks: list = field(default_factory=list)
    bench_rows: list = field(default_factory=list)
    bench_notes: list = field(default_factory=list)  # rows that passed only within a yardstick's own error
    seconds: dict = field(default_factory=dict)  # phase -> wall seconds: builds, checks, timing (and its parts), report

    @property
    def failures(self) -> list[str]:
        out = [f"build of {b.name} failed" for b in self.builds if not b.ok]
        out += [f"check of {c.target}: {counted(len(c.failures), 'case')} failed" for c in self.checks if not c.passed]
        out += [f"{r['kernel']}.{r['op']} {r['dtype']} {r['shape']}: {r['status']}" for r in kwb_failures(self.bench_rows)]
        return out


@contextlib.contextmanager
def _progress(console):
    """rich progress bars, live where the console can redraw them (feedback.live); elsewhere
    (a log, a notebook run by nbclient) the finished bars print once, as plain output."""
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        SpinnerColumn,
        TextColumn,
        TimeElapsedColumn,
    )

    from .jit import feedback

    shown_live = feedback.live(console)
    progress = Progress(SpinnerColumn(), TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                        TimeElapsedColumn(), console=console, transient=False, disable=not shown_live)
    with progress:
        yield progress
    if not shown_live and progress.tasks:
        console.print(progress.get_renderable())


def run(names=None, device=None, out="kwb-report", dtypes=None, sizes=None, sweep: bool = False, baselines=None,
        seed: int | None = None, console=None, command: str | None = None, backward: bool = True,
        full: bool = False, in_turns: bool | None = None) -> RunResult:
    """Build, check (every case) and time the kernels. Timing covers one size and dtype per
    kernel (its spec's quick_for(device)) unless `full` (every dtype at every bench size) or
    sizes/dtypes/sweep say otherwise. in_turns: kwb and its baselines timed in turns (the default),
    or one after the other (False)."""
    from rich.console import Console
    from rich.markup import escape

    from .harness import benchmark as benching
    from .harness import correctness as checking
    from .jit import device as devices
    from .jit.parallel import load_all
    from .jit.sources import builtin_names, unknown_name_error
    from .report.folder import BuildRecord
    from .report.render import headline_table, print_check

    console = console or Console(stderr=True, highlight=False)
    names = list(names) if names else builtin_names()
    for name in names:  # before any work: an unknown name is a usage error, not a failed build
        why = unknown_name_error(name)
        if why is not None:
            raise ValueError(why)
    notice = ""
    why = devices.why_cpu() if device is None else None
    if why is not None:
        device = devices.CPU
        notice = CPU_NOTICE if not devices.gpu_visible() else \
            f"{why[0].upper()}{why[1:]}. kwb run builds, checks and times the CPU implementations."
    device = devices.choose(device, what="kernels")
    devices.choose(device, purpose="run", what="kernels")  # --device cuda without a GPU: NoGpuError
    env = results.environment(device)
    folder = Path(out) / env.slug
    result = RunResult(folder)
    if notice:
        console.print(f"[bold yellow]{notice}[/]")
    console.print(f"kwb run: {counted(len(names), 'kernel')} on {env.title()}; report in {folder}")

    def report(loaded) -> None:
        if loaded.ok:
            k = loaded.kernel
            how = f"built in {k.build.manifest.build_seconds:.1f} s" if k.build.compiled else "cached"
            console.print(f"  [green]✓[/] {k.name}: {how}; ops: {', '.join(k.ops)}")
        else:
            console.print(f"  [red]✗ {escape(loaded.name)}[/]: {escape(str(loaded.error))}")

    started = process_seconds()
    if started is not None:  # the interpreter, import torch, the device and CUDA's start: before the builds
        result.seconds["start-up"] = started
    console.print(f"building {counted(len(names), 'kernel')} ({device})" + (", side by side" if len(names) > 1 else ""))
    clock = time.monotonic()
    kernels = []
    for loaded in load_all(names, device=device, on_done=report):  # in the order named
        if not loaded.ok:
            result.builds.append(BuildRecord(loaded.name, device, ok=False, error=str(loaded.error)))
            continue
        k = loaded.kernel
        m = k.build.manifest
        result.builds.append(BuildRecord(k.name, k.device, True, k.build.compiled, m.build_seconds,
                                         str(k.library_path), m.build_log))
        kernels.append(k)

    with_spec = []
    for k in kernels:
        if k.spec is None or not hasattr(k.spec, "SPEC"):
            console.print(f"  {k.name}: no spec.py, so it is built but not checked or timed")
        else:
            with_spec.append(k)

    result.seconds["builds"] = time.monotonic() - clock
    clock = time.monotonic()
    seed = checking.new_seed() if seed is None else seed
    with _progress(console) as progress:
        total = sum(checking.count_cases(k, device, dtypes=dtypes) for k in with_spec)
        task = progress.add_task("checking", total=total)
        for k in with_spec:
            progress.update(task, description=f"checking {k.name}")
            result.checks.append(checking.check(k, device=device, dtypes=dtypes, seed=seed,
                                                progress=lambda: progress.advance(task)))
    for c in result.checks:
        print_check(console, c)
    result.seconds["checks"] = time.monotonic() - clock
    clock = time.monotonic()

    def timed(k) -> dict:
        """What to time of kernel k: the quick size and dtype where nothing else was asked for."""
        size, dtype = k.spec.SPEC.quick_for(device)
        return {"dtypes": dtypes if full or dtypes is not None else [dtype],
                "sizes": sizes if full or sweep or sizes is not None else [size], "sweep": sweep}

    session = benching.new_session(device, env, in_turns)
    with _progress(console) as progress:
        total = sum(benching.count_measurements(k, device, baselines=baselines, backward=backward, **timed(k))
                    for k in with_spec)
        task = progress.add_task("timing", total=total)
        for k in with_spec:
            progress.update(task, description=f"timing {k.name}")
            rep = benching.bench(k, device=device, baselines=baselines, seed=seed, session=session, backward=backward,
                                 progress=lambda: progress.advance(task), **timed(k))
            result.bench_rows += rep.rows
            result.bench_notes += rep.notes

    quiet = session.quietness(result.bench_rows) if result.bench_rows else ""
    for note in result.bench_notes:
        console.print(f"note: {escape(note)}", soft_wrap=True)
    if quiet:
        console.print(quiet, soft_wrap=True)
    standing = standings_line(result.bench_rows)
    if standing:
        console.print(standing, soft_wrap=True)
    result.seconds["timing"] = time.monotonic() - clock
    result.seconds.update({f"timing: {k}": v for k, v in session.seconds.items()})
    clock = time.monotonic()
    env_cols = env.columns()
    if result.checks:
        results.append(folder / "check.csv", [{**r, **env_cols} for c in result.checks for r in c.rows()])
        results.append(folder / "check_errors.csv", [{**r, **env_cols} for c in result.checks for r in c.error_histograms()])
    if result.bench_rows:
        results.append(folder / "bench.csv", result.bench_rows)
    plot_paths = report_files.write_plots(folder, env.run_id)
    command = command or f"wb.run({names!r}, device={device!r}, out={str(out)!r})"
    index = report_files.index_text(env, command, notice, result.builds, result.checks, result.bench_rows, plot_paths,
                                    session.ceiling / 1e9, quiet=quiet, notes=result.bench_notes)
    # last: the earlier run's index.md and build.log stay until this one's are whole
    result.index = report_files.write_report(folder, env.run_id, report_files.build_log_text(result.builds), index)
    result.seconds["report"] = time.monotonic() - clock
    if result.bench_rows:
        console.print(headline_table(result.bench_rows, title=f"Speed at each op's largest size ({env.title()}; "
                                                              f"copy ceiling {session.ceiling / 1e9:.0f} GB/s)"))
    clock = time.monotonic()
    _stop_compile_workers()
    result.seconds["shutdown"] = time.monotonic() - clock
    elapsed = process_seconds()
    if elapsed is not None and started is not None:  # what no phase holds: printing between them, say
        gap = elapsed - sum(v for k, v in result.seconds.items() if ": " not in k)
        if gap >= 0.5:
            result.seconds["between phases"] = gap
    console.print(where_the_time_went(result.seconds), soft_wrap=True)
    return result


def _stop_compile_workers() -> None:
    """End torch.compile's compile-worker processes here, inside the account, rather than at
    interpreter exit after the closing line (the H100 machine: ~3 s of a 48 s run went there)."""
    import sys

    module = sys.modules.get("torch._inductor.async_compile")
    stop = getattr(module, "shutdown_compile_workers", None)
    if stop is not None:
        try:
            stop()
        except Exception:  # noqa: BLE001, S110 - a torch whose pool cannot be stopped this way: exit does it
            pass


def process_seconds() -> float | None:
    """Seconds since this process started (Linux: /proc), None where that cannot be read."""
    try:
        with open("/proc/self/stat") as f:
            start_ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        return max(0.0, uptime - start_ticks / os.sysconf("SC_CLK_TCK"))
    except (OSError, ValueError, IndexError):
        return None


def where_the_time_went(seconds: dict) -> str:
    """'kwb run took 74 s: builds 21 s, checks 9 s, timing 40 s (torch.compile compiling 25 s, ...), report 4 s'."""
    parts = {"compile": "torch.compile compiling", "reference": "float64 references", "validate": "validating outputs",
             "samples": "timed samples", "graphs": "CUDA graphs", "launches": "profiling launches"}
    inner = ", ".join(f"{parts[k.split(': ', 1)[1]]} {v:.0f} s" for k, v in seconds.items() if k.startswith("timing: "))
    outer = [f"{k} {v:.0f} s" + (f" ({inner})" if k == "timing" and inner else "")
             for k, v in seconds.items() if not k.startswith("timing: ")]
    return f"kwb run took {sum(v for k, v in seconds.items() if not k.startswith('timing: ')):.0f} s: {', '.join(outer)}"
