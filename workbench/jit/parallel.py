"""Several kernels loaded side by side: `kwb build --all`, `kwb run`, `wb.load_all(names)`.

A load spends its time in ninja and the compilers, outside Python, so a thread per load
overlaps them fully. The machine's compile slots (cores, capped by memory and MAX_JOBS) are
shared out: `kernels` loads at once, each ninja running up to `jobs` compilers. Builds show on
one live board (feedback.BuildBoard). Two loads of one kernel still build it once: they meet at
its entry's flock as two processes would (kwb_store/locks.py).
"""
from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import dataclass

from . import arch_units, ninja
from .build_spec import build_spec
from .errors import KwbError
from .feedback import BuildBoard
from .sources import resolve

# Peak resident memory of one compile (GNU time, g++ 12, nvcc 13.0): relu_scale.cpp (ATen and
# torch/library.h) 0.63 GiB, relu_scale.cu 0.19 GiB, the tutorial's lltm.cpp with
# torch/extension.h 1.35 GiB. A slot of 1.5 GiB holds the largest.
MEMORY_PER_COMPILE = 1.5 * (1 << 30)


@dataclass(frozen=True)
class Plan:
    """How `n` loads share the machine: `kernels` at once, the i-th load's ninja with
    `-j jobs_for(i)`; together never more compilers than slots."""

    slots: int
    kernels: int
    jobs: int  # each load's share, rounded down; the first `slots % kernels` loads get one more
    floor: int = 1  # no load gets fewer

    def jobs_for(self, index: int) -> int:
        return max(self.floor, self.jobs + (1 if index < self.slots % self.kernels else 0))


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
    given = ninja.max_jobs()
    if given is not None:
        return given
    slots = cpus()
    memory = available_memory()
    if memory is not None:
        slots = min(slots, max(1, int(memory // MEMORY_PER_COMPILE)))
    return max(1, slots)


def plan(n: int, slots: int | None = None) -> Plan:
    """All `n` loads at once where the slots allow, the slots shared out among them. A kernel
    is a .cpp and a .cu: with one compiler it builds them in turn, and that kernel is the whole
    build's critical path (H200 machine, 9 kernels on 16 slots: softmax with one job 13.4 s,
    the others with two 10 s or less). So where the slots hold 1.5 a kernel, each gets two,
    up to a third more compilers than slots."""
    slots = compile_slots() if slots is None else slots
    kernels = max(1, min(n, slots))
    jobs = max(1, slots // kernels)
    return Plan(slots, kernels, jobs, 2 if jobs == 1 and 2 * slots >= 3 * kernels else 1)


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


def _import_torch_once_started(started: list[threading.Event], wait_s: float = 10.0) -> None:
    """Import torch once the first builds' compilers run. The compilers start without torch
    (build/torch_facts.py), and torch's import holds the GIL for seconds at a time, so importing
    it first stalled the build threads that had yet to start theirs (10 s on the 2-core
    machine); imported meanwhile, it is ready for the loads: 3.6-6.0 s off `kwb build --all` on
    the H100 hosts."""
    deadline = time.monotonic() + wait_s
    for event in started:
        event.wait(max(0.0, deadline - time.monotonic()))
    import torch  # noqa: F401


def _jobs(name, device, share: int, slots: int) -> int:
    """A load's compilers: its share of the slots; where some of its units are CUTLASS units
    (arch_units.py), a compiler a unit up to the slots (unless MAX_JOBS says how many): at a
    share of 2, linear_gelu's eight units took `kwb run`'s cold builds from 20 s to 154 s on the
    H200 host, the other kernels done after 20 s."""
    if ninja.max_jobs() is not None:
        return share
    try:
        spec = build_spec(resolve(name), device)
    except KwbError:
        return share  # the load itself reports it
    source = spec.source
    if spec.device != "cuda" or not arch_units.cutlass_units(source, spec.archs):
        return share
    return max(share, min(slots, len(source.cpp_sources) + len(source.cuda_sources)))


def load_all(names: Iterable, device=None, *, force: bool = False, verbose: bool = False,
             on_done: Callable[[Loaded], None] | None = None, what: str = "kernels") -> list[Loaded]:
    """Load every name (a kernel kwb ships or a folder), building side by side what is not
    cached. Returns one Loaded per name, in the order given; a failed build is an entry with
    its error, not an exception. on_done(loaded) is called in this thread as each finishes."""
    from .loader import load

    names = list(names)
    if not names:
        return []
    # verbose: one at a time, so that each build's compiler commands and output stay together
    slots = compile_slots()
    how = Plan(slots, 1, slots) if verbose else plan(len(names), slots)

    started = [threading.Event() for _ in names]  # its compilers run, or it needs none

    def one(index: int, name) -> Loaded:
        start = time.monotonic()
        ninja.launch_hooks.callback = started[index].set
        try:
            kernel = load(name, device=device, force=force, verbose=verbose, jobs=_jobs(name, device, how.jobs_for(index), slots))
        except KwbError as e:
            return Loaded(str(name), None, e, time.monotonic() - start)
        finally:
            ninja.launch_hooks.callback = None
            started[index].set()
        return Loaded(str(name), kernel, None, time.monotonic() - start)

    outcomes: dict[int, Loaded] = {}
    pool = ThreadPoolExecutor(how.kernels, thread_name_prefix="kwb-build")
    with BuildBoard(what, len(names)) as board:
        try:
            futures = {pool.submit(one, i, name): i for i, name in enumerate(names)}
            _import_torch_once_started(started[:how.kernels])
            for future in as_completed(futures):
                loaded = future.result()
                outcomes[futures[future]] = loaded
                board.one_done()
                if on_done is not None:
                    with board.hold():
                        on_done(loaded)
        except BaseException:  # Ctrl-C: no queued build starts, the running ones' ninjas are ended
            ninja.stop_all.set()
            pool.shutdown(wait=True, cancel_futures=True)
            ninja.stop_all.clear()
            raise
    pool.shutdown()
    return [outcomes[i] for i in range(len(names))]
