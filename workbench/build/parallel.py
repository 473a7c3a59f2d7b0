"""Several kernels loaded side by side: `kwb build --all`, `kwb run`, `wb.load_all(names)`.

A load spends its time in ninja and the compilers, outside Python, so a thread per load
overlaps them fully. The machine's compile slots (cores, capped by memory and MAX_JOBS) are
shared out: `kernels` loads at once, each ninja running up to `jobs` compilers. Builds show on
one live board (feedback.BuildBoard). Two loads of one kernel still build it once: they meet at
its entry's flock as two processes would (locking.py).
"""
from __future__ import annotations

import math
import os
import time
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass
from typing import Callable, Iterable

from .errors import KwbError
from .feedback import BuildBoard

# Peak resident memory of one compile (GNU time, g++ 12, nvcc 13.0): relu_scale.cpp (ATen and
# torch/library.h) 0.63 GiB, relu_scale.cu 0.19 GiB, the tutorial's lltm.cpp with
# torch/extension.h 1.35 GiB. A slot of 1.5 GiB holds the largest.
MEMORY_PER_COMPILE = 1.5 * (1 << 30)


@dataclass(frozen=True)
class Plan:
    """How `n` loads share the machine: `kernels` at once, each ninja with `-j jobs`."""

    slots: int
    kernels: int
    jobs: int


def cpus() -> int:
    try:
        return len(os.sched_getaffinity(0))  # a container's or taskset's share, not the host's cores
    except (AttributeError, OSError):
        return os.cpu_count() or 1


def available_memory() -> float | None:
    """MemAvailable from /proc/meminfo in bytes, None where there is none."""
    try:
        with open("/proc/meminfo") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return float(line.split()[1]) * 1024
    except OSError:
        pass
    return None


def compile_slots() -> int:
    """Compiler processes this machine runs at once: MAX_JOBS where set (torch.utils.cpp_extension
    reads it too), else one per CPU, fewer where memory would not hold them."""
    given = os.environ.get("MAX_JOBS", "").strip()
    if given:
        if not given.isdigit() or int(given) < 1:
            raise ValueError(f"MAX_JOBS must be a whole number of at least 1, got {given!r}")
        return int(given)
    slots = cpus()
    memory = available_memory()
    if memory is not None:
        slots = min(slots, max(1, int(memory // MEMORY_PER_COMPILE)))
    return max(1, slots)


def plan(n: int, slots: int | None = None) -> Plan:
    """All `n` loads at once where the slots allow, each ninja taking an equal share of them
    (rounded up: a kernel's units are few and finish at different times)."""
    slots = compile_slots() if slots is None else slots
    kernels = max(1, min(n, slots))
    return Plan(slots, kernels, max(1, math.ceil(slots / kernels)))


@dataclass
class Loaded:
    """One name's outcome: its Kernel, or the KwbError that stopped it."""

    name: str
    kernel: object | None
    error: KwbError | None
    seconds: float

    @property
    def ok(self) -> bool:
        return self.error is None


def load_all(names: Iterable, device=None, *, force: bool = False, verbose: bool = False,
             on_done: Callable[[Loaded], None] | None = None, what: str = "kernels") -> list[Loaded]:
    """Load every name (a kernel kwb ships or a folder), building side by side what is not
    cached. Returns one Loaded per name, in the order given; a failed build is an entry with
    its error, not an exception. on_done(loaded) is called in this thread as each finishes."""
    from .loader import load

    names = list(names)
    if not names:
        return []
    how = plan(len(names))

    def one(name) -> Loaded:
        start = time.monotonic()
        try:
            kernel = load(name, device=device, force=force, verbose=verbose, jobs=how.jobs)
        except KwbError as e:
            return Loaded(str(name), None, e, time.monotonic() - start)
        return Loaded(str(name), kernel, None, time.monotonic() - start)

    outcomes: dict[int, Loaded] = {}
    with BuildBoard(what, len(names)) as board, ThreadPoolExecutor(how.kernels, thread_name_prefix="kwb-build") as pool:
        futures = {pool.submit(one, name): i for i, name in enumerate(names)}
        for future in as_completed(futures):
            loaded = future.result()
            outcomes[futures[future]] = loaded
            board.one_done()
            if on_done is not None:
                with board.hold():
                    on_done(loaded)
    return [outcomes[i] for i in range(len(names))]
