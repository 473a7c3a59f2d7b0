"""The kwb command, run as a user runs it."""
from __future__ import annotations

import subprocess
import sys

import pytest


def kwb(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True, timeout=600, check=False)


@pytest.mark.parametrize("sub", [[], ["list"], ["build"], ["doctor"], ["check"], ["bench"], ["run"]])
def test_help_says_what_each_command_does(sub):
    res = kwb(*sub, "--help")
    assert res.returncode == 0 and "Usage:" in res.stdout
    assert len(res.stdout.split("\n\n", 2)[1].strip()) > 20


def test_build_then_list_shows_built_and_a_bare_build_is_a_usage_error():
    res = kwb("build", "relu_scale", "vector_add", "--device", "cpu")
    assert res.returncode == 0, res.stderr
    assert "relu_scale (cpu)" in res.stdout and "ops: relu_scale, relu_scale_backward" in res.stdout
    res = kwb("list", "--device", "cpu")
    assert res.returncode == 0
    rows = [l for l in res.stdout.splitlines() if "relu_scale" in l or "vector_add" in l]
    assert len(rows) == 2 and all("built" in r and "not built" not in r for r in rows)
    bare = kwb("build")
    assert bare.returncode == 2 and "pass --all" in bare.stderr


def test_build_of_an_unknown_kernel_is_bad_usage_exit_2():
    res = kwb("build", "no_such_kernel")
    assert res.returncode == 2 and "no kernel 'no_such_kernel'" in res.stderr


def test_doctor_reports_each_tool_with_a_status():
    res = kwb("doctor")
    assert res.returncode in (0, 1)
    for name in ("python", "torch", "c++ compiler", "ninja", "nvcc", "gpu", "cache"):
        line = next((l for l in res.stdout.splitlines() if f"  {name}  " in l or l.split()[1:2] == [name]), None)
        assert line and line.split()[0] in ("ok", "warn", "fail"), (name, res.stdout)
    import torch

    if torch.version.cuda:  # a CUDA build of torch brings NVRTC: raw kernels' compiler is checked too
        assert any(l.split()[1:2] == ["nvrtc"] for l in res.stdout.splitlines()), res.stdout
