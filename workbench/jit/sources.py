"""What a kernel or extension is made of: its sources, how they bind to Python, and where
they are. Three kinds of binding are recognised from the sources' text:

    kwb             KWB_LIBRARY(m) { ... }: kwb's own layout (a kernel folder, see below)
    pybind          PYBIND11_MODULE(TORCH_EXTENSION_NAME, m): the PyTorch C++ extension tutorial
    torch_library   TORCH_LIBRARY(ns, m) / TORCH_LIBRARY_IMPL(ns, CPU, m): pytorch/extension-cpp

A kwb kernel folder:

    <name>/<name>.cu     __global__ kernels + launchers over raw pointers (CUDA headers only)
    <name>/<name>.cpp    op schemas, checks, the CPU implementation, registrations
    <name>/<name>_python.cpp  a PYBIND11_MODULE entry that calls the ops through the dispatcher,
                         for ops.py's public functions (optional; compiled with Python's headers)
    <name>/<name>_autograd.cpp  a C++ Autograd kernel: KWB_LIBRARY_IMPL(m, Autograd) (optional)
    <name>/ops.py        typed public functions, fake kernels and autograd (optional)
    <name>/spec.py       reference, inputs, tolerances, bytes/flops model, sizes (optional)

Any folder whose top level holds C++/CUDA sources is taken whole; a project laid out for
setup.py (no sources at its top, sources under csrc/ folders: extension_cpp/csrc/muladd.cpp,
extension_cpp/csrc/cuda/muladd.cu) gives every source under its csrc folders.
"""
from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KernelNotFoundError

_IDENT = re.compile(r"[^0-9A-Za-z_]")
_OP_DEF = re.compile(r"""\bm\.def\(\s*"(?P<name>[A-Za-z_][\w.]*)""")
CPP_SUFFIXES = (".cpp", ".cc", ".cxx")
CUDA_SUFFIXES = (".cu",)
KWB, PYBIND, TORCH_LIBRARY = "kwb", "pybind", "torch_library"
_BINDING_MARKS = {
    KWB: re.compile(r"\bKWB_LIBRARY\s*\("),
    TORCH_LIBRARY: re.compile(r"\bTORCH_LIBRARY(?:_FRAGMENT|_IMPL)?\s*\("),
    PYBIND: re.compile(r"\bPYBIND11_MODULE\s*\("),
}
KINDS_ACCEPTED = ("a kwb kernel (KWB_LIBRARY), a pybind extension (PYBIND11_MODULE, the PyTorch tutorial's way) "
                  "or a TORCH_LIBRARY extension (pytorch/extension-cpp's way)")
_SKIPPED_DIRS = {"build", "dist", "tests", "test", "__pycache__", "node_modules", "third_party"}


def kernels_dir() -> Path:
    """The kernels kwb ships: the installed `kwb_kernels` package (the repository's kernels/)."""
    spec = importlib.util.find_spec("kwb_kernels")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "kernels"


def common_dir() -> Path:
    """The kernel math the shipped kernels share (kernels/common)."""
    return kernels_dir() / "common"


def core_include_dir() -> Path:
    """kwb's own headers: op registration (kwb_library.h, kwb_torch_library.h), load_inline's
    preludes and the lighter torch/extension.h."""
    return Path(__file__).resolve().parent / "include"


def kwb_include_dirs() -> list[Path]:
    """What every build searches after its own folders: kwb's own headers, then kernels/common."""
    return [core_include_dir(), common_dir()]


def builtin_names() -> list[str]:
    root = kernels_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _is_kernel_folder(p)) if root.is_dir() else []


def _is_kernel_folder(folder: Path) -> bool:
    return any(folder.glob("*.cpp"))


def identifier(text: str) -> str:
    ident = _IDENT.sub("_", text)
    return ident if ident and not ident[0].isdigit() else f"k_{ident}"


def _read(path: Path) -> str:
    try:
        return path.read_text(errors="replace")
    except OSError:
        return ""


def binding_of(paths) -> str | None:
    """kwb, torch_library or pybind, by what the sources' text declares (in that order: a
    TORCH_LIBRARY extension may also define a Python module); None when none is there."""
    texts = [_read(Path(p)) for p in paths]
    for kind in (KWB, TORCH_LIBRARY, PYBIND):
        if any(_BINDING_MARKS[kind].search(t) for t in texts):
            return kind
    return None


def uses_torch_library(path: Path) -> bool:
    return bool(_BINDING_MARKS[TORCH_LIBRARY].search(_read(path)))


def defines_python_module(paths) -> bool:
    return any(_BINDING_MARKS[PYBIND].search(_read(Path(p))) for p in paths)


@dataclass
class KernelSource:
    """One kernel's (or extension's) sources, as the builder needs them."""

    name: str  # an identifier: used in op namespaces and file names
    folder: Path
    ident: str  # the cache entry's name: kwb_<ident>
    cpp_sources: list[Path]
    cuda_sources: list[Path]
    include_dirs: list[Path]
    kind: str = "kernel"  # where it came from: "kernel" (a folder), "inline", "sources" (a list of files)
    # cache path -> (what the user calls it, the line number its first line has there)
    display_paths: dict[str, tuple[str, int]] = field(default_factory=dict)
    binding: str = KWB  # KWB, PYBIND or TORCH_LIBRARY
    module_name: str = ""  # TORCH_EXTENSION_NAME of a pybind or TORCH_LIBRARY extension
    python_module: bool = True  # import a pybind module (torch's is_python_module)
    # the translation units whose TORCH_LIBRARY blocks kwb's shim defers (kwb_torch_library.h)
    torch_library_units: set[Path] = field(default_factory=set)
    use_pch: bool | None = None  # precompile torch/extension.h: None = kwb's choice (yes where it applies)

    @property
    def ops_file(self) -> Path | None:
        p = self.folder / "ops.py"
        return p if p.exists() and self.kind != "sources" else None

    @property
    def spec_file(self) -> Path | None:
        p = self.folder / "spec.py"
        return p if p.exists() and self.kind != "sources" else None

    @property
    def torch_style(self) -> bool:
        """Written against torch's headers the tutorial way (pybind or TORCH_LIBRARY), not kwb's."""
        return self.binding != KWB

    @functools.cached_property
    def python_units(self) -> list[Path]:
        """A kwb kernel's C++ units that hold a PYBIND11_MODULE, its Python entry: compiled with
        Python's headers, and the build is imported as a module beside its ops."""
        if self.binding != KWB:
            return []
        return [p for p in self.cpp_sources if _BINDING_MARKS[PYBIND].search(_read(p))]

    def sources(self, with_cuda: bool) -> list[Path]:
        return self.cpp_sources + (self.cuda_sources if with_cuda else [])

    def op_names(self) -> list[str]:
        """Ops or functions declared with m.def(...) in the C++ sources (read from the text, no
        build): KWB_LIBRARY's and TORCH_LIBRARY's schemas, PYBIND11_MODULE's functions."""
        names: list[str] = []
        for src in self.cpp_sources + self.cuda_sources:
            for m in _OP_DEF.finditer(_read(src)):
                op = m.group("name").split(".")[0]
                if op not in names:
                    names.append(op)
        return names


def looks_like_path(name_or_path: str | Path) -> bool:
    """A folder path rather than a kernel's name: a Path, or text with '/' or starting with '.' or '~'."""
    text = str(name_or_path)
    return isinstance(name_or_path, Path) or "/" in text or text.startswith((".", "~"))


def did_you_mean(name: str, candidates) -> str:
    """'; did you mean relu_scale?' for the closest of candidates, or '' where none is close."""
    import difflib

    close = difflib.get_close_matches(name, list(candidates), n=1)
    return f"; did you mean {close[0]}?" if close else ""


def unknown_name_error(name: str | Path) -> str | None:
    """Why `name` names no kernel (with the closest shipped name), or None where it names a
    shipped kernel or is a folder path (those are resolved, and judged, by resolve())."""
    if looks_like_path(name) or Path(str(name)).expanduser().is_dir():
        return None
    names = builtin_names()
    if str(name) in names:
        return None
    return f"no kernel {str(name)!r}{did_you_mean(str(name), names)} (shipped kernels: {', '.join(names) or 'none'})"


def resolve(name_or_path: str | Path) -> KernelSource:
    """A shipped kernel by name, or a kernel or extension folder by path."""
    text = str(name_or_path)
    builtin = kernels_dir() / text
    if not looks_like_path(name_or_path) and builtin.is_dir() and _is_kernel_folder(builtin):
        return from_folder(builtin, ident=identifier(text))
    folder = Path(text).expanduser()
    if folder.is_dir():
        folder = folder.resolve()
        # A folder outside kernels/ gets its path's hash in the cache entry, so two folders of
        # one name never share (and thrash) one build folder.
        digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
        return from_folder(folder, ident=f"{identifier(folder.name)}-{digest}")
    known = ", ".join(builtin_names()) or "none"
    raise KernelNotFoundError(f"no kernel {text!r}: not a folder, and not one of the shipped kernels ({known})"
                              f"{did_you_mean(text, builtin_names())}")


def _is_source(path: Path) -> bool:
    return path.suffix in CPP_SUFFIXES + CUDA_SUFFIXES and path.is_file()


def _csrc_sources(folder: Path) -> tuple[list[Path], list[Path]]:
    """(csrc folders, every source under them) for a project laid out for setup.py."""
    roots: list[Path] = []
    for dirpath, dirnames, _ in os.walk(folder):
        depth = len(Path(dirpath).relative_to(folder).parts)
        dirnames[:] = sorted(d for d in dirnames if not d.startswith(".") and d not in _SKIPPED_DIRS and depth < 3)
        if Path(dirpath).name == "csrc" and Path(dirpath) != folder:
            roots.append(Path(dirpath))
            dirnames[:] = []  # everything below is this csrc's
    found = sorted(p for root in roots for p in root.rglob("*") if _is_source(p))
    return roots, found


def from_folder(folder: Path, ident: str) -> KernelSource:
    top = sorted(p for p in folder.iterdir() if _is_source(p))
    roots: list[Path] = []
    files = top
    if not files:
        roots, files = _csrc_sources(folder)
    if not files:
        raise KernelNotFoundError(f"{folder} holds no C++ or CUDA source at its top or under a csrc/ folder: "
                                  f"kwb loads {KINDS_ACCEPTED}")
    binding = binding_of(files)
    if binding is None:
        raise KernelNotFoundError(f"{folder}: none of its sources ({', '.join(p.name for p in files)}) declares "
                                  f"ops or a module that kwb recognises; kwb loads {KINDS_ACCEPTED}")
    name = identifier(folder.name)
    return KernelSource(
        name=name,
        folder=folder,
        ident=ident,
        cpp_sources=[p for p in files if p.suffix in CPP_SUFFIXES],
        cuda_sources=[p for p in files if p.suffix in CUDA_SUFFIXES],
        include_dirs=[folder, *roots, *kwb_include_dirs()] if binding != KWB else [folder, *kwb_include_dirs()],
        binding=binding,
        module_name=name,
        torch_library_units={p for p in files if binding == TORCH_LIBRARY and uses_torch_library(p)},
    )


def from_files(name: str, paths, include_dirs=()) -> KernelSource:
    """torch's load(name, sources=[...]): the files given, bound however their text says."""
    files = [Path(p).expanduser().resolve() for p in paths]
    missing = [str(p) for p in files if not p.is_file()]
    if missing:
        raise KernelNotFoundError(f"sources: {', '.join(missing)} {'is' if len(missing) == 1 else 'are'} not a file")
    bad = [p.name for p in files if p.suffix not in CPP_SUFFIXES + CUDA_SUFFIXES]
    if bad:
        raise ValueError(f"sources: {', '.join(bad)} is not C++ ({', '.join(CPP_SUFFIXES)}) or CUDA (.cu)")
    binding = binding_of(files)
    if binding is None:
        raise KernelNotFoundError(f"sources: none of {', '.join(p.name for p in files)} declares ops or a module "
                                  f"that kwb recognises; kwb loads {KINDS_ACCEPTED}")
    ident = identifier(name)
    digest = hashlib.sha256("\n".join(map(str, files)).encode()).hexdigest()[:8]
    parents = list(dict.fromkeys(p.parent for p in files))
    return KernelSource(
        name=ident,
        folder=Path(os.path.commonpath([str(p) for p in parents])),
        ident=f"{ident}-{digest}",
        cpp_sources=[p for p in files if p.suffix in CPP_SUFFIXES],
        cuda_sources=[p for p in files if p.suffix in CUDA_SUFFIXES],
        include_dirs=[*parents, *[Path(d).expanduser().resolve() for d in include_dirs], *kwb_include_dirs()],
        kind="sources",
        binding=binding,
        module_name=ident,
        torch_library_units={p for p in files if binding == TORCH_LIBRARY and uses_torch_library(p)},
    )
