"""Shared fixtures. Every test session builds into its own cache folder (never the user's)."""
from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path

import pytest

# One cache for the whole run, pytest-xdist's workers included: they start from the controller's
# environment, so the shipped kernels are built once a run, not once a worker (kwb's lock lets
# two workers ask for one build at once).
_SESSION_CACHE = os.environ.get("KWB_TEST_SESSION_CACHE") or tempfile.mkdtemp(prefix="kwb-test-cache-")
_OWNS_SESSION_CACHE = "KWB_TEST_SESSION_CACHE" not in os.environ
os.environ["KWB_TEST_SESSION_CACHE"] = _SESSION_CACHE
os.environ["TORCH_EXTENSIONS_DIR"] = _SESSION_CACHE
os.environ.setdefault("KWB_CUDA_ARCH", "9.0")  # quiet the no-GPU arch notice; the H100's arch

import torch

HAS_GPU = torch.cuda.is_available()


def _has_nvcc() -> bool:
    from workbench.jit import toolchain

    return toolchain.cuda_unavailable_reason() is None


HAS_NVCC = _has_nvcc()


def _has_nvrtc() -> bool:
    from workbench.jit import nvrtc

    try:
        nvrtc.version()
    except Exception:  # noqa: BLE001 - any reason NVRTC cannot be loaded means: skip
        return False
    return True


HAS_NVRTC = _has_nvrtc()


def pytest_collection_modifyitems(config, items):
    no_gpu = pytest.mark.skip(reason="needs a CUDA GPU (none visible)")
    no_nvcc = pytest.mark.skip(reason="needs nvcc and a CUDA build of torch to compile CUDA code")
    no_nvrtc = pytest.mark.skip(reason="needs NVRTC, which comes with a CUDA build of torch")
    for item in items:
        if "cuda" in item.keywords and not HAS_GPU:
            item.add_marker(no_gpu)
        if "nvcc" in item.keywords and not HAS_NVCC:
            item.add_marker(no_nvcc)
        if "nvrtc" in item.keywords and not HAS_NVRTC:
            item.add_marker(no_nvrtc)


def pytest_sessionstart(session):
    """Before a run over whole folders (the default `python -m pytest`), build the shipped
    kernels' CPU code side by side into the session cache. The test modules load them at import,
    one after another, while the other workers wait on the same builds: 117 s of collection on
    the 2-core machine, about 65 s side by side. Runs before pytest-xdist starts its workers
    (its sessionstart is trylast); not for a chosen subset (-k, --lf), where it may be waste."""
    config = session.config
    if hasattr(config, "workerinput") or config.option.collectonly or config.option.keyword or config.getoption("lf", False):
        return
    if not config.args or not all(Path(a.split("::")[0]).is_dir() for a in config.args):
        return
    from workbench.jit.parallel import load_all
    from workbench.jit.sources import builtin_names

    try:
        load_all(builtin_names(), device="cpu", what="shipped kernels for the tests")
    except Exception as e:  # noqa: BLE001 - the tests that load them report any failure, with its cause
        print(f"conftest: building the shipped kernels first failed ({e}); the tests build them as they load them")


def pytest_xdist_auto_num_workers(config):
    # `-n auto`: a worker a core up to 8; more workers than that fight over the GPU and the disk
    return max(1, min(os.cpu_count() or 1, 8))


def pytest_sessionfinish(session, exitstatus):
    if _OWNS_SESSION_CACHE:
        shutil.rmtree(_SESSION_CACHE, ignore_errors=True)


@pytest.fixture
def cache_root() -> Path:
    return Path(os.environ["TORCH_EXTENSIONS_DIR"])


# A minimal kernel folder: one op, add_value(x) = x + VALUE, where VALUE comes from a header,
# so tests can edit the source, the header or the flags and see which result comes back.
TINY_CPP = """\
#include <ATen/ops/add.h>
#include "kwb_library.h"
#include "value.h"

namespace {
at::Tensor add_value(const at::Tensor& x) { return at::add(x, VALUE * SCALE); }
}

KWB_LIBRARY(m) { m.def("add_value(Tensor x) -> Tensor"); }
KWB_LIBRARY_IMPL(m, CPU) { m.impl("add_value", &add_value); }
"""

TINY_HEADER = "#pragma once\n#define VALUE 1.0\n"


def write_tiny_kernel(folder: Path, value: str = "1.0", scale: str = "1.0", cpp: str | None = None) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "tiny.cpp").write_text((cpp or TINY_CPP).replace("VALUE * SCALE", f"VALUE * {scale}"))
    (folder / "value.h").write_text(f"#pragma once\n#define VALUE {value}\n")
    return folder


@pytest.fixture
def tiny_kernel(tmp_path) -> Path:
    return write_tiny_kernel(tmp_path / "tiny")


def run_python(code: str, env: dict | None = None, timeout: float = 600) -> subprocess.CompletedProcess:
    """Run `code` in a fresh interpreter with this session's cache."""
    full_env = dict(os.environ, **(env or {}))
    return subprocess.run([sys.executable, "-c", textwrap.dedent(code)], capture_output=True, text=True,
                          env=full_env, timeout=timeout, check=False)

