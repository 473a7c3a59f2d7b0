"""kwb: a JIT-compiled CUDA kernel workbench for PyTorch.

    import workbench as wb
    k = wb.load("relu_scale")        # compiles on first use, cached on disk afterwards
    y = k.relu_scale(x, 1.5)
    wb.check("relu_scale")           # against its float64 reference, every dtype and odd shape
    wb.bench("relu_scale")           # beside eager PyTorch and torch.compile

The package is three rooms and a front door:

    jit/       sources -> compiled, cached, loaded ops (wb.load, wb.load_inline, Kernel; raw
               kernels through NVRTC: wb.cuda_kernel, wb.raw_op)
    harness/   is it right, how fast is it (wb.check, wb.bench, specs, CSV results)
    report/    tables, plots, report folders, notebook helpers
    __init__.py, cli.py, magics.py, doctor.py, runner.py: the faces people use

Imports run one way, jit <- harness <- report <- faces (tests/test_layers.py checks it).
Attributes are imported on first use, so `import workbench` and the `kwb` command stay fast.
"""
from __future__ import annotations

import importlib
import importlib.abc
import importlib.util
import sys

__version__ = "0.1.0"  # the one version string: pyproject.toml reads it from here

_LAZY = {
    "load": ("workbench.jit.loader", "load"),
    "load_inline": ("workbench.jit.inline", "load_inline"),
    "load_all": ("workbench.jit.parallel", "load_all"),
    "cache_root": ("workbench.jit.compile_cache", "cache_root"),
    "Kernel": ("workbench.jit.kernel", "Kernel"),
    "cuda_kernel": ("workbench.jit.raw_kernel", "cuda_kernel"),
    "RawKernel": ("workbench.jit.raw_launch", "RawKernel"),
    "LaunchError": ("workbench.jit.raw_launch", "LaunchError"),
    "raw_op": ("workbench.jit.raw_op", "raw_op"),
    "kernels_dir": ("workbench.jit.sources", "kernels_dir"),
    "list_kernels": ("workbench.jit.sources", "builtin_names"),
    "BuildError": ("workbench.jit.errors", "BuildError"),
    "ToolchainError": ("workbench.jit.errors", "ToolchainError"),
    "KernelNotFoundError": ("workbench.jit.errors", "KernelNotFoundError"),
    "LoadError": ("workbench.jit.errors", "LoadError"),
    "CacheError": ("workbench.jit.errors", "CacheError"),
    "KwbError": ("workbench.jit.errors", "KwbError"),
    "Diagnostic": ("workbench.jit.errors", "Diagnostic"),
    "check": ("workbench.harness.correctness", "check"),
    "bench": ("workbench.harness.benchmark", "bench"),
    "run": ("workbench.runner", "run"),
    "Tolerance": ("workbench.harness.spec", "Tolerance"),
    "KernelSpec": ("workbench.harness.spec", "KernelSpec"),
    "OpSpec": ("workbench.harness.spec", "OpSpec"),
    "CheckReport": ("workbench.harness.correctness", "CheckReport"),
    "BenchReport": ("workbench.harness.benchmark", "BenchReport"),
}

# Modules users import by their short names (`from workbench.spec import OpSpec` in a spec.py,
# wb.plots.latency, `from workbench import notebook as nb`): each is the room's module itself.
_PUBLIC_MODULES = {
    "workbench.errors": "workbench.jit.errors",
    "workbench.spec": "workbench.harness.spec",
    "workbench.timing": "workbench.harness.timing",
    "workbench.results": "workbench.harness.results",
    "workbench.plots": "workbench.report.plots",
    "workbench.notebook": "workbench.report.notebook",
}

# list displays, not sorted(...) + [...]: the form linters can read as __all__
__all__ = [name for name in sorted(_LAZY)] + [name.rpartition(".")[2] for name in _PUBLIC_MODULES]


class _PublicModules(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """`import workbench.spec` gives workbench.harness.spec, the same module object."""

    def find_spec(self, fullname, path=None, target=None):
        return importlib.util.spec_from_loader(fullname, self) if fullname in _PUBLIC_MODULES else None

    def create_module(self, spec):
        module = importlib.import_module(_PUBLIC_MODULES[spec.name])
        module.__dict__.setdefault("__own_spec__", module.__spec__)
        return module

    def exec_module(self, module) -> None:
        # The room's module already ran; the import system has just set its __spec__ to the
        # short name's: give it back its own (pickling and reload go by it).
        module.__spec__ = module.__dict__.pop("__own_spec__")


if not any(isinstance(f, _PublicModules) for f in sys.meta_path):
    sys.meta_path.append(_PublicModules())


def __getattr__(name: str):
    if name in _LAZY:
        module, attr = _LAZY[name]
        value = getattr(importlib.import_module(module), attr)
        globals()[name] = value
        return value
    if f"workbench.{name}" in _PUBLIC_MODULES:
        return importlib.import_module(f"workbench.{name}")
    raise AttributeError(f"module 'workbench' has no attribute {name!r}")


def __dir__():
    return sorted(list(globals()) + __all__)


def load_ipython_extension(ipython) -> None:
    """`%load_ext workbench`: the %%cuda and %%cpp cell magics (workbench/magics.py)."""
    from .magics import load_ipython_extension as register

    register(ipython)


def _register_views() -> None:
    """A check or bench report prints as a table and shows as Markdown in a notebook: the
    harness asks workbench.harness.views, and the report room's renderers answer."""
    from .harness import views

    def rendered(function: str):
        def render(report) -> str:
            from .report import render as render_module

            return getattr(render_module, function)(report)
        return render

    views.register("CheckReport", "text", rendered("check_text"))
    views.register("CheckReport", "markdown", rendered("check_markdown"))
    views.register("BenchReport", "text", rendered("bench_text"))
    views.register("BenchReport", "markdown", rendered("bench_report_markdown"))


_register_views()
