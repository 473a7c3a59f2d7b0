"""kwb: a JIT-compiled CUDA kernel workbench for PyTorch.

    import workbench as wb
    k = wb.load("relu_scale")        # compiles on first use, cached on disk afterwards
    y = k.relu_scale(x, 1.5)
    wb.check("relu_scale")           # against its float64 reference, every dtype and odd shape
    wb.bench("relu_scale")           # beside eager PyTorch and torch.compile

Attributes are imported on first use, so `import workbench` and the `kwb` command stay fast.
"""
from __future__ import annotations

import importlib

__version__ = "0.1.0"

_LAZY = {
    "load": ("workbench.loader", "load"),
    "load_inline": ("workbench.inline", "load_inline"),
    "cache_root": ("workbench.loader", "cache_root"),
    "Kernel": ("workbench.library", "Kernel"),
    "kernels_dir": ("workbench.sources", "kernels_dir"),
    "list_kernels": ("workbench.sources", "builtin_names"),
    "BuildError": ("workbench.errors", "BuildError"),
    "ToolchainError": ("workbench.errors", "ToolchainError"),
    "KernelNotFoundError": ("workbench.errors", "KernelNotFoundError"),
    "LoadError": ("workbench.errors", "LoadError"),
    "KwbError": ("workbench.errors", "KwbError"),
    "Diagnostic": ("workbench.errors", "Diagnostic"),
    "check": ("workbench.correctness", "check"),
    "bench": ("workbench.benchmark", "bench"),
    "run": ("workbench.runner", "run"),
    "Tolerance": ("workbench.spec", "Tolerance"),
    "CheckReport": ("workbench.correctness", "CheckReport"),
    "BenchReport": ("workbench.benchmark", "BenchReport"),
}

# Submodules a user reaches as wb.<name> (wb.spec.randn, wb.plots.latency, ...).
_SUBMODULES = ("spec", "plots", "results", "timing")

__all__ = sorted(_LAZY) + list(_SUBMODULES)


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if name in _SUBMODULES:
        return importlib.import_module(f"workbench.{name}")
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


def load_ipython_extension(ipython) -> None:
    """`%load_ext workbench`: the %%cuda and %%cpp cell magics (workbench/magics.py)."""
    from .magics import load_ipython_extension as register

    register(ipython)


def __dir__():
    return sorted(list(globals()) + list(_LAZY))
