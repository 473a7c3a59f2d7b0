"""The GPU kernels one call launches, with each launch's block size, registers and shared memory
as the CUDA profiler (CUPTI, through torch.profiler) saw them, and the theoretical occupancy of
that launch (kwb_store.resources: the occupancy calculator's rule for the device's arch).

kwb bench profiles one call of each kwb row before timing it (about 50 ms; not timed) and
reports the launch of its longest kwb kernel: what ran, at the launch used.
"""
from __future__ import annotations

import json
import os
import tempfile
import warnings
from dataclasses import dataclass

import torch

from cache_tools.resource_rows import short_name
from kwb_store.resources import FunctionResources, occupancy

BENCH_FIELDS = ("gpu_kernel", "block", "registers", "smem_bytes", "spill_bytes", "occupancy_pct")


@dataclass(frozen=True)
class Launch:
    name: str                 # as the profiler names it (demangled)
    duration_us: float
    block: tuple[int, int, int]
    grid: tuple[int, int, int]
    registers: int | None     # a thread
    smem_bytes: int | None    # static + dynamic, a block

    @property
    def threads(self) -> int:
        return self.block[0] * self.block[1] * self.block[2]


def _triple(value) -> tuple[int, int, int]:
    if isinstance(value, (list, tuple)) and len(value) == 3 and all(isinstance(v, int) for v in value):
        return tuple(value)  # type: ignore[return-value]
    return (0, 0, 0)


def from_trace(trace: dict) -> list[Launch]:
    """The kernel launches in a Chrome trace that torch.profiler exported."""
    launches = []
    for e in trace.get("traceEvents", []):
        if not isinstance(e, dict) or e.get("cat") != "kernel":
            continue
        args = e.get("args") or {}
        regs, smem = args.get("registers per thread"), args.get("shared memory")
        launches.append(Launch(str(e.get("name", "?")), float(e.get("dur", 0.0)), _triple(args.get("block")),
                               _triple(args.get("grid")), regs if isinstance(regs, int) else None,
                               smem if isinstance(smem, int) else None))
    return launches


def profile(fn, args) -> list[Launch]:
    """The kernels one call of fn(*args) launches (a CUDA device and torch.profiler needed)."""
    from torch.profiler import ProfilerActivity
    from torch.profiler import profile as torch_profile

    fd, path = tempfile.mkstemp(prefix="kwb-trace-", suffix=".json")
    os.close(fd)
    try:
        # torch warns that "Profiler clears events at the end of each cycle" into every `kwb run`
        # (torch 2.11 starts the message with "Warning: ", and filterwarnings matches from the
        # start); there is one cycle here
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", message=r".*Profiler clears events", category=UserWarning)
            with torch_profile(activities=[ProfilerActivity.CUDA]) as prof:
                fn(*args)
                torch.cuda.synchronize()
            prof.export_chrome_trace(path)
        with open(path) as f:
            return from_trace(json.load(f))
    finally:
        os.unlink(path)


def _matches(launch: Launch, f: FunctionResources) -> bool:
    return launch.name == f.name or short_name(launch.name, 10**6) == short_name(f.name, 10**6)


def bench_columns(launches: list[Launch], functions, arch: str) -> dict:
    """BENCH_FIELDS for a row: the longest launch of one of the build's own functions (else the
    longest launch: a library's GEMM, say), its registers and shared memory as launched, its
    spilled bytes from the build, and its theoretical occupancy on `arch`."""
    if not launches:
        return {}
    own = [(l, f) for l in launches for f in functions if _matches(l, f)]
    launch, fn = max(own, key=lambda lf: lf[0].duration_us) if own else (max(launches, key=lambda l: l.duration_us), None)
    regs = launch.registers if launch.registers is not None else (fn.registers if fn else None)
    smem = launch.smem_bytes if launch.smem_bytes is not None else (fn.static_smem if fn else None)
    row = {"gpu_kernel": short_name(launch.name, 80), "block": "x".join(map(str, launch.block)) if launch.threads else None,
           "registers": regs, "smem_bytes": smem, "spill_bytes": (fn.spill_stores + fn.spill_loads) if fn else None}
    if regs is not None and launch.threads:
        row["occupancy_pct"] = round(100 * occupancy(regs, smem or 0, launch.threads, arch), 1)
    return row


def device_arch(device=None) -> str:
    major, minor = torch.cuda.get_device_capability(device)
    return f"sm_{major}{minor}"
