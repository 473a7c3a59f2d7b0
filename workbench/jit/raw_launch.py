"""Launching a raw kernel: the RawKernel that wb.cuda_kernel() returns, its arguments checked
against the parameters (as the source declares them, at the sizes the cubin records) and packed
for the driver, the module loaded once per device, and the launch on a torch stream. Compiling
and caching it is raw_kernel.py's job.
"""
from __future__ import annotations

import ctypes
import struct
import threading
from dataclasses import dataclass, field
from pathlib import Path

from cache_tools.resource_rows import TABLE_COLUMNS, table_rows
from kwb_store.resources import FunctionResources

from .errors import KwbError
from .signature import Param

_lock = threading.Lock()  # the per-device module table


class LaunchError(KwbError, ValueError):
    """A launch's arguments do not fit the kernel: which argument, and the rule."""


# --- the kernel -------------------------------------------------------------------------------------

@dataclass
class _Loaded:
    module: ctypes.c_void_p
    function: ctypes.c_void_p
    attributes: dict
    dynamic_smem_allowed: int = 48 * 1024


@dataclass
class RawKernel:
    """A compiled raw kernel. Call it: k(grid, block, args, shared_mem=0, stream=None)."""

    name: str
    key: str
    cubin: bytes
    arch: str
    params: list[Param] | None       # as the source declares them (None: not found in the text)
    slots: list                      # as the cubin records them (cubin.ParamSlot)
    resources: list[FunctionResources]
    manifest_path: Path
    cubin_path: Path
    compiled: bool = False           # compiled by this call (False: from the cache)
    compile_seconds: float = 0.0
    _loaded: dict = field(default_factory=dict, repr=False)

    # -- arguments ------------------------------------------------------------------------------
    def signature(self) -> str:
        if self.params is not None:
            return f"{self.name}({', '.join(p.describe() for p in self.params)})"
        return f"{self.name}({', '.join(f'<{s.size} bytes>' for s in self.slots)})"

    def _pack(self, args, check_device: bool = True):
        """The driver's kernelParams for args: (pointer array, buffers to keep alive, device index)."""
        import torch

        if not isinstance(args, (tuple, list)):
            args = (args,)
        wanted = len(self.slots) if self.slots else len(self.params or ())
        if len(args) != wanted:
            raise LaunchError(f"{self.name} takes {wanted} arguments, {self.signature()}; got {len(args)}")
        buffers, device = [], None
        for i, value in enumerate(args):
            param = self.params[i] if self.params is not None and i < len(self.params) else None
            size = self.slots[i].size if self.slots else (param.size or 8)
            what = f"{self.name}: argument {i} ({param.describe() if param else f'{size} bytes'})"
            if isinstance(value, torch.Tensor):
                data, device = _tensor_arg(value, param, size, what, device, check_device)
            else:
                data = _scalar_arg(value, param, size, what)
            buffers.append((ctypes.c_char * len(data)).from_buffer_copy(data))
        array = (ctypes.c_void_p * len(buffers))(*[ctypes.addressof(b) for b in buffers])
        return array, buffers, device

    # -- launching ------------------------------------------------------------------------------
    def _on(self, device: int) -> _Loaded:
        """The kernel loaded on device (once; the caller has made device's context current)."""
        from . import cuda_driver as drv

        with _lock:
            loaded = self._loaded.get(device)
            if loaded is None:
                module = None
                try:
                    module = drv.load_module(self.cubin)
                    function = drv.get_function(module, self.name)
                    loaded = self._loaded[device] = _Loaded(module, function, drv.attributes(function))
                except drv.DriverError as e:
                    if module is not None:
                        drv.unload_module(module)
                    raise drv.DriverError(self._load_failure(e, device), e.code) from None
        return loaded

    def _load_failure(self, e, device: int) -> str:
        import torch

        from . import cuda_driver as drv

        here = "sm_{}{}".format(*torch.cuda.get_device_capability(device))
        if e.code in (drv.NO_BINARY_FOR_GPU, drv.INVALID_IMAGE) or here != self.arch.rstrip("af"):
            return (f"{self.name}: {e}; it was compiled for {self.arch} and cuda:{device} is {here} (give arch= or set "
                    "KWB_CUDA_ARCH)")
        return f"{self.name}: {e}"

    def __call__(self, grid, block, args=(), shared_mem: int = 0, stream=None) -> None:
        import torch

        from . import cuda_driver as drv

        grid3, block3 = _dims(grid, "grid", (2**31 - 1, 65535, 65535)), _dims(block, "block", (1024, 1024, 64))
        if isinstance(shared_mem, bool) or not isinstance(shared_mem, int) or shared_mem < 0:
            raise LaunchError(f"{self.name}: shared_mem must be a whole number of bytes, at least 0, got {shared_mem!r}")
        params, keep, device = self._pack(args)
        if device is None:
            device = torch.cuda.current_device()
        handle = _stream_handle(stream, device)
        with drv.on_device(device):
            self._launch(device, grid3, block3, shared_mem, handle, params)
        del keep  # the driver copied the arguments during the call

    def _launch(self, device: int, grid3, block3, shared_mem: int, stream: int, params) -> None:
        from . import cuda_driver as drv

        loaded = self._on(device)
        threads = block3[0] * block3[1] * block3[2]
        limit = loaded.attributes["max_threads_per_block"]
        if threads > limit:
            raise LaunchError(f"{self.name}: a block of {threads} threads is more than it can have: {limit} "
                              f"({loaded.attributes['registers']} registers a thread)")
        if shared_mem > loaded.dynamic_smem_allowed:
            drv.allow_dynamic_shared(loaded.function, shared_mem)
            loaded.dynamic_smem_allowed = shared_mem
        drv.launch(loaded.function, grid3, block3, shared_mem, stream, params)

    def occupancy(self, block_threads: int, shared_mem: int = 0) -> float | None:
        """Theoretical occupancy of a launch with this block size (from ptxas's report)."""
        own = [f for f in self.resources if f.name == self.name or f.mangled == self.name]
        return own[0].occupancy(block_threads, shared_mem) if own else None

    def __repr__(self) -> str:
        how = f"compiled in {self.compile_seconds:.2f} s" if self.compiled else "from the cache"
        return f"<kwb raw kernel {self.signature()} {self.arch}, {how}>"

    def _repr_markdown_(self) -> str:
        rows = "\n".join("| " + " | ".join(r) + " |" for r in table_rows(self.resources))
        head = "| " + " | ".join(TABLE_COLUMNS) + " |\n|" + "---|" * len(TABLE_COLUMNS)
        how = f"compiled with NVRTC in {self.compile_seconds:.2f} s" if self.compiled else "loaded from the cache"
        return f"**{self.name}** ({self.arch}, {how})\n\n`{self.signature()}`\n\n{head}\n{rows}\n"


def _dims(value, what: str, limits: tuple[int, int, int]) -> tuple[int, int, int]:
    items = (value,) if isinstance(value, int) else tuple(value) if isinstance(value, (tuple, list)) else None
    if items is None or not 1 <= len(items) <= 3 or any(isinstance(v, bool) or not isinstance(v, int) for v in items):
        raise LaunchError(f"{what} must be a whole number or a tuple of 1 to 3 of them, got {value!r}")
    items = items + (1,) * (3 - len(items))
    for axis, (n, top) in enumerate(zip(items, limits)):
        if not 1 <= n <= top:
            raise LaunchError(f"{what}[{axis}] must be between 1 and {top}, got {n}")
    return items


def _stream_handle(stream, device: int) -> int:
    import torch

    if stream is None:
        return torch.cuda.current_stream(device).cuda_stream
    if isinstance(stream, torch.cuda.Stream):
        return stream.cuda_stream
    if isinstance(stream, int):
        return stream
    raise LaunchError(f"stream must be a torch.cuda.Stream, a raw stream handle or None, got {type(stream).__name__}")


_SAME_SIZE = {"int32": "uint32", "uint32": "int32", "int64": "uint64", "uint64": "int64", "int16": "uint16",
              "uint16": "int16", "int8": "uint8", "uint8": "int8"}


def _tensor_arg(t, param: Param | None, size: int, what: str, device, check_device: bool):
    if param is not None and not param.pointer:
        raise LaunchError(f"{what} is a value, not a pointer: pass a Python number, not a tensor (t.item() if you must)")
    if size != 8:
        raise LaunchError(f"{what} takes {size} bytes, not a pointer: a tensor cannot go there")
    if check_device:
        if t.device.type != "cuda":
            raise LaunchError(f"{what} must be a CUDA tensor, got one on {t.device}")
        if device is not None and t.device.index != device:
            raise LaunchError(f"{what} is on cuda:{t.device.index}, another argument on cuda:{device}: one device a launch")
        device = t.device.index
    if param is not None and param.dtype is not None:
        name = str(t.dtype).removeprefix("torch.")
        if name != param.dtype and _SAME_SIZE.get(param.dtype) != name:
            raise LaunchError(f"{what} points at {param.dtype} elements, got a {name} tensor")
    if not t.is_contiguous():
        raise LaunchError(f"{what} must be contiguous (a raw kernel sees memory, not strides), got strides "
                          f"{tuple(t.stride())}: pass t.contiguous()")
    align = param.align if param is not None else 1
    if t.data_ptr() % align:
        raise LaunchError(f"{what} must be aligned to {align} bytes, got an address {t.data_ptr() % align} bytes past "
                          "(a view at an odd offset?)")
    return struct.pack("<Q", t.data_ptr()), device


def _scalar_arg(value, param: Param | None, size: int, what: str) -> bytes:
    import torch

    if param is not None and param.pointer:
        if value is None:
            return struct.pack("<Q", 0)
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**64:
            return struct.pack("<Q", value)  # a raw address
        raise LaunchError(f"{what} is a pointer: pass a tensor (or None for a null pointer), got {value!r}"[:300])
    if isinstance(value, (bytes, bytearray, ctypes.Structure)):
        data = bytes(value)
        if len(data) != size:
            raise LaunchError(f"{what} takes {size} bytes, got {len(data)}")
        return data
    if hasattr(value, "item") and not isinstance(value, torch.Tensor):  # a numpy scalar
        value = value.item()
    if not isinstance(value, (int, float)):
        raise LaunchError(f"{what} must be a number, got {type(value).__name__}")
    fmt = param.fmt if param is not None and param.size == size else None
    if param is not None and param.dtype == "bfloat16" and size == 2:
        return torch.tensor(float(value), dtype=torch.bfloat16).view(torch.int16).item().to_bytes(2, "little", signed=True)
    if fmt is None:  # a type the text does not name: by the cubin's size and the value's kind
        fmt = {(4, False): "i", (8, False): "q", (4, True): "f", (8, True): "d", (2, False): "h", (1, False): "b",
               (2, True): "e"}.get((size, isinstance(value, float)))
        if fmt is None:
            raise LaunchError(f"{what} takes {size} bytes of a type kwb cannot read from the source: pass bytes of that size")
    if fmt in "bBhHiIqQ?" and isinstance(value, float):
        raise LaunchError(f"{what} is an integer, got the float {value!r}")
    try:
        return struct.pack("<" + fmt, value)
    except (struct.error, OverflowError):
        raise LaunchError(f"{what} cannot hold {value!r}") from None
