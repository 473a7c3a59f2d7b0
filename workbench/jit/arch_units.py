"""CUDA units that need the H100's arch-specific instructions (wgmma, TMA multicast, setmaxnreg:
sm_90a, which an sm_90 build cannot use).

A unit named *_sm90a.cu is compiled for sm_90a alone, with -DKWB_SM90A and CUTLASS's headers
(CUTLASS_PATH's, else the nvidia-cutlass wheel's), where the build targets 9.0. Elsewhere
(another GPU, or no CUTLASS) it is compiled with the build's own flags and without KWB_SM90A,
and must then define its entry points to refuse, so the kernel's other routes still build and
load. An sm_90a cubin runs on
compute capability 9.0 only: the GPU the build targets.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
from pathlib import Path

from . import notices

SUFFIX = "_sm90a.cu"
# CUTLASS's collective builders need constexpr host functions in device code; NDEBUG: its
# device-side asserts off, as in CUTLASS's own release builds
_NVCC_FLAGS = ("-DKWB_SM90A", "-DNDEBUG", "--expt-relaxed-constexpr")
# nvcc's ways to name targets: any left beside sm_90a's would compile the unit for them too
# (about 70 s more a target, and a cubin holding only CUTLASS's stub)
_ARCH_FLAGS = ("-gencode", "--generate-code", "-arch", "--gpu-architecture", "-code", "--gpu-code")


def is_sm90a_unit(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


def cutlass_include_dirs() -> tuple[Path, ...]:
    """CUTLASS's and its utilities' headers: from CUTLASS_PATH (a CUTLASS checkout, the variable
    NVIDIA's CUTLASS tools read) where it is set, else from the installed nvidia-cutlass wheel;
    () with neither."""
    return _include_dirs(os.environ.get("CUTLASS_PATH") or None)


@functools.cache
def _include_dirs(cutlass_path: str | None) -> tuple[Path, ...]:
    if cutlass_path is not None:
        root = Path(cutlass_path).expanduser()
        if not (root / "include" / "cutlass" / "cutlass.h").is_file():
            notices.once("bad-cutlass-path", f"kwb: CUTLASS_PATH={cutlass_path} holds no include/cutlass/cutlass.h; "
                                             "using the nvidia-cutlass wheel's headers, if installed")
            return _include_dirs(None)
    else:
        spec = importlib.util.find_spec("cutlass_library")  # finds the package without importing it
        if spec is None or not spec.submodule_search_locations:
            return ()
        root = Path(next(iter(spec.submodule_search_locations))) / "source"
    dirs = (root / "include", root / "tools" / "util" / "include")
    return dirs if (dirs[0] / "cutlass" / "cutlass.h").is_file() else ()


def cutlass_version() -> str:
    """The version of the CUTLASS headers builds use (part of a build's key), from their own
    cutlass/version.h; "none" without them."""
    dirs = cutlass_include_dirs()
    return _version(dirs[0]) if dirs else "none"


@functools.cache
def _version(include: Path) -> str:  # read once: every load of such a kernel asks
    try:
        text = (include / "cutlass" / "version.h").read_text(errors="replace")
    except OSError:
        return "?"
    parts = [re.search(rf"#define CUTLASS_{p}\s+(\d+)", text) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(m.group(1) if m else "?" for m in parts)


def targets_sm90(archs) -> bool:
    return any(a.removesuffix("+PTX").rstrip("af") == "9.0" for a in archs)


def unit_cuda_cflags(cuda_cflags: list[str], archs) -> list[str] | None:
    """An *_sm90a.cu unit's whole nvcc command-line flags: the build's, its targets (-gencode,
    -arch, -code in any form) replaced by sm_90a, plus KWB_SM90A and CUTLASS's headers. None
    where the unit compiles with the build's own flags (no 9.0 target, or no CUTLASS): its entry
    points then refuse."""
    includes = cutlass_include_dirs()
    if not targets_sm90(archs) or not includes:
        return None
    kept: list[str] = []
    flags = iter(cuda_cflags)
    for f in flags:
        if f in _ARCH_FLAGS:
            next(flags, None)  # its value, given apart
        elif not f.startswith(tuple(f"{a}=" for a in _ARCH_FLAGS)):
            kept.append(f)
    return [*kept, "-gencode=arch=compute_90a,code=sm_90a", *_NVCC_FLAGS,
            *[arg for d in includes for arg in ("-isystem", str(d))]]


def cutlass_units(source, archs) -> int:
    """How many of a kernel's units compile CUTLASS kernels for this build: about 70 s of nvcc
    each on the H200 host, where a kernel's other units take 10 s or less; a side-by-side
    build gives such a kernel a compiler for every unit (parallel.py)."""
    if not targets_sm90(archs) or not cutlass_include_dirs():
        return 0
    return sum(1 for p in source.cuda_sources if is_sm90a_unit(p))
