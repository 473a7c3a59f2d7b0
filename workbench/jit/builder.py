"""From a kernel's sources to a finished, cached library.

    build():        compile_cache.compile_cached with NvccCompiler: found, else built.
    find_cached():  the warm path. Hashes the sources, finds manifests with the same base by
                    file name, checks their recorded headers; no compiler, no ninja.
    _build_locked(): the cold path, under the entry's lock: ninja compiles what changed, the
                    library is copied to its content-keyed name and the manifest written last.

The build key covers every source and every header the compiler reported including (from its
depfiles), all flags, the target archs, and the torch, CUDA, compiler and kwb format versions.
A failed compile writes only build-<device>/.kwb-failed.json (for `kwb cache`), never a
manifest, so fixing the error and loading again always rebuilds.
"""
from __future__ import annotations

import errno
import json
import os
import re
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from kwb_store import layout
from kwb_store.fsutil import atomic_copy, atomic_write_text, sha256_file, unchanged
from kwb_store.locks import clear_dead_owner
from kwb_store.manifest import Manifest, library_problem
from kwb_store.tool_versions import tool_version

from . import (
    arch_units,
    compile_cache,
    header_cost,
    light_headers,
    notices,
    pch,
    ptxas,
    toolchain,
)
from .build_spec import BuildSpec
from .errors import BuildError, CacheError, ToolchainError, cache_error
from .feedback import BuildFeedback
from .ninja import CompileStep, NinjaPlan, parse_depfile, run
from .sources import KernelSource, core_include_dir

INPUTS_RECORD = ".kwb-inputs.json"  # per build folder: content hashes each object was built from
# Held while a load reads the toolchain and the cache, not while it compiles: threads loading
# different kernels compile side by side (parallel.py), and two threads building one kernel
# meet at its entry's flock, like two processes.
_read_lock = threading.RLock()


@dataclass
class BuildConfig:
    """Everything besides the sources that changes the binary."""

    device: str  # "cpu" or "cuda"
    cxx: str
    nvcc: str | None
    ninja: str
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    archs: tuple[str, ...]
    versions: dict[str, str]
    # a CUDA unit's whole nvcc flags where they are not cuda_cflags (arch_units.py), by its path
    unit_cuda_cflags: dict[str, list[str]] = field(default_factory=dict)

    def fingerprint(self) -> dict:
        key = {
            "device": self.device,
            "cflags": self.cflags,
            "cuda_cflags": self.cuda_cflags,
            "ldflags": self.ldflags,
            "archs": list(self.archs),
            "versions": self.versions,
        }
        if self.unit_cuda_cflags:  # only such builds' keys gain the entry
            key["unit_cuda_cflags"] = self.unit_cuda_cflags
        return key


def make_config(spec: BuildSpec) -> BuildConfig:
    """The compilers, flags and versions of a build: what besides the sources goes into its key."""
    source, device, root, cuda_includes_torch = spec.source, spec.device, spec.root, spec.cuda_includes_torch
    info = toolchain.torch_info()
    cxx = toolchain.cxx_path(root)
    if cxx is None:
        raise ToolchainError("no C++ compiler was found: install g++ (or set CXX to a compiler)")
    ninja = toolchain.ninja_path()
    if ninja is None:
        raise ToolchainError("ninja was not found: pip install ninja")
    abi = f"-D_GLIBCXX_USE_CXX11_ABI={int(info.cxx11_abi)}"
    includes = [f"-I{d}" for d in source.include_dirs]
    torch_includes = [f"-isystem{d}" for d in info.include_dirs]
    openmp = toolchain.openmp_flags(cxx, root)
    linker = ["-shared", *openmp, *toolchain.fast_linker_flags(), f"-L{info.library_dir}", f"-Wl,-rpath,{info.library_dir}"]
    if source.torch_style:
        # Code written against torch/extension.h compiles with the flags torch.utils.cpp_extension
        # gives it (no -O: torch's default), so it means what it means there.
        defines = [f"-DTORCH_EXTENSION_NAME={source.module_name}", "-DTORCH_API_INCLUDE_EXTENSION_H",
                   *toolchain.pybind11_abi_flags()]
        cflags = [f"-std={info.cxx_standard}", "-fPIC", "-fvisibility=hidden", *openmp, "-fdiagnostics-color=never", abi,
                  *defines, *includes, *torch_includes, f"-isystem{toolchain.python_include()}"]
        # no --no-undefined: a Python module's symbols come from the interpreter that loads it
        ldflags = [*linker, "-lc10", "-ltorch_cpu", "-ltorch", "-ltorch_python"]
    else:
        defines = []
        # -fvisibility=hidden: two builds of one kernel in one process never bind to each other's symbols.
        # -fno-trapping-math: float selects vectorize, 33x on relu_scale's CPU loop (benchmarks/reference/workbench_choices.md).
        cflags = ["-O3", f"-std={info.cxx_standard}", "-fPIC", "-fvisibility=hidden", "-fno-trapping-math", *openmp,
                  *toolchain.cpu_capability_flags(), "-fdiagnostics-color=never", abi, *includes, *torch_includes]
        ldflags = [*linker, "-lc10", "-ltorch_cpu"]
        if source.python_units:  # a Python entry: torch's bindings, and Python's symbols at import
            ldflags += ["-ltorch", "-ltorch_python"]
        if cuda_includes_torch:  # torch/extension.h in both parts: Python's headers, Python's symbols at load
            cflags.append(f"-isystem{toolchain.python_include()}")
        elif not source.python_units:
            ldflags.insert(len(linker), "-Wl,--no-undefined")
    nvcc = None
    cuda_cflags: list[str] = []
    archs: tuple[str, ...] = ()
    versions = {
        "kwb_format": str(layout.FORMAT),
        "kwb": _kwb_version(),
        "python": layout.python_tag(),
        "torch": info.version,
        "torch_git": info.git,
        "torch_cuda": info.cuda or "none",
        "cxx": tool_version(cxx, root),
    }
    if device == "cuda":
        nvcc = toolchain.nvcc_path()
        assert nvcc is not None
        home = toolchain.cuda_home()
        archs = spec.archs
        versions["nvcc"] = tool_version(nvcc, root)
        cflags += [*([] if source.torch_style else ["-DKWB_WITH_CUDA"]), f"-isystem{home / 'include'}"]
        # -ccbin: nvcc's host compiler is the one in the key, not whichever gcc PATH finds first.
        common = ["-ccbin", cxx, "-Xcompiler", "-fPIC", "-Xcompiler", "-fvisibility=hidden", abi,
                  *toolchain.gencode_flags(archs), *includes]
        if source.torch_style or cuda_includes_torch:
            # torch's headers in a .cu: torch's nvcc flags, and nvcc takes -isystem and its folder apart
            cuda_cflags = [f"-std={info.cxx_standard}", *common, *defines,
                           *[arg for d in (*info.include_dirs, toolchain.python_include()) for arg in ("-isystem", d)],
                           *toolchain.TORCH_NVCC_FLAGS]
            if cuda_includes_torch:
                cuda_cflags += ["-O3", "-DKWB_CUDA_INCLUDES_TORCH"]
        else:
            # -O1: a .cu's host code is launchers only, and -O1 saves 0.14 s an edit; device code is
            # -O3 in cicc and ptxas regardless (benchmarks/reference/workbench_choices.md).
            cuda_cflags = ["-O1", "-std=c++17", *common, "-lineinfo"]
        # ptxas's report of each kernel's registers, spills and shared memory (ptxas.py)
        cuda_cflags += ptxas.NVCC_FLAGS
        lib64 = home / "lib64" if (home / "lib64").exists() else home / "lib"
        ldflags += ["-lc10_cuda", f"-L{lib64}", "-lcudart"]
        if source.torch_style or cuda_includes_torch:
            ldflags += ["-ltorch_cuda", *([] if source.torch_style else ["-ltorch", "-ltorch_python"])]
    cflags += list(spec.extra_cflags)
    cuda_cflags += list(spec.extra_cuda_cflags)
    ldflags += list(spec.extra_ldflags)
    units = _arch_unit_flags(source, device, cuda_cflags, archs)
    if units:
        versions["cutlass"] = arch_units.cutlass_version()
    return BuildConfig(device, cxx, nvcc, ninja, cflags, cuda_cflags, ldflags, archs, versions, units)


def _arch_unit_flags(source: KernelSource, device: str, cuda_cflags: list[str], archs) -> dict[str, list[str]]:
    """The arch-specific units' own nvcc flags (arch_units.py), by path; none where the
    build is for the CPU, or its units compile with the build's flags."""
    found = [p for p in source.cuda_sources if arch_units.is_sm90a_unit(p)] if device == "cuda" else []
    flags = arch_units.unit_cuda_cflags(cuda_cflags, archs) if found else None
    if found and flags is None and arch_units.targets_sm90(archs):
        notices.once("no-cutlass", f"kwb: {found[0].name} needs CUTLASS's headers for its sm_90a code and they are not "
                                   "installed (pip install nvidia-cutlass, or set CUTLASS_PATH to a CUTLASS checkout); "
                                   "it builds without that code, and its kernel takes its other routes")
    return {str(p): flags for p in found} if flags is not None else {}


def _kwb_version() -> str:
    from workbench import __version__  # the package's one version string

    return __version__


@dataclass
class Build:
    """A finished build on disk."""

    name: str
    device: str
    base: str
    key: str
    library: Path
    manifest_path: Path
    manifest: Manifest = field(repr=False)
    compiled: bool = False  # this call ran the compiler


def _hash_files(paths) -> dict[str, str]:
    return {str(p): sha256_file(Path(p)) for p in paths}


def _base(source: KernelSource, config: BuildConfig) -> tuple[str, dict[str, str]]:
    src = _hash_files(source.sources(config.device == "cuda"))
    return layout.build_base(config.fingerprint(), src), src


def find_cached(spec: BuildSpec, config: BuildConfig) -> Build | None:
    source, entry = spec.source, spec.entry
    base, _ = _base(source, config)
    unreadable = []  # named only where no build loads instead: then this load builds past them
    for path in layout.manifests_for(entry, source.name, config.device, base):
        manifest, why = Manifest.read_why(path)
        if manifest is None and why:
            unreadable.append((path, why))
        if manifest is None or manifest.base != base:
            continue
        if not unchanged(manifest.headers):
            continue
        library = entry / manifest.library
        if not library.exists():
            continue
        problem = library_problem(library, manifest)
        if problem:
            notices.once(f"damaged:{library}:{problem}", f"kwb: {source.name} ({config.device}): {problem}; building it again")
            continue
        clear_dead_owner(entry / layout.LOCK_NAME)
        return Build(source.name, config.device, base, manifest.key, library, path, manifest)
    for path, why in unreadable:
        notices.once(f"manifest:{path}:{why}", f"kwb: {source.name} ({config.device}): its manifest {path.name} {why}; "
                                               "building it again")
    return None


def latest_manifest(source: KernelSource, device: str, root: Path) -> Manifest | None:
    """The newest manifest of any base for this kernel and device (for 'stale' in kwb list)."""
    entry = layout.entry_dir(root, source.ident)
    found = sorted(entry.glob(f"{source.name}.{device}.*{layout.MANIFEST_SUFFIX}"), key=lambda p: p.stat().st_mtime, reverse=True)
    for p in found:
        manifest = Manifest.read(p)
        if manifest is not None:
            return manifest
    return None


def _toolchain_prefixes() -> list[str]:
    """Headers under these come with torch, CUDA or the system: their versions are in the key."""
    info = toolchain.torch_info()
    prefixes = [os.path.dirname(info.include_dirs[0]), "/usr/include", "/usr/lib", "/usr/local/include/c++"]
    home = toolchain.cuda_home()
    if home:
        prefixes += [str(home), os.path.realpath(home)]
    import sysconfig

    prefixes.append(sysconfig.get_paths()["include"])  # Python.h: the Python version is in the key
    return [os.path.normpath(p) + os.sep for p in prefixes]


def _user_headers(dep_paths: list[str], sources: set[str], build_dir: Path, own_dirs: list[Path]) -> list[str]:
    """Headers the key must hash: everything the compiler read except the toolchain's, and
    never those under the kernel's own include folders (an installed kwb lives under
    site-packages, which may sit under /usr or a conda prefix)."""
    prefixes = _toolchain_prefixes()
    own = [os.path.normpath(d) + os.sep for d in own_dirs]
    out = []
    for dep in dep_paths:
        path = os.path.normpath(dep if os.path.isabs(dep) else os.path.join(build_dir, dep))
        if path in sources or path.endswith(".o") or pch.is_pch_path(path):
            continue
        if not any(path.startswith(p) for p in own) and any(path.startswith(p) for p in prefixes):
            continue
        if path not in out:
            out.append(path)
    return out


def _step_flags(source: KernelSource, path: Path, pch_for, levels: light_headers.Levels | None) -> tuple[str, ...]:
    """A unit's own flags: Python's headers for a kwb kernel's Python entry (its PYBIND11_MODULE
    unit, imported under the kernel's name); a lighter torch/extension.h (light_headers.py, at the unit's level),
    precompiled (pch.py; pch_for(light) gives the header or None) for a C++ unit that starts
    with it; kwb's shim first in a TORCH_LIBRARY extension's units that register ops, which
    defers their registration to load time (workbench/jit/include/kwb_torch_library.h)."""
    flags: list[str] = []
    if path in source.python_units:
        flags += [f"-isystem{toolchain.python_include()}", f"-DTORCH_EXTENSION_NAME={source.module_name}",
                  *toolchain.pybind11_abi_flags()]
    light = levels.flags(path) if source.torch_style and levels is not None else []
    if path.suffix != ".cu" and pch.wants_pch(path):
        header = pch_for(bool(light))
        if header is not None:
            flags += ["-include", str(header), "-Winvalid-pch"]
    flags += light
    if path in source.torch_library_units:
        flags += ["-include", str(core_include_dir() / "kwb_torch_library.h")]
    return tuple(flags)


def _pch_headers(source: KernelSource, config: BuildConfig, root: Path):
    """pch_for(light): the include file of the precompiled torch/extension.h (lighter or
    torch's own) for this build's C++ units; None where none applies (kwb's own kernels,
    use_pch=False, not GCC). pch_for.start() starts compiling, in the background, each .gch
    that is not there yet: the units never wait for one."""
    made: dict[bool, Path | None] = {}
    jobs: dict[Path, tuple[list[str], str]] = {}

    def pch_for(light: bool) -> Path | None:
        if not source.torch_style or source.use_pch is False:
            return None
        if light not in made:
            flags = pch.pch_flags(config.cflags, source.module_name) + ([f"-I{light_headers.folder(cuda=False)}"] if light else [])
            what = "kwb's lighter torch/extension.h" if light else "torch/extension.h"
            found = pch.header_for(root, config.cxx, flags, what,
                                   [light_headers.folder(cuda=False) / "torch" / "extension.h"] if light else [])
            made[light] = found[0] if found else None
            if found:
                jobs[found[1]] = (flags, what)
        return made[light]

    def start() -> None:
        for entry, (flags, what) in jobs.items():
            pch.start(entry, config.cxx, flags, what)
    pch_for.start = start
    return pch_for


def _no_pch(light: bool) -> None:
    return None


def _cores_to_spare(build_dir: Path, plan: NinjaPlan) -> bool:
    """Whether a precompiled header can compile beside this build's units without slowing them:
    a core for each unit to compile and two more. On the 2-core machine it did not (the tutorial
    LLTM's cold build 37.6 s and 60.6 s beside it, 30.2 s and 41.7 s with it started after)."""
    try:
        cores = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cores = os.cpu_count() or 1
    units = sum(not (build_dir / s.obj).exists() for s in plan.steps)
    return cores >= units + 2


def _plan(source: KernelSource, config: BuildConfig, pch_for=_no_pch, levels: light_headers.Levels | None = None) -> NinjaPlan:
    names = _object_names(source.sources(config.device == "cuda"))
    steps = [CompileStep(p, names[p], False, _step_flags(source, p, pch_for, levels)) for p in source.cpp_sources]
    if config.device == "cuda":
        steps += [CompileStep(p, names[p], True, _step_flags(source, p, pch_for, levels),
                              _own(config.unit_cuda_cflags.get(str(p)))) for p in source.cuda_sources]
    return NinjaPlan(config.cxx, config.nvcc, config.cflags, config.cuda_cflags, config.ldflags, steps, f"{source.name}.so")


def _own(flags: list[str] | None) -> tuple[str, ...] | None:
    return None if flags is None else tuple(flags)


def _object_names(paths: list[Path]) -> dict[Path, str]:
    """An object file name per source, unique within the build folder: csrc/muladd.cpp and
    csrc/cuda/muladd.cu both have the stem muladd."""
    names: dict[Path, str] = {}
    taken: set[str] = set()
    for p in paths:
        stem = re.sub(r"[^A-Za-z0-9_.+-]", "_", p.stem)  # an object name is safe in ninja and the shell
        base = f"{stem}.cuda" if p.suffix == ".cu" else stem
        name, n = f"{base}.o", 1
        while name in taken:
            n += 1
            name = f"{base}_{n}.o"
        taken.add(name)
        names[p] = name
    return names


def _invalidate_changed_objects(build_dir: Path, plan: NinjaPlan) -> None:
    """Delete each object whose inputs' content differs from what it was built from.

    ninja trusts modification times; a file copied with its old mtime (cp -p, tar, rsync -a) or
    an object left half-written by a killed build would otherwise pass as up to date."""
    try:
        record = json.loads((build_dir / INPUTS_RECORD).read_text())
    except (OSError, ValueError):
        record = {}
    for step in plan.steps:
        obj = build_dir / step.obj
        if not obj.exists():
            continue
        inputs = record.get(step.obj)
        if not inputs or not unchanged(inputs):
            obj.unlink()


def _record_inputs(build_dir: Path, plan: NinjaPlan, deps: dict[str, list[str]]) -> None:
    record = {step.obj: _hash_files([str(step.source), *deps[step.obj]]) for step in plan.steps}
    atomic_write_text(build_dir / INPUTS_RECORD, json.dumps(record, indent=1))


_DISK_FULL = "No space left on device"  # strerror(ENOSPC), as gcc, as and ld print it
_INTERRUPTED = "ninja: build stopped: interrupted by user"  # ninja's words on SIGINT or SIGTERM


def _record_failure(build_dir: Path, source: KernelSource, config: BuildConfig, src_hashes: dict[str, str],
                    log_path: Path, output: str) -> None:
    """build-<device>/.kwb-failed.json: the compiler exited non-zero on these sources. `kwb
    cache` tells such an entry (failed) from one whose build was stopped (interrupted) by it."""
    first = next((l.strip() for l in output.splitlines() if re.search(r"(^|: )(fatal )?error\b", l)), "")
    record = {"name": source.name, "device": config.device, "failed_at": time.time(), "log": str(log_path),
              "sources": src_hashes, "error": first[:300]}
    try:
        atomic_write_text(build_dir / layout.FAILURE_RECORD, json.dumps(record, indent=1))
    except OSError:
        pass  # a full or read-only cache: the BuildError still says what failed


def _cache_write_failure(e: OSError, entry: Path) -> bool:
    """Whether e is the cache failing to take a write (full, read-only, or something in the way
    under the entry), as opposed to, say, a source deleted mid-edit, which stays as it is."""
    if e.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS):
        return True
    inside = e.filename is not None and os.path.abspath(str(e.filename)).startswith(str(entry) + os.sep)
    return inside and e.errno in (errno.EACCES, errno.EPERM, errno.EEXIST, errno.ENOTDIR, errno.EISDIR)


def build(spec: BuildSpec, verbose: bool = False, force: bool = False, jobs: int | None = None) -> Build:
    """The build of spec: cached, else built (compile_cache.compile_cached) under the entry's
    lock. force: compile every object again; jobs: ninja's -j, None for ninja's default."""
    return compile_cache.compile_cached(spec, NvccCompiler(verbose, jobs), force)


@dataclass
class _Job:
    config: BuildConfig


class NvccCompiler:
    """nvcc/ninja behind compile_cache.compile_cached. The key is whole only after a compile
    (the headers come from the compiler's depfiles), so the cache is looked up by the base
    (sources, flags, toolchain) and each manifest's recorded headers (find_cached); a loaded
    library is remembered by kernel.load_library."""

    def __init__(self, verbose: bool = False, jobs: int | None = None):
        self.verbose, self.jobs = verbose, jobs
        self.objects_cleared = False  # a forced build clears its objects once, not on each retry

    def prepare(self, spec: BuildSpec) -> _Job:
        with _read_lock:
            return _Job(make_config(spec))

    def cached(self, spec: BuildSpec, job: _Job) -> Build | None:
        with _read_lock:
            return find_cached(spec, job.config)

    def compile(self, spec: BuildSpec, job: _Job, force: bool) -> Build | None:
        entry, config = spec.entry, job.config
        if force and not self.objects_cleared:  # every object again, not only what ninja finds out of date
            for obj in layout.build_dir(entry, config.device).glob("*.o"):
                obj.unlink()
            self.objects_cleared = True
        try:
            return _build_locked(spec.source, config, entry, self.verbose, self.jobs)
        except OSError as e:  # a full disk, say: one sentence naming the file, not errno 28 alone
            if isinstance(e, CacheError) or not _cache_write_failure(e, entry):
                raise
            raise cache_error(e, e.filename or layout.build_dir(entry, config.device), "a file of this build") from None


def _build_locked(source: KernelSource, config: BuildConfig, entry: Path, verbose: bool, jobs: int | None) -> Build | None:
    build_dir = layout.build_dir(entry, config.device)
    build_dir.mkdir(parents=True, exist_ok=True)
    pch_for = _pch_headers(source, config, entry.parent)
    levels = light_headers.Levels(build_dir)
    plan = _plan(source, config, pch_for, levels)
    base, src_hashes = _base(source, config)
    _invalidate_changed_objects(build_dir, plan)
    headers_before = _hash_files([h for h in _recorded_headers(build_dir) if os.path.exists(h)])
    compile_window = _Window(build_dir / layout.COMPILE_MARKER)
    started = time.time()
    toolchain.announce_build_choices()
    feedback = BuildFeedback(f"{source.name} ({config.device})", verbose)
    beside = _cores_to_spare(build_dir, plan)
    if beside:
        pch_for.start()
    ok, output = run(config.ninja, build_dir, plan, feedback, jobs)
    last = output  # the attempt whose diagnostics a failure reports
    from . import diagnostics  # only builds parse compiler output

    # Whatever the errors say (a unit may have leaned on anything torch/all.h pulls in), the units
    # that failed against a lighter header are compiled again one level down (light_headers.py);
    # the level that compiles one is remembered, and a unit that fails with torch's own reports its errors.
    while not ok:
        light = {str(s.source) for s in plan.steps if any(light_headers.is_light_flag(f) for f in s.flags)}
        failed = {str(s.source) for s in plan.steps if s.obj in light_headers.failed_objects(last)} & light
        if not failed:
            break
        now_full = levels.demote(failed)
        plan = _plan(source, config, pch_for, levels)
        if beside:
            pch_for.start()
        ok, last = run(config.ninja, build_dir, plan, feedback, jobs)
        output += last
        names = {s.obj: str(s.source) for s in plan.steps}
        fixed = failed - {names[o] for o in light_headers.failed_objects(last) if o in names}
        if fixed:
            levels.save()
        if fixed & now_full:
            notices.say(f"kwb: {', '.join(Path(u).name for u in sorted(fixed & now_full))} needs the whole "
                        "torch/extension.h; compiled it with torch's own (remembered for this build folder)")
    pch_for.start()  # what did not start beside the units starts now, for the next build
    log_path = build_dir / layout.BUILD_LOG
    atomic_write_text(log_path, output)

    if not ok:
        feedback.done(False)
        if _INTERRUPTED not in last:  # Ctrl-C reaches ninja too: that is an interruption, not a failure
            _record_failure(build_dir, source, config, src_hashes, log_path, last)
        if _DISK_FULL in last:  # the compiler or linker ran out of disk, not the user's code
            raise cache_error(OSError(errno.ENOSPC, _DISK_FULL), build_dir, f"{source.name}'s objects (see {log_path})")
        found = diagnostics.parse(last, cwd=str(build_dir))
        has_error = any(d.severity != "warning" for d in found)
        raise BuildError(source.name, config.device, found, str(log_path),
                         tail="" if has_error else _command_tail(last), display_paths=source.display_paths)
    deps = {step.obj: _user_headers(parse_depfile(build_dir / f"{step.obj}.d"), {str(step.source)}, build_dir, source.include_dirs)
            for step in plan.steps}
    all_headers = sorted({h for hs in deps.values() for h in hs})
    headers = _hash_files(all_headers)
    compile_window.close()  # after hashing: a save between the two is inside the window, never missed
    # An input saved while the compiler ran may or may not be in the binary: build again. The
    # headers the last build read are compared by content; one this build read for the first
    # time (a first build, a new #include) by whether it was saved while the compilers ran.
    if (_base(source, config)[0] != base or any(headers.get(h, d) != d for h, d in headers_before.items())
            or any(compile_window.saw_change(h) for h in all_headers if h not in headers_before)):
        feedback.done(False)
        return None
    key = layout.build_key(base, headers)
    stem = layout.stem(source.name, config.device, base, key)
    library = entry / f"{stem}{layout.LIBRARY_SUFFIX}"
    atomic_copy(build_dir / plan.library, library)
    warnings = [d for d in diagnostics.parse(output, cwd=str(build_dir)) if d.severity == "warning"]
    functions = ptxas.collect(build_dir, plan.steps, output) if config.nvcc else []
    compile_cache.announce_spills(source.name, functions)
    manifest_path = entry / f"{stem}{layout.MANIFEST_SUFFIX}"
    manifest = compile_cache.write_manifest(
        manifest_path, library, functions, name=source.name, kind=source.kind, ident=source.ident, device=config.device,
        folder=str(source.folder), base=base, key=key, sources=src_hashes, headers=headers, config=config.fingerprint(),
        compilers={"cxx": config.cxx, "nvcc": config.nvcc}, build_seconds=round(time.time() - started, 3),
        build_log=str(log_path), warnings=len(warnings), binding=source.binding)
    (build_dir / layout.FAILURE_RECORD).unlink(missing_ok=True)
    _record_inputs(build_dir, plan, deps)
    feedback.done(True, f"; {len(warnings)} warnings, see {log_path}" if warnings else "")
    if source.torch_style:
        header_cost.after_build(entry.parent, source.name, config.nvcc, config.cuda_cflags, source.module_name, build_dir,
                                plan.steps, started, source.display_paths)
    return Build(source.name, config.device, base, key, library, manifest_path, manifest, compiled=True)


class _Window:
    """The span of a compile in the file system's own clock (a marker file's mtime, stamped at
    the start and at the end), to tell whether a file was saved while the compilers ran.

    A header edited mid-compile of a kernel's first build used to be recorded by its new content
    while the library held the old one: a later process loaded the stale library as fresh
    (benchmarks/chaos.py, the edits part: 2 of 18 loads). A file stamped after the window (in
    the future) does not count, so it cannot make every build start again. The marker lies in
    the build folder: where the headers sit on another file system with another clock (a home
    over NFS, a local cache), a skew between the two clocks can hide a save from the window."""

    def __init__(self, marker: Path):
        self.marker = marker
        self.start = self._stamp()
        self.end = self.start

    def _stamp(self) -> int:
        self.marker.write_bytes(b"")
        os.utime(self.marker)
        return self.marker.stat().st_mtime_ns

    def close(self) -> None:
        self.end = self._stamp()

    def saw_change(self, path: str) -> bool:
        try:
            return self.start <= os.stat(path).st_mtime_ns <= self.end
        except OSError:
            return True  # gone since the compiler read it: whatever it read is not there now


def _recorded_headers(build_dir: Path) -> list[str]:
    """Every input the last successful build of this folder read, sources aside."""
    try:
        record = json.loads((build_dir / INPUTS_RECORD).read_text())
    except (OSError, ValueError):
        return []
    return sorted({path for inputs in record.values() for path in list(inputs)[1:]})


def _command_tail(output: str) -> str:
    """The failing command's own words, without ninja's '[n/m]' and 'FAILED:' scaffolding."""
    keep = [l for l in output.splitlines() if not l.startswith(("[", "FAILED:", "ninja:")) and l.strip()]
    return "\n".join(keep[-15:])
