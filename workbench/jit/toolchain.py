"""What the machine builds with: torch's headers and libraries, the C++ compiler, nvcc, ninja,
and the GPU architecture to target.

Everything here is on the warm-load path, so it avoids importing torch.utils.cpp_extension
(which pulls in setuptools) and caches compiler versions by the binary's path, size and mtime
instead of running `--version` in every process.

Nor does it import torch: torch's facts come from its files (torch_facts.py), so that
`kwb build` starts its compilers first and imports torch while they run (import torch took
3.6-6.0 s of a 16-22 s `kwb build --all` on the H100 hosts). Where torch is imported already,
its own answers are used.
"""
from __future__ import annotations

import functools
import os
import re
import shutil
import subprocess
from dataclasses import dataclass
from pathlib import Path

from kwb_store.tool_versions import file_ident, probe_once

from . import notices, torch_facts
from .errors import ToolchainError

DEFAULT_ARCH = "9.0"  # the H100, the GPU kwb is tuned and measured on


@dataclass(frozen=True)
class TorchInfo:
    version: str
    cuda: str | None  # torch.version.cuda: None for a CPU-only build
    git: str
    cxx11_abi: bool
    include_dirs: tuple[str, ...]
    library_dir: str

    @property
    def cxx_standard(self) -> str:
        # ATen's headers require C++20 from torch 2.13 on (pytorch#178150); C++17 before.
        major, minor = (int(p) for p in re.findall(r"\d+", self.version)[:2])
        return "c++20" if (major, minor) >= (2, 13) else "c++17"


@functools.cache
def torch_info() -> TorchInfo:
    base = torch_facts.package_dir()
    version = torch_facts.version_file(base)
    return TorchInfo(
        version=version["__version__"],
        cuda=version.get("cuda"),
        git=version.get("git_version") or "",
        cxx11_abi=torch_facts.cxx11_abi(base),
        include_dirs=(str(base / "include"), str(base / "include" / "torch" / "csrc" / "api" / "include")),
        library_dir=str(base / "lib"),
    )


def _is_toolkit(home: Path) -> bool:
    return (home / "bin" / "nvcc").exists() and (home / "include" / "cuda_runtime.h").exists()


def cuda_home() -> Path | None:
    """The CUDA toolkit: CUDA_HOME, CUDA_PATH, the toolkit of the nvcc on PATH, /usr/local/cuda.

    A candidate counts only with both bin/nvcc and include/cuda_runtime.h: an nvcc on PATH may
    be a wrapper outside its toolkit (benchmarks/reference/workbench_choices.md)."""
    candidates = [Path(os.environ[v]) for v in ("CUDA_HOME", "CUDA_PATH") if os.environ.get(v)]
    nvcc = shutil.which("nvcc")
    if nvcc:
        candidates += [Path(nvcc).parent.parent, Path(nvcc).resolve().parent.parent]
    candidates.append(Path("/usr/local/cuda"))
    for home in candidates:
        if _is_toolkit(home):
            return home
    return None


def nvcc_path() -> str | None:
    home = cuda_home()
    return str(home / "bin" / "nvcc") if home else None


_PROBE_SOURCE = "#include <sstream>\n#include <string>\nstd::string kwb_probe(long v) { std::ostringstream s; s << v; return s.str(); }\n"


def links_libstdcxx_dynamically(cxx: str, cache_root: Path | None = None) -> bool | None:
    """Whether `cxx -shared` links libstdc++ as a shared library (None: could not tell).

    Statically linked, the extension's private, uninitialized C++ runtime crashes on the first
    error message it formats (benchmarks/reference/workbench_choices.md). Probed once per
    compiler binary; the answer is kept with the tool versions."""
    import tempfile

    def probe() -> str | None:
        readelf = shutil.which("readelf")
        if readelf is None:
            return None
        with tempfile.TemporaryDirectory(prefix="kwb-cxx-probe-") as tmp:
            src, lib = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
            src.write_text(_PROBE_SOURCE)
            try:
                subprocess.run([cxx, "-shared", "-fPIC", "-O0", str(src), "-o", str(lib)], capture_output=True, timeout=120,
                               check=True)
                dyn = subprocess.run([readelf, "-d", str(lib)], capture_output=True, text=True, timeout=30, check=False).stdout
            except (OSError, subprocess.SubprocessError):
                return None
        return "yes" if "libstdc++.so" in dyn else "no"

    return {"yes": True, "no": False}.get(probe_once("libstdc++-shared:" + file_ident(cxx), probe, cache_root))


def compiler_family(cxx: str, cache_root: Path | None = None) -> str:
    """"gcc", "clang" or "other", by the macros the compiler predefines (`c++ --version` names
    neither on Debian's g++). Probed once per compiler binary."""
    def probe() -> str | None:
        try:
            macros = subprocess.run([cxx, "-x", "c++", "-E", "-dM", "-"], input="", capture_output=True, text=True,
                                    timeout=60, check=False).stdout
        except (OSError, subprocess.SubprocessError):
            return None
        return "clang" if "__clang__" in macros else "gcc" if "__GNUC__" in macros else "other"

    return probe_once("family:" + file_ident(cxx), probe, cache_root) or "other"


def cxx_path(cache_root: Path | None = None) -> str | None:
    """The C++ compiler: KWB_CXX as given; else the first of $CXX, c++, g++ that links libstdc++
    as a shared library (see links_libstdcxx_dynamically), with a notice when $CXX is skipped."""
    if os.environ.get("KWB_CXX"):
        return shutil.which(os.environ["KWB_CXX"]) or os.environ["KWB_CXX"]
    names = [n for n in (os.environ.get("CXX"), "c++", "g++") if n]
    found = []
    for name in names:
        path = shutil.which(name)
        if path and path not in found:
            found.append(path)
    for path in found:
        if links_libstdcxx_dynamically(path, cache_root) is not False:
            if path != found[0]:
                _pending_notices["cxx-static"] = f"kwb: {found[0]} links libstdc++ statically, which crashes torch extensions; building with {path} instead (set KWB_CXX to choose)"
            return path
    return found[0] if found else None


# Notices about choices that matter only when something compiles: shown by the builder when a
# build runs, so that a cache hit stays silent.
_pending_notices: dict[str, str] = {}


def announce_build_choices() -> None:
    for key, message in _pending_notices.items():
        notices.once(key, message)


_OPENMP_PROBE = "#include <omp.h>\nextern \"C\" int kwb_probe() { int n = 0;\n#pragma omp parallel reduction(+:n)\n n += 1;\n return n + omp_get_max_threads(); }\n"


def torch_uses_libgomp() -> bool:
    """Whether ATen parallelizes with OpenMP (AT_PARALLEL_OPENMP) through a runtime whose
    soname is plain libgomp.so.1. Only then does an extension built with -fopenmp bind to the
    runtime torch already loaded; a wheel with a renamed (libgomp-<hash>.so.1) or another
    (libiomp5) runtime would get a second thread pool, so kwb leaves -fopenmp out there."""
    config = Path(torch_info().include_dirs[0]) / "ATen" / "Config.h"
    try:
        if re.search(r"#define AT_PARALLEL_OPENMP 1", config.read_text()) is None:
            return False
    except OSError:
        return False
    readelf = shutil.which("readelf")
    if readelf is None:
        return False
    try:
        dyn = subprocess.run([readelf, "-d", str(Path(torch_info().library_dir) / "libtorch_cpu.so")],
                             capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return False
    return "[libgomp.so.1]" in dyn


def openmp_flags(cxx: str, cache_root: Path | None = None) -> list[str]:
    """-fopenmp when ATen parallelizes with OpenMP and the compiler can build and link it.

    Without it, at::parallel_for in a kernel's CPU code compiles to one serial loop: ATen's
    header only parallelizes under _OPENMP (torch.utils.cpp_extension's JIT never adds it).
    At run time the extension's libgomp.so.1 resolves to the one torch already loaded (same
    soname), so there is one OpenMP thread pool. Probed once per compiler, like the runtime."""
    import tempfile

    def probe() -> str | None:
        if not torch_uses_libgomp():
            return "no"
        with tempfile.TemporaryDirectory(prefix="kwb-omp-probe-") as tmp:
            src, lib = Path(tmp) / "probe.cpp", Path(tmp) / "probe.so"
            src.write_text(_OPENMP_PROBE)
            try:
                subprocess.run([cxx, "-shared", "-fPIC", "-fopenmp", str(src), "-o", str(lib)], capture_output=True,
                               timeout=120, check=True)
            except (OSError, subprocess.SubprocessError):  # not remembered on disk: may pass next time
                return None
        return "yes"

    known = probe_once("openmp:" + file_ident(cxx) + ":" + torch_info().version, probe, cache_root)
    return ["-fopenmp"] if known == "yes" else []


# ATen compiles its CPU kernels once per instruction set and picks one at run time; a JIT build
# runs where it was built, so a kernel's CPU code takes the set torch picked here, with the flags
# ATen's build gives that set. Without them at::vec::Vectorized is its scalar fallback, and
# bias_gelu's erf form ran 0.20x eager on the 2-core machine (AVX-512). Loops the compiler
# vectorizes itself stay at 256 bits (explicit Vectorized code keeps 512): vector_add's loop out of
# cache, one thread, 2^22 fp32 on the AVX-512 AMD EPYC ran 16-26% behind ATen's add_out in 512-bit
# vectors and within 2% of it in 256-bit (benchmarks/cpu_loop_width.py, docs/results.md).
_CPU_CAPABILITY_FLAGS = {
    "AVX512": ["-mavx512f", "-mavx512bw", "-mavx512vl", "-mavx512dq", "-mfma", "-mf16c", "-mprefer-vector-width=256"],
    "AVX2": ["-mavx2", "-mfma", "-mf16c", "-mbmi", "-mbmi2"],
}


@functools.cache
def cpu_capability() -> str:
    """The instruction set torch's CPU kernels use here ("AVX512", "AVX2", "DEFAULT", ...):
    torch.backends.cpu.get_cpu_capability(), which ATEN_CPU_CAPABILITY can lower; read by
    torch's own rule from /proc/cpuinfo on x86-64 Linux, so it is the same answer with torch
    imported or not (a build key must not depend on import order)."""
    return torch_facts.cpu_capability()


def cpu_capability_flags(capability: str | None = None) -> list[str]:
    """Compiler flags that give a kernel's CPU code the vector width of ``capability`` (torch's
    own, by default): nothing for a set kwb has no flags for, or off x86-64."""
    import platform

    capability = capability or cpu_capability()
    flags = _CPU_CAPABILITY_FLAGS.get(capability)
    if not flags or platform.machine().lower() not in ("x86_64", "amd64"):
        return []
    return [*flags, f"-DCPU_CAPABILITY_{capability}", f"-DCPU_CAPABILITY={capability}"]


def fast_linker_flags() -> list[str]:
    """lld, else gold, when installed: 0.14 s a link against libtorch where ld takes 0.34 s
    (benchmarks/reference/workbench_choices.md)."""
    for name, flag in (("ld.lld", "-fuse-ld=lld"), ("ld.gold", "-fuse-ld=gold")):
        if shutil.which(name):
            return [flag]
    return []


def ninja_path() -> str | None:
    found = shutil.which("ninja")
    if found:
        return found
    try:  # the pip package puts its binary next to the module, not always on PATH
        import ninja  # type: ignore

        candidate = Path(ninja.BIN_DIR) / "ninja"
        return str(candidate) if candidate.exists() else None
    except ImportError:
        return None


def nvcc_cuda_version(nvcc_version_line: str) -> str | None:
    """'Cuda compilation tools, release 13.0, V13.0.88' -> '13.0'."""
    m = re.search(r"release (\d+\.\d+)", nvcc_version_line)
    return m.group(1) if m else None


def cuda_unavailable_reason() -> str | None:
    """Why this machine cannot build CUDA code, in one sentence; None when it can."""
    info = torch_info()
    if info.cuda is None:
        return f"this torch ({info.version}) was built without CUDA; install a CUDA build of torch to build CUDA kernels"
    if nvcc_path() is None:
        return "nvcc was not found; install the CUDA toolkit, or set CUDA_HOME to the folder holding bin/nvcc"
    return None


def gpu_available() -> bool:
    if torch_info().cuda is None:
        return False
    torch = torch_facts.imported_torch()
    if torch is not None:
        return torch.cuda.is_available()
    return torch_facts.driver_gpu_capability() is not None


def parse_archs(text: str) -> list[str]:
    """'9.0', '90', 'sm_90', '8.0;9.0+PTX', '9.0a' -> ['9.0', ...] (keeps +PTX and a/f suffixes)."""
    archs = []
    for part in re.split(r"[;,\s]+", text.strip()):
        if not part:
            continue
        core = part.lower()
        ptx = core.endswith("+ptx")
        core = core.removesuffix("+ptx").removeprefix("sm_").removeprefix("compute_")
        m = re.fullmatch(r"(\d{1,2})\.?(\d)([af]?)", core)
        if not m:
            raise ToolchainError(f"cannot read the CUDA arch {part!r}: use forms like 9.0, 90 or sm_90")
        archs.append(f"{m.group(1)}.{m.group(2)}{m.group(3)}" + ("+PTX" if ptx else ""))
    return archs


def cuda_archs() -> tuple[str, ...]:
    """The archs to build for: KWB_CUDA_ARCH, else the visible GPU's, else TORCH_CUDA_ARCH_LIST,
    else 9.0 with a notice. Never torch's all-arch default (several times slower to build)."""
    if os.environ.get("KWB_CUDA_ARCH"):
        return tuple(parse_archs(os.environ["KWB_CUDA_ARCH"]))
    if gpu_available():
        torch = torch_facts.imported_torch()
        major, minor = torch.cuda.get_device_capability() if torch is not None else torch_facts.driver_gpu_capability()
        return (f"{major}.{minor}",)
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return tuple(parse_archs(os.environ["TORCH_CUDA_ARCH_LIST"]))
    notices.once("arch-default", f"kwb: no GPU visible and neither KWB_CUDA_ARCH nor TORCH_CUDA_ARCH_LIST is set; building CUDA code for sm_{DEFAULT_ARCH.replace('.', '')}")
    return (DEFAULT_ARCH,)


# What torch.utils.cpp_extension gives nvcc for a .cu written against torch's headers.
TORCH_NVCC_FLAGS = ("-D__CUDA_NO_HALF_OPERATORS__", "-D__CUDA_NO_HALF_CONVERSIONS__", "-D__CUDA_NO_BFLOAT16_CONVERSIONS__",
                    "-D__CUDA_NO_HALF2_OPERATORS__", "--expt-relaxed-constexpr")


def python_include() -> str:
    """Python.h's folder (torch/extension.h includes it)."""
    import sysconfig

    return sysconfig.get_paths()["include"]


@functools.cache
def pybind11_abi_flags() -> tuple[str, ...]:
    """The pybind11 ABI torch was built with (-DPYBIND11_COMPILER_TYPE=... and kin), as
    torch.utils.cpp_extension passes them where torch records them (older torch; newer has none),
    so a module's pybind11 types are torch's."""
    import torch  # recorded only in torch._C; torch-style builds import torch anyway to load

    flags = []
    for name in ("COMPILER_TYPE", "STDLIB", "BUILD_ABI"):
        value = getattr(torch._C, f"_PYBIND11_{name}", None)
        if value is not None:
            flags.append(f'-DPYBIND11_{name}="{value}"')
    return tuple(flags)


def gencode_flags(archs: tuple[str, ...]) -> list[str]:
    flags = []
    for arch in archs:
        ptx = arch.endswith("+PTX")
        num = arch.removesuffix("+PTX").replace(".", "")
        flags.append(f"-gencode=arch=compute_{num},code=sm_{num}")
        if ptx:
            flags.append(f"-gencode=arch=compute_{num},code=compute_{num}")
    return flags

