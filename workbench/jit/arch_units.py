"""CUDA units that need the H100's arch-specific instructions (wgmma, TMA multicast, setmaxnreg:
sm_90a, which an sm_90 build cannot use).

A unit named *_sm90a.cu is compiled for sm_90a alone, with -DKWB_SM90A and CUTLASS's headers
(the nvidia-cutlass wheel's), where the build targets 9.0. Elsewhere (another GPU, or no CUTLASS)
it is compiled with the build's own flags and without KWB_SM90A, and must then define its entry
points to refuse, so the kernel's other routes still build and load. An sm_90a cubin runs on
compute capability 9.0 only: the GPU the build targets.
"""
from __future__ import annotations

import functools
import importlib.util
from pathlib import Path

SUFFIX = "_sm90a.cu"
# CUTLASS's collective builders need constexpr host functions in device code
_NVCC_FLAGS = ("-DKWB_SM90A", "--expt-relaxed-constexpr")


def is_sm90a_unit(path: Path) -> bool:
    return path.name.endswith(SUFFIX)


@functools.cache
def cutlass_include_dirs() -> tuple[Path, ...]:
    """CUTLASS's and its utilities' headers from the installed nvidia-cutlass wheel; () without it."""
    spec = importlib.util.find_spec("cutlass_library")  # finds the package without importing it
    if spec is None or not spec.submodule_search_locations:
        return ()
    source = Path(next(iter(spec.submodule_search_locations))) / "source"
    dirs = (source / "include", source / "tools" / "util" / "include")
    return dirs if (dirs[0] / "cutlass" / "cutlass.h").is_file() else ()


def cutlass_version() -> str:
    """The installed nvidia-cutlass's version (part of a build's key), or "none"."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("nvidia-cutlass") if cutlass_include_dirs() else "none"
    except PackageNotFoundError:
        return "none"


def targets_sm90(archs) -> bool:
    return any(a.removesuffix("+PTX").rstrip("af") == "9.0" for a in archs)


def unit_cuda_cflags(cuda_cflags: list[str], archs) -> list[str] | None:
    """An *_sm90a.cu unit's whole nvcc command-line flags: the build's, its -gencode flags
    replaced by sm_90a's, plus KWB_SM90A and CUTLASS's headers. None where the unit compiles
    with the build's own flags (no 9.0 target, or no CUTLASS): its entry points then refuse."""
    includes = cutlass_include_dirs()
    if not targets_sm90(archs) or not includes:
        return None
    kept: list[str] = []
    flags = iter(cuda_cflags)
    for f in flags:
        if f in ("-gencode", "--generate-code"):
            next(flags, None)  # its value, given apart
        elif not f.startswith(("-gencode=", "--generate-code=")):
            kept.append(f)
    return [*kept, "-gencode=arch=compute_90a,code=sm_90a", *_NVCC_FLAGS,
            *[arg for d in includes for arg in ("-isystem", str(d))]]
