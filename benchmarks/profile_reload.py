"""Where the seconds of one edit-reload go, command by command (a diagnostic for jit_loop.py).

    python benchmarks/profile_reload.py [--cxx PATH ...]

Builds a temporary copy of kernels/relu_scale for CUDA, then times separately: each compile
and link command ninja runs (re-run 3 times, median), link variants (default ld, gold, lld
where present), the .cu compile without -lineinfo, and the Python side of a reload (hashing,
loading the .so, registering ops and ops.py, the first call).
"""
from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent


def timed(cmd: str, cwd: Path, n: int = 3) -> float:
    runs = []
    for _ in range(n):
        t = time.perf_counter()
        subprocess.run(cmd, shell=True, cwd=cwd, check=True, capture_output=True)
        runs.append(time.perf_counter() - t)
    return statistics.median(runs)


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--cxx", nargs="*", default=[], help="other C++ compilers to time on the binding .cpp")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="kwb-profile-"))
    os.environ["TORCH_EXTENSIONS_DIR"] = str(tmp / "cache")
    folder = tmp / "relu_scale"
    shutil.copytree(REPO / "kernels" / "relu_scale", folder)
    import torch

    import workbench as wb

    t = time.perf_counter()
    k = wb.load(folder, device="cuda")
    print(f"cold load: {time.perf_counter() - t:.2f} s")
    build_dir = k.library_path.parent / "build-cuda"
    ninja = shutil.which("ninja")
    commands = subprocess.run([ninja, "-t", "commands"], cwd=build_dir, capture_output=True, text=True, check=False).stdout.splitlines()
    for cmd in commands:
        what = "link" if " -shared " in cmd else ("nvcc " if "nvcc" in cmd.split()[0] else "cxx  ") + cmd.split(" -c ")[-1].split()[0].rsplit("/", 1)[-1]
        print(f"{what:<28} {timed(cmd, build_dir):.2f} s")
        if "nvcc" in cmd.split()[0]:
            print(f"{'  nvcc without -lineinfo':<28} {timed(cmd.replace(' -lineinfo', ''), build_dir):.2f} s")
        if " -shared " in cmd:
            for ld in ("gold", "lld"):
                variant = cmd.replace(" -shared ", f" -shared -fuse-ld={ld} ")
                try:
                    print(f"{'  link -fuse-ld=' + ld:<28} {timed(variant, build_dir):.2f} s")
                except subprocess.CalledProcessError:
                    print(f"{'  link -fuse-ld=' + ld:<28} not available")
        if cmd.split()[0] == k.build.manifest.compilers["cxx"] and " -c " in cmd:
            for other in args.cxx:
                print(f"{'  .cpp with ' + other:<28} {timed(cmd.replace(cmd.split()[0], other, 1), build_dir):.2f} s")
    # The Python side of a reload after a .cu edit.
    x = torch.randn(1 << 16, device="cuda") if torch.cuda.is_available() else None
    cu = folder / "relu_scale.cu"
    cu.write_text(cu.read_text().replace("v * alpha", "v * alpha * kwb::acc_t<T>(1.0000001)"))
    t0 = time.perf_counter()
    k2 = wb.load(folder, device="cuda")
    t1 = time.perf_counter()
    if x is not None:
        k2.relu_scale(x, 1.5)
        torch.cuda.synchronize()
    t2 = time.perf_counter()
    log = (build_dir / ".ninja_log").read_text().splitlines()[-3:]
    ninja_ms = [int(l.split("\t")[1]) - int(l.split("\t")[0]) for l in log if l and not l.startswith("#")]
    print(f"reload after .cu edit: load {t1 - t0:.2f} s (ninja commands {', '.join(f'{m / 1000:.2f}' for m in ninja_ms)} s), first call {t2 - t1:.3f} s")


if __name__ == "__main__":
    main()
