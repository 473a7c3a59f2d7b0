"""Lighter torch/extension.h headers for the units of torch-style extensions.

A tutorial .cu includes torch/extension.h, and nvcc parses all of it three times over (cudafe++,
cicc, the host compile): 72 s for the tutorial LLTM's .cu on the 2-core machine, 34 s with
torch/types.h in its place (benchmarks/reference/workbench_choices.md), about half that again
with ATen's core and the few ATen ops the unit calls (61 s against 32 s, the same .cu, a loaded
2-core machine). Kernels and their launch code use ATen and the torch:: tensor API, not the C++
frontend (torch::nn, optim, data) or the Python bindings, so each such unit compiles against the
lightest of three levels that compiles it, found first on its include path:

    ops    (.cu units) a header kwb writes for the unit into the build folder: ATen's Tensor,
           AT_DISPATCH, the ATen ops the unit names (torch::zeros_like -> ATen/ops/zeros_like.h)
           and `namespace torch { using namespace at; }`; it stands in for torch/types.h too
           (load_inline's CUDA prelude includes that);
    types  workbench/jit/include/kwb_light_torch/: torch/types.h alone; for C++ units,
           kwb_light_torch_py/ adds torch/python.h for their PYBIND11_MODULE (the frontend's
           templates are emitted in every unit that includes it, precompiled header or not: 11.0 s
           of an empty unit's compile against 6.5 s for the tutorial's lltm.cpp without it);
    full   torch's own header.

A unit that fails to compile at its level is compiled again one level down, and the build folder
remembers the level that compiled it; a unit that fails with torch's own header reports torch's
errors. KWB_TORCH_HEADERS=full turns the lighter levels off.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
from pathlib import Path

from kwb_store.fsutil import atomic_write_text

from . import torch_facts
from .sources import core_include_dir

RECORD = ".kwb-full-torch-headers.json"  # per build folder: {unit: the level that compiled it}
OPS_FOLDER = "kwb_torch_ops"  # in the build folder: one generated header folder per .cu unit
OPS, TYPES, FULL = "ops", "types", "full"
_NEXT = {OPS: TYPES, TYPES: FULL}
_INCLUDES_EXTENSION_H = re.compile(r'^\s*#\s*include\s*[<"]torch/extension\.h[>"]', re.MULTILINE)
_QUOTED_INCLUDE = re.compile(r'^\s*#\s*include\s*"([^"]+)"', re.MULTILINE)
_QUALIFIED_CALL = re.compile(r"\b(?:torch|at)::([a-z_][a-z0-9_]*)\s*[(<]")
_ANY_CALL = re.compile(r"\b([a-z_][a-z0-9_]*)\s*\(")
_USES_NAMESPACE = re.compile(r"\busing\s+namespace\s+(?:torch|at)\s*;")


def enabled() -> bool:
    return os.environ.get("KWB_TORCH_HEADERS", "").strip().lower() != "full"


def folder(cuda: bool = True) -> Path:
    """The types level's folder: torch/types.h alone for CUDA units, with torch/python.h for C++ ones."""
    return core_include_dir() / ("kwb_light_torch" if cuda else "kwb_light_torch_py")


def is_light_flag(text: str) -> bool:
    """Whether a compile flag puts one of the lighter headers first."""
    if not text.startswith("-I"):
        return False
    path = Path(text[2:])
    return path in (folder(True), folder(False)) or path.parent.name == OPS_FOLDER


def wants_light(path: Path) -> bool:
    """A unit that includes torch/extension.h, itself or through a file it includes with quotes
    (load_inline's wrapper includes the cell's text: that .cu compiled against all of torch's
    header, 154 s on the 2-core machine)."""
    return enabled() and _includes_extension_h(path, depth=2)


def _texts(path: Path, depth: int) -> list[str]:
    """The unit's text and that of the files it includes with quotes, `depth` deep."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return []
    out = [text]
    if depth > 0:
        for name in _QUOTED_INCLUDE.findall(text):
            if (path.parent / name).is_file():
                out += _texts(path.parent / name, depth - 1)
    return out


def _includes_extension_h(path: Path, depth: int) -> bool:
    return any(_INCLUDES_EXTENSION_H.search(t) for t in _texts(path, depth))


def ops_header(path: Path) -> str:
    """The ops level's torch/extension.h for the unit at `path`: ATen's core, AT_DISPATCH, the
    packed accessors, and a header per ATen op the unit calls (by name, where ATen has one)."""
    texts = _texts(path, depth=2)
    names = {n for t in texts for n in _QUALIFIED_CALL.findall(t)}
    if any(_USES_NAMESPACE.search(t) for t in texts):  # calls written without torch:: or at::
        names |= {n for t in texts for n in _ANY_CALL.findall(t)}
    ops_dir = torch_facts.package_dir() / "include" / "ATen" / "ops"
    ops = sorted(n for n in names if (ops_dir / f"{n}.h").is_file())
    # One guard for both names it is written under (torch/extension.h, torch/types.h): GCC's #pragma
    # once takes two files for one only where their mtimes share a second, and a second apart the
    # aliases below were defined twice and the unit compiled again one level down.
    return ("// kwb's torch/extension.h for one CUDA unit (workbench/jit/light_headers.py): ATen's core and\n"
            "// the ATen ops this unit names; a unit that needs more compiles again with torch/types.h.\n"
            "#ifndef KWB_TORCH_OPS_HEADER\n#define KWB_TORCH_OPS_HEADER\n"
            "#include <ATen/core/Tensor.h>\n#include <ATen/Dispatch.h>\n#include <ATen/TensorOptions.h>\n"
            + "".join(f"#include <ATen/ops/{n}.h>\n" for n in ops)
            + _torch_namespace() + "#endif  // KWB_TORCH_OPS_HEADER\n")


# torch/types.h's own declarations in namespace torch (torch::kFloat32, torch::Dtype, optional),
# read from the installed torch so they match its version: a host wrapper writes `torch::kFloat32`
# as often as `torch::kFloat`, and a miss costs the unit a second, heavier compile.
_TYPES_DECLARATION = re.compile(r"^\s*(?:using std::\w+;|using Dtype = [\w:]+;|constexpr auto k\w+ = [\w:]+;)", re.MULTILINE)


def _torch_namespace() -> str:
    types_h = torch_facts.package_dir() / "include" / "torch" / "csrc" / "api" / "include" / "torch" / "types.h"
    try:
        declarations = [m.group(0).strip() for m in _TYPES_DECLARATION.finditer(types_h.read_text())]
    except OSError:
        declarations = []
    return "#include <optional>\nnamespace torch {\nusing namespace at;\n" + "".join(f"{d}\n" for d in declarations) + "}  // namespace torch\n"


class Levels:
    """Each torch-style unit's level in one build folder: where it compiled before, else its
    lightest (ops for a .cu, types for a C++ unit)."""

    def __init__(self, build_dir: Path):
        self.build_dir = build_dir
        self.known = _read(build_dir)

    def level(self, path: Path) -> str:
        return self.known.get(str(path)) or (OPS if path.suffix == ".cu" else TYPES)

    def flags(self, path: Path) -> list[str]:
        """The include flag that puts the unit's lighter header first; none for torch's own."""
        if not wants_light(path):
            return []
        level = self.level(path)
        if level == FULL:
            return []
        if level == TYPES:
            return [f"-I{folder(cuda=path.suffix == '.cu')}"]
        return [f"-I{self._write_ops_header(path)}"]

    def _write_ops_header(self, path: Path) -> Path:
        digest = hashlib.sha256(str(path).encode()).hexdigest()[:12]
        include = self.build_dir / OPS_FOLDER / f"{path.stem}-{digest}"
        text = ops_header(path)
        for name in ("extension.h", "types.h"):  # load_inline's CUDA prelude includes torch/types.h
            target = include / "torch" / name
            if not target.is_file() or target.read_text() != text:  # unchanged: ninja's mtime stays
                target.parent.mkdir(parents=True, exist_ok=True)
                atomic_write_text(target, text)
        return include

    def demote(self, units: set[str]) -> set[str]:
        """Move each unit one level down; the units now at torch's own header."""
        for unit in units:
            self.known[unit] = _NEXT.get(self.level(Path(unit)), FULL)
        return {u for u in units if self.known[u] == FULL}

    def save(self) -> None:
        atomic_write_text(self.build_dir / RECORD, json.dumps(dict(sorted(self.known.items())), indent=1))


def _read(build_dir: Path) -> dict[str, str]:
    try:
        record = json.loads((build_dir / RECORD).read_text())
    except (OSError, ValueError):
        return {}
    if isinstance(record, list):  # the older record: the units that needed torch's own header
        return {u: FULL for u in record if isinstance(u, str)}
    if not isinstance(record, dict):
        return {}
    return {u: v for u, v in record.items() if isinstance(u, str) and v in (OPS, TYPES, FULL)}


_FAILED = re.compile(r"^FAILED: (?:\[code=\d+\] )?(.+)$", re.MULTILINE)  # ninja 1.12+ adds "[code=N] "


def failed_objects(ninja_output: str) -> set[str]:
    """The files ninja says it failed to build."""
    return {name for line in _FAILED.findall(ninja_output) for name in line.split()}
