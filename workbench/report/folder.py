"""The report folder `kwb run` leaves behind, written from the CSVs of the run:

    <out>/<device slug>/
      index.md            the page to read: machine, verdicts, speed tables, plots, checks
      bench.csv           timings (appended run after run; this run's rows share one run_id)
      check.csv           every compared output       check_errors.csv   their error histograms
      build.log           this run's builds: compiler output, or where the cached build came from
      plots/*.png, *.svg  latency per kernel, % of the copy ceiling, speedup, check errors
      runs/<run id>/      each finished run's index.md, build.log and plots/, kept
      latest              a link to the newest of them

A run draws its plots into its own runs/<run id>/plots/; index.md, build.log, plots/ and
`latest` are replaced only by a run that finished (write_report, at its end): a run stopped by
bad usage, an error or Ctrl-C leaves the last complete report as it was.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from kwb_store.fsutil import atomic_write_text

from ..harness import results
from . import plots
from .render import (
    bench_markdown,
    check_markdown,
    counted,
    headline_markdown,
    standings_markdown,
)


@dataclass
class BuildRecord:
    name: str
    device: str
    ok: bool
    compiled: bool = False
    seconds: float = 0.0
    library: str = ""
    log_path: str = ""
    error: str = ""


def build_log_text(builds: list[BuildRecord]) -> str:
    parts = []
    for b in builds:
        head = f"==== {b.name} ({b.device}): "
        if not b.ok:
            parts.append(head + f"FAILED\n{b.error}\n")
            continue
        if not b.compiled:
            parts.append(head + f"cached, not rebuilt: {b.library}\n")
            continue
        try:
            text = Path(b.log_path).read_text(errors="replace")
        except OSError:
            text = f"(the log {b.log_path} could not be read)"
        parts.append(head + f"built in {b.seconds:.1f} s: {b.library}\n{text}\n")
    return "\n".join(parts)


def run_folder(folder: Path, run_id: str) -> Path:
    return folder / "runs" / run_id


def write_report(folder: Path, run_id: str, build_log: str, index: str) -> Path:
    """A finished run's pages: runs/<run_id>/ (index.md, build.log beside the plots drawn there),
    then the folder's own build.log, plots/ and index.md, each file written whole under a
    temporary name and renamed into place, then `latest`. Returns index.md's path."""
    own = run_folder(folder, run_id)
    atomic_write_text(own / "build.log", build_log)
    atomic_write_text(own / "index.md", index)
    if (own / "plots").is_dir():
        (folder / "plots").mkdir(parents=True, exist_ok=True)
        for plot in (own / "plots").iterdir():
            tmp = folder / "plots" / f".{plot.name}.tmp"
            shutil.copyfile(plot, tmp)
            os.replace(tmp, folder / "plots" / plot.name)
    atomic_write_text(folder / "build.log", build_log)
    path = folder / "index.md"
    atomic_write_text(path, index)
    _point_latest(folder, own)
    return path


def _point_latest(folder: Path, own: Path) -> None:
    """folder/latest -> runs/<run id>, replaced in one rename (a relative link: the folder may move)."""
    tmp = folder / ".latest.tmp"
    if tmp.is_symlink() or tmp.exists():
        tmp.unlink()
    try:
        os.symlink(os.path.relpath(own, folder), tmp)
        os.replace(tmp, folder / "latest")
    except OSError:  # a file system without links: runs/ and index.md still say it
        pass


def index_text(env: results.Environment, command: str, notice: str, builds: list[BuildRecord], checks: list,
               bench_rows: list[dict], plot_paths: list[Path], ceiling_gbps: float | None, quiet: str = "",
               notes: list[str] = ()) -> str:
    lines = [f"# kwb run: {env.device_name}", ""]
    if notice:
        lines += [f"> **{notice}**", ""]
    if quiet:
        lines += [f"> {quiet}", ""]
    ceiling = f"; copy ceiling {ceiling_gbps:.0f} GB/s, measured in this run" if ceiling_gbps else ""
    lines += [f"torch {env.torch}, CUDA {env.cuda}, kwb {env.kwb_version}, {env.timestamp}{ceiling}.  ",
              f"Command: `{command}`; run id `{env.run_id}`.", ""]

    lines += ["## Summary", "", "| kernel | build | check | timed rows |", "|---|---|---|---|"]
    by_kernel = {c.target: c for c in checks}
    for b in builds:
        build = (f"built in {b.seconds:.1f} s" if b.compiled else "cached") if b.ok else "**FAILED**"
        c = by_kernel.get(b.name)
        check = "-" if c is None else (f"{counted(len(c.cases), 'case')} pass" if c.passed else f"**{len(c.failures)} of {len(c.cases)} FAIL**")
        timed = sum(1 for r in bench_rows if r["kernel"] == b.name and r.get("median_us") is not None)
        lines.append(f"| {b.name} | {build} | {check} | {timed} |")
    lines.append("")

    if bench_rows:
        lines += ["## Speed at each op's largest size", "",
                  ("Median time per call; % of the measured copy ceiling from the op's bytes model; "
                   "× = how many times faster kwb is than the baseline, with its 95% interval where there is one."), "",
                  headline_markdown(bench_rows)]
        standing = standings_markdown(bench_rows)
        if standing:
            lines += ["## Where kwb stands", "", standing]
    if plot_paths:
        lines += ["## Plots", ""]
        for p in plot_paths:
            if p.suffix == ".png":
                lines += [f"![{p.stem}](plots/{p.name})", ""]
    for b in builds:
        if not b.ok:
            lines += [f"## Build of {b.name} failed", "", "```", b.error, "```", ""]
    if checks:
        lines += ["## Correctness", "",
                  "Against the float64 reference, outputs poisoned with NaN before each run; errors are the worst over the shapes.", ""]
        for c in checks:
            lines += [check_markdown(c), ""]
    if bench_rows:
        lines += ["## Every timing", "", bench_markdown(bench_rows), ""]
    if notes:
        lines += ["Rows whose output passed only within a baseline's own error against the float64 reference:", ""]
        lines += [f"- {n}" for n in notes] + [""]
    lines += ["## Files", "", "- `bench.csv`, `check.csv`, `check_errors.csv`: every run appends; this run's rows carry its run id",
              "- `build.log`: this run's builds", "- `plots/`: PNG and SVG of each figure, redrawn with `workbench.plots.plot_results(folder)`",
              "- `runs/<run id>/`: each finished run's page, build log and plots, kept; `latest` links the newest", ""]
    return "\n".join(lines)


def write_plots(folder: Path, run_id: str) -> list[Path]:
    """The run's figures, drawn from what the run wrote to the CSVs."""
    def rows_of(name: str) -> list[dict]:
        path = folder / name
        return [r for r in results.read(path) if r["run_id"] == run_id] if path.exists() else []

    return plots.plot_all(rows_of("bench.csv"), rows_of("check_errors.csv"), run_folder(folder, run_id) / "plots")
