"""wb.load(): a kernel folder in, a Kernel with callable ops out, compiling only when needed."""
from __future__ import annotations

import shlex
import threading
from pathlib import Path
from typing import TYPE_CHECKING

from kwb_store import layout

from . import builder, notices
from . import device as devices
from .build_spec import BuildSpec, build_spec
from .errors import LoadError
from .sources import from_files, resolve

if TYPE_CHECKING:
    from .kernel import Kernel

# Held while a library is imported (registration into torch's dispatcher is process-wide).
_import_lock = threading.RLock()


def load_source(spec: BuildSpec, verbose: bool = False, force: bool = False, jobs: int | None = None) -> Kernel:
    """The kernel of a build: cached, else built (builder.build). jobs: compiler processes this
    build may run at once (ninja -j); None: ninja's default."""
    for attempt in range(2):
        build = builder.build(spec, verbose=verbose, force=force and attempt == 0, jobs=jobs)
        if not build.compiled and verbose:
            notices.say(f"kwb: {spec.what} is cached: {build.library}")
        # imports torch: once the compile is done (jit/torch_facts.py)
        from .kernel import load_library

        with _import_lock:
            try:
                kernel = load_library(spec.source, build)
            except LoadError:
                if build.library.exists() or attempt:
                    raise
                continue  # `kwb cache clean` removed the build between finding and loading it: build again
            layout.mark_loaded(build.manifest_path)
            return kernel
    raise AssertionError("unreachable")


def flag_list(value, what: str) -> list[str]:
    """torch's extra_* arguments: None, a string, or a list of strings."""
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    items = list(value)
    if not all(isinstance(v, str) for v in items):
        raise TypeError(f"{what} must be a string or a list of strings, got {value!r}")
    return items


def compiler_flags(value, what: str) -> list[str]:
    """extra_cflags, extra_cuda_cflags, extra_ldflags as the compiler sees them under torch:
    torch writes each item into build.ninja unquoted, so the shell splits "-O3 --use_fast_math"
    (one string, as lecture notebooks pass it) into two flags; kwb splits it the same way."""
    try:
        return [part for item in flag_list(value, what) for part in shlex.split(item)]
    except ValueError as e:  # an unclosed quote, which the shell would refuse as well
        raise ValueError(f"{what}: {value!r} does not split into flags: {e}") from None


def torch_device(with_cuda, device, what: str):
    """device from torch's with_cuda (True: CUDA, False: the CPU, None: kwb's choice) and kwb's
    device; both given must agree."""
    if with_cuda is None:
        return device
    if not isinstance(with_cuda, bool):
        raise TypeError(f"with_cuda must be True, False or None, got {with_cuda!r}")
    wanted = devices.CUDA if with_cuda else devices.CPU
    if device is not None and devices.normalize(device) != wanted:
        raise ValueError(f"with_cuda={with_cuda} and device={device!r} disagree: give one of them")
    return wanted


def refuse_unsupported(what: str, **given) -> None:
    """torch's arguments kwb does not take, refused by name when set to anything but torch's default."""
    reasons = {
        "extra_sycl_cflags": "SYCL is not built by kwb",
        "with_sycl": "SYCL is not built by kwb",
        "sycl_sources": "SYCL is not built by kwb",
        "is_standalone": "kwb builds extensions to load, not executables (torch.utils.cpp_extension.load builds those)",
    }
    for name, value in given.items():
        if value not in (None, False):
            raise ValueError(f"{what}: {name}={value!r} is not supported: {reasons[name]}")


def load(name: str | Path, sources=None, extra_cflags=None, extra_cuda_cflags=None, extra_sycl_cflags=None,
         extra_ldflags=None, extra_include_paths=None, build_directory=None, verbose: bool = False, with_cuda=None,
         with_sycl=None, is_python_module: bool = True, is_standalone: bool = False, keep_intermediates: bool = True, *,
         device=None, force: bool = False, use_pch: bool | None = None, jobs: int | None = None) -> Kernel:
    """Load a kernel or extension, building it first if its sources, headers, flags or toolchain
    changed. Takes what torch.utils.cpp_extension.load takes, in its order.

    name: torch's first parameter, under torch's name. With `sources`, the extension's name (its
        TORCH_EXTENSION_NAME) as in torch; without, a kernel kwb ships ("relu_scale") or a
        folder (a str or a Path): a kwb kernel, a pybind extension, a TORCH_LIBRARY extension,
        or a project laid out for setup.py (sources under csrc/).
    sources: C++ and CUDA files (a path or a list), compiled and bound however their text says.
        torch requires it; kwb's default None loads `name` as a kernel or folder.
    extra_cflags, extra_cuda_cflags, extra_ldflags, extra_include_paths: as torch's.
    build_directory: the cache root this build goes under (default: TORCH_EXTENSIONS_DIR, else
        ~/.cache/torch_extensions/<py>_<cu>).
    verbose: print the compiler commands.
    with_cuda: True builds the CUDA sources (nvcc needed), False the C++ ones only; None: CUDA
        where a GPU and nvcc are here and there are CUDA sources. device= says the same in kwb's
        words ("cuda", "cpu", None); give one of them.
    is_python_module: False loads a pybind extension's library without importing it as a module.
    keep_intermediates: as torch's (it concerns ROCm's hipified files; kwb keeps its objects).
    is_standalone, extra_sycl_cflags, with_sycl: refused (kwb builds no executables, no SYCL).
    force: rebuild even if a cached build matches.
    use_pch: for C++ units that start with torch/extension.h, the header precompiled once into
        kwb's cache; None (default) and True use it, False compiles the header in each unit.
    jobs: compiler processes at once for this build; None: MAX_JOBS where set (as torch), else
        ninja's default. wb.load_all(names) builds several kernels side by side.

    Returns a Kernel: a kwb kernel's ops, a pybind module's functions (k.module is the module),
    or a TORCH_LIBRARY extension's ops. Calling it again after editing a source or a header
    builds and returns the new code, in the same process; unchanged sources return the same
    object at once.
    """
    refuse_unsupported("load", extra_sycl_cflags=extra_sycl_cflags, with_sycl=with_sycl, is_standalone=is_standalone)
    if jobs is not None and (isinstance(jobs, bool) or not isinstance(jobs, int) or jobs < 1):
        raise ValueError(f"jobs must be a whole number of at least 1 (compiler processes at once), got {jobs!r}")
    device = torch_device(with_cuda, device, "load")
    includes = flag_list(extra_include_paths, "extra_include_paths")
    if sources is not None:
        source = from_files(str(name), [sources] if isinstance(sources, (str, Path)) else list(sources), includes)
    else:
        source = resolve(name)
        source.include_dirs += [Path(d).expanduser().resolve() for d in includes]
    if not is_python_module:
        source.python_module = False
    source.use_pch = use_pch
    root = Path(build_directory).expanduser() if build_directory is not None else None
    spec = build_spec(source, device, root, compiler_flags(extra_cflags, "extra_cflags"),
                      compiler_flags(extra_cuda_cflags, "extra_cuda_cflags"), compiler_flags(extra_ldflags, "extra_ldflags"))
    return load_source(spec, verbose, force, jobs)
