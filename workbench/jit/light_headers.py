"""A lighter torch/extension.h for the units of torch-style extensions.

A tutorial .cu includes torch/extension.h, and nvcc parses all of it three times over (cudafe++,
cicc, the host compile): 72 s for the tutorial LLTM's .cu on the 2-core machine, 34 s with
torch/types.h in its place (benchmarks/reference/workbench_choices.md). Kernels and their launch
code use ATen and the torch:: tensor API, not the C++ frontend (torch::nn, optim, data) or the
Python bindings, so kwb puts workbench/jit/include/kwb_light_torch/ first on such a unit's include path,
whose torch/extension.h includes torch/types.h alone. A C++ unit gets kwb_light_torch_py/, which
adds torch/python.h for its PYBIND11_MODULE: the frontend's templates are emitted in every unit
that includes it, precompiled header or not (11.0 s of an empty unit's compile against 6.5 s for
the tutorial's lltm.cpp without it, 2-core machine). A unit that turns out to need more fails
to compile; kwb then compiles it with torch's own header and, where that compiles it,
remembers that for the build folder. KWB_TORCH_HEADERS=full turns the lighter headers off.
"""
from __future__ import annotations

import json
import os
import re
from pathlib import Path

from kwb_store.fsutil import atomic_write_text

from .sources import core_include_dir

RECORD = ".kwb-full-torch-headers.json"  # per build folder: units that need torch's own header
_INCLUDES_EXTENSION_H = re.compile(r'^\s*#\s*include\s*[<"]torch/extension\.h[>"]', re.MULTILINE)
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)


def enabled() -> bool:
    return os.environ.get("KWB_TORCH_HEADERS", "").strip().lower() != "full"


def folder(cuda: bool = True) -> Path:
    """The lighter header's folder: torch/types.h alone for CUDA units, with torch/python.h for C++ ones."""
    return core_include_dir() / ("kwb_light_torch" if cuda else "kwb_light_torch_py")


def flag(path: Path) -> str:
    """The include flag that puts the lighter header first for the unit at `path`."""
    return f"-I{folder(cuda=path.suffix == '.cu')}"


def is_light_flag(text: str) -> bool:
    return text in (f"-I{folder(True)}", f"-I{folder(False)}")


def wants_light(path: Path, full_units: set[str]) -> bool:
    """A unit that includes torch/extension.h, itself or through a file it includes with quotes
    (load_inline's wrapper includes the cell's text: that .cu compiled against all of torch's
    header, 154 s on the 2-core machine), and has not needed the whole of it before."""
    if str(path) in full_units or not enabled():
        return False
    return _includes_extension_h(path, depth=2)


def _includes_extension_h(path: Path, depth: int) -> bool:
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return False
    if _INCLUDES_EXTENSION_H.search(text):
        return True
    return depth > 0 and any(_includes_extension_h(path.parent / name, depth - 1)
                             for name in _QUOTED_INCLUDE.findall(text) if (path.parent / name).is_file())


def full_units(build_dir: Path) -> set[str]:
    try:
        units = json.loads((build_dir / RECORD).read_text())
    except (OSError, ValueError):
        return set()
    return {u for u in units if isinstance(u, str)} if isinstance(units, list) else set()


def remember_full(build_dir: Path, units: set[str]) -> None:
    atomic_write_text(build_dir / RECORD, json.dumps(sorted(units), indent=1))


_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(.+)$", re.MULTILINE)  # ninja 1.12+ adds "[code=N] "


def failed_objects(ninja_output: str) -> set[str]:
    """The files ninja says it failed to build."""
    return {name for line in _FAILED.findall(ninja_output) for name in line.split()}
