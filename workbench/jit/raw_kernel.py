"""wb.cuda_kernel(): an `extern "C" __global__` function compiled with NVRTC and launched on
torch tensors, for the sub-second edit loop (no nvcc, no host compiler, no linker, no dispatcher).
This module compiles and caches it; raw_launch.py launches it.

    k = wb.cuda_kernel(source, "relu_scale")           # source: text, or a .cu file's path
    k((blocks,), (256,), (x, y, 1.5, x.numel()))       # on the current stream, arguments checked

Cache: the cubin and its manifest under <cache root>/kwb_nvrtc-<name>/, keyed (kwb_store's
build_base/build_key, as nvcc builds are) by the source, every header it includes (found by
following its #include lines through the include folders, each hashed), the options, the
architecture and NVRTC's version. A key seen in this process is a dictionary lookup; one on
disk reads the cubin (its size and sha256 checked against the manifest, as a library's are);
either way NVRTC does not compile. A changed source or header is a new key: new code. A process
keeps every version it compiled or loaded (and its modules on the GPU) until it exits, as
torch keeps every extension it loaded: a notebook's hundred edits hold a hundred small cubins.
"""
from __future__ import annotations

import hashlib
import re
import threading
from dataclasses import dataclass, field
from pathlib import Path

from kwb_store import layout
from kwb_store.fsutil import atomic_write_bytes, atomic_write_text, unchanged
from kwb_store.locks import clear_dead_owner
from kwb_store.manifest import FORMAT, Manifest, library_problem
from kwb_store.resources import functions_of
from kwb_store.tool_versions import file_ident

from . import compile_cache, notices, nvrtc, signature
from . import cubin as cubins
from .build_spec import RAW_BINDING, BuildSpec, RawSource, raw_kernel_spec
from .errors import BuildError
from .raw_launch import RawKernel
from .signature import Param

KIND = RAW_BINDING
SUFFIX = ".cubin"
_INCLUDE = re.compile(r'^\s*#\s*include\s*([<"])([^>"]+)[>"]', re.MULTILINE)
_memory: dict[str, RawKernel] = {}
_lock = threading.Lock()


# --- what goes into the key -----------------------------------------------------------------------

def _includes(path: Path, text: str, dirs: list[Path], found: dict[str, str]) -> None:
    """Every header reachable from text's #include lines through the including file's folder
    (for "...") and dirs, hashed into found. Headers no folder holds (NVRTC's and CUDA's own,
    whose versions are in the key) are left to NVRTC."""
    for m in _INCLUDE.finditer(signature.strip_comments(text)):
        quoted, name = m.group(1) == '"', m.group(2)
        for folder in ([path.parent] if quoted else []) + dirs:
            candidate = (folder / name).resolve()
            if candidate.is_file():
                if str(candidate) not in found:
                    data = candidate.read_bytes()
                    found[str(candidate)] = hashlib.sha256(data).hexdigest()
                    _includes(candidate, data.decode(errors="replace"), dirs, found)
                break


@dataclass
class _Job:
    """One attempt at a raw kernel: its text as read now and the key's parts."""
    text: str
    program: Path          # the file NVRTC's diagnostics name (the user's .cu, or kwb's copy of the text)
    kept: bool             # program is kwb's copy of text (written before compiling)
    arch: str              # "sm_90"
    config: dict = field(default_factory=dict)
    sources: dict = field(default_factory=dict)
    headers: dict = field(default_factory=dict)
    base: str = ""
    key: str = ""
    stem: str = ""


def _key_parts(raw: RawSource, job: _Job, options: tuple[str, ...]) -> None:
    """job's (config, sources, headers) as kwb_store's build_base/build_key take them. Text is
    recorded as the file kwb keeps it in (entry/src/<name>-<hash>.cu), so `kwb cache verify`
    recomputes the same key and `kwb cache list` finds the source."""
    headers: dict[str, str] = {}
    for path in raw.pre_includes:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise FileNotFoundError(f"options: cannot read the pre-included {path}: {e.strerror}") from None
        headers[str(path)] = hashlib.sha256(data).hexdigest()
        _includes(path, data.decode(errors="replace"), list(raw.include_dirs), headers)
    _includes(job.program, job.text, list(raw.include_dirs), headers)
    # NVRTC's version says major.minor only: its library's identity (path, size, mtime) tells a
    # 13.2.x wheel from a 13.2.y, and the CUDA headers it compiles against are named by folder
    job.config = {"kind": KIND, "kernel": raw.name, "archs": [job.arch], "cuda_cflags": list(options),
                  "include_dirs": [str(d) for d in raw.include_dirs], "pre_includes": [str(p) for p in raw.pre_includes],
                  "versions": {"nvrtc": nvrtc.version(), "nvrtc_library": file_ident(nvrtc.library_path()),
                               "cuda_include": list(nvrtc.cuda_include_dirs()), "kwb_format": FORMAT}}
    job.sources = {str(job.program): hashlib.sha256(job.text.encode()).hexdigest()}
    job.headers = headers


# --- compile or find ---------------------------------------------------------------------------------

def cuda_kernel(source, name: str, *, options=(), include_dirs=(), arch=None, verbose: bool = False,
                label: str | None = None, first_line: int = 1, root: Path | None = None) -> RawKernel:
    """Compile (or find in the cache) the extern "C" __global__ function `name` of `source`.

    source: CUDA C++ text, or the path of a .cu file (its folder is searched for includes).
    options: NVRTC options ("-DBLOCK=256", "--use_fast_math", "-lineinfo"); include_dirs: folders
        for #include (kwb's workbench/jit/include and kernels/common are always searched).
    arch: '9.0', 'sm_90a'; default: KWB_CUDA_ARCH, else the visible GPU's, else TORCH_CUDA_ARCH_LIST's first, else sm_90.
    label, first_line: what errors call the source, and the number of its first line (a cell).
    Returns a RawKernel: k(grid, block, args, shared_mem=0, stream=None).
    Raises BuildError (each error at its line, with a caret) when NVRTC rejects the source.
    """
    spec = raw_kernel_spec(source, name, options, include_dirs, arch, label, first_line, root)
    return compile_cache.compile_cached(spec, NvrtcCompiler(verbose))


class NvrtcCompiler:
    """NVRTC behind compile_cache.compile_cached: the key is whole before compiling (the source
    and every header its #include lines reach), so memory and disk are looked up by it."""

    def __init__(self, verbose: bool = False):
        self.verbose = verbose

    def prepare(self, spec: BuildSpec) -> _Job:
        raw = spec.source
        assert isinstance(raw, RawSource)
        if raw.path is not None:
            try:
                text = raw.path.read_text()
            except OSError as e:
                raise FileNotFoundError(f"source: cannot read {raw.path}: {e.strerror}") from None
            job = _Job(text, raw.path, kept=False, arch=_sm(spec.archs[0]))
        else:  # text gets a file of kwb's, named by its hash, for NVRTC's diagnostics and the manifest
            text = raw.text or ""
            program = spec.entry / "src" / f"{raw.name}-{hashlib.sha256(text.encode()).hexdigest()[:16]}.cu"
            job = _Job(text, program, kept=True, arch=_sm(spec.archs[0]))
        _key_parts(raw, job, spec.extra_cuda_cflags)
        job.base = layout.build_base(job.config, job.sources)
        job.key = layout.build_key(job.base, job.headers)
        job.stem = layout.stem(raw.name, "cuda", job.base, job.key)
        return job

    def cached(self, spec: BuildSpec, job: _Job) -> RawKernel | None:
        with _lock:
            hit = _memory.get(job.key)
        if hit is not None:
            return _again(hit)
        kernel = _from_disk(spec, job)
        if kernel is not None:
            with _lock:
                _memory[job.key] = kernel
        return kernel

    def compile(self, spec: BuildSpec, job: _Job, force: bool) -> RawKernel | None:
        kernel = _compile(spec, job, self.verbose)
        if kernel is not None:
            with _lock:
                _memory[job.key] = kernel
        return kernel


def _sm(arch: str) -> str:
    """'9.0a' -> 'sm_90a', as NVRTC's -arch and the key say it."""
    return "sm_" + arch.replace(".", "")


def _again(kernel: RawKernel) -> RawKernel:
    """The same code again: the same loaded modules, marked as not compiled now."""
    if kernel.compiled:
        kernel = RawKernel(**{**kernel.__dict__, "compiled": False})
    return kernel


def _from_disk(spec: BuildSpec, job: _Job) -> RawKernel | None:
    entry = spec.entry
    manifest_path = entry / f"{job.stem}{layout.MANIFEST_SUFFIX}"
    manifest = Manifest.read(manifest_path)
    if manifest is None or manifest.key != job.key:
        return None
    cubin_path = entry / manifest.library
    problem = library_problem(cubin_path, manifest)
    if problem:
        notices.once(f"damaged:{cubin_path}", f"kwb: {spec.name} (NVRTC): {problem}; compiling it again")
        return None
    image = cubin_path.read_bytes()
    clear_dead_owner(entry / layout.LOCK_NAME)  # a compile killed earlier: its record goes once a good cubin loads
    layout.mark_loaded(manifest_path)
    return _kernel(spec, job, image, manifest_path, cubin_path, functions_of(manifest.resources), compiled=False,
                   seconds=0.0)


def _kernel(spec: BuildSpec, job: _Job, image: bytes, manifest_path: Path, cubin_path: Path, functions, compiled: bool,
            seconds: float) -> RawKernel:
    name = spec.name
    try:
        slots = cubins.param_slots(image, name) or []
    except (cubins.CubinError, ValueError) as e:  # a cubin layout kwb cannot read: the text's word only
        notices.once(f"cubin:{job.key}", f"kwb: {name}: cannot read its parameters from the cubin ({e}); checking "
                                         "launches against the source's declarations only")
        slots = []
    return RawKernel(name, job.key, image, job.arch, _declared(name, job.text, slots), slots, functions, manifest_path,
                     cubin_path, compiled, seconds)


def _declared(name: str, text: str, slots) -> list[Param] | None:
    """The parameters as the text declares them, where they agree with the cubin's (a macro or
    a type the reading gets wrong must not refuse right arguments); None otherwise."""
    params = signature.find(text, name)
    if params is None or not slots:
        return params
    if len(params) != len(slots) or any((p.pointer and s.size != 8) or (p.size is not None and p.size != s.size)
                                        for p, s in zip(params, slots)):
        notices.once(f"params:{name}:{[s.size for s in slots]}",
                     f"kwb: {name}: its parameters as read from the source ({', '.join(p.describe() for p in params)}) "
                     f"do not match the compiled kernel's ({', '.join(f'{s.size} bytes' for s in slots)}); checking "
                     "launches by size only")
        return None
    return params


def _compile(spec: BuildSpec, job: _Job, verbose: bool) -> RawKernel | None:
    raw, entry = spec.source, spec.entry
    assert isinstance(raw, RawSource)
    program = job.program
    if job.kept and not program.exists():  # NVRTC's diagnostics name this file: errors show its lines
        atomic_write_text(program, job.text)
    options = [f"-arch={job.arch}", *nvrtc.RESOURCE_OPTIONS, *[f"-I{d}" for d in raw.include_dirs],
               *[f"-I{d}" for d in nvrtc.cuda_include_dirs()], *[f"--pre-include={p}" for p in raw.pre_includes],
               *spec.extra_cuda_cflags]
    if verbose:
        notices.say(f"kwb: NVRTC {nvrtc.version()} compiling {raw.name}: {' '.join(options)}")
    from . import diagnostics  # only a compile reads NVRTC's log
    from .ptxas import parse_ptxas

    done = nvrtc.compile(job.text, str(program), options)
    log_path = layout.build_dir(entry, KIND) / f"{job.stem}.log"
    atomic_write_text(log_path, done.log)
    display = {str(program): (raw.label, raw.first_line)}
    if not done.ok:
        found = [d for d in diagnostics.parse(done.log) if d.severity != "warning"]
        raise BuildError(raw.name, spec.target, found, str(log_path), tail="" if found else done.log,
                         display_paths=display)
    if not unchanged(job.headers):
        return None  # a header changed while NVRTC read it: what the cubin holds is not what the key says
    names = cubins.kernel_names(done.cubin)
    if raw.name not in names:
        raise BuildError(raw.name, spec.target, [], str(log_path), display_paths=display,
                         tail=f"the source has no extern \"C\" __global__ function named {raw.name}; the cubin holds: "
                              f"{', '.join(names) or 'none'} (a function without extern \"C\" has a mangled name)")
    functions = parse_ptxas(done.log, str(program))
    compile_cache.announce_spills(raw.name, functions)
    cubin_path = entry / f"{job.stem}{SUFFIX}"
    atomic_write_bytes(cubin_path, done.cubin)
    manifest_path = entry / f"{job.stem}{layout.MANIFEST_SUFFIX}"
    compile_cache.write_manifest(
        manifest_path, cubin_path, functions, name=raw.name, kind=KIND, ident=entry.name[len(layout.ENTRY_PREFIX):],
        device="cuda", folder=str(program.parent), base=job.base, key=job.key, sources=job.sources, headers=job.headers,
        config=job.config, compilers={"cxx": None, "nvcc": None, "nvrtc": nvrtc.library_path()},
        build_seconds=round(done.seconds, 4), build_log=str(log_path),
        warnings=sum(d.severity == "warning" for d in diagnostics.parse(done.log)), binding=KIND)
    return _kernel(spec, job, done.cubin, manifest_path, cubin_path, functions, compiled=True, seconds=done.seconds)
