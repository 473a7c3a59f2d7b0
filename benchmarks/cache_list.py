"""How long `kwb cache list` takes on a cache of 1,000 entries (the bar: under a second).

    python benchmarks/cache_list.py [--entries 1000] [--out [DIR]]

--out writes cache_list.md to DIR; --out alone to benchmarks/results/<device>/<date>-<commit>/
(the harness's name for this machine's CPU, e.g. cpu-2core, and kwb's commit).

Builds a synthetic cache in a temporary folder: 600 kwb entries (two builds each, manifests
naming 50 shared source files and headers that exist, 4 KB libraries with an ELF header, a
lock file) and 400 torch.utils.cpp_extension entries (build.ninja naming a source, an object,
name.so and name_v1.so, a released lock). Then times, 5 runs each, median:
- api.open_cache() in this process (scan + every state: hashes of sources and headers, ELF
  checks, lock probes, one /proc scan);
- `kwb cache list --json` and `kwb cache list` as fresh processes (what a user waits for,
  interpreter start included).
"""
from __future__ import annotations

import argparse
import hashlib
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import date
from pathlib import Path

from cache_tools import api
from kwb_store import environment
from kwb_store.manifest import Manifest
from workbench.harness.results import kwb_version

ELF_STUB = b"\x7fELF\x02\x01\x01" + b"\0" * (4096 - 7)  # header fields 0: nothing announced past the end


def make_cache(root: Path, n: int) -> None:
    src = root.parent / "sources"
    src.mkdir()
    files = []
    for i in range(50):
        p = src / f"k{i}.cpp"
        p.write_text(f"// source {i}\n" + "int x;\n" * 200)
        files.append(p)
    digest = {str(p): hashlib.sha256(p.read_bytes()).hexdigest() for p in files}
    run = environment.running()
    tag = root / run.tag
    tag.mkdir(parents=True)
    n_kwb = n * 6 // 10
    for i in range(n_kwb):
        entry = tag / f"kwb_k{i}-{i:08x}"
        entry.mkdir()
        (entry / "lock").write_text("")
        (entry / "build-cpu").mkdir()
        (entry / "build-cpu" / "build.log").write_text("")
        for v in range(2):
            stem = f"k{i}.cpu.{i:012x}.{v:012x}"
            (entry / f"{stem}.so").write_bytes(ELF_STUB)
            s, h = files[i % 50], files[(i + 1) % 50]
            Manifest(name=f"k{i}", kind="kernel", ident=f"k{i}-{i:08x}", device="cpu", folder=str(src), base="0" * 64,
                     key="1" * 64, library=f"{stem}.so", library_size=len(ELF_STUB),
                     library_sha256=hashlib.sha256(ELF_STUB).hexdigest(), sources={str(s): digest[str(s)]},
                     headers={str(h): digest[str(h)]},
                     config={"device": "cpu", "cflags": ["-O3"], "cuda_cflags": [], "ldflags": [], "archs": [],
                             "versions": {"python": run.python, "torch": run.torch, "torch_git": run.torch_git,
                                          "torch_cuda": run.torch_cuda or "none"}},
                     compilers={"cxx": "/usr/bin/c++", "nvcc": None}, built_at=time.time() - v, build_seconds=1.0,
                     build_log=str(entry / "build-cpu" / "build.log")).write(entry / f"{stem}.json")
    inc = os.path.join(run.torch_dir or "/nonexistent/torch", "include")
    for i in range(n - n_kwb):
        entry = tag / f"ext{i}"
        entry.mkdir()
        source = files[i % 50]
        (entry / "build.ninja").write_text(
            f"ninja_required_version = 1.3\ncxx = c++\n\ncflags = -DTORCH_EXTENSION_NAME=ext{i}_v1 -isystem {inc} -fPIC\n"
            f"ldflags = -shared\n\nbuild {source.stem}.o: compile {source}\nbuild ext{i}_v1.so: link {source.stem}.o\n\n"
            f"default ext{i}_v1.so\n")
        (entry / f"{source.stem}.o").write_bytes(b"\0" * 2048)
        for name in (f"ext{i}.so", f"ext{i}_v1.so"):
            (entry / name).write_bytes(ELF_STUB)
        (entry / "lock").write_text("")


def timed(fn, repeat: int = 5) -> list[float]:
    out = []
    for _ in range(repeat):
        t = time.perf_counter()
        fn()
        out.append(time.perf_counter() - t)
    return out


RUN_FOLDER = object()  # --out given no folder


def run_folder() -> Path:
    """benchmarks/results/<device>/<date>-<commit>/, as gpu_run.sh names a run's folder: the
    harness's slug for this machine's CPU and kwb_version()'s commit (imports torch: only after the timings)."""
    from workbench.harness import results

    env = results.environment("cpu")
    commit = env.kwb_version.partition("+")[2] or "unknown"
    return Path(__file__).resolve().parent / "results" / env.slug / f"{env.timestamp[:10]}-{commit}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--entries", type=int, default=1000)
    ap.add_argument("--out", type=Path, nargs="?", const=RUN_FOLDER, default=None,
                    help="Write the results (cache_list.md) under this folder (alone: benchmarks/results/<device>/<date>-<commit>).")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="kwb-cache-bench-") as tmp:
        root = Path(tmp) / "torch_extensions"
        make_cache(root, args.entries)
        cache = api.open_cache(root)
        assert len(cache.entries) == args.entries, len(cache.entries)
        states = {}
        for e in cache.entries:
            states[e.state] = states.get(e.state, 0) + 1
        kwb = [sys.executable, "-m", "workbench.cli", "cache", "list", "--root", str(root)]
        rows = {
            "api.open_cache() (in process)": timed(lambda: api.open_cache(root)),
            "kwb cache list --json (fresh process)": timed(lambda: subprocess.run(kwb + ["--json"], capture_output=True, check=True)),
            "kwb cache list (fresh process)": timed(lambda: subprocess.run(kwb, capture_output=True, check=True)),
            "python -c pass (interpreter start, for scale)": timed(lambda: subprocess.run([sys.executable, "-c", "pass"], check=True)),
        }
    run = environment.running()
    lines = [f"# kwb cache list on {args.entries} entries",
             "",
             (f"{date.today().isoformat()}, {platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}, "
              f"torch {run.torch}, kwb {kwb_version()}; states: {states}. `python benchmarks/cache_list.py --entries {args.entries}`."),
             "",
             "| what | median s | min s | max s |",
             "|---|---|---|---|"]
    for name, ts in rows.items():
        lines.append(f"| {name} | {statistics.median(ts):.3f} | {min(ts):.3f} | {max(ts):.3f} |")
    text = "\n".join(lines) + "\n"
    print(text)
    if args.out:
        out = run_folder() if args.out is RUN_FOLDER else args.out
        out.mkdir(parents=True, exist_ok=True)
        (out / "cache_list.md").write_text(text)


if __name__ == "__main__":
    main()
