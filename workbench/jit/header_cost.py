"""How much of a torch-style .cu unit's compile is torch/extension.h, measured, and a notice
where it is most of it.

nvcc parses a .cu's headers three times over (cudafe++, cicc, the host compile): the tutorial
LLTM's .cu spends 72 s in nvcc on the 2-core machine with torch/extension.h, 34 s with kwb's
lighter header, where a torch-free .cu of kwb's recompiles in about 2 s. After a build that
compiled such a unit, kwb compares the unit's seconds (ninja's log) with the header's own cost
under the same flags: the CPU seconds of a .cu holding only the #include, less an empty .cu's
(nvcc's own start), measured once per nvcc, torch and flag set by a detached, lower-priority
process that the first such build starts once it is done, and kept at the cache root. A cached
load never gets here; the build after the measurement gets the notice.
"""
from __future__ import annotations

import fcntl
import hashlib
import json
import os
import re
import resource
import subprocess
import sys
import time
from pathlib import Path

from kwb_store.fsutil import atomic_write_text
from kwb_store.tool_versions import file_ident

from . import detached, notices, toolchain

FOLDER = ".kwb-header-cost"  # at the cache root: one <key>.json per nvcc, torch and flag set
DOMINATES = 0.5  # the header's share of a unit's compile from which the notice shows
_NICE = 10
_INCLUDES_EXTENSION_H = re.compile(r'^\s*#\s*include\s*[<"]torch/extension\.h[>"]', re.MULTILINE)
_started: dict[str, subprocess.Popen] = {}


def includes_torch(path: Path) -> bool:
    try:
        return bool(_INCLUDES_EXTENSION_H.search(path.read_text(errors="replace")))
    except OSError:
        return False


def probe_flags(cuda_cflags: list[str], step_flags, module_name: str) -> list[str]:
    """The unit's nvcc flags less what only it reads (its include folders, TORCH_EXTENSION_NAME)."""
    return [f for f in cuda_cflags if not f.startswith("-I") and f != f"-DTORCH_EXTENSION_NAME={module_name}"] + list(step_flags)


def key_for(nvcc: str, flags: list[str]) -> str:
    info = toolchain.torch_info()
    return hashlib.sha256(json.dumps([file_ident(nvcc), info.version, info.git, flags]).encode()).hexdigest()[:16]


def measured(root: Path, key: str) -> dict | None:
    try:
        found = json.loads((root / FOLDER / f"{key}.json").read_text())
    except (OSError, ValueError):
        return None
    return found if isinstance(found, dict) else None


def unit_seconds(build_dir: Path, obj: str, since: float) -> float | None:
    """ninja's wall seconds for `obj`, where the build that began at `since` compiled it."""
    try:
        if (build_dir / obj).stat().st_mtime < since:
            return None
        lines = (build_dir / ".ninja_log").read_text().splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        parts = line.split("\t")
        if len(parts) >= 4 and parts[3] == obj:
            try:
                return (int(parts[1]) - int(parts[0])) / 1000
            except ValueError:
                return None
    return None


def after_build(root: Path, name: str, nvcc: str | None, cuda_cflags: list[str], module_name: str, build_dir: Path,
                steps, since: float, display_paths: dict | None = None) -> None:
    """The notice for each .cu unit this build compiled whose torch/extension.h is most of its
    compile, once per process; or the measurement started where it is not known yet."""
    if nvcc is None:
        return
    for step in steps:
        if not step.cuda or not includes_torch(step.source):
            continue
        seconds = unit_seconds(build_dir, step.obj, since)
        if seconds is None:
            continue
        flags = probe_flags(cuda_cflags, step.flags, module_name)
        key = key_for(nvcc, flags)
        found = measured(root, key)
        if found is None:
            start(root, key, nvcc, flags)
            continue
        cost = found.get("seconds")
        if not isinstance(cost, (int, float)) or cost < DOMINATES * seconds:
            continue
        label = (display_paths or {}).get(str(step.source), (step.source.name, 1))[0]
        notices.once(f"header-cost:{name}:{step.source}",
                     f"kwb: {label} spends ~{cost:.0f} s of its {seconds:.0f} s compile in torch/extension.h; moving its "
                     f"torch::Tensor host wrapper into a .cpp (the .cu keeping only kernels and a launcher) would save "
                     f"about {cost:.0f} s per edit")


def start(root: Path, key: str, nvcc: str, flags: list[str]) -> subprocess.Popen | None:
    """Measure in a detached process of lower priority, once per process and key."""
    if key in _started:
        return None
    proc = detached.start("workbench.jit.header_cost", {"root": str(root), "key": key, "nvcc": nvcc, "flags": flags})
    _started[key] = proc
    return proc


def wait(timeout: float | None = None) -> None:
    """Wait for the measurements this process started (tests, benchmarks)."""
    for proc in list(_started.values()):
        proc.wait(timeout)


def _cpu_seconds(cmd: list[str], cwd: Path) -> tuple[float | None, str]:
    """The CPU seconds of cmd and every process it waited for (nvcc's cudafe++, cicc, ptxas, the
    host compiler): a niced measurement beside other work counts what the compile costs, not
    how long it waited for a core."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    result = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, check=False)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    if result.returncode != 0:
        return None, result.stdout + result.stderr
    return (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime), ""


def measure(root: Path, key: str, nvcc: str, flags: list[str]) -> dict | None:
    """Compile an empty .cu and one holding only the #include, under a lock of the key (another
    process measuring it: None at once); the record written last, whole."""
    folder = root / FOLDER / key
    folder.mkdir(parents=True, exist_ok=True)
    fd = os.open(root / FOLDER / f"{key}.lock", os.O_RDWR | os.O_CREAT, 0o644)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            return None
        if measured(root, key) is not None:
            return measured(root, key)
        seconds = {}
        for part, text in (("empty", "\n"), ("header", "#include <torch/extension.h>\n")):
            (folder / f"{part}.cu").write_text(text)
            seconds[part], log = _cpu_seconds([nvcc, *flags, "-c", f"{part}.cu", "-o", f"{part}.o"], folder)
            (folder / f"{part}.o").unlink(missing_ok=True)
            if seconds[part] is None:
                atomic_write_text(folder / "build.log", log)
                break
        ok = all(v is not None for v in seconds.values())
        record = {"seconds": round(seconds["header"] - seconds["empty"], 1) if ok else None, "cpu_seconds": seconds,
                  "nvcc": nvcc, "flags": flags, "measured_at": time.time()}
        atomic_write_text(root / FOLDER / f"{key}.json", json.dumps(record, indent=1))
        return record
    finally:
        os.close(fd)


def _main(job: str) -> int:
    os.nice(_NICE)
    spec = json.loads(job)
    measure(Path(spec["root"]), spec["key"], spec["nvcc"], spec["flags"])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
