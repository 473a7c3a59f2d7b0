"""Turn compiler and linker output into Diagnostics that point into the user's files.

Formats seen with gcc 12 and nvcc 13.0:
    gcc:    /abs/relu_scale.cpp:3:10: error: 'x' was not declared in this scope
    nvcc:   /abs/relu_scale.cu(4): error: identifier "x" is undefined   (column: the caret line)
    ld:     relu_scale.cpp:(.text+0x5): undefined reference to `launch(...)'
    tools:  nvcc fatal   : Unsupported gpu architecture 'compute_99'
            ptxas error   : Entry function '...' uses too much shared data
"""
from __future__ import annotations

import os
import re

from .errors import Diagnostic

_GCC = re.compile(r"^(?P<file>[^\s:][^:]*):(?P<line>\d+):(?P<col>\d+): (?P<sev>fatal error|error|warning): (?P<msg>.*)$")
_NVCC = re.compile(r"^(?P<file>[^\s(][^(]*)\((?P<line>\d+)\): (?P<sev>error|warning|catastrophic error)(?: #[\w-]+)?: (?P<msg>.*)$")
_CARET = re.compile(r"^(\s*)\^")
_LD_UNDEF = re.compile(r"undefined (?:reference to [`'](?P<sym>[^']+)'|symbol: (?P<lld>.+)$)")  # GNU ld / gold, lld
_TOOL = re.compile(r"^(?P<tool>ld\.lld: error|nvcc fatal|ptxas fatal|ptxas error|nvlink error|nvlink fatal|c\+\+: fatal error|g\+\+: fatal error|cc1plus: fatal error|collect2: error)\s*:\s*(?P<msg>.*)$")


def _read_line(path: str, line: int) -> str | None:
    try:
        with open(path, errors="replace") as f:
            for i, text in enumerate(f, start=1):
                if i == line:
                    return text
    except OSError:
        return None
    return None


def parse(output: str, cwd: str | None = None) -> list[Diagnostic]:
    """Every error and warning in `output`, in order, without duplicates."""
    lines = output.splitlines()
    found: list[Diagnostic] = []
    seen: set[tuple] = set()

    def add(d: Diagnostic) -> None:
        k = (d.severity, d.file, d.line, d.column, d.message)
        if k not in seen:
            seen.add(k)
            found.append(d)

    for i, text in enumerate(lines):
        m = _GCC.match(text)
        if m:
            path = _resolve(m["file"], cwd)
            line, col = int(m["line"]), int(m["col"])
            add(Diagnostic(m["sev"], m["msg"].strip(), path, line, col, _read_line(path, line)))
            continue
        m = _NVCC.match(text)
        if m:
            path = _resolve(m["file"], cwd)
            line = int(m["line"])
            col = 1
            # nvcc prints the source line, then a caret line under the column.
            for j in range(i + 1, min(i + 4, len(lines))):
                c = _CARET.match(lines[j])
                if c:
                    # nvcc indents its copy of the source by 2 spaces more than the caret base
                    src = _read_line(path, line)
                    shown = lines[j - 1] if j - 1 > i else ""
                    offset = len(shown) - len(shown.lstrip()) - (len(src) - len(src.lstrip())) if src else 0
                    col = max(len(c.group(1)) - max(offset, 0) + 1, 1)
                    break
            sev = "error" if m["sev"] == "catastrophic error" else m["sev"]
            add(Diagnostic(sev, m["msg"].strip(), path, line, col, _read_line(path, line)))
            continue
        m = _LD_UNDEF.search(text)
        if m:
            sym = (m["sym"] or m["lld"]).strip()
            add(Diagnostic("error", f"undefined reference to `{sym}' (declared but not defined in any source, or a library is missing)"))
            continue
        m = _TOOL.match(text.strip())
        if m and not m["tool"].startswith("collect2") and "undefined symbol" not in text:
            add(Diagnostic("error", f"{m['tool']}: {m['msg'].strip()}"))
    return found


def _resolve(path: str, cwd: str | None) -> str:
    path = path.strip()
    if cwd and not os.path.isabs(path):
        path = os.path.join(cwd, path)
    return os.path.normpath(path)

