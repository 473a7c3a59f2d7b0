#!/usr/bin/env python
"""compute-sanitizer over every kernel's check cases: memcheck on every kernel, racecheck on
every kernel whose CUDA source uses shared memory. Needs a GPU and compute-sanitizer.

    python benchmarks/sanitize.py [NAMES ...] [--out DIR] [--jobs 4] [--timeout 300]
    python benchmarks/sanitize.py linear_gelu --shapes 4096x64x4096 --dtypes bfloat16 --tools memcheck
        # chosen shapes in place of the check's small ones: a path only large shapes take (the
        # CUTLASS product needs 2^24 outputs)

Each run is one child process, `compute-sanitizer --tool T python -c <wb.check(...)>`, over the
kernel's own check shapes, forward and backward, in float32 and bfloat16, kept to the small
ones (racecheck instruments every shared-memory access: linear_gelu's check at 32x768x3072
did not finish in 170 s). PyTorch's caching allocator is off in the child, so an access past a
tensor's end lands outside any allocation and memcheck sees it. Writes DIR/sanitize.json and
DIR/sanitize.md; exits 1 on any error, hazard, failed check or unfinished run.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, dataclass, field
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
DTYPES = ("float32", "bfloat16")
# The largest shape checked, as the product of its sizes (for linear_gelu m*k*n, the work),
# and how many shapes at most: every awkward size and the multi-block rows stay in.
LIMITS = {"memcheck": (1 << 17, 12), "racecheck": (1 << 16, 6)}

CHILD = """
import json, sys
import workbench as wb
name, dtypes, shapes = sys.argv[1], sys.argv[2].split(","), json.loads(sys.argv[3])
r = wb.check(name, device="cuda", dtypes=dtypes, shapes=[tuple(s) for s in shapes], seed=0)
print("KWB_SANITIZE", json.dumps({"passed": r.passed, "cases": len(r.cases)}), flush=True)
sys.exit(0 if r.passed else 3)
"""


@dataclass
class Run:
    kernel: str
    tool: str
    dtypes: list
    shapes: list
    seconds: float = 0.0
    errors: int | None = None   # memcheck's "ERROR SUMMARY: N errors"
    hazards: int | None = None  # racecheck's "RACECHECK SUMMARY: N hazards"
    cases: int | None = None
    check_passed: bool | None = None
    finished: bool = False
    rc: int | None = None
    tail: str = field(default="", repr=False)


def uses_shared_memory(folder: Path) -> bool:
    """The kernel's CUDA sources, or the kernels/common headers they include, declare __shared__."""
    text = "".join(p.read_text(errors="replace") for p in folder.glob("*.cu*"))
    headers = set(re.findall(r'#include\s+"([^"]+)"', text))
    common = REPO / "kernels" / "common"
    text += "".join((common / h).read_text(errors="replace") for h in headers if (common / h).is_file())
    return "__shared__" in text


def small_shapes(spec, tool: str) -> list[tuple]:
    """The two smallest shapes (empty, one element) and the largest that fit the tool's limit
    (multi-block rows, the long-row paths)."""
    limit, most = LIMITS[tool]
    sized = [s for s in sorted({tuple(s) for s in spec.shapes}, key=lambda s: (_product(s), s)) if _product(s) <= limit]
    return sized if len(sized) <= most else sized[:2] + sized[len(sized) - (most - 2):]


def _product(shape) -> int:
    n = 1
    for s in shape:
        n *= max(int(s), 1)
    return n


def plan(names: list[str], shapes: list[list[int]] | None = None, dtypes: tuple[str, ...] = DTYPES,
         tools: tuple[str, ...] = ("memcheck", "racecheck")) -> list[Run]:
    """A run per kernel and tool: memcheck, and racecheck where the source uses shared memory
    (of `tools`), over `shapes` where given, else the check's small ones (small_shapes)."""
    import workbench as wb
    from workbench.jit.sources import resolve

    runs = []
    for name in names:
        kernel = wb.load(name, device="cuda")  # built here once; the children load it from the cache
        spec = kernel.spec.SPEC
        kept = [d for d in dtypes if any(str(t).removeprefix("torch.") == d for t in spec.dtypes.get("cuda", ()))]
        wanted = ["memcheck"] + (["racecheck"] if uses_shared_memory(resolve(name).folder) else [])
        runs += [Run(name, tool, kept, shapes or [list(s) for s in small_shapes(spec, tool)])
                 for tool in wanted if tool in tools]
    return runs


def execute(run: Run, sanitizer: str, timeout: float) -> Run:
    cmd = [sanitizer, "--tool", run.tool, "--print-limit", "20", "--error-exitcode", "9"]
    if run.tool == "racecheck":
        cmd += ["--racecheck-report", "hazard"]
    cmd += [sys.executable, "-c", CHILD, run.kernel, ",".join(run.dtypes), json.dumps(run.shapes)]
    env = {**os.environ, "PYTORCH_NO_CUDA_MEMORY_CACHING": "1"}
    start = time.perf_counter()
    try:
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout, env=env, cwd=REPO, check=False)
    except subprocess.TimeoutExpired as e:
        run.seconds = time.perf_counter() - start
        run.tail = ((e.stdout or b"").decode(errors="replace") if isinstance(e.stdout, bytes) else (e.stdout or ""))[-2000:]
        return run
    run.seconds = time.perf_counter() - start
    text = done.stdout + done.stderr
    run.rc, run.finished, run.tail = done.returncode, True, text[-3000:]
    if m := re.search(r"ERROR SUMMARY: (\d+) error", text):
        run.errors = int(m.group(1))
    if m := re.search(r"RACECHECK SUMMARY: (\d+) hazard", text):
        run.hazards = int(m.group(1))
    elif run.tool == "racecheck" and run.errors is not None:
        run.hazards = run.errors
    if m := re.search(r"KWB_SANITIZE (\{.*\})", text):
        got = json.loads(m.group(1))
        run.cases, run.check_passed = got["cases"], got["passed"]
    return run


def bad(run: Run) -> bool:
    return not run.finished or bool(run.errors) or bool(run.hazards) or run.check_passed is not True or run.rc not in (0, None)


def markdown(runs: list[Run], header: str) -> str:
    lines = [header, "", "| kernel | tool | dtypes | shapes | cases | errors | hazards | check | seconds |",
             "|---|---|---|---|---:|---:|---:|---|---:|"]
    for r in runs:
        lines.append(f"| {r.kernel} | {r.tool} | {', '.join(r.dtypes)} | {len(r.shapes)} (largest {r.shapes[-1] if r.shapes else '-'}) "
                     f"| {r.cases if r.cases is not None else '-'} | {_n(r.errors)} | {_n(r.hazards) if r.tool == 'racecheck' else '-'} "
                     f"| {'passed' if r.check_passed else ('did not finish' if not r.finished else 'FAILED')} | {r.seconds:.0f} |")
    return "\n".join(lines) + "\n"


def _n(value) -> str:
    return "-" if value is None else str(value)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="kernels (default: every shipped one)")
    ap.add_argument("--out", type=Path, default=Path("."), help="folder for sanitize.json and sanitize.md")
    ap.add_argument("--jobs", type=int, default=4, help="sanitizer runs at once (default 4)")
    ap.add_argument("--timeout", type=float, default=300, help="seconds one run may take (default 300)")
    ap.add_argument("--shapes", help="these shapes (AxB or AxBxC, comma-separated) in place of the check's small ones")
    ap.add_argument("--dtypes", default=",".join(DTYPES), help=f"of {', '.join(DTYPES)} (default: both)")
    ap.add_argument("--tools", default="memcheck,racecheck", help="memcheck, racecheck (default: both)")
    args = ap.parse_args(argv)
    try:
        shapes = [[int(v) for v in s.split("x")] for s in args.shapes.split(",")] if args.shapes else None
    except ValueError:
        ap.error(f"--shapes: sizes joined by x, shapes by commas (4096x64x4096,7x33), got {args.shapes!r}")
    dtypes = tuple(d for d in args.dtypes.split(",") if d)
    tools = tuple(t for t in args.tools.split(",") if t)
    if not set(dtypes) <= set(DTYPES) or not dtypes:
        ap.error(f"--dtypes: of {', '.join(DTYPES)}, got {args.dtypes!r}")
    if not set(tools) <= {"memcheck", "racecheck"} or not tools:
        ap.error(f"--tools: of memcheck, racecheck, got {args.tools!r}")
    sanitizer = shutil.which("compute-sanitizer") or next(
        (p for p in ("/usr/local/cuda/bin/compute-sanitizer", "/usr/local/cuda/compute-sanitizer/compute-sanitizer")
         if os.path.exists(p)), None)
    if sanitizer is None:
        print("sanitize.py: compute-sanitizer is not on PATH nor under /usr/local/cuda", file=sys.stderr)
        return 2
    import torch

    if not torch.cuda.is_available():
        print("sanitize.py: needs a GPU (torch.cuda.is_available() is False)", file=sys.stderr)
        return 2
    from workbench.harness import results
    from workbench.jit.sources import builtin_names

    names = args.names or builtin_names()
    runs = plan(names, shapes, dtypes, tools)
    print(f"{len(runs)} sanitizer runs over {len(names)} kernels, {args.jobs} at once", flush=True)
    with ThreadPoolExecutor(args.jobs) as pool:
        for r in pool.map(lambda run: execute(run, sanitizer, args.timeout), runs):
            verdict = "BAD" if bad(r) else "ok"
            print(f"{verdict:3}  {r.kernel:22} {r.tool:9} errors {_n(r.errors):>3}  hazards {_n(r.hazards):>3}  "
                  f"cases {_n(r.cases):>3}  {r.seconds:5.0f} s", flush=True)
            if verdict == "BAD":
                print(r.tail, flush=True)
    env = results.environment("cuda")
    summary = {"device": env.title(), "date": time.strftime("%Y-%m-%d"), "commit": os.environ.get("KWB_GIT_DESCRIBE", ""),
               "errors": sum(r.errors or 0 for r in runs), "hazards": sum(r.hazards or 0 for r in runs),
               "unfinished": sum(not r.finished for r in runs), "failed_checks": sum(r.check_passed is False for r in runs),
               "runs": [asdict(r) for r in runs]}
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "sanitize.json").write_text(json.dumps(summary, indent=1) + "\n")
    header = (f"# compute-sanitizer over every kernel's check cases\n\n{env.title()}; kwb "
              f"{summary['commit'] or 'unknown'}. `python benchmarks/sanitize.py`: memcheck on every kernel, racecheck "
              f"where the CUDA source uses shared memory; forward and backward, {' and '.join(dtypes)}"
              f"{'; shapes ' + args.shapes if args.shapes else ''}.\n\n"
              f"Total: {summary['errors']} memcheck errors, {summary['hazards']} racecheck hazards, "
              f"{summary['unfinished']} runs unfinished, {summary['failed_checks']} checks failed.")
    (args.out / "sanitize.md").write_text(markdown(runs, header))
    print(f"errors {summary['errors']}, hazards {summary['hazards']}, unfinished {summary['unfinished']}, "
          f"failed checks {summary['failed_checks']}", flush=True)
    return 1 if any(bad(r) for r in runs) else 0


if __name__ == "__main__":
    sys.exit(main())
