"""The rule programmatic dependent launch rests on (kernels/common/kwb_cuda.cuh): a kernel launched
through kwb::launch_kernel may start while the kernel before it still runs, so its first statement
must be wait_prior_grid(), before any memory access or early return. A kernel that broke it would
read half-written inputs, and would let the kernel after it overlap the one before. Read from the
sources, so it holds for kernels no GPU test reaches."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

KERNELS = Path(__file__).resolve().parents[1] / "kernels"
SOURCES = sorted(p for p in KERNELS.rglob("*") if p.suffix in (".cu", ".cuh"))


def _without_comments(text: str) -> str:
    return re.sub(r"//[^\n]*|/\*.*?\*/", "", text, flags=re.DOTALL)


def launched_through_launch_kernel() -> set[str]:
    names = set()
    for path in SOURCES:
        for m in re.finditer(r"(?<!void )\blaunch_kernel\(\s*(?:kwb::)?(\w+)", _without_comments(path.read_text())):
            names.add(m.group(1))
    return names


# compile-time statements: no memory access, so they may come before the wait
COMPILE_TIME = re.compile(r"(using|typedef|constexpr|static_assert)\b")


def first_statements(name: str) -> list[tuple[str, str]]:
    """(file, first statement of the body that runs on the device) for each __global__ definition
    of `name`."""
    found = []
    for path in SOURCES:
        text = _without_comments(path.read_text())
        for m in re.finditer(r"__global__[^;{}]*?\b" + re.escape(name) + r"\s*\(", text):
            depth, i = 1, m.end()
            while depth:  # to the parameter list's closing parenthesis
                depth += {"(": 1, ")": -1}.get(text[i], 0)
                i += 1
            start = text.index("{", i) + 1
            while True:
                end = text.index(";", start)
                statement = " ".join(text[start:end].split())
                if not COMPILE_TIME.match(statement):
                    break
                start = end + 1
            found.append((path.name, statement))
    return found


def test_the_sources_launch_kernels_through_launch_kernel():
    # the rule below must have something to check: the map, the norms and the column sums
    assert {"map_kernel", "column_sums_kernel", "norm_forward_regs", "norm_backward_loop"} <= launched_through_launch_kernel()


@pytest.mark.parametrize("name", sorted(launched_through_launch_kernel()))
def test_a_kernel_launched_with_pdl_waits_for_the_one_before_first(name):
    definitions = first_statements(name)
    assert definitions, f"{name}: launched through launch_kernel, but no __global__ definition found under kernels/"
    for file, first in definitions:
        assert re.fullmatch(r"(kwb::)?wait_prior_grid\(\)", first), (
            f"{file}: {name}'s first statement is `{first}`, not wait_prior_grid(): launched through "
            "launch_kernel it may start while the kernel before it still runs")
