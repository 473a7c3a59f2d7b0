"""The rows of the table of a build's GPU functions (kwb_store.resources' records) that
`kwb cache info`, `kwb build -v` and a raw kernel's notebook view show, and a function's
short name for them and for notices. No torch here.
"""
from __future__ import annotations

from kwb_store.resources import FunctionResources


def short_name(name: str, width: int = 60) -> str:
    """A kernel's name without its parameter list, cut to width: 'forward_kernel<float, 4, true>'."""
    base = name
    if name.endswith(")"):  # drop the parameter list, matching parentheses from the end
        depth = 0
        for i in range(len(name) - 1, -1, -1):
            depth += name[i] == ")"
            depth -= name[i] == "("
            if depth == 0:
                base = name[:i]
                break
    base = base.removeprefix("void ").replace("(anonymous namespace)::", "")
    return base if len(base) <= width else base[: width - 1] + "…"


TABLE_COLUMNS = ("function", "arch", "regs", "spill st/ld", "stack", "smem", "max threads")


def table_rows(functions: list[FunctionResources]) -> list[tuple[str, ...]]:
    """One row per function for a table with TABLE_COLUMNS."""
    return [(short_name(f.name), f.arch, str(f.registers), f"{f.spill_stores}/{f.spill_loads}", str(f.stack_bytes),
             str(f.static_smem), str(f.max_threads_per_block())) for f in functions]
