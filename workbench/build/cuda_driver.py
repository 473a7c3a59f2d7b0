"""The few CUDA driver calls a raw kernel needs (load a cubin, find a function, read its
attributes, launch it on a stream), through libcuda.so.1 as torch's own NVRTC path reaches it.
Only ever called where a GPU is visible: importing this module loads nothing.
"""
from __future__ import annotations

import ctypes
import functools

from .errors import KwbError

# cuFuncGetAttribute's CUfunction_attribute values (cuda.h)
ATTRIBUTES = {"max_threads_per_block": 0, "static_smem": 1, "constant_bytes": 2, "local_bytes": 3, "registers": 4}
_MAX_DYNAMIC_SHARED_SIZE_BYTES = 8


class DriverError(KwbError, RuntimeError):
    """A CUDA driver call failed: which call, and the driver's words."""


@functools.lru_cache(maxsize=None)
def library() -> ctypes.CDLL:
    lib = ctypes.CDLL("libcuda.so.1")
    lib.cuGetErrorString.argtypes = [ctypes.c_int, ctypes.POINTER(ctypes.c_char_p)]
    lib.cuLaunchKernel.argtypes = [ctypes.c_void_p, *[ctypes.c_uint] * 7, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p]
    return lib


def check(result: int, call: str) -> None:
    if result != 0:
        text = ctypes.c_char_p()
        library().cuGetErrorString(result, ctypes.byref(text))
        words = text.value.decode(errors="replace") if text.value else f"error {result}"
        raise DriverError(f"{call} failed: {words} (CUresult {result})")


def load_module(image: bytes) -> ctypes.c_void_p:
    """A cubin loaded into the current context (torch's, made current by the caller)."""
    module = ctypes.c_void_p()
    check(library().cuModuleLoadData(ctypes.byref(module), ctypes.c_char_p(image)), "cuModuleLoadData")
    return module


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


def ensure_context(device: int) -> None:
    """Make `device`'s primary context (the one torch's runtime calls use) current in this
    thread, where no context or another device's is."""
    lib = library()
    current = ctypes.c_void_p()
    check(lib.cuCtxGetCurrent(ctypes.byref(current)), "cuCtxGetCurrent")
    if current.value:
        on = ctypes.c_int()
        check(lib.cuCtxGetDevice(ctypes.byref(on)), "cuCtxGetDevice")
        if on.value == device:
            return
    handle, context = ctypes.c_int(), ctypes.c_void_p()
    check(lib.cuDeviceGet(ctypes.byref(handle), device), "cuDeviceGet")
    check(lib.cuDevicePrimaryCtxRetain(ctypes.byref(context), handle), "cuDevicePrimaryCtxRetain")
    check(lib.cuCtxSetCurrent(context), "cuCtxSetCurrent")
