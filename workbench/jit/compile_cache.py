"""One compile-and-cache path, two compilers behind it: nvcc/ninja (extensions:
builder.NvccCompiler) and NVRTC (raw kernels: raw_kernel.NvrtcCompiler).
compile_cached(spec, compiler) is the path:

    prepare   the sources read and hashed again, the key as far as it is known before compiling
    cached    memory, then disk (a manifest whose key matches and whose library is whole)
    the lock  one compiler per cache entry: under it, cached again (another process may have
              just built it), else compile: library first, manifest written last
    retry     compile returns None when an input changed under the compiler: prepare again

and these are the steps both compilers share:

    cache_root()                              where builds go: the extensions cache root, made if missing
    until_inputs_hold(attempt, name, what)   compile again while a file changes under the compiler
    announce_spills(name, functions)          one notice per kernel that spills registers
    write_manifest(path, library, ...)        the manifest, written last: it marks the library whole
    build_lock(path, what)                    the entry's lock (kwb_store.locks) with kwb's notices and errors
"""
from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Generic, Protocol, TypeVar

from cache_tools.resource_rows import short_name
from kwb_store import layout
from kwb_store.fsutil import sha256_file
from kwb_store.locks import BuildLock
from kwb_store.manifest import Manifest
from kwb_store.resources import FunctionResources

from . import notices, toolchain
from .errors import BuildError, cache_error

if TYPE_CHECKING:
    from .build_spec import BuildSpec

T = TypeVar("T")
J = TypeVar("J")

# A file saved while the compiler read it makes the result not what the key says: compile
# again, at most this often (benchmarks/chaos.py's edit storm settles within 2).
MAX_ATTEMPTS = 3


def cache_root() -> Path:
    """TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/<py>_<cu>/ (kwb_store.layout's
    default_root for the installed torch's CUDA), made if missing."""
    root = layout.default_root(toolchain.torch_info().cuda)
    try:  # a root under a file, or unwritable: one sentence, not a raw error from deep inside
        root.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise cache_error(e, root, "the extensions cache root (TORCH_EXTENSIONS_DIR)") from None
    return root


def until_inputs_hold(attempt: Callable[[], T | None], name: str, what: str) -> T:
    """attempt() until it returns a result; None means an input changed during its compile."""
    for _ in range(MAX_ATTEMPTS):
        result = attempt()
        if result is not None:
            return result
    raise BuildError(name, what, tail=f"its sources or headers kept changing during {MAX_ATTEMPTS} compiles; "
                                      "load again once they are saved")


def announce_spills(name: str, functions: list[FunctionResources]) -> None:
    for f in functions:
        if f.spills:
            notices.say(f"kwb: {name}: {short_name(f.name)} ({f.arch}) spills registers to local memory: "
                        f"{f.spill_stores} bytes stored, {f.spill_loads} loaded a thread ({f.registers} registers)")


def write_manifest(path: Path, library: Path, functions: list[FunctionResources], **fields) -> Manifest:
    """The manifest of a library just compiled and written, with its size, digest and resources.
    Written last: a manifest on disk means its library is whole."""
    manifest = Manifest(library=library.name, library_size=library.stat().st_size, library_sha256=sha256_file(library),
                        built_at=time.time(), resources={"functions": [f.to_dict() for f in functions]} if functions else {},
                        **fields)
    manifest.write(path)
    return manifest


def build_lock(path: Path, what: str, timeout: float | None = None) -> BuildLock:
    """`with build_lock(entry / layout.LOCK_NAME, "relu_scale (cuda)"):` -- one builder at a time;
    its waits told through notices, a lock file that cannot be made a one-sentence CacheError."""
    return BuildLock(path, what, timeout, say=notices.say, refused=cache_error)


class Compiler(Protocol, Generic[J, T]):
    """What compile_cached needs of a compiler. J: one attempt's job (the sources as read, the
    key's parts); T: what a build gives (builder.Build, raw_launch.RawKernel)."""

    def prepare(self, spec: BuildSpec) -> J:
        """Read and hash the inputs; run again for each attempt."""

    def cached(self, spec: BuildSpec, job: J) -> T | None:
        """The build in memory or on disk, else None."""

    def compile(self, spec: BuildSpec, job: J, force: bool) -> T | None:
        """Compile under the entry's lock; write the library, then its manifest (write_manifest).
        None: an input changed while the compiler read it."""


def compile_cached(spec: BuildSpec, compiler: Compiler[J, T], force: bool = False) -> T:
    """The build of spec: from memory or disk where its key is there (unless force), else
    compiled under the entry's lock, where another process may have built it meanwhile."""
    def attempt() -> T | None:
        job = compiler.prepare(spec)
        found = None if force else compiler.cached(spec, job)
        if found is not None:
            return found
        with build_lock(spec.entry / layout.LOCK_NAME, spec.what):
            found = None if force else compiler.cached(spec, job)
            return found if found is not None else compiler.compile(spec, job, force)

    return until_inputs_hold(attempt, spec.name, spec.target)
