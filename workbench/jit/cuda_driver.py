"""The few CUDA driver calls a raw kernel needs (load a cubin, find a function, read its
attributes, launch it on a stream), through libcuda.so.1 as torch's own NVRTC path reaches it.
Only ever called where a GPU is visible: importing this module loads nothing.

Every call runs inside `on_device(d)`: the primary context of device d (the one torch's runtime
uses) is made current for the call and the thread's own context put back after, so a launch
from a thread that never touched CUDA works, and a launch on cuda:1 leaves the thread's
current device as it was (CuPy's raw kernels once changed it and had to learn the same).
"""
from __future__ import annotations

import contextlib
import ctypes
import functools
import threading

from .errors import KwbError

# cuFuncGetAttribute's CUfunction_attribute values (cuda.h)
ATTRIBUTES = {"max_threads_per_block": 0, "static_smem": 1, "constant_bytes": 2, "local_bytes": 3, "registers": 4}
_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8
NO_BINARY_FOR_GPU = 209  # CUDA_ERROR_NO_BINARY_FOR_GPU: the cubin is for another architecture
INVALID_IMAGE = 200      # CUDA_ERROR_INVALID_IMAGE


class DriverError(KwbError, RuntimeError):
    """A CUDA driver call failed: which call, and the driver's words."""

    def __init__(self, message: str, code: int = 0):
        super().__init__(message)
        self.code = code


@functools.cache
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    for name in ("cuCtxSetCurrent", "cuCtxPushCurrent_v2", "cuModuleUnload"):
        getattr(lib, name).argtypes = [ctypes.c_void_p]
    lib.cuModuleGetFunction.argtypes = [ctypes.c_void_p, ctypes.c_void_p, ctypes.c_char_p]
    lib.cuFuncGetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p]
    lib.cuFuncSetAttribute.argtypes = [ctypes.c_void_p, ctypes.c_int, ctypes.c_int]
    return lib


def check(result: int, call: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        library().cuGetErrorString(result, ctypes.byref(text))
        words = text.value.decode(errors="replace") if text.value else f"error {result}"
        raise DriverError(f"{call} failed: {words} (CUresult {result})", result)


_primaries: dict[int, int] = {}
_primaries_lock = threading.Lock()


def primary_context(device: int) -> int:
    """Device's primary context, retained once per process (torch keeps it alive anyway)."""
    with _primaries_lock:
        if device not in _primaries:
            lib = library()
            handle, context = ctypes.c_int(), ctypes.c_void_p()
            check(lib.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
            check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle), "cuDevicePrimaryCtxRetain")
            _primaries[device] = context.value
        return _primaries[device]


@contextlib.contextmanager
def on_device(device: int):
    """device's primary context current for the block, the thread's own back afterwards."""
    lib = library()
    wanted = primary_context(device)
    current = ctypes.c_void_p()
    check(lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
    if current.value == wanted:
        yield
        return
    check(lib.cuCtxPushCurrent_v2(wanted), "cuCtxPushCurrent")
    try:
        yield
    finally:
        popped = ctypes.c_void_p()
        lib.cuCtxPopCurrent_v2(ctypes.byref(popped))


def load_module(image: bytes) -> ctypes.c_void_p:
    """A cubin loaded into the current context."""
    module = ctypes.c_void_p()
    check(library().cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
    return module


def unload_module(module: ctypes.c_void_p) -> None:
    library().cuModuleUnload(module)


def get_function(module: ctypes.c_void_p, name: str) -> ctypes.c_void_p:
    func = ctypes.c_void_p()
    check(library().cuModuleGetFunction(ctypes.byref(func), module, name.encode()), f"cuModuleGetFunction({name!r})")
    return func


def attributes(func: ctypes.c_void_p) -> dict[str, int]:
    """Registers a thread, static shared memory, local (spill and stack) bytes, constant bytes
    and the most threads a block can have, as the driver reports them for this function."""
    out = {}
    for name, attr in ATTRIBUTES.items():
        value = ctypes.c_int()
        check(library().cuFuncGetAttribute(ctypes.byref(value), attr, func), "cuFuncGetAttribute")
        out[name] = value.value
    return out


def allow_dynamic_shared(func: ctypes.c_void_p, nbytes: int) -> None:
    """Opt a function in to more than 48 KiB of dynamic shared memory."""
    check(library().cuFuncSetAttribute(func, _MAX_DYNAMIC_SHARED_SIZE_BYTES, nbytes), "cuFuncSetAttribute")


def launch(func: ctypes.c_void_p, grid: tuple[int, int, int], block: tuple[int, int, int], shared_mem: int,
           stream: int, params: ctypes.Array) -> None:
    check(library().cuLaunchKernel(func, *grid, *block, shared_mem, stream, params, None), "cuLaunchKernel")
