"""What a build needs to know about torch and the GPU, read without importing torch.

`import torch` costs 3.6-6.0 s on the H100 hosts (and ~4 s on the 2-core machine): done first,
it sat in front of every compiler `kwb build` starts. These facts come from torch's files
(version.py, libc10.so), /proc/cpuinfo and the CUDA driver instead, and they are the answers
torch itself gives (tests/test_toolchain_facts.py compares them where torch is installed).
Where a fact cannot be read this way, torch is imported and asked.
"""
from __future__ import annotations

import ast
import ctypes
import functools
import importlib.util
import mmap
import os
import platform
import sys
from pathlib import Path

from .errors import ToolchainError


def imported_torch():
    """torch where it is imported and done importing, else None (kwb build imports it in one
    thread while its build threads read these facts)."""
    torch = sys.modules.get("torch")
    if torch is None or getattr(getattr(torch, "__spec__", None), "_initializing", False):
        return None
    return torch


def package_dir() -> Path:
    """torch's package folder, found without importing it."""
    torch = imported_torch()
    if torch is not None and getattr(torch, "__file__", None):
        return Path(torch.__file__).resolve().parent
    spec = importlib.util.find_spec("torch")
    if spec is None or not spec.submodule_search_locations:
        raise ToolchainError("torch is not installed in this Python: pip install torch")
    return Path(next(iter(spec.submodule_search_locations))).resolve()


def version_file(base: Path) -> dict:
    """torch/version.py's assignments (__version__, cuda, git_version): plain literals, read
    with ast so nothing is executed; torch.version itself when the file reads otherwise."""
    try:
        tree = ast.parse((base / "version.py").read_text())
        found = {}
        for node in tree.body:
            if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
                found[node.targets[0].id] = ast.literal_eval(node.value)
            elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and node.value is not None:
                found[node.target.id] = ast.literal_eval(node.value)
        if isinstance(found.get("__version__"), str):
            return found
    except (OSError, SyntaxError, ValueError):
        pass
    import torch

    return {"__version__": torch.__version__, "cuda": torch.version.cuda,
            "git_version": getattr(torch.version, "git_version", "")}


def cxx11_abi(base: Path) -> bool:
    """Whether torch was built with the C++11 std::string ABI: its libc10 then exports functions
    whose names carry the [abi:cxx11] tag ("B5cxx11" in the mangled name, as
    c10::DeviceTypeName does); the old ABI has none."""
    torch = imported_torch()
    if torch is not None:
        return bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))
    try:
        with open(base / "lib" / "libc10.so", "rb") as f, mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as m:
            return m.find(b"B5cxx11") >= 0
    except (OSError, ValueError):
        import torch

        return bool(getattr(torch._C, "_GLIBCXX_USE_CXX11_ABI", True))


# ATEN_CPU_CAPABILITY's values on x86-64 (aten/src/ATen/native/DispatchStub.cpp); an unknown value
# is ignored there, with a warning, and here.
_CAPABILITY_NAMES = {"default": "DEFAULT", "avx2": "AVX2", "avx512": "AVX512"}


def _cpu_flags() -> set[str] | None:
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.startswith("flags"):
                    return set(line.partition(":")[2].split())
    except OSError:
        return None
    return None


@functools.cache
def cpu_capability() -> str:
    """torch.backends.cpu.get_cpu_capability(), by torch's rule on x86-64 Linux: the
    ATEN_CPU_CAPABILITY it names, else AVX512 with avx512vl, avx512bw, avx512dq and fma, else
    AVX2 with avx2 and fma, else DEFAULT. Elsewhere torch is asked."""
    flags = _cpu_flags() if platform.machine().lower() in ("x86_64", "amd64") and sys.platform == "linux" else None
    if flags is None:
        import torch

        return str(torch.backends.cpu.get_cpu_capability())
    wanted = _CAPABILITY_NAMES.get(os.environ.get("ATEN_CPU_CAPABILITY", "").strip())
    if wanted is not None:
        return wanted
    if {"avx512vl", "avx512bw", "avx512dq", "fma"} <= flags:
        return "AVX512"
    if {"avx2", "fma"} <= flags:
        return "AVX2"
    return "DEFAULT"


@functools.cache
def driver_gpu_capability() -> tuple[int, int] | None:
    """(major, minor) of the first visible GPU, from the CUDA driver (CUDA_VISIBLE_DEVICES
    applies), or None without a driver, a GPU, or a driver new enough for torch's CUDA (torch
    then reports no GPU too: a 12.x driver cannot run a 13.0 runtime)."""
    try:
        lib = ctypes.CDLL("libcuda.so.1")
    except OSError:
        return None
    count, version, major, minor = ctypes.c_int(), ctypes.c_int(), ctypes.c_int(), ctypes.c_int()
    if lib.cuInit(0) != 0 or lib.cuDeviceGetCount(ctypes.byref(count)) != 0 or count.value < 1:
        return None
    torch_cuda = version_file(package_dir()).get("cuda")
    if (torch_cuda and lib.cuDriverGetVersion(ctypes.byref(version)) == 0
            and version.value // 1000 < int(str(torch_cuda).split(".")[0])):
        return None
    # CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR / _MINOR (cuda.h)
    if lib.cuDeviceGetAttribute(ctypes.byref(major), 75, 0) != 0 or lib.cuDeviceGetAttribute(ctypes.byref(minor), 76, 0) != 0:
        return None
    return major.value, minor.value
