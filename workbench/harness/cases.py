"""The harness's shared kit: what check and bench both need to turn a request into cases.

    Case                      one op (or function) at one dtype and shape, with its arguments,
                              reference and tolerances: what check compares and bench times
    kernel_and_device()       the kernel to use and the device to run it on (the device policy
                              is workbench.jit.device's)
    spec_of, select_ops, select_dtypes, parse_dtype(s), case_seed, new_seed
    poisoned_outputs()        torch.empty starts as NaN inside: unwritten outputs cannot pass
"""
from __future__ import annotations

import contextlib
import secrets
import warnings
import zlib
from collections.abc import Callable
from dataclasses import dataclass

import torch

from ..jit import device as devices
from ..jit.errors import KwbError
from .spec import DEFAULT_TOLERANCES, KernelSpec, OpSpec, Tolerance


@dataclass
class Case:
    """One thing to check or time: `fn` beside `reference` on `args`, judged by `tolerance`."""

    kernel: str                 # the kernel's (or function's) name, as reports show it
    op: str                     # the op as reports show it: "bias_gelu_tanh", "softmax fwd+bwd"
    fn: Callable                # what runs: a kernel's op, an ops.py function, a function of yours
    reference: Callable         # the plain PyTorch op; run on float64 copies, it is the reference
    args: tuple
    dtype: torch.dtype
    shape: tuple
    seed: int
    tolerance: Tolerance
    grad_inputs: tuple[int, ...] = ()          # argument indices whose gradients are checked
    grad_tolerance: Tolerance | None = None    # gradients' own tolerance, where the spec gives one
    grad_names: tuple[str, ...] = ()
    nbytes: int | None = None                  # the bytes model's bytes (timing only)
    flops: float | None = None
    baseline_tolerance: Tolerance | None = None  # how baselines are validated before timing
    functions: tuple = ()                      # the build's GPU functions (kwb_store.resources), for bench's columns
    # (name, fn) whose own error against the reference the kernel may match where it misses its
    # tolerance, after eager's: the vendor's fused op, which kwb may call itself
    yardsticks: tuple = ()


# ---- dtypes, seeds, errors ---------------------------------------------------------------


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


_DTYPE_ALIASES = {
    "float32": torch.float32, "fp32": torch.float32, "float": torch.float32, "f32": torch.float32,
    "float16": torch.float16, "fp16": torch.float16, "half": torch.float16, "f16": torch.float16,
    "bfloat16": torch.bfloat16, "bf16": torch.bfloat16,
    "float64": torch.float64, "fp64": torch.float64, "double": torch.float64, "f64": torch.float64,
}


def parse_dtype(value) -> torch.dtype:
    """torch.float32, 'float32', 'fp32', 'bf16', ... -> a torch dtype."""
    if isinstance(value, torch.dtype):
        return value
    key = str(value).strip().lower().removeprefix("torch.")
    if key not in _DTYPE_ALIASES:
        raise ValueError(f"dtype {value!r} is not one of float32, float16, bfloat16, float64 (or fp32, fp16, bf16, fp64)")
    return _DTYPE_ALIASES[key]


def parse_dtypes(value) -> list[torch.dtype] | None:
    """None, one dtype or name, or a list of them -> a list of torch dtypes (None stays None)."""
    if value is None:
        return None
    return [parse_dtype(d) for d in ([value] if isinstance(value, (str, torch.dtype)) else value)]


def case_seed(seed: int, *parts) -> int:
    """The seed of one case: the same in every process for one report seed."""
    return zlib.crc32(repr((seed, *parts)).encode()) & 0x7FFFFFFF


def generator_for(device, seed: int) -> torch.Generator:
    """A generator on `device` (the current GPU for "cuda"), seeded: inputs drawn where they
    are used. Drawn on the CPU and copied, a 16384 x 4096 float64 tensor cost `kwb run` ~1 s
    of host time per input on the H100 machine."""
    dev = torch.device(device)
    if dev.type == "cuda" and dev.index is None:
        dev = torch.device("cuda", torch.cuda.current_device())
    return torch.Generator(device=dev).manual_seed(seed)


def _generator_mismatch(e: Exception) -> bool:
    """torch's error for a generator of another device than the draw's."""
    return isinstance(e, RuntimeError) and "device type for generator" in str(e)


def draw_inputs(make_inputs: Callable, shape, dtype, device, seed: int) -> tuple:
    """make_inputs(shape, dtype, device, generator) with a generator on `device`. A function
    written for a CPU generator (it draws on the CPU, then moves the result) gets one: the
    same seed, the same values it always drew."""
    gen = generator_for(device, seed)
    try:
        return tuple(make_inputs(shape, dtype, device, gen))
    except RuntimeError as e:
        if gen.device.type == "cpu" or not _generator_mismatch(e):
            raise
    return tuple(make_inputs(shape, dtype, device, torch.Generator().manual_seed(seed)))


def new_seed() -> int:
    return secrets.randbelow(1 << 31)


def error_text(e: BaseException) -> str:
    """'KeyError: first line of the message', for a case or row that failed by raising."""
    text = str(e).strip()
    return f"{type(e).__name__}: {text.splitlines()[0]}" if text else type(e).__name__


# ---- arguments and outputs ------------------------------------------------------------------


def as_list(out) -> list:
    """An op's outputs as a list (one tensor, or a tuple of them)."""
    return list(out) if isinstance(out, (tuple, list)) else [out]


def output_label(i: int, n: int) -> str:
    return "output" if n == 1 else f"output[{i}]"


def first_tensor(args) -> torch.Tensor | None:
    return next((a for a in args if isinstance(a, torch.Tensor) and a.is_floating_point()), None)


def input_sets(inputs) -> list[tuple]:
    """inputs= of a function check or bench: one tuple of arguments, or a list of them."""
    sets = [inputs] if isinstance(inputs, tuple) else list(inputs)
    if not sets or not all(isinstance(x, (tuple, list)) for x in sets):
        raise ValueError("inputs: give a tuple of arguments, a list of such tuples, or (to check) a function "
                         "(shape, dtype, device, generator) -> arguments")
    return sets


def tolerance_for(tolerance, dtype: torch.dtype) -> Tolerance:
    """tolerance= of a function check or bench: None (the dtype's default), a Tolerance, a
    {dtype: Tolerance} dict, or (atol, rtol)."""
    if tolerance is None:
        return DEFAULT_TOLERANCES.get(dtype, DEFAULT_TOLERANCES[torch.float32])
    if isinstance(tolerance, Tolerance):
        return tolerance
    if isinstance(tolerance, dict):
        if dtype not in tolerance:
            raise ValueError(f"tolerance: no entry for {dtype_name(dtype)} (given for {', '.join(dtype_name(d) for d in tolerance)})")
        return tolerance[dtype]
    atol, rtol = tolerance
    return Tolerance(float(atol), float(rtol))


@contextlib.contextmanager
def poisoned_outputs():
    """Inside: tensors from torch.empty/at::empty start as NaN (integers as their maximum),
    through torch's deterministic mode. Restores the previous settings on the way out."""
    det = torch.are_deterministic_algorithms_enabled()
    warn_only = torch.is_deterministic_algorithms_warn_only_enabled()
    fill = torch.utils.deterministic.fill_uninitialized_memory
    torch.use_deterministic_algorithms(True, warn_only=True)
    torch.utils.deterministic.fill_uninitialized_memory = True
    try:
        with warnings.catch_warnings():
            # warn_only: an op without a deterministic implementation (cuBLAS without a
            # workspace config, say) still runs; its warning says nothing about the kernel.
            warnings.filterwarnings("ignore", message=".*determinis.*")
            yield
    finally:
        torch.use_deterministic_algorithms(det, warn_only=warn_only)
        torch.utils.deterministic.fill_uninitialized_memory = fill


# ---- kernels and their specs ----------------------------------------------------------------


def kernel_and_device(target, device):
    """The loaded kernel (target: a Kernel, a shipped kernel's name or a folder) and the device
    to run its ops on, by the device policy: the kernel's build device where a GPU is visible."""
    from ..jit.kernel import Kernel
    from ..jit.loader import load

    kernel = target if isinstance(target, Kernel) else load(target, device=device)
    return kernel, devices.choose(device, purpose="run", built_for=kernel.device, what=kernel.name)


def spec_of(kernel) -> KernelSpec:
    module = kernel.spec
    if module is None or not hasattr(module, "SPEC"):
        raise KwbError(f"kernel {kernel.name!r} has no spec.py with a SPEC: write one (README 'Adding a kernel'), "
                       f"or check a function against a reference with wb.check(fn, reference, inputs=...)")
    return module.SPEC


def select_ops(spec: KernelSpec, ops, kernel_name: str) -> list[OpSpec]:
    if not ops:
        return list(spec.ops)
    names = [ops] if isinstance(ops, str) else list(ops)
    known = [o.name for o in spec.ops]
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"ops: {kernel_name} has no op {', '.join(map(repr, unknown))} in its spec; its ops: {', '.join(known)}")
    return [spec.op(n) for n in names]


def select_dtypes(spec: KernelSpec, dtypes, device: str, kernel_name: str) -> list[torch.dtype]:
    supported = list(spec.dtypes.get(device, ()))
    if dtypes is None:
        return supported
    wanted = parse_dtypes(dtypes)
    missing = [d for d in wanted if d not in supported]
    if missing:
        raise ValueError(f"dtypes: {kernel_name} on {device} supports {', '.join(map(dtype_name, supported)) or 'nothing'}; "
                         f"{', '.join(map(dtype_name, missing))} is not among them")
    return wanted
