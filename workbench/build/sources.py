"""What a kernel is made of: finding its folder and listing its sources, headers and Python
files. A folder with this layout anywhere on disk is a kernel:

    <name>/<name>.cu     __global__ kernels + launchers over raw pointers (CUDA headers only)
    <name>/<name>.cpp    op schemas, checks, the CPU implementation, registrations
    <name>/ops.py        fake kernels and autograd (optional)
    <name>/spec.py       reference, inputs, tolerances, bytes/flops model, sizes (optional)

Any *.cpp and *.cu in the folder are compiled; headers are found by the compiler.
"""
from __future__ import annotations

import hashlib
import importlib.util
import re
from dataclasses import dataclass, field
from pathlib import Path

from .errors import KernelNotFoundError

_IDENT = re.compile(r"[^0-9A-Za-z_]")
_OP_DEF = re.compile(r"""\bm\.def\(\s*"(?P<name>[A-Za-z_][\w.]*)""")


def kernels_dir() -> Path:
    """The kernels kwb ships: the installed `kwb_kernels` package (the repository's kernels/)."""
    spec = importlib.util.find_spec("kwb_kernels")
    if spec is not None and spec.submodule_search_locations:
        return Path(next(iter(spec.submodule_search_locations)))
    return Path(__file__).resolve().parents[2] / "kernels"


def common_dir() -> Path:
    return kernels_dir() / "common"


def builtin_names() -> list[str]:
    root = kernels_dir()
    return sorted(p.name for p in root.iterdir() if p.is_dir() and _is_kernel_folder(p)) if root.is_dir() else []


def _is_kernel_folder(folder: Path) -> bool:
    return any(folder.glob("*.cpp"))


def identifier(text: str) -> str:
    ident = _IDENT.sub("_", text)
    return ident if ident and not ident[0].isdigit() else f"k_{ident}"


@dataclass
class KernelSource:
    """One kernel's sources, as the builder needs them."""

    name: str  # an identifier: used in op namespaces and file names
    folder: Path
    ident: str  # the cache entry's name: kwb_<ident>
    cpp_sources: list[Path]
    cuda_sources: list[Path]
    include_dirs: list[Path]
    kind: str = "kernel"  # or "inline"
    # cache path -> (what the user calls it, the line number its first line has there)
    display_paths: dict[str, tuple[str, int]] = field(default_factory=dict)

    @property
    def ops_file(self) -> Path | None:
        p = self.folder / "ops.py"
        return p if p.exists() else None

    @property
    def spec_file(self) -> Path | None:
        p = self.folder / "spec.py"
        return p if p.exists() else None

    def sources(self, with_cuda: bool) -> list[Path]:
        return self.cpp_sources + (self.cuda_sources if with_cuda else [])

    def op_names(self) -> list[str]:
        """Ops declared with m.def(...) in the binding sources (read from the text, no build)."""
        names: list[str] = []
        for src in self.cpp_sources:
            for m in _OP_DEF.finditer(src.read_text(errors="replace")):
                op = m.group("name").split(".")[0]
                if op not in names:
                    names.append(op)
        return names


def resolve(name_or_path: str | Path) -> KernelSource:
    """A shipped kernel by name, or a kernel folder by path."""
    text = str(name_or_path)
    builtin = kernels_dir() / text
    looks_like_path = isinstance(name_or_path, Path) or "/" in text or text.startswith(".") or text.startswith("~")
    if not looks_like_path and builtin.is_dir() and _is_kernel_folder(builtin):
        return from_folder(builtin, ident=identifier(text))
    folder = Path(text).expanduser()
    if folder.is_dir():
        folder = folder.resolve()
        if not _is_kernel_folder(folder):
            raise KernelNotFoundError(f"{folder} holds no .cpp file: a kernel folder needs a binding .cpp (and usually a .cu); see README 'Adding a kernel'")
        # A folder outside kernels/ gets its path's hash in the cache entry, so two folders of
        # one name never share (and thrash) one build folder.
        digest = hashlib.sha256(str(folder).encode()).hexdigest()[:8]
        return from_folder(folder, ident=f"{identifier(folder.name)}-{digest}")
    known = ", ".join(builtin_names()) or "none"
    raise KernelNotFoundError(f"no kernel {text!r}: not a folder, and not one of the shipped kernels ({known})")


def from_folder(folder: Path, ident: str) -> KernelSource:
    return KernelSource(
        name=identifier(folder.name),
        folder=folder,
        ident=ident,
        cpp_sources=sorted(folder.glob("*.cpp")),
        cuda_sources=sorted(folder.glob("*.cu")),
        include_dirs=[folder, common_dir()],
    )
