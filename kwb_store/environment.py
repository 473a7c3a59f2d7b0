"""The toolchain running now, as the cache commands compare builds against it, read without
importing torch (torch's import takes seconds; `kwb cache list` should not).

torch's version, git commit and CUDA version come from the text of torch/version.py; the
compilers' versions from `--version`, cached as the builder caches them.
"""
from __future__ import annotations

import functools
import importlib.util
import os
import re
from dataclasses import dataclass
from pathlib import Path

from . import layout
from .tool_versions import tool_version


@dataclass(frozen=True)
class Running:
    python: str             # "cpython311", as manifests record it
    torch: str | None       # "2.15.0+cu132"; None: torch is not installed
    torch_git: str | None
    torch_cuda: str | None  # "13.2"; None for a CPU build of torch
    torch_dir: str | None   # the installed package folder
    tag: str                # torch.utils.cpp_extension's folder tag: "py311_cu132"

    @property
    def torch_include(self) -> str | None:
        return os.path.join(self.torch_dir, "include") if self.torch_dir else None


def _version_field(text: str, name: str) -> str | None:
    m = re.search(rf"^{name}\s*(?::[^=]*)?=\s*['\"]([^'\"]*)['\"]", text, re.MULTILINE)
    return m.group(1) if m else None


@functools.lru_cache(maxsize=1)
def running() -> Running:
    python = layout.python_tag()
    spec = importlib.util.find_spec("torch")
    torch_dir = None
    version = git = cuda = None
    if spec is not None and spec.submodule_search_locations:
        torch_dir = str(Path(next(iter(spec.submodule_search_locations))).resolve())
        try:
            text = (Path(torch_dir) / "version.py").read_text()
        except OSError:
            text = ""
        version = _version_field(text, "__version__")
        git = _version_field(text, "git_version")
        cuda = _version_field(text, "cuda")
    return Running(python, version, git, cuda, torch_dir, layout.torch_tag(cuda))


@functools.cache
def lock_style_of(torch_dir: str | None) -> str:
    """How the torch installed at torch_dir locks a JIT build: "filelock" (flock, held by a
    live process only; seen in torch 2.15, pytorch#189245) or "baton" (FileBaton, seen in torch
    2.13: the file's existence is the lock, so a killed build leaves one that blocks every
    later load). Read from that torch's source text; the running torch's when it is gone."""
    if torch_dir is None:
        return "baton"
    try:
        text = (Path(torch_dir) / "utils" / "cpp_extension.py").read_text(errors="replace")
    except OSError:
        run = running()
        return lock_style_of(run.torch_dir) if run.torch_dir and run.torch_dir != torch_dir else "baton"
    return "filelock" if "FileLock(os.path.join(build_directory" in text else "baton"


def torch_lock_style() -> str:
    """The running torch's lock style."""
    return lock_style_of(running().torch_dir)


def default_root() -> Path:
    """TORCH_EXTENSIONS_DIR, else the folder holding torch's per-tag folders
    (~/.cache/torch_extensions): every tag's builds, not only this torch's."""
    root = layout.default_root(running().torch_cuda)
    return root if os.environ.get("TORCH_EXTENSIONS_DIR") else root.parent


@functools.cache
def compiler_version(path: str | None) -> str:
    """`path --version` now ('none' if it is gone), once per path and command. Kept in memory
    only: the cache commands write nothing but what they are asked to remove."""
    return tool_version(path, None)
