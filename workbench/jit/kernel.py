"""Kernel: a finished build loaded into this process, its ops as attributes.

Each build is registered under its own dispatcher namespace, kwb_<kernel>_<id>, where <id>
hashes the build key and the kernel's ops.py: an edited kernel (or an edited ops.py) gets
fresh ops beside the old ones, and whoever holds the old Kernel object keeps working code.
"""
from __future__ import annotations

import ctypes
import functools
import hashlib
import importlib.util
import inspect
import os
import shlex
import shutil
import sys
import tempfile
import threading
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING

import torch

from kwb_store.fsutil import sha256_file

from . import notices
from .errors import LoadError
from .sources import KWB, PYBIND, TORCH_LIBRARY, KernelSource, defines_python_module

if TYPE_CHECKING:  # launching does not import the compiler: a Build is what the builder hands over
    from .builder import Build

_loaded: dict[str, Kernel] = {}  # namespace -> Kernel, for this process
_handles: list[ctypes.CDLL] = []  # loaded libraries stay loaded (their ops are registered)
_lock = threading.Lock()


def _check_one_device(op: str, signature: inspect.Signature, args, kwargs) -> None:
    """RuntimeError naming the arguments when the tensors among them are on different devices."""
    try:
        bound = signature.bind(*args, **kwargs).arguments
    except TypeError:
        bound = {f"argument {i}": a for i, a in enumerate(args)}
    devices: dict[str, str] = {}
    for name, value in bound.items():
        items = value if isinstance(value, (list, tuple)) else [value]
        for item in items:
            if isinstance(item, torch.Tensor):
                devices.setdefault(name, str(item.device))
    if len(set(devices.values())) > 1:
        where = ", ".join(f"{name}: {device}" for name, device in devices.items())
        raise RuntimeError(f"{op}: every tensor argument must be on one device, got {where}")


class OpNamespace:
    """What ops.py's register() receives: the ops of one loaded build, `ops.relu_scale`, and
    `ops.entry`, the build's Python module where the kernel has a PYBIND11_MODULE unit (its
    functions call the ops from C++: kernels/vector_add/vector_add_python.cpp), else None."""

    def __init__(self, namespace: str, entry: ModuleType | None = None):
        self.namespace = namespace
        self.entry = entry

    def qualname(self, op: str) -> str:
        """'relu_scale' -> 'kwb_relu_scale_1a2b3c4d5e6f::relu_scale', for torch.library calls."""
        return f"{self.namespace}::{op}"

    def register_fake(self, op: str, fake=None):
        """torch.library.register_fake for this build's `op` (as a decorator, or with the fake),
        which first checks that every tensor argument is on one device: a CPU tensor beside a
        meta one dispatches to the fake, which would hand back an uninitialised CPU tensor."""

        def register(fn):
            signature = inspect.signature(fn)

            @functools.wraps(fn)
            def checked(*args, **kwargs):
                _check_one_device(op, signature, args, kwargs)
                return fn(*args, **kwargs)

            torch.library.register_fake(self.qualname(op), checked)
            return fn

        return register if fake is None else register(fake)

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        packet = getattr(getattr(torch.ops, self.namespace), op)
        if torch.compiler.is_compiling():  # first met inside a traced function: the compiler takes the op itself
            return packet
        found = _BelowAutogradWhenNoGrad(packet) if _pure(packet) else packet
        self.__dict__[op] = found  # found once: a wrapper's every call is then a plain attribute
        return found


def _pure(packet) -> bool:
    """One overload that writes no argument and returns no view: an op for which skipping the
    autograd keys (ADInplaceOrView still runs) changes nothing but the time."""
    overloads = packet.overloads()
    if overloads != ["default"]:
        return False
    schema = packet.default._schema
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


def _needs_grad(args, kwargs) -> bool:
    for a in (*args, *kwargs.values()):
        if isinstance(a, torch.Tensor):
            if a.requires_grad:
                return True
        elif isinstance(a, (list, tuple)) and any(isinstance(t, torch.Tensor) and t.requires_grad for t in a):
            return True
    return False


class _BelowAutogradWhenNoGrad:
    """An op of ops.py's, called past the dispatcher's Autograd key when no input needs a
    gradient. register_autograd puts a Python kernel at that key which runs on every call, grad
    or not: a fixed cost of every small op, which skipping it where it could do nothing saves
    (benchmarks/cpu_call_overhead.py). Under torch.compile the op is called as it is (the
    compiler traces autograd itself), and so it is inside forward_ad.dual_level(): a tangent
    needs no requires_grad, and skipping the Autograd key would drop it without a word."""

    def __init__(self, packet):
        self.packet, self.default = packet, packet.default

    def __call__(self, *args, **kwargs):
        if (torch.compiler.is_compiling() or (torch.is_grad_enabled() and _needs_grad(args, kwargs))
                or torch.autograd.forward_ad._current_level >= 0):
            return self.packet(*args, **kwargs)
        with torch._C._AutoDispatchBelowAutograd():
            return self.default(*args, **kwargs)

    def __getattr__(self, name: str):
        return getattr(self.packet, name)


class Kernel:
    """A loaded kernel or extension. Its ops and functions are attributes: `k.relu_scale(x, 1.5)`.

    kwb kernels: ops dispatch on the inputs' device and support autograd and torch.compile
    where the kernel's ops.py registers them; ops.py's public functions (typed wrappers over
    the ops) shadow the ops of their names, and k.op(name) reaches an op itself.
    pybind extensions: the module's functions, as torch.utils.cpp_extension.load returns them
    (k.module is the module). TORCH_LIBRARY extensions: the ops of the namespaces they define
    (k.namespace; renamed on a reload in one process, see load_library)."""

    def __init__(self, source: KernelSource, build: Build, namespace: str | None, ops_module: ModuleType | None,
                 functions: dict | None = None, module: ModuleType | None = None, namespaces: tuple[str, ...] = ()):
        self.name = source.name
        self.device = build.device
        self.namespace = namespace
        self.namespaces = namespaces or ((namespace,) if namespace else ())
        self.key = build.key
        self.library_path = build.library
        self.folder = source.folder
        self.build = build
        self.binding = source.binding
        self.module = module
        self._source = source
        self._ops_module = ops_module
        self._spec = None
        self._functions = dict(functions or {})

    def _dispatcher_ops(self) -> set[str]:
        prefixes = tuple(ns + "::" for ns in self.namespaces)
        if not prefixes:
            return set()
        return {n.split("::", 1)[1].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefixes)}

    @property
    def ops(self) -> list[str]:
        """The dispatcher ops of this build and its public functions (ops.py's, or a pybind module's)."""
        return sorted(self._dispatcher_ops() | set(self._functions))

    @property
    def spec(self):
        """The kernel's spec.py module (reference, inputs, tolerances, sizes), or None."""
        if self._spec is None and self._source.spec_file is not None:
            self._spec = _import_file(self._source.spec_file, f"kwb_spec_{self.namespace}")
        return self._spec

    @property
    def info(self) -> dict:
        """The build's manifest as a dict: sources, headers, flags, versions, timings."""
        return self.build.manifest.to_dict()

    def op(self, name: str):
        """The dispatcher op `name` of this build (torch.ops.<namespace>.<name>), even where
        ops.py's public function of that name shadows it: for torch.library.opcheck, say."""
        for ns in self.namespaces:
            try:
                return getattr(getattr(torch.ops, ns), name)
            except (AttributeError, RuntimeError):
                continue
        raise AttributeError(f"{self.name!r} has no dispatcher op {name!r}; its ops: {', '.join(self.ops) or 'none'}")

    def qualname(self, op: str) -> str:
        """'mymuladd' -> 'extension_cpp::mymuladd' (the namespace this build's ops live in), for
        torch.library.register_fake and kin: code written this way follows a reload's renaming."""
        if not self.namespace:
            raise AttributeError(f"{self.name!r} is a Python module with no dispatcher ops")
        return f"{self.namespace}::{op}"

    def __getattr__(self, op: str):
        if op.startswith("_"):
            raise AttributeError(op)
        if op in self._functions:
            found = self._functions[op]
        elif op in self._dispatcher_ops():
            found = self.op(op)
        elif self.module is not None and callable(getattr(self.module, op, None)):
            found = getattr(self.module, op)
        elif self.module is not None and hasattr(self.module, op):
            return getattr(self.module, op)  # a module's value, which the module may rebind
        else:
            raise AttributeError(f"{self.name!r} has no op or function {op!r}; it has: {', '.join(self.ops) or 'none'}")
        # Found once, then a plain attribute: this lookup cost every `k.op(...)` call 1.7 ms where
        # it lists the dispatcher's 3600 ops, and a public function 20 us with cold caches on the
        # 2-core CPU (a 2^20 add takes 270).
        self.__dict__[op] = found
        return found

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.ops))

    def __repr__(self) -> str:
        where = f"namespace={self.namespace}" if self.namespace else f"module={self.module.__name__ if self.module else None}"
        what = "kernel" if self.binding == "kwb" else f"{self.binding} extension"
        return f"<kwb {what} {self.name} ({self.device}) ops=[{', '.join(self.ops)}] {where}>"

    def _repr_markdown_(self) -> str:
        """A notebook's view of the build: what it is, where it lives, what went into its key."""
        m = self.build.manifest
        how = f"built in {m.build_seconds:.1f} s" if self.build.compiled else "loaded from the cache"
        rows = [("ops", ", ".join(f"`{o}`" for o in self.ops)),
                ("build", f"{how}; {m.warnings} warnings"),
                ("key", f"`{self.key[:16]}`"),
                ("library", f"`{self.library_path}` ({m.library_size / 1024:.0f} KiB)"),
                ("sources", ", ".join(f"`{Path(p).name}`" for p in m.sources)),
                ("headers", ", ".join(f"`{Path(p).name}`" for p in m.headers) or "-"),
                ("arch", ", ".join(m.archs) or "-"),
                ("toolchain", (f"torch {m.versions.get('torch')}, CUDA {m.versions.get('torch_cuda')}, "
                               f"{m.versions.get('nvcc') or m.versions.get('cxx')}")),
                ("build log", f"`{m.build_log}`")]
        body = "\n".join(f"| {k} | {v} |" for k, v in rows)
        return f"**{self.name}** ({self.device})\n\n| | |\n|---|---|\n{body}\n"


def loaded_kernels() -> list[Kernel]:
    """Every kernel loaded in this process so far."""
    with _lock:
        return list(_loaded.values())


def _import_file(path: Path, module_name: str) -> ModuleType:
    """Import a kernel's ops.py or spec.py under a name of its own build. The module goes into
    sys.modules (the importlib recipe): tools that find a function's globals through its
    module's name need it there, e.g. torch.compile inlining a spec's reference (seen on torch
    2.11: ModuleNotFoundError for kwb_spec_...)."""
    spec = importlib.util.spec_from_file_location(module_name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[module_name] = module
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[module_name]
        raise
    return module


def namespace_for(source: KernelSource, build: Build) -> str:
    # the library's path is in it: the same build in two cache roots (build_directory=) is two
    # libraries, and torch takes a namespace once a process
    h = hashlib.sha256(build.key.encode())
    h.update(str(Path(build.library).resolve()).encode())
    if source.ops_file is not None:
        h.update(sha256_file(source.ops_file).encode())
    return f"kwb_{source.name}_{h.hexdigest()[:12]}"


def _open(source: KernelSource, build: Build, library: Path | None = None) -> ctypes.CDLL:
    try:
        return ctypes.CDLL(str(library or build.library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
    except OSError as e:
        raise LoadError(_load_failure(source, build, e)) from e


# A kwb library file -> the namespace it registered its ops under in this process. Its C++ keeps
# that namespace (kwb::library_namespace, and the op handles its Autograd kernels and Python
# entry look up once), so the same file under a second namespace (ops.py edited, the C++ not)
# is loaded from a copy of its own: one dlopen'd image a namespace.
_library_namespaces: dict[str, str] = {}


def _library_for(build: Build, namespace: str) -> Path:
    path = Path(build.library).resolve()
    if _library_namespaces.setdefault(str(path), namespace) == namespace:
        return path
    copy = Path(tempfile.mkdtemp(prefix="kwb-namespace-")) / f"{path.stem}.{namespace}{path.suffix}"
    shutil.copy2(path, copy)  # a copy, not a link: the loader takes one inode for one library
    _library_namespaces[str(copy)] = namespace
    return copy


def _load_failure(source: KernelSource, build: Build, e: OSError) -> str:
    """Why a library would not load, in words: above all a symbol the C++ part calls and only
    CUDA sources this build left out define (a CPU-only build of a tutorial extension)."""
    text = str(e)
    missing = text.split("undefined symbol: ", 1)[1].strip() if "undefined symbol: " in text else ""
    if missing and source.cuda_sources and build.device != "cuda":
        return (f"{source.name}'s C++ part calls {_demangle(missing)}, which its CUDA sources define, and this build "
                f"has no CUDA part (built for the CPU: no nvcc or no GPU here): load it with device='cuda' on a "
                f"machine with nvcc ({', '.join(p.name for p in source.cuda_sources)})")
    if missing:
        return f"{build.library} calls {_demangle(missing)}, which none of its sources or libraries define: {text}"
    # the command names what this build came from: a folder of the user's, or a shipped kernel's name
    from .sources import kernels_dir

    shipped = source.folder is not None and Path(source.folder).parent == kernels_dir()
    target = source.name if shipped else shlex.quote(str(source.folder))
    return (f"could not load {build.library}: {text}. Rebuild it with force=True (kwb build --force {target}), "
            "or check `kwb doctor`")


def _demangle(symbol: str) -> str:
    import shutil
    import subprocess

    tool = shutil.which("c++filt")
    if tool is None:
        return symbol
    try:
        return subprocess.run([tool, symbol], capture_output=True, text=True, timeout=10, check=False).stdout.strip() or symbol
    except (OSError, subprocess.SubprocessError):
        return symbol


def _register_ops_py(source: KernelSource, namespace: str, entry: ModuleType | None = None) -> tuple[ModuleType | None, dict | None]:
    """The kernel's ops.py, imported for this build, and what its register(ops) returns."""
    if source.ops_file is None:
        return None, None
    ops_module = _import_file(source.ops_file, f"kwb_ops_{namespace}")
    functions = None
    if hasattr(ops_module, "register"):
        functions = ops_module.register(OpNamespace(namespace, entry))
        if functions is not None and not isinstance(functions, dict):
            raise LoadError(f"{source.ops_file}: register(ops) returned {type(functions).__name__}; it must "
                            "return None or a dict of public functions, {'name': function}")
    _refuse_missing_derivatives(namespace)
    return ops_module, functions


def _refuse_missing_derivatives(namespace: str) -> None:
    """An autograd kernel that raises, for each op of the build that has none: without it,
    differentiating through the op (a *_backward op in a gradient penalty, say) only warns and
    the gradient comes out as None or zero. First derivatives are untouched: autograd calls the
    *_backward ops with gradients off, where this kernel passes straight through."""
    for qualname in torch._C._dispatch_get_all_op_names():
        ns, _, op = qualname.partition("::")
        if ns != namespace or any(torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key)
                                  for key in ("Autograd", "CompositeImplicitAutograd")):
            continue
        try:
            torch.library.register_autograd(qualname, _not_differentiable(op), setup_context=_no_context)
        except Exception:  # noqa: BLE001, S112 - an op whose outputs autograd cannot track (no tensors): nothing to guard
            continue
        NOT_DIFFERENTIABLE.add(qualname)


# Ops given the raising autograd kernel above ("ns::op"): differentiable(qualname) says False.
NOT_DIFFERENTIABLE: set[str] = set()


def differentiable(qualname: str) -> bool:
    """Whether the op has a derivative of its own (an autograd kernel other than kwb's refusal)."""
    return qualname not in NOT_DIFFERENTIABLE and any(
        torch._C._dispatch_has_kernel_for_dispatch_key(qualname, key) for key in ("Autograd", "CompositeImplicitAutograd"))


def _no_context(ctx, inputs, output) -> None:
    pass


def _not_differentiable(op: str):
    def backward(ctx, *grads):
        raise RuntimeError(
            f"{op} is not differentiable: kwb gives no derivative of it, so a second derivative (double "
            "backward, a gradient penalty) through it would come out as zero; compute that term with PyTorch "
            "ops, or detach the inputs that need no gradient")
    return backward


def load_library(source: KernelSource, build: Build) -> Kernel:
    """Load a finished build into this process, once per build (a second call returns the same Kernel)."""
    loaders = {KWB: _load_kwb, PYBIND: _load_pybind, TORCH_LIBRARY: _load_torch_library}
    with _lock:
        key = f"{source.binding}:{build.library}:{sha256_file(source.ops_file) if source.ops_file else ''}"
        if key not in _loaded:
            _loaded[key] = loaders[source.binding](source, build)
        return _loaded[key]


# ops.py's error for a build whose ops registered in this process and whose ops.py then
# raised: torch takes a namespace once a process, so loading it again re-raises that error
# instead of failing on the registration (the namespace changes when ops.py or the build does).
_ops_py_failures: dict[str, tuple[BaseException, object]] = {}


def _load_kwb(source: KernelSource, build: Build) -> Kernel:
    namespace = namespace_for(source, build)
    if namespace in _ops_py_failures:
        error, trace = _ops_py_failures[namespace]
        raise error.with_traceback(trace)  # its traceback as it was, not grown by every retry
    library = _library_for(build, namespace)
    handle = _open(source, build, library)
    try:
        register = handle.kwb_register_library
    except AttributeError:
        raise LoadError(f"{build.library} exports no kwb_register_library: the kernel's binding .cpp must declare its ops in a KWB_LIBRARY(m) block (kwb_library.h, in workbench/jit/include)") from None
    register.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    register.restype = ctypes.c_int
    err = ctypes.create_string_buffer(8192)
    if register(namespace.encode(), err, len(err)) != 0:
        raise LoadError(f"registering the ops of {source.name} failed: {err.value.decode(errors='replace')}")
    _handles.append(handle)
    entry_loaded = False
    try:
        # the Python entry, imported once the ops it calls are registered
        entry = _import_extension(source, build, library, namespace) if source.python_units else None
        entry_loaded = True
        ops_module, functions = _register_ops_py(source, namespace, entry)
    except Exception as e:
        if hasattr(e, "add_note"):  # Python 3.11+
            where = f"{source.ops_file}" if entry_loaded else f"importing {source.name}'s Python entry"
            e.add_note(f"kwb: {where} raised this when {source.name}'s build was loaded; loading it again in "
                       "this process gives this error again: edit the kernel (or restart Python) to load it anew")
        _ops_py_failures[namespace] = (e, e.__traceback__)
        raise
    return Kernel(source, build, namespace, ops_module, functions, module=entry)


# The build whose module holds a module name in this process: pybind11 (3.x) keeps one module
# per name an interpreter, so another build of the same extension is imported under its own.
_module_names: dict[str, str] = {}


def _import_extension(source: KernelSource, build: Build, library: Path | None = None,
                      namespace: str | None = None) -> ModuleType:
    """The pybind module of a build, under its TORCH_EXTENSION_NAME as torch imports it (not in
    sys.modules); another build of it in the same process as kwb_<key>.<name>, whose init
    function is still PyInit_<name>, so the edited code is the module's and the old module
    stays as it was for whoever holds it. A kwb kernel's entry is imported from the library
    its namespace was registered from (`library`), under a name of that namespace's."""
    owner = f"{build.key}:{namespace}" if namespace else build.key
    name = source.module_name
    if _module_names.setdefault(name, owner) != owner:
        name = f"{namespace or 'kwb_' + build.key[:12]}.{source.module_name}"
    spec = importlib.util.spec_from_file_location(name, library or build.library)
    assert spec is not None and spec.loader is not None
    try:
        module = importlib.util.module_from_spec(spec)  # dlopen and PyInit_<name>
        spec.loader.exec_module(module)
    except ImportError as e:
        if "undefined symbol" in str(e):
            raise LoadError(_load_failure(source, build, OSError(str(e)))) from e
        raise LoadError(f"could not import {build.library} as the Python module {source.module_name}: {e}") from e
    return module


def _public(module: ModuleType) -> dict:
    return {k: v for k, v in vars(module).items() if not k.startswith("_") and callable(v)}


def _load_pybind(source: KernelSource, build: Build) -> Kernel:
    if not source.python_module:  # torch's is_python_module=False: the library is loaded, not imported
        _handles.append(_open(source, build))
        return Kernel(source, build, None, None)
    module = _import_extension(source, build)
    return Kernel(source, build, None, None, _public(module), module=module)


# A TORCH_LIBRARY namespace a build of this process registered, and which build: torch accepts
# a namespace once per process, so another build of the same extension gets a suffix.
_claimed_namespaces: dict[str, str] = {}


def _torch_library_namespaces(handle: ctypes.CDLL, library: Path) -> list[str]:
    try:
        query = handle.kwb_torch_library_namespaces
    except AttributeError:
        raise LoadError(f"{library} exports no kwb_torch_library_namespaces: it was not built with kwb's TORCH_LIBRARY shim") from None
    out = ctypes.create_string_buffer(4096)
    query(out, len(out))
    return [ns for ns in out.value.decode().split(",") if ns]


def _load_torch_library(source: KernelSource, build: Build) -> Kernel:
    handle = _open(source, build)
    defined = _torch_library_namespaces(handle, build.library)
    taken = [ns for ns in defined if _claimed_namespaces.get(ns, build.key) != build.key]
    suffix = ""
    if taken:
        n = 2
        while any(f"{ns}_kwb{n}" in _claimed_namespaces for ns in defined):
            n += 1
        suffix = f"_kwb{n}"
    register = handle.kwb_register_torch_library
    register.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
    register.restype = ctypes.c_int
    err = ctypes.create_string_buffer(8192)
    failed = register(suffix.encode(), err, len(err)) != 0
    if failed and not suffix and "Only a single TORCH_LIBRARY" in err.value.decode(errors="replace"):
        # the namespace was registered outside kwb (the project's setup.py build, imported): a new name
        suffix = "_kwb2"
        while any(f"{ns}{suffix}" in _claimed_namespaces for ns in defined):
            suffix = f"_kwb{int(suffix[4:]) + 1}"
        failed = register(suffix.encode(), err, len(err)) != 0
    if failed:
        raise LoadError(f"registering the ops of {source.name} failed: {err.value.decode(errors='replace').strip()}")
    _handles.append(handle)
    names = tuple(ns + suffix for ns in defined)
    for ns in names:
        _claimed_namespaces[ns] = build.key
    for ns in defined:
        _claimed_namespaces.setdefault(ns, build.key)
    if suffix:
        first = defined[0] if defined else source.name
        notices.say(f"kwb: this build of {source.name} registers its ops as torch.ops.{first}{suffix} (torch takes a "
                    f"namespace once a process): the object load() returned reaches them (k.<op>, k.qualname(op)), "
                    f"torch.ops.{first} still runs the first build; restart Python to get the name back.")
    module = _import_extension(source, build) \
        if source.python_module and defines_python_module([*source.cpp_sources, *source.cuda_sources]) else None
    ops_module, functions = _register_ops_py(source, names[0]) if names else (None, None)
    functions = {**(_public(module) if module is not None else {}), **(functions or {})}
    return Kernel(source, build, names[0] if names else None, ops_module, functions, module=module, namespaces=names)
