"""`kwb doctor`: can this machine build and run kernels, and if not, what to do about it."""
from __future__ import annotations

import os
import platform
import shutil
import sys
from dataclasses import dataclass


@dataclass
class Check:
    name: str
    status: str  # "ok", "warn", "fail"
    detail: str
    fix: str = ""


def run_checks() -> list[Check]:
    checks: list[Check] = []
    py = sys.version_info
    checks.append(Check("python", "ok" if py >= (3, 10) else "fail", f"{platform.python_version()} at {sys.executable}",
                        "" if py >= (3, 10) else "use Python 3.10 or newer"))
    try:
        import torch
    except Exception as e:  # noqa: BLE001 - a broken torch install must not crash the doctor
        checks.append(Check("torch", "fail", f"cannot import torch: {e}", "pip install torch"))
        return checks
    from kwb_store import layout
    from kwb_store.tool_versions import tool_version

    from .jit import device as devices
    from .jit import toolchain

    info = toolchain.torch_info()
    checks.append(Check("torch", "ok", f"{info.version}, built with CUDA {info.cuda or 'none (CPU-only build)'}, C++ {info.cxx_standard}"))

    cxx = toolchain.cxx_path()
    if cxx is None:
        checks.append(Check("c++ compiler", "fail", "not found", "install g++ (apt-get install g++), or set KWB_CXX"))
    elif toolchain.links_libstdcxx_dynamically(cxx) is False:
        checks.append(Check("c++ compiler", "fail", f"{cxx}: links libstdc++ statically into shared libraries (extensions would crash)",
                            "set KWB_CXX to a compiler that links libstdc++ as a shared library, e.g. /usr/bin/g++"))
    else:
        checks.append(Check("c++ compiler", "ok", f"{cxx}: {tool_version(cxx)}"))
    ninja = toolchain.ninja_path()
    checks.append(Check("ninja", "ok" if ninja else "fail", f"{ninja}: {tool_version(ninja)}" if ninja else "not found",
                        "" if ninja else "pip install ninja"))

    nvcc = toolchain.nvcc_path()
    if nvcc is None:
        checks.append(Check("nvcc", "warn", "not found: kernels build for the CPU only",
                            "install the CUDA toolkit matching torch's CUDA, or set CUDA_HOME"))
    else:
        line = tool_version(nvcc)
        nv = toolchain.nvcc_cuda_version(line)
        if info.cuda is None:
            checks.append(Check("nvcc", "warn", f"{nvcc}: CUDA {nv}, but this torch has no CUDA", "install a CUDA build of torch to run CUDA kernels"))
        elif nv and nv.split(".")[0] != info.cuda.split(".")[0]:
            checks.append(Check("nvcc", "fail", f"{nvcc}: CUDA {nv}, torch was built with CUDA {info.cuda} (major versions differ)",
                                f"use a CUDA {info.cuda.split('.')[0]}.x toolkit (set CUDA_HOME), or a torch built for CUDA {nv}"))
        elif nv and nv != info.cuda:
            checks.append(Check("nvcc", "ok", f"{nvcc}: CUDA {nv} (torch: {info.cuda}; same major version, compatible)"))
        else:
            checks.append(Check("nvcc", "ok", f"{nvcc}: CUDA {nv}"))

    if info.cuda is not None:
        from .jit import nvrtc
        from .jit.errors import ToolchainError

        try:
            checks.append(Check("nvrtc", "ok", f"{nvrtc.version()} at {nvrtc.library_path() or 'libnvrtc'}: raw kernels "
                                               "(wb.cuda_kernel, %%cuda_kernel) compile in-process"))
        except (ToolchainError, OSError, AttributeError) as e:
            checks.append(Check("nvrtc", "warn", f"not usable: {e}", "install torch's nvidia-cuda-nvrtc package"))

    if devices.gpu_visible():
        name = torch.cuda.get_device_name()
        major, minor = torch.cuda.get_device_capability()
        checks.append(Check("gpu", "ok", f"{name}, sm_{major}{minor}, {torch.cuda.device_count()} visible"))
    else:
        arch = os.environ.get("KWB_CUDA_ARCH") or os.environ.get("TORCH_CUDA_ARCH_LIST")
        checks.append(Check("gpu", "warn", "none visible: CUDA kernels compile but cannot run here; CPU implementations run",
                            "" if arch else f"CUDA builds target sm_{toolchain.DEFAULT_ARCH.replace('.', '')}; set KWB_CUDA_ARCH to choose"))

    root = layout.default_root(info.cuda)
    try:
        root.mkdir(parents=True, exist_ok=True)
        probe = root / f".kwb-doctor-{os.getpid()}"
        probe.write_text("ok")
        probe.unlink()
        free = shutil.disk_usage(root).free / 2**30
        status = "ok" if free >= 2 else "warn"
        checks.append(Check("cache", status, f"{root} is writable, {free:.1f} GiB free",
                            "" if status == "ok" else "free some space: each kernel build takes 1-20 MB"))
    except OSError as e:
        checks.append(Check("cache", "fail", f"{root}: {e}", "set TORCH_EXTENSIONS_DIR to a writable folder"))
    return checks
