"""Packaging: a non-editable install carries the kernel sources (built from the wheel, not the checkout); the README stays a guide."""
from __future__ import annotations

import re
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


@pytest.mark.slow
def test_the_wheel_ships_kernel_sources_and_the_kwb_command(tmp_path):
    res = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", str(ROOT), "-w", str(tmp_path)],
                         capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr
    [wheel] = tmp_path.glob("kwb-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    for needed in ("kwb_kernels/relu_scale/relu_scale.cu", "kwb_kernels/relu_scale/relu_scale.cpp",
                   "kwb_kernels/relu_scale/spec.py", "kwb_kernels/relu_scale/ops.py",
                   "kwb_kernels/common/kwb_elementwise.cuh", "workbench/jit/include/kwb_library.h",
                   "workbench/jit/include/kwb_deferred_registration.h", "workbench/jit/include/kwb_torch_library.h",
                   "workbench/jit/include/kwb_inline.h", "workbench/jit/include/kwb_inline.cuh",
                   "workbench/jit/include/kwb_light_torch/torch/extension.h",
                   "workbench/jit/include/kwb_light_torch_py/torch/extension.h",
                   "workbench/jit/loader.py", "workbench/harness/spec.py", "workbench/report/plots.py",
                   "kwb_store/layout.py", "kwb_store/manifest.py", "cache_tools/commands.py"):
        assert needed in names, needed
    entry_points = next(n for n in names if n.endswith("entry_points.txt"))
    assert "kwb = workbench.cli:main" in zipfile.ZipFile(wheel).read(entry_points).decode()
    # one version string: the wheel's comes from workbench.__version__ (pyproject reads it)
    import workbench

    metadata = next(n for n in names if n.endswith("METADATA"))
    assert f"Version: {workbench.__version__}\n" in zipfile.ZipFile(wheel).read(metadata).decode()
    assert 'version = "' not in (ROOT / "pyproject.toml").read_text()


def test_the_readme_stays_a_users_guide_and_its_links_resolve():
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 350, "design and results belong in docs/ (design.md, results.md)"
    for target in re.findall(r"\]\(((?!https?:)[^)#\s]+)", readme):
        assert (ROOT / target).exists(), f"README links to {target}, which is not in the repository"
