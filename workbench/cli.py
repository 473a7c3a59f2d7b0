"""The `kwb` command: build, check, time and diagnose kernels from the shell.

Exit codes: 0 success, 1 a build or check failed, 2 bad usage (click's convention).
"""
from __future__ import annotations

import os
import shlex
import sys
import time
from pathlib import Path

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

# In a log (no terminal), rich would wrap tables at 80 columns; 160 keeps a row on a line.
out = Console(highlight=False, width=None if sys.stdout.isatty() else 160)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 160)

DEVICES = click.Choice(["cpu", "cuda"])

from kwb_store.resources import functions_of


def _print_version(ctx: click.Context, _param, value: bool) -> None:
    """`kwb --version`: the version every report and CSV row records (0.1.0+<git describe>)."""
    if not value or ctx.resilient_parsing:
        return
    from .harness.results import kwb_version

    click.echo(f"kwb {kwb_version()}")
    ctx.exit()


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.option("--version", is_flag=True, expose_value=False, is_eager=True, callback=_print_version,
              help="Show the version (as reports record it) and exit.")
def main() -> None:
    """kwb: build, load and inspect JIT-compiled CUDA/C++ kernels for PyTorch.

    Builds are cached under TORCH_EXTENSIONS_DIR (else ~/.cache/torch_extensions/<py>_<cu>)
    and rebuilt only when a source, an included header, a flag or the toolchain changes.
    """


def _state(source, device: str) -> str:
    from .jit import builder
    from .jit.build_spec import build_spec
    from .jit.errors import KwbError

    try:
        spec = build_spec(source, device)
        config = builder.make_config(spec)
    except KwbError as e:
        return f"cannot build: {e}"
    if builder.find_cached(spec, config) is not None:
        return "built"
    return "stale" if builder.latest_manifest(source, spec.device, spec.root) else "not built"


def _check_names(names, hint: str = "NAMES") -> None:
    """A usage error (exit 2), before any work, for a name that is neither a shipped kernel nor
    a folder path, with the closest shipped name."""
    from .jit import sources

    for name in names:
        why = sources.unknown_name_error(name)
        if why is not None:
            raise click.BadParameter(why, param_hint=hint)


def _default_device() -> str:
    from .jit import device as devices

    return devices.choose(None)


@main.command("list")
@click.argument("folders", nargs=-1)
@click.option("--device", type=DEVICES, default=None, help="Build state for this device (default: cuda with a GPU, else cpu).")
def list_cmd(folders: tuple[str, ...], device: str | None) -> None:
    """List the shipped kernels (or the kernel and extension FOLDERS given), their kind, ops
    and build state (built / stale / not built).

    'stale' means a build exists but its sources, headers, flags or toolchain changed since."""
    from .jit import sources
    from .jit.errors import KernelNotFoundError

    _check_names(folders, "FOLDERS")
    device = device or _default_device()
    where = "the folders given" if folders else f"kernels in {sources.kernels_dir()}"
    table = Table(title=f"{where} (state for {device})", title_justify="left")
    for col in ("kernel", "kind", "ops", "state"):
        table.add_column(col)
    for name in folders or sources.builtin_names():
        try:
            src = sources.resolve(name)
        except KernelNotFoundError as e:
            raise click.UsageError(str(e)) from None
        state = _state(src, device)
        color = {"built": "green", "stale": "yellow"}.get(state, "dim")
        table.add_row(name, src.binding, ", ".join(src.op_names()), f"[{color}]{state}[/]")
    out.print(table)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Build every shipped kernel.")
@click.option("--device", type=DEVICES, default=None, help="cuda (CPU code included) or cpu; default: cuda with a GPU and nvcc, else cpu.")
@click.option("--force", is_flag=True, help="Rebuild even if a cached build matches.")
@click.option("-v", "--verbose", is_flag=True, help="Show the compiler commands.")
def build(names: tuple[str, ...], all_: bool, device: str | None, force: bool, verbose: bool) -> None:
    """Build kernels or extensions by name or folder path (NAMES: a kwb kernel, a pybind or
    TORCH_LIBRARY extension, a setup.py project), or --all shipped kernels. Several build side
    by side, sized to the machine's cores and memory (MAX_JOBS caps the compilers at once)."""
    from .jit import sources
    from .jit.parallel import load_all

    if all_ and names:
        raise click.UsageError("give kernel names or --all, not both")
    _check_names(names)
    if not all_ and not names:
        raise click.UsageError(f"name the kernels to build, or pass --all (kernels: {', '.join(sources.builtin_names())})")
    targets = sources.builtin_names() if all_ else list(names)
    failed = []

    def report(loaded) -> None:
        if not loaded.ok:
            err.print(f"[red]✗[/] {escape(loaded.name)}: {escape(str(loaded.error))}", soft_wrap=True)
            failed.append(loaded.name)
            return
        k = loaded.kernel
        how = f"built in {k.build.manifest.build_seconds:.1f} s" if k.build.compiled else "cached"
        out.print(f"[green]✓[/] {loaded.name} ({k.device}): {how}; ops: {', '.join(k.ops)}")
        functions = functions_of(k.build.manifest.resources)
        if verbose and functions:
            from cache_tools.commands import resource_table

            out.print(resource_table(functions, indent=2))

    start = time.monotonic()
    try:
        load_all(targets, device=device, verbose=verbose, force=force, on_done=report)
    except ValueError as e:  # MAX_JOBS that is not a number
        raise click.UsageError(str(e)) from None
    if len(targets) > 1:
        err.print(f"{len(targets) - len(failed)} of {len(targets)} loaded in {time.monotonic() - start:.1f} s")
    if failed:
        err.print(f"{len(failed)} of {len(targets)} failed: {', '.join(failed)}")
        sys.exit(1)


def _parse_dim(text: str) -> int:
    text = text.strip()
    if "^" in text:
        base, exp = text.split("^", 1)
        return int(base) ** int(exp)
    return int(text)


def parse_sizes(values: tuple[str, ...]) -> list[tuple[int, ...]] | None:
    """'2^20,2^24' and '4096x4096' (commas or repeats) -> [(1048576,), (16777216,), (4096, 4096)]."""
    sizes = []
    for value in values:
        for item in value.replace(" ", ",").split(","):
            if not item:
                continue
            try:
                dims = tuple(_parse_dim(d) for d in item.lower().split("x"))
            except ValueError:
                raise click.BadParameter(f"{item!r} is not a size: use numbers, 2^k, and AxB for shapes (e.g. 2^20,4096x4096)",
                                         param_hint="--sizes") from None
            if any(d < 0 for d in dims):
                raise click.BadParameter(f"{item!r} has a negative dimension", param_hint="--sizes")
            sizes.append(dims)
    return sizes or None


def parse_dtypes(values: tuple[str, ...]) -> list | None:
    from .harness.cases import parse_dtype

    names = [n for v in values for n in v.replace(" ", ",").split(",") if n]
    try:
        return [parse_dtype(n) for n in names] or None
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--dtype") from None


def _run_device(device: str | None) -> str | None:
    """--device as given for commands that run kernels; 'cuda' without a visible GPU is a usage error."""
    from .jit import device as devices

    if device is not None:
        try:
            devices.choose(device, purpose="run")
        except devices.NoGpuError:
            raise click.UsageError("--device cuda: no GPU is visible, so CUDA kernels cannot run here (leave --device out for the CPU)") from None
    return device


def _targets(names: tuple[str, ...]) -> list[str]:
    from .jit import sources

    return list(names) or sources.builtin_names()


def _for_each_kernel(names: tuple[str, ...], work) -> None:
    """work(name) -> passed, for each named (or every shipped) kernel; a ValueError is a usage
    error (exit 2), a KwbError that kernel's failure; exit 1 if any failed."""
    from .jit.errors import KwbError

    failed = False
    for name in _targets(names):
        try:
            failed = not work(name) or failed
        except ValueError as e:
            raise click.UsageError(str(e)) from None
        except KwbError as e:
            err.print(f"[red]✗[/] {escape(name)}: {escape(str(e))}", soft_wrap=True)
            failed = True
    if failed:
        sys.exit(1)


def _timing_options(f):
    """--sizes, --sweep, --baselines, --backward and --in-turns, shared by `kwb bench` and `kwb run`."""
    f = click.option("--in-turns/--one-after-another", default=None,
                     help="Time kwb, eager and torch.compile in turns, a few samples of each a round, so drift (a "
                          "GPU's clocks under load, other processes) lands on all alike [default: in turns]; "
                          "--one-after-another times each provider's samples together.")(f)
    f = click.option("--baselines", default="eager,compile,vendor", show_default=True,
                     help="Baselines to time beside kwb: eager, compile, vendor (where the spec has one), or none.")(f)
    f = click.option("--sweep", is_flag=True, help="Time the spec's longer sweep of sizes.")(f)
    f = click.option("--backward/--no-backward", default=True, show_default=True,
                     help="Also time forward + backward (a training step) of ops with gradients.")(f)
    return click.option("--sizes", multiple=True, metavar="LIST",
                        help="Sizes to time, e.g. 2^20,2^26 or 4096x4096 (default: the spec's).")(f)


def _timing_args(sizes, sweep: bool, baselines: str):
    """The parsed --sizes and --baselines, or a usage error naming the option."""
    from .harness.benchmark import parse_baselines

    size_list = parse_sizes(sizes)
    if sweep and size_list:
        raise click.UsageError("give --sizes or --sweep, not both")
    try:
        return size_list, parse_baselines(baselines)
    except ValueError as e:
        raise click.BadParameter(str(e), param_hint="--baselines") from None


_dtype_option = click.option("--dtype", "dtypes", multiple=True, metavar="LIST",
                             help="Only these dtypes, e.g. float32,bf16 (default: every dtype the kernel supports on the device).")
_device_option = click.option("--device", type=DEVICES, default=None, help="cpu or cuda (default: cuda with a GPU, else cpu).")


@main.command()
@click.argument("names", nargs=-1)
@_device_option
@_dtype_option
@click.option("--seed", type=int, default=None, help="Seed of the random inputs (printed by every check, to repeat a failure).")
@click.option("--no-backward", is_flag=True, help="Check forward outputs only, not gradients.")
@click.option("-v", "--verbose", is_flag=True, help="A row per shape, not per op and dtype.")
def check(names, device, dtypes, seed, no_backward, verbose) -> None:
    """Check kernels (default: every shipped one) against their spec.py references.

    Every op, dtype and awkward shape (empty, 1, 37, 199, 760, 1128, ...), fresh random inputs
    with the seed printed, outputs poisoned with NaN so an unwritten element fails, gradients
    against autograd of the reference. Exit code 1 if any case fails."""
    from .harness import correctness as checking
    from .report.render import print_check

    _check_names(names)
    device, dtype_list = _run_device(device), parse_dtypes(dtypes)

    def check_one(name: str) -> bool:
        report = checking.check(name, device=device, dtypes=dtype_list, seed=seed, backward=not no_backward)
        print_check(out, report, verbose)
        return report.passed

    _for_each_kernel(names, check_one)


@main.command()
@click.argument("names", nargs=-1)
@_device_option
@_dtype_option
@_timing_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=None,
              help="Append the rows to OUT/<device>/bench.csv (e.g. --out benchmarks/results).")
@click.option("--no-graphs", is_flag=True, help="Skip CUDA-graph timings of sizes under ~10 us.")
@click.option("--no-launches", is_flag=True, help="Skip profiling one call of each kwb row on a GPU (its kernel, block, registers, occupancy columns).")
def bench(names, device, dtypes, sizes, sweep, baselines, backward, in_turns, out_dir: Path | None, no_graphs,
          no_launches) -> None:
    """Time kernels (default: every shipped one) beside eager PyTorch and torch.compile.

    CUDA events with the L2 flushed before each sample (perf_counter on the CPU), median with
    p20/p80, GB/s from the spec's bytes model as a share of the copy ceiling measured in this
    run, and the speedup over each baseline. Each provider is validated before it is timed."""
    from .harness import benchmark as benching
    from .harness.cases import kernel_and_device
    from .report.render import bench_header, bench_table, counted

    _check_names(names)
    device, dtype_list = _run_device(device), parse_dtypes(dtypes)
    size_list, chosen = _timing_args(sizes, sweep, baselines)
    sessions: dict = {}  # one timer and copy ceiling per device, measured once

    def bench_one(name: str) -> bool:
        kernel, dev = kernel_and_device(name, device)
        if dev not in sessions:
            sessions[dev] = benching.new_session(dev, in_turns=in_turns)
        report = benching.bench(kernel, device=dev, dtypes=dtype_list, sizes=size_list, sweep=sweep, baselines=chosen,
                                graphs=not no_graphs, session=sessions[dev], backward=backward, launches=not no_launches)
        out.print(bench_table(report.rows, title=f"{name}: {bench_header(report.env, report.ceiling / 1e9)}"))
        for note in report.notes:
            out.print(f"note: {escape(note)}", soft_wrap=True)
        if out_dir is not None:
            out.print(f"appended {counted(len(report.rows), 'row')} to {report.save(out_dir)}")
        return not report.failures

    _for_each_kernel(names, bench_one)


@main.command()
@click.argument("names", nargs=-1)
@_device_option
@_dtype_option
@_timing_options
@click.option("--out", "out_dir", type=click.Path(file_okay=False, path_type=Path), default=Path("kwb-report"), show_default=True,
              help="Results root: the report goes to OUT/<device>/ (index.md, CSVs, plots, build.log).")
@click.option("--seed", type=int, default=None, help="Seed of the random inputs.")
@click.option("--full", is_flag=True, help="Time every dtype at each of the spec's bench sizes (add --sweep for its "
                                           "longer list); default: one size and dtype per kernel.")
def run(names, device, dtypes, sizes, sweep, baselines, backward, in_turns, out_dir: Path, seed, full) -> None:
    """The main job: build every kernel (or NAMES), check each, time each against eager
    PyTorch and torch.compile, and write a report folder with tables, plots and CSVs. Timing
    covers one representative size and dtype per kernel (bfloat16 on a GPU, float32 on the
    CPU); --full times every dtype at every default size.

    With no GPU, all of it runs on the CPU (and the report says so). Exit code 1 if a build or
    a check fails."""
    from .jit.errors import KwbError
    from .runner import run as run_all

    _check_names(names)
    dtype_list = parse_dtypes(dtypes)
    size_list, chosen = _timing_args(sizes, sweep, baselines)
    try:
        result = run_all(names, device=_run_device(device), out=out_dir, dtypes=dtype_list, sizes=size_list, sweep=sweep,
                         baselines=chosen, backward=backward, seed=seed, full=full, in_turns=in_turns, console=err, command=" ".join(["kwb", *map(shlex.quote, sys.argv[1:])]))
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    except KwbError as e:
        err.print(f"[red]kwb run: {escape(str(e))}[/]", soft_wrap=True)
        sys.exit(1)
    err.print(f"report: {result.index}")
    for f in result.failures:
        err.print(f"[red]✗[/] {escape(f)}", soft_wrap=True)
    _leave(1 if result.failures else 0)


def _leave(code: int) -> None:
    """Exit without tearing torch down once the report is written and closed: CUDA's and torch's
    teardown took 2.3-2.6 s after `kwb run`'s closing line on the H100, time its account cannot
    hold and no one waits for. Only as the kwb program itself (not inside a caller's process)."""
    if Path(sys.argv[0]).name not in ("kwb", "cli.py"):
        sys.exit(code)
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


@main.command()
def doctor() -> None:
    """Check Python, torch, the C++ compiler, nvcc (and its CUDA version against torch's),
    ninja, the GPU, and the cache folder; each line says ok, warn or fail, with the fix."""
    from .doctor import run_checks

    checks = run_checks()
    marks = {"ok": "[green]ok  [/]", "warn": "[yellow]warn[/]", "fail": "[red]fail[/]"}
    width = max(len(c.name) for c in checks)
    for c in checks:
        out.print(f"{marks[c.status]}  {c.name:<{width}}  {c.detail}", soft_wrap=True)
        if c.fix:
            out.print(f"      {'':<{width}}  fix: {c.fix}", soft_wrap=True)
    if any(c.status == "fail" for c in checks):
        sys.exit(1)


# `kwb cache ...` lives in cache_tools (no torch import: it answers in well under a second)
import cache_tools.commands as _cache_cli


def _shipped_names() -> list[str]:
    from .jit.sources import builtin_names

    return builtin_names()


_cache_cli.shipped_names = _shipped_names
main.add_command(_cache_cli.cache)


if __name__ == "__main__":
    main()
