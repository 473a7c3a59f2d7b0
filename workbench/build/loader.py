"""wb.load(): a kernel folder in, a Kernel with callable ops out, compiling only when needed."""
from __future__ import annotations

import threading
from pathlib import Path

from cache_tools import layout

from . import builder, device as devices, notices, toolchain
from .errors import LoadError
from .kernel import Kernel, load_library
from .sources import KernelSource, resolve

_process_lock = threading.RLock()


def cache_root() -> Path:
    """Where builds go: TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/<py>_<cu>/."""
    root = layout.default_root(toolchain.torch_info().cuda)
    root.mkdir(parents=True, exist_ok=True)
    return root


def load_source(source: KernelSource, device=None, verbose: bool = False, force: bool = False,
                extra_cflags=(), extra_cuda_cflags=(), extra_ldflags=(), cuda_includes_torch: bool = False) -> Kernel:
    device = devices.choose(device, what=source.name)
    root = cache_root()
    with _process_lock:
        config = builder.make_config(source, device, root, extra_cflags, extra_cuda_cflags, extra_ldflags, cuda_includes_torch)
        build = None if force else builder.find_cached(source, config, root)
        if build is None:
            build = builder.build(source, config, root, verbose=verbose, force=force)
        elif verbose:
            notices.say(f"kwb: {source.name} ({device}) is cached: {build.library}")
        try:
            kernel = load_library(source, build)
        except LoadError:
            if build.library.exists():
                raise
            # `kwb cache clean` removed the build between finding and loading it: build again
            build = builder.build(source, config, root, verbose=verbose)
            kernel = load_library(source, build)
        layout.mark_loaded(build.manifest_path)
        return kernel


def load(name_or_path: str | Path, *, device=None, verbose: bool = False, force: bool = False,
         extra_cflags=(), extra_cuda_cflags=(), extra_ldflags=()) -> Kernel:
    """Load a kernel, building it first if its sources, headers, flags or toolchain changed.

    name_or_path: a kernel kwb ships ("relu_scale") or a kernel folder of your own.
    device: "cuda", "cpu", or None for CUDA when a GPU and nvcc are present. A CUDA build
        holds the CPU implementation too; ops dispatch on their inputs' device.
    verbose: print the compiler commands.
    force: rebuild even if a cached build matches.

    Calling it again after editing a source or header builds and returns the new code, in the
    same process; unchanged sources return the same Kernel at once.
    """
    return load_source(resolve(name_or_path), device, verbose, force, extra_cflags, extra_cuda_cflags, extra_ldflags)
