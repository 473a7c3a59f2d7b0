"""Kernel: a finished build loaded into this process, its ops as attributes.

Each build is registered under its own dispatcher namespace, kwb_<kernel>_<id>, where <id>
hashes the build key and the kernel's ops.py: an edited kernel (or an edited ops.py) gets
fresh ops beside the old ones, and whoever holds the old Kernel object keeps working code.
"""
from __future__ import annotations

import ctypes
import hashlib
import importlib.util
import os
import sys
import threading
from pathlib import Path
from types import ModuleType

import torch

from cache_tools.fsutil import sha256_file

from .builder import Build
from .errors import LoadError
from .sources import KernelSource

_loaded: dict[str, "Kernel"] = {}  # namespace -> Kernel, for this process
_handles: list[ctypes.CDLL] = []  # loaded libraries stay loaded (their ops are registered)
_lock = threading.Lock()


class OpNamespace:
    """What ops.py's register() receives: the ops of one loaded build, `ops.relu_scale`."""

    def __init__(self, namespace: str):
        self.namespace = namespace

    def qualname(self, op: str) -> str:
        """'relu_scale' -> 'kwb_relu_scale_1a2b3c4d5e6f::relu_scale', for torch.library calls."""
        return f"{self.namespace}::{op}"

    def __getattr__(self, op: str):
        if op.startswith("__"):
            raise AttributeError(op)
        packet = getattr(getattr(torch.ops, self.namespace), op)
        self.__dict__[op] = packet  # found once: a wrapper's every call is then a plain attribute
        return packet


class Kernel:
    """A loaded kernel. Its ops are attributes: `k.relu_scale(x, 1.5)`.

    Ops dispatch on the inputs' device (CPU or CUDA) and support autograd and torch.compile
    where the kernel's ops.py registers them. An ops.py whose register() returns a dict of
    Python functions adds those too (a public `lltm(...)` over the op `lltm_forward`, say);
    a function shadows an op of the same name."""

    def __init__(self, source: KernelSource, build: Build, namespace: str, ops_module: ModuleType | None,
                 functions: dict | None = None):
        self.name = source.name
        self.device = build.device
        self.namespace = namespace
        self.key = build.key
        self.library_path = build.library
        self.folder = source.folder
        self.build = build
        self._source = source
        self._ops_module = ops_module
        self._spec = None
        self._functions = dict(functions or {})

    @property
    def ops(self) -> list[str]:
        """The dispatcher ops of this build and ops.py's public functions."""
        prefix = self.namespace + "::"
        names = {n[len(prefix):].split(".")[0] for n in torch._C._dispatch_get_all_op_names() if n.startswith(prefix)}
        return sorted(names | set(self._functions))

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
        try:
            return getattr(getattr(torch.ops, self.namespace), name)
        except (AttributeError, RuntimeError):
            raise AttributeError(f"kernel {self.name!r} has no dispatcher op {name!r}; its ops: {', '.join(self.ops) or 'none'}") from None

    def __getattr__(self, op: str):
        if op.startswith("_"):
            raise AttributeError(op)
        if op in self._functions:
            return self._functions[op]
        try:
            return getattr(getattr(torch.ops, self.namespace), op)
        except (AttributeError, RuntimeError):
            raise AttributeError(f"kernel {self.name!r} has no op {op!r}; its ops: {', '.join(self.ops) or 'none'}") from None

    def __dir__(self):
        return sorted(set(super().__dir__()) | set(self.ops))

    def __repr__(self) -> str:
        return f"<kwb kernel {self.name} ({self.device}) ops=[{', '.join(self.ops)}] namespace={self.namespace}>"

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
                ("toolchain", f"torch {m.versions.get('torch')}, CUDA {m.versions.get('torch_cuda')}, "
                              f"{m.versions.get('nvcc') or m.versions.get('cxx')}"),
                ("build log", f"`{m.build_log}`")]
        body = "\n".join(f"| {k} | {v} |" for k, v in rows)
        return f"**{self.name}** ({self.device})\n\n| | |\n|---|---|\n{body}\n"


def loaded_kernels() -> list["Kernel"]:
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
    h = hashlib.sha256(build.key.encode())
    if source.ops_file is not None:
        h.update(sha256_file(source.ops_file).encode())
    return f"kwb_{source.name}_{h.hexdigest()[:12]}"


def load_library(source: KernelSource, build: Build) -> Kernel:
    namespace = namespace_for(source, build)
    with _lock:
        if namespace in _loaded:
            return _loaded[namespace]
        try:
            handle = ctypes.CDLL(str(build.library), mode=os.RTLD_NOW | os.RTLD_LOCAL)
        except OSError as e:
            raise LoadError(f"could not load {build.library}: {e}. Rebuild with kwb build {source.name} --force, or check `kwb doctor`") from e
        try:
            register = handle.kwb_register_library
        except AttributeError:
            raise LoadError(f"{build.library} exports no kwb_register_library: the kernel's binding .cpp must declare its ops in a KWB_LIBRARY(m) block (kernels/common/kwb_library.h)") from None
        register.argtypes = [ctypes.c_char_p, ctypes.c_char_p, ctypes.c_size_t]
        register.restype = ctypes.c_int
        err = ctypes.create_string_buffer(8192)
        if register(namespace.encode(), err, len(err)) != 0:
            raise LoadError(f"registering the ops of {source.name} failed: {err.value.decode(errors='replace')}")
        _handles.append(handle)
        ops_module, functions = None, None
        if source.ops_file is not None:
            ops_module = _import_file(source.ops_file, f"kwb_ops_{namespace}")
            if hasattr(ops_module, "register"):
                functions = ops_module.register(OpNamespace(namespace))
                if functions is not None and not isinstance(functions, dict):
                    raise LoadError(f"{source.ops_file}: register(ops) returned {type(functions).__name__}; it must "
                                    "return None or a dict of public functions, {'name': function}")
        kernel = Kernel(source, build, namespace, ops_module, functions)
        _loaded[namespace] = kernel
        return kernel
