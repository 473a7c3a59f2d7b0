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

from . import compile_cache, notices, nvrtc, signature, toolchain
from . import cubin as cubins
from .errors import BuildError, ToolchainError
from .raw_launch import RawKernel
from .signature import Param
from .sources import kwb_include_dirs

KIND = "nvrtc"
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
class _Request:
    name: str
    text: str
    program: Path          # the file NVRTC's diagnostics name (the user's .cu, or a copy of the text)
    label: str             # what error messages call the source
    first_line: int
    include_dirs: list[Path]
    options: list[str]
    arch: str
    pre_includes: list[Path] = field(default_factory=list)  # -include FILE: in the key like any header
    kept: bool = False     # program is kwb's copy of text (written before compiling)


def _arch(arch: str | None) -> str:
    """'sm_90': arch as given ('9.0', '90', 'sm_90a', '9.0+PTX'), else as CUDA builds choose
    (toolchain.cuda_archs: KWB_CUDA_ARCH, the visible GPU's, TORCH_CUDA_ARCH_LIST's first, sm_90)."""
    given = arch if arch is not None else toolchain.cuda_archs()[0]
    try:
        [one] = toolchain.parse_archs(str(given))
    except (ToolchainError, ValueError):
        raise ValueError(f"arch must name a GPU architecture such as '9.0', '90' or 'sm_90a', got {given!r}") from None
    return "sm_" + one.removesuffix("+PTX").replace(".", "")


def _request(source, name: str, options, include_dirs, arch, label, first_line) -> _Request:
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z_]\w*", name):
        raise ValueError(f"name must be the kernel's C identifier (its extern \"C\" __global__ function), got {name!r}")
    if isinstance(options, str):
        options = options.split()
    options = list(options or [])
    if not all(isinstance(o, str) for o in options):
        raise TypeError(f"options must be NVRTC options as strings, got {options!r}")
    bad = [o for o in options if o.startswith(("-arch", "--gpu-architecture"))]
    if bad:
        raise ValueError(f"options: give the architecture as arch= (or KWB_CUDA_ARCH), not {bad[0]!r}")
    options, from_options, pre_includes = _include_options(options)
    dirs = [Path(d).expanduser().resolve() for d in ([include_dirs] if isinstance(include_dirs, (str, Path))
                                                      else list(include_dirs or []))] + from_options
    if isinstance(source, Path) or (isinstance(source, str) and "\n" not in source and source.endswith((".cu", ".cuh"))):
        path = Path(source).expanduser().resolve()
        try:
            text = path.read_text()
        except OSError as e:
            raise FileNotFoundError(f"source: cannot read {path}: {e.strerror}") from None
        return _Request(name, text, path, label or str(path), first_line, [path.parent, *dirs, *kwb_include_dirs()], options,
                        _arch(arch), pre_includes)
    if not isinstance(source, str):
        raise TypeError(f"source must be CUDA C++ text or the path of a .cu file, got {type(source).__name__}")
    # text: "..." includes resolve against the working folder (a notebook's), as for a file beside it
    return _Request(name, source, Path(), label or f"<{name} source>", first_line, [Path.cwd(), *dirs, *kwb_include_dirs()],
                    options, _arch(arch), pre_includes)


def _include_options(options: list[str]) -> tuple[list[str], list[Path], list[Path]]:
    """(the other options, -I / --include-path folders, -include / --pre-include files): the
    folders join include_dirs and the files are hashed, so headers they reach are in the key."""
    rest, dirs, files = [], [], []
    words = iter(options)
    for word in words:
        for flag, into in (("--include-path", dirs), ("-I", dirs), ("--pre-include", files), ("-include", files)):
            if word == flag:
                value = next(words, None)
                if value is None:
                    raise ValueError(f"options: {flag} needs a value")
            elif word.startswith(flag + "=") or (flag == "-I" and word.startswith("-I") and len(word) > 2):
                value = word[len(flag) + 1:] if word.startswith(flag + "=") else word[2:]
            else:
                continue
            into.append(Path(value).expanduser().resolve())
            break
        else:
            rest.append(word)
    return rest, dirs, files


def _key_parts(req: _Request) -> tuple[dict, dict, dict]:
    """(config, sources, headers) as kwb_store's build_base/build_key take them. Text is
    recorded as the file kwb keeps it in (_keep_text: entry/src/<name>-<hash>.cu), so `kwb
    cache verify` recomputes the same key and `kwb cache list` finds the source."""
    headers: dict[str, str] = {}
    for path in req.pre_includes:
        try:
            data = path.read_bytes()
        except OSError as e:
            raise FileNotFoundError(f"options: cannot read the pre-included {path}: {e.strerror}") from None
        headers[str(path)] = hashlib.sha256(data).hexdigest()
        _includes(path, data.decode(errors="replace"), req.include_dirs, headers)
    _includes(req.program if req.program != Path() else Path.cwd() / "<text>", req.text, req.include_dirs, headers)
    # NVRTC's version says major.minor only: its library's identity (path, size, mtime) tells a
    # 13.2.x wheel from a 13.2.y, and the CUDA headers it compiles against are named by folder
    config = {"kind": KIND, "kernel": req.name, "archs": [req.arch], "cuda_cflags": req.options,
              "include_dirs": [str(d) for d in req.include_dirs], "pre_includes": [str(p) for p in req.pre_includes],
              "versions": {"nvrtc": nvrtc.version(), "nvrtc_library": file_ident(nvrtc.library_path()),
                           "cuda_include": list(nvrtc.cuda_include_dirs()), "kwb_format": FORMAT}}
    return config, {str(req.program): hashlib.sha256(req.text.encode()).hexdigest()}, headers


def _keep_text(req: _Request, entry: Path) -> None:
    """Text gets a file of kwb's, named by its hash, for NVRTC's diagnostics and the manifest."""
    if req.program == Path():
        req.program = entry / "src" / f"{req.name}-{hashlib.sha256(req.text.encode()).hexdigest()[:16]}.cu"
        req.kept = True


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
    def attempt() -> RawKernel | None:  # None: a header saved while NVRTC read it, the key is taken again
        req = _request(source, name, options, include_dirs, arch, label, first_line)
        entry = layout.entry_dir(root or compile_cache.cache_root(), f"{KIND}-{name}")
        _keep_text(req, entry)
        config, sources, headers = _key_parts(req)
        base = layout.build_base(config, sources)
        key = layout.build_key(base, headers)
        with _lock:
            hit = _memory.get(key)
        if hit is not None:
            return _again(hit)
        stem = layout.stem(name, "cuda", base, key)
        kernel = _from_disk(req, entry, stem, key)
        if kernel is None:
            with compile_cache.build_lock(entry / layout.LOCK_NAME, f"{name} (cuda, NVRTC)"):  # one compiler; the others read its cubin
                kernel = _from_disk(req, entry, stem, key) or _compile(req, entry, stem, config, sources, headers, base,
                                                                       key, verbose)
        if kernel is not None:
            with _lock:
                _memory[key] = kernel
        return kernel

    return compile_cache.until_inputs_hold(attempt, name, "cuda, NVRTC")


def _again(kernel: RawKernel) -> RawKernel:
    """The same code again: the same loaded modules, marked as not compiled now."""
    if kernel.compiled:
        kernel = RawKernel(**{**kernel.__dict__, "compiled": False})
    return kernel


def _from_disk(req: _Request, entry: Path, stem: str, key: str) -> RawKernel | None:
    manifest_path = entry / f"{stem}{layout.MANIFEST_SUFFIX}"
    manifest = Manifest.read(manifest_path)
    if manifest is None or manifest.key != key:
        return None
    cubin_path = entry / manifest.library
    problem = library_problem(cubin_path, manifest)
    if problem:
        notices.once(f"damaged:{cubin_path}", f"kwb: {req.name} (NVRTC): {problem}; compiling it again")
        return None
    image = cubin_path.read_bytes()
    clear_dead_owner(entry / layout.LOCK_NAME)  # a compile killed earlier: its record goes once a good cubin loads
    layout.mark_loaded(manifest_path)
    return _kernel(req, manifest.key, image, manifest_path, cubin_path, functions_of(manifest.resources), compiled=False,
                   seconds=0.0)


def _kernel(req: _Request, key: str, image: bytes, manifest_path: Path, cubin_path: Path, functions, compiled: bool,
            seconds: float) -> RawKernel:
    try:
        slots = cubins.param_slots(image, req.name) or []
    except (cubins.CubinError, ValueError) as e:  # a cubin layout kwb cannot read: the text's word only
        notices.once(f"cubin:{key}", f"kwb: {req.name}: cannot read its parameters from the cubin ({e}); checking "
                                     "launches against the source's declarations only")
        slots = []
    return RawKernel(req.name, key, image, req.arch, _declared(req, slots), slots, functions, manifest_path, cubin_path,
                     compiled, seconds)


def _declared(req: _Request, slots) -> list[Param] | None:
    """The parameters as the text declares them, where they agree with the cubin's (a macro or
    a type the reading gets wrong must not refuse right arguments); None otherwise."""
    params = signature.find(req.text, req.name)
    if params is None or not slots:
        return params
    if len(params) != len(slots) or any((p.pointer and s.size != 8) or (p.size is not None and p.size != s.size)
                                        for p, s in zip(params, slots)):
        notices.once(f"params:{req.name}:{[s.size for s in slots]}",
                     f"kwb: {req.name}: its parameters as read from the source ({', '.join(p.describe() for p in params)}) "
                     f"do not match the compiled kernel's ({', '.join(f'{s.size} bytes' for s in slots)}); checking "
                     "launches by size only")
        return None
    return params


def _compile(req: _Request, entry: Path, stem: str, config: dict, sources: dict, headers: dict, base: str, key: str,
             verbose: bool) -> RawKernel | None:
    program = req.program
    if req.kept and not program.exists():  # NVRTC's diagnostics name this file: errors show its lines
        atomic_write_text(program, req.text)
    options = [f"-arch={req.arch}", *nvrtc.RESOURCE_OPTIONS, *[f"-I{d}" for d in req.include_dirs],
               *[f"-I{d}" for d in nvrtc.cuda_include_dirs()], *[f"--pre-include={p}" for p in req.pre_includes],
               *req.options]
    if verbose:
        notices.say(f"kwb: NVRTC {nvrtc.version()} compiling {req.name}: {' '.join(options)}")
    from . import diagnostics  # only a compile reads NVRTC's log
    from .ptxas import parse_ptxas

    done = nvrtc.compile(req.text, str(program), options)
    log_path = layout.build_dir(entry, KIND) / f"{stem}.log"
    atomic_write_text(log_path, done.log)
    display = {str(program): (req.label, req.first_line)}
    if not done.ok:
        found = [d for d in diagnostics.parse(done.log) if d.severity != "warning"]
        raise BuildError(req.name, "cuda, NVRTC", found, str(log_path), tail="" if found else done.log,
                         display_paths=display)
    if not unchanged(headers):
        return None  # a header changed while NVRTC read it: what the cubin holds is not what the key says
    names = cubins.kernel_names(done.cubin)
    if req.name not in names:
        raise BuildError(req.name, "cuda, NVRTC", [], str(log_path), display_paths=display,
                         tail=f"the source has no extern \"C\" __global__ function named {req.name}; the cubin holds: "
                              f"{', '.join(names) or 'none'} (a function without extern \"C\" has a mangled name)")
    functions = parse_ptxas(done.log, str(program))
    compile_cache.announce_spills(req.name, functions)
    cubin_path = entry / f"{stem}{SUFFIX}"
    atomic_write_bytes(cubin_path, done.cubin)
    manifest_path = entry / f"{stem}{layout.MANIFEST_SUFFIX}"
    compile_cache.write_manifest(
        manifest_path, cubin_path, functions, name=req.name, kind=KIND, ident=entry.name[len(layout.ENTRY_PREFIX):],
        device="cuda", folder=str(program.parent), base=base, key=key, sources=sources, headers=headers, config=config,
        compilers={"cxx": None, "nvcc": None, "nvrtc": nvrtc.library_path()}, build_seconds=round(done.seconds, 4),
        build_log=str(log_path), warnings=sum(d.severity == "warning" for d in diagnostics.parse(done.log)), binding=KIND)
    return _kernel(req, key, done.cubin, manifest_path, cubin_path, functions, compiled=True, seconds=done.seconds)

