"""Each GPU function's resource use, read from ptxas's report as nvcc compiles (--resource-usage:
no extra tool, no extra pass; cuobjdump is not in every CUDA install), kept per object file in
the build folder so a build that recompiles one .cu keeps the others' records, and recorded in
the build's manifest. kwb_store.resources holds the record and the model (occupancy, limits);
cache_tools.resource_rows the table's rows.
"""
from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

from kwb_store.fsutil import atomic_write_text
from kwb_store.resources import FunctionResources

NVCC_FLAGS = ["--resource-usage"]  # ptxas's per-function report on stderr, which ninja captures
RECORD = "resources.json"  # in the build folder: {object file: [function dicts]}

_ENTRY = re.compile(r"ptxas info\s*: Compiling entry function '([^']+)' for '(sm_\w+)'")
_PROPS = re.compile(r"(\d+) bytes stack frame, (\d+) bytes spill stores, (\d+) bytes spill loads")
_USED = re.compile(r"ptxas info\s*: Used (\d+) registers")
_SMEM = re.compile(r"(\d+) bytes smem")
_CMEM = re.compile(r"(\d+) bytes cmem\[0\]")
_BARRIERS = re.compile(r"used (\d+) barriers")
_STATUS = re.compile(r"^\[\d+/\d+\] (.*)$")


def parse_ptxas(text: str, source: str = "") -> list[FunctionResources]:
    """The entry functions in ptxas's --resource-usage report (names as compiled)."""
    found: list[FunctionResources] = []
    current: dict | None = None

    def finish() -> None:
        if current is not None and "registers" in current:
            found.append(FunctionResources(name=current["mangled"], source=source, **current))

    for line in text.splitlines():
        m = _ENTRY.search(line)
        if m:
            finish()
            # registers come from the "Used" line: a function without one is not reported
            current = {"mangled": m.group(1), "arch": m.group(2), "spill_stores": 0, "spill_loads": 0,
                       "stack_bytes": 0, "static_smem": 0, "constant_bytes": 0, "barriers": 0}
            continue
        if current is None:
            continue
        m = _PROPS.search(line)
        if m:
            current.update(stack_bytes=int(m.group(1)), spill_stores=int(m.group(2)), spill_loads=int(m.group(3)))
            continue
        m = _USED.search(line)
        if m:
            current["registers"] = int(m.group(1))
            for pattern, key in ((_SMEM, "static_smem"), (_CMEM, "constant_bytes"), (_BARRIERS, "barriers")):
                hit = pattern.search(line)
                if hit:
                    current[key] = int(hit.group(1))
    finish()
    return found


def _by_step(output: str, descs: dict[str, str]) -> dict[str, str]:
    """ninja's output cut into each compile step's part: {object: text}. ninja prints a step's
    status line ('[2/3] NVCC relu_scale.cu', or the command with -v), then what it printed."""
    parts: dict[str, list[str]] = {}
    current = None
    for line in output.splitlines():
        m = _STATUS.match(line)
        if m:
            step = m.group(1)
            current = next((obj for obj, desc in descs.items() if step.endswith(f" {desc}") or f" -o {obj}" in step), None)
            continue
        if current is not None:
            parts.setdefault(current, []).append(line)
    return {obj: "\n".join(lines) for obj, lines in parts.items()}


def demangle(names: list[str]) -> dict[str, str]:
    """Mangled -> readable, through c++filt where installed (else the names as they are)."""
    tool = shutil.which("c++filt")
    if not tool or not names:
        return {n: n for n in names}
    try:
        done = subprocess.run([tool], input="\n".join(names), capture_output=True, text=True, timeout=30, check=True)
        readable = done.stdout.splitlines()
    except (OSError, subprocess.SubprocessError):
        return {n: n for n in names}
    return dict(zip(names, readable)) if len(readable) == len(names) else {n: n for n in names}


def collect(build_dir: Path, steps, output: str) -> list[FunctionResources]:
    """Every function of the build's current objects: this build's report for the objects it
    compiled, the folder's record for the others. steps: the build's (obj, source, desc, cuda)."""
    record_path = Path(build_dir) / RECORD
    try:
        record = json.loads(record_path.read_text())
        record = record if isinstance(record, dict) else {}
    except (OSError, ValueError):
        record = {}
    descs = {s.obj: Path(s.source).name for s in steps if s.cuda}
    for obj, text in _by_step(output, descs).items():
        source = next(str(s.source) for s in steps if s.obj == obj)
        functions = parse_ptxas(text, source)
        names = demangle([f.mangled for f in functions])
        record[obj] = [dict(f.to_dict(), name=names.get(f.mangled, f.mangled)) for f in functions]
    record = {obj: items for obj, items in record.items() if obj in descs}  # objects no longer built go
    atomic_write_text(record_path, json.dumps(record, indent=1))
    found = [FunctionResources.from_dict(d) for items in record.values() if isinstance(items, list) for d in items]
    return sorted((f for f in found if f is not None), key=lambda f: (f.source, f.name, f.arch))
