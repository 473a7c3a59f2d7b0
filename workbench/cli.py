"""The `kwb` command: list, build and diagnose kernels from the shell.

Exit codes: 0 success, 1 a build or check failed, 2 bad usage (click's convention).
"""
from __future__ import annotations

import sys

import click
from rich.console import Console
from rich.table import Table

out = Console(highlight=False)
err = Console(stderr=True, highlight=False)

DEVICES = click.Choice(["cpu", "cuda"])


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="kwb")
def main() -> None:
    """kwb: build, load and inspect JIT-compiled CUDA/C++ kernels for PyTorch.

    Builds are cached under TORCH_EXTENSIONS_DIR (else ~/.cache/torch_extensions/<py>_<cu>)
    and rebuilt only when a source, an included header, a flag or the toolchain changes.
    """


def _state(source, device: str) -> str:
    from . import builder, loader
    from .errors import KwbError

    root = loader.cache_root()
    try:
        config = builder.make_config(source, loader.resolve_device(device, source.name), root)
    except KwbError as e:
        return f"cannot build: {e}"
    if builder.find_cached(source, config, root) is not None:
        return "built"
    return "stale" if builder.latest_manifest(source, device, root) else "not built"


def _default_device() -> str:
    from .loader import resolve_device

    return resolve_device(None, "kernels")


@main.command("list")
@click.option("--device", type=DEVICES, default=None, help="Build state for this device (default: cuda with a GPU, else cpu).")
def list_cmd(device: str | None) -> None:
    """List the shipped kernels, their ops and build state (built / stale / not built).

    'stale' means a build exists but its sources, headers, flags or toolchain changed since."""
    from . import sources

    device = device or _default_device()
    table = Table(title=f"kernels in {sources.kernels_dir()} (state for {device})", title_justify="left")
    for col in ("kernel", "ops", "state"):
        table.add_column(col)
    for name in sources.builtin_names():
        src = sources.resolve(name)
        state = _state(src, device)
        color = {"built": "green", "stale": "yellow"}.get(state, "dim")
        table.add_row(name, ", ".join(src.op_names()), f"[{color}]{state}[/]")
    out.print(table)


@main.command()
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Build every shipped kernel.")
@click.option("--device", type=DEVICES, default=None, help="cuda (CPU code included) or cpu; default: cuda with a GPU and nvcc, else cpu.")
@click.option("--force", is_flag=True, help="Rebuild even if a cached build matches.")
@click.option("-v", "--verbose", is_flag=True, help="Show the compiler commands.")
def build(names: tuple[str, ...], all_: bool, device: str | None, force: bool, verbose: bool) -> None:
    """Build kernels by name or folder path (NAMES), or --all shipped kernels."""
    from . import sources
    from .errors import KwbError
    from .loader import load

    if all_ and names:
        raise click.UsageError("give kernel names or --all, not both")
    if not all_ and not names:
        raise click.UsageError(f"name the kernels to build, or pass --all (kernels: {', '.join(sources.builtin_names())})")
    targets = sources.builtin_names() if all_ else list(names)
    failed = []
    for name in targets:
        try:
            k = load(name, device=device, verbose=verbose, force=force)
        except KwbError as e:
            err.print(f"[red]✗[/] {name}: {e}", markup=True)
            failed.append(name)
            continue
        seconds = k.build.manifest.get("build_seconds", 0.0)
        how = f"built in {seconds:.1f} s" if k.build.compiled else "cached"
        out.print(f"[green]✓[/] {name} ({k.device}): {how}; ops: {', '.join(k.ops)}")
    if failed:
        err.print(f"{len(failed)} of {len(targets)} failed: {', '.join(failed)}")
        sys.exit(1)


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


if __name__ == "__main__":
    main()
