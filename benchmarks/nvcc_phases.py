"""Where the seconds of a kwb `.cu` edit go: each phase nvcc runs (host and device preprocessing,
cudafe++, cicc, ptxas, fatbinary, the host compile), the link, and the load, timed one by one.

    python benchmarks/nvcc_phases.py [--kernel relu_scale] [--repeat 3] [--out DIR]

A copy of the kernel is built with kwb for CUDA (sm_90 without a GPU, the visible GPU's with
one) in a temporary cache; the .cu's compile command is taken from the build's ninja file
(`ninja -t commands`), `nvcc --dryrun --keep` lists the programs it runs, and each is run and
timed in order (the median of --repeat), then the whole nvcc command, the link, and a load of
the built kernel in a fresh process (after `import torch`). Without a GPU everything still
compiles, links and loads; nothing runs.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]

# What each program nvcc runs does, by its name and arguments
PHASES = [
    ("cicc", "cicc: device C++ -> PTX (NVVM)"),
    ("ptxas", "ptxas: PTX -> SASS (cubin)"),
    ("fatbinary", "fatbinary: cubins -> fat binary"),
    ("cudafe++", "cudafe++: split host and device code"),
    ("nvlink", "nvlink: device link"),
]


def _what(argv: list[str]) -> str:
    prog = os.path.basename(argv[0])
    for name, label in PHASES:
        if prog == name:
            return label
    if "-E" in argv:
        return "host compiler -E: preprocess for the " + ("device" if any(a.startswith("-D__CUDA_ARCH__=") for a in argv)
                                                          else "host")
    if "-c" in argv:
        return "host compiler -c: the host side (launchers, stubs)"
    return prog


def _timed(command: str, env: dict, cwd: Path) -> float:
    t0 = time.perf_counter()
    done = subprocess.run(["bash", "-c", command], env=env, cwd=cwd, capture_output=True, text=True, check=False)
    seconds = time.perf_counter() - t0
    if done.returncode != 0:
        raise SystemExit(f"nvcc_phases: failed ({done.returncode}): {command}\n{done.stderr[-3000:]}")
    return seconds


def dryrun(nvcc_command: str, keep: Path, cwd: Path) -> tuple[list[str], list[str]]:
    """(the variables nvcc sets, as shell `export` lines; the commands it runs) for nvcc_command.
    nvcc's own pseudo-steps ('-- Filter Dependencies --') and clean-ups (rm) are left out."""
    out = subprocess.run(f"{nvcc_command} --dryrun --keep --keep-dir {shlex.quote(str(keep))}", shell=True, cwd=cwd,
                         capture_output=True, text=True, check=False)
    exports, commands = [], []
    for line in out.stderr.splitlines():
        if not line.startswith("#$ "):
            continue
        body = line[3:].strip()
        if re.match(r"^\w+=", body):
            exports.append(f"export {body}")
        elif not body.startswith(("--", "rm ")):
            commands.append(body)
    return exports, commands


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--kernel", default="relu_scale", help="a kernel under kernels/ (default relu_scale)")
    ap.add_argument("--repeat", type=int, default=3, help="runs of each phase; the median is reported (default 3)")
    ap.add_argument("--out", type=Path, help="write nvcc_phases.md and .json here")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error("--repeat must be at least 1")
    source = REPO / "kernels" / args.kernel
    if not (source / f"{args.kernel}.cu").exists():
        ap.error(f"--kernel: no kernels/{args.kernel}/{args.kernel}.cu")

    import torch

    from workbench.jit import toolchain

    reason = toolchain.cuda_unavailable_reason()
    if reason:
        print(f"nvcc_phases: needs nvcc and a CUDA build of torch: {reason}", file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    with tempfile.TemporaryDirectory(prefix="kwb-nvcc-phases-") as tmp:
        work = Path(tmp)
        folder = work / args.kernel
        shutil.copytree(source, folder)
        env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(work / "cache"))
        env.setdefault("KWB_CUDA_ARCH", "{}.{}".format(*torch.cuda.get_device_capability()) if gpu else "9.0")
        load = f"import time, torch; t=time.perf_counter(); import workbench as wb; wb.load({str(folder)!r}, device='cuda'); print(time.perf_counter()-t)"
        first = subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True, check=False)
        if first.returncode != 0:
            raise SystemExit(f"nvcc_phases: the build failed:\n{first.stderr[-3000:]}")
        build_dir = next((work / "cache").glob("kwb_*/build-cuda"))
        ninja = toolchain.ninja_path()
        commands = subprocess.run([ninja, "-t", "commands"], cwd=build_dir, capture_output=True, text=True,
                                  check=True).stdout.splitlines()
        nvcc_command = next(c for c in commands if f"{args.kernel}.cu " in c + " " and "nvcc" in c.split()[0])
        link_command = commands[-1]
        keep = work / "keep"
        keep.mkdir()
        exports, steps = dryrun(nvcc_command, keep, build_dir)
        prelude = "".join(f"{e}; " for e in exports)
        rows = []
        for step in steps:
            argv = shlex.split(step)
            seconds = statistics.median(_timed(f"{prelude}{step}", dict(os.environ), build_dir) for _ in range(args.repeat))
            rows.append({"phase": _what(argv), "seconds": round(seconds, 3), "program": os.path.basename(argv[0])})
        whole = statistics.median(_timed(nvcc_command, dict(os.environ), build_dir) for _ in range(args.repeat))
        link = statistics.median(_timed(link_command, dict(os.environ), build_dir) for _ in range(args.repeat))
        loads = [float(subprocess.run([sys.executable, "-c", load], env=env, capture_output=True, text=True,
                                      check=True).stdout.strip().splitlines()[-1]) for _ in range(args.repeat)]
    report = {"kernel": args.kernel, "device": torch.cuda.get_device_name() if gpu else f"no GPU ({os.cpu_count()} cores)",
              "torch": torch.__version__, "nvcc_command": nvcc_command, "phases": rows, "nvcc_total": round(whole, 3),
              "link": round(link, 3), "warm_load": round(statistics.median(loads), 3), "date": str(date.today()),
              "python": platform.python_version(), "repeat": args.repeat}
    lines = [f"# Where a `.cu` edit's seconds go: kernels/{args.kernel}/{args.kernel}.cu", "",
             (f"{report['device']}, torch {report['torch']}, {toolchain.nvcc_cuda_version(subprocess.run([toolchain.nvcc_path(), '--version'], capture_output=True, text=True, check=False).stdout) or 'nvcc'}; "
              f"{report['date']}; median of {args.repeat}; `python benchmarks/nvcc_phases.py --kernel {args.kernel}`"), "",
             "| phase | seconds |", "|---|---:|"]
    lines += [f"| {r['phase']} | {r['seconds']:.3f} |" for r in rows]
    lines += [f"| **the phases together** | **{sum(r['seconds'] for r in rows):.3f}** |",
              f"| nvcc, the whole command | {whole:.3f} |", f"| link (c++ -shared) | {link:.3f} |",
              f"| load in a fresh process (after import torch) | {report['warm_load']:.3f} |", "",
              f"nvcc command: `{nvcc_command}`"]
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "nvcc_phases.md").write_text(text)
        (args.out / "nvcc_phases.json").write_text(json.dumps(report, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
