"""NVRTC, CUDA's runtime compiler, which the CUDA build of torch already loads: CUDA C++ text in,
a cubin for one architecture out, inside this process (no nvcc, host compiler or linker).

A small kernel compiles in 0.04 s on the 2-core development machine, where nvcc's floor for a
torch-free translation unit is about 1.8 s on the H100 host (benchmarks/reference/h100_compile_times.md).
"""
from __future__ import annotations

import ctypes
import functools
import os
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import ToolchainError

# ptxas's per-function report (registers, spills, shared memory) lands in the program log,
# which kwb parses as it parses nvcc's (ptxas.py).
RESOURCE_OPTIONS = ("--ptxas-options=-v",)


@dataclass(frozen=True)
class Compiled:
    ok: bool
    cubin: bytes
    log: str
    seconds: float


def _candidates(major: str) -> list[str]:
    """libnvrtc by soname first (torch has loaded it, so this finds that copy), then where the
    nvidia-cuda-nvrtc wheel and a toolkit keep it."""
    names = [f"libnvrtc.so.{major}", "libnvrtc.so"]
    import torch

    site = Path(torch.__file__).resolve().parents[1] / "nvidia"
    for folder in (site / f"cu{major}" / "lib", site / "cuda_nvrtc" / "lib"):
        names += [str(p) for p in sorted(folder.glob("libnvrtc.so*")) if "builtins" not in p.name]
    from .toolchain import cuda_home

    home = cuda_home()
    if home is not None:
        names += [str(p) for p in sorted((home / "lib64").glob("libnvrtc.so*")) if "builtins" not in p.name]
    return names


@functools.cache
def library() -> ctypes.CDLL:
    """The NVRTC library torch uses; ToolchainError in one sentence where there is none."""
    import torch

    if not torch.version.cuda:
        raise ToolchainError(f"raw CUDA kernels need NVRTC, which comes with a CUDA build of torch; this torch "
                             f"({torch.__version__}) is CPU-only")
    major = torch.version.cuda.split(".")[0]
    tried = _candidates(major)
    for name in tried:
        try:
            lib = ctypes.CDLL(name)
            break
        except OSError:
            continue
    else:
        raise ToolchainError(f"NVRTC (libnvrtc.so.{major}) was not found: torch {torch.__version__} was built with "
                             f"CUDA {torch.version.cuda}; install its nvidia-cuda-nvrtc package or a CUDA toolkit")
    lib.nvrtcGetErrorString.restype = ctypes.c_char_p
    lib.nvrtcGetErrorString.argtypes = [ctypes.c_int]
    return lib


@functools.cache
def version() -> str:
    """NVRTC's version, '13.2'."""
    major, minor = ctypes.c_int(), ctypes.c_int()
    _check(library().nvrtcVersion(ctypes.byref(major), ctypes.byref(minor)), "nvrtcVersion")
    return f"{major.value}.{minor.value}"


@functools.cache
def library_path() -> str:
    """The file of the NVRTC library loaded in this process (its headers lie beside it)."""
    library()
    try:
        with open("/proc/self/maps") as maps:
            for line in maps:
                path = line.split()[-1] if "/" in line else ""
                if os.path.basename(path).startswith("libnvrtc.so"):
                    return path
    except OSError:
        pass
    return ""


@functools.cache
def cuda_include_dirs() -> tuple[str, ...]:
    """Where cuda_fp16.h and kin are for this NVRTC: the wheel's include/ beside its lib/, else
    the toolkit's. NVRTC itself has none of them, nor the C++ standard library."""
    found = []
    lib = library_path()
    if lib:
        beside = Path(lib).resolve().parent.parent / "include"
        if (beside / "cuda_fp16.h").exists():
            found.append(str(beside))
    if not found:
        from .toolchain import cuda_home

        home = cuda_home()
        if home is not None and (home / "include" / "cuda_fp16.h").exists():
            found.append(str(home / "include"))
    return tuple(found)


def _check(result: int, what: str) -> None:
    if result != 0:
        text = library().nvrtcGetErrorString(result).decode(errors="replace")
        raise ToolchainError(f"NVRTC: {what} failed: {text}")


def compile(source: str, program_name: str, options: list[str]) -> Compiled:
    """Compile `source` (named `program_name` in diagnostics) with NVRTC options; the cubin
    needs a real architecture among them (-arch=sm_90)."""
    lib = library()
    started = time.perf_counter()
    prog = ctypes.c_void_p()
    _check(lib.nvrtcCreateProgram(ctypes.byref(prog), source.encode(), program_name.encode(), 0, None, None),
           "nvrtcCreateProgram")
    try:
        encoded = [o.encode() for o in options]
        array = (ctypes.c_char_p * len(encoded))(*encoded)
        result = lib.nvrtcCompileProgram(prog, len(encoded), array)
        size = ctypes.c_size_t()
        _check(lib.nvrtcGetProgramLogSize(prog, ctypes.byref(size)), "nvrtcGetProgramLogSize")
        log = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetProgramLog(prog, log), "nvrtcGetProgramLog")
        text = log.value.decode(errors="replace")
        if result != 0:
            if not text.strip():
                text = lib.nvrtcGetErrorString(result).decode(errors="replace")
            return Compiled(False, b"", text, time.perf_counter() - started)
        _check(lib.nvrtcGetCUBINSize(prog, ctypes.byref(size)), "nvrtcGetCUBINSize")
        if size.value == 0:
            return Compiled(False, b"", text + "\nNVRTC made no cubin: give a real architecture (-arch=sm_90)",
                            time.perf_counter() - started)
        cubin = ctypes.create_string_buffer(size.value)
        _check(lib.nvrtcGetCUBIN(prog, cubin), "nvrtcGetCUBIN")
        return Compiled(True, cubin.raw, text, time.perf_counter() - started)
    finally:
        lib.nvrtcDestroyProgram(ctypes.byref(prog))
