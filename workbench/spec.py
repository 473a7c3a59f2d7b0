"""What a kernel's spec.py declares: for each op, a reference, an input generator, tolerances
per dtype, and a bytes/flops model; for the kernel, the shapes to check and the sizes to time.

The correctness and timing harnesses (workbench.correctness, workbench.benchmark) read only this, so a
kernel of your own gets the same checks and timings by writing a spec.py beside its sources:

    SPEC = KernelSpec(ops=[OpSpec("relu_scale", reference, make_inputs, bytes_moved=...)])

`reference` is the op written the plain PyTorch way, with no upcasting of its own. The harness
calls it twice over: on float64 copies of the inputs, as the reference the kernel must match,
and on the inputs as they are, as the eager baseline that the kernel is timed against (and,
compiled, as the torch.compile baseline).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Callable

import torch

# Sizes that catch the usual indexing bugs: empty, one element, odd lengths that leave a
# vector tail (37, 199), lengths that are not multiples of a block (760, 1128).
AWKWARD_SIZES = (0, 1, 37, 199, 760, 1128)


@dataclass(frozen=True)
class Tolerance:
    """An output passes when every element has |out - ref| <= atol + rtol * |ref|, and the
    whole tensor ||out - ref|| <= rel_l2 * ||ref|| + atol * sqrt(numel) (where rel_l2 is set).
    elementwise=False drops the per-element bound (NaN and Inf placement still count): how
    baselines' gradients are validated, since eager bf16 sums gradients it rounded first."""

    atol: float
    rtol: float
    rel_l2: float | None = None
    elementwise: bool = True

    def __str__(self) -> str:
        l2 = f", rel_l2 {self.rel_l2:.0e}" if self.rel_l2 is not None else ""
        return f"atol {self.atol:.0e}, rtol {self.rtol:.0e}{l2}"


# Defaults for elementwise work computed in fp32: one rounding to the output type, so rtol sits
# at about two units in the last place (bf16 has 8 bits of mantissa: 2^-8 = 3.9e-3).
DEFAULT_TOLERANCES = {
    torch.float64: Tolerance(1e-12, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-6, 1e-6, 1e-6),
    torch.float16: Tolerance(1e-3, 1e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-2, 8e-3, 8e-3),
}


@dataclass
class OpSpec:
    """One op of a kernel.

    reference(*inputs): the op written the plain PyTorch way (see the module's docstring).
    make_inputs(shape, dtype, device, generator): the op's arguments, drawn from `generator`
        (never all zeros: zeros hide unwritten outputs).
    bytes_moved(shape, dtype) / flops(shape, dtype): the fewest bytes the op must move (each
        input read once, each output written once) and its floating-point operations.
    grad_inputs: indices of the arguments that take gradients (autograd is checked for these).
    eager: the eager baseline when it should differ from `reference`.
    vendor: a vendor-library route to the same result (cuBLAS, cuDNN), timed as `vendor_name`;
        vendor_device: the device it is that route on ("cuda"), or None for every device.
    calls: the kernel's op (or ops.py function) this entry runs, when it differs from `name`:
        two entries can call one op with different arguments (bias_gelu's tanh and erf forms).
    """

    name: str
    reference: Callable
    make_inputs: Callable
    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    bytes_moved: Callable | None = None
    flops: Callable | None = None
    grad_inputs: tuple[int, ...] = ()
    grad_tolerances: dict | None = None
    eager: Callable | None = None
    vendor: Callable | None = None
    vendor_name: str = "vendor"
    vendor_device: str | None = None
    calls: str | None = None

    def tolerance(self, dtype: torch.dtype, grad: bool = False) -> Tolerance:
        table = self.grad_tolerances if grad and self.grad_tolerances else self.tolerances
        if dtype not in table:
            known = ", ".join(str(d).removeprefix("torch.") for d in table)
            raise KeyError(f"op {self.name!r} has no tolerance for {str(dtype).removeprefix('torch.')} "
                           f"(its spec gives {known}); add one to the OpSpec's tolerances")
        return table[dtype]

    def vendor_on(self, device: str) -> bool:
        return self.vendor is not None and self.vendor_device in (None, device)

    @property
    def kernel_op(self) -> str:
        return self.calls or self.name

    @property
    def eager_fn(self) -> Callable:
        return self.eager or self.reference


def _per_device(sizes) -> dict[str, list[tuple]]:
    if isinstance(sizes, dict):
        return {k: [tuple(s) for s in v] for k, v in sizes.items()}
    return {"cpu": [tuple(s) for s in sizes], "cuda": [tuple(s) for s in sizes]}


@dataclass
class KernelSpec:
    """dtypes: what each device's implementation supports.
    shapes: the shapes every check runs (the awkward ones always among them).
    bench_sizes: the default sizes to time, per device ({"cpu": [...], "cuda": [...]}, or one
        list for both); sweep_sizes: a longer list for `kwb bench --sweep`."""

    ops: list[OpSpec]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {
        "cpu": (torch.float32, torch.float64),
        "cuda": (torch.float32, torch.float16, torch.bfloat16),
    })
    shapes: list[tuple] = field(default_factory=lambda: [(n,) for n in AWKWARD_SIZES] + [(7, 33), (3, 5, 17), ((1 << 20) + 3,)])
    # 2^26 is the size BASELINES.md measures. The CPU stops at 2^22: a tensor of 32 MB or more
    # is a fresh mmap from glibc on every call, and its ~8k page faults (about 10 ms on the
    # 2-core development machine) then outweigh the kernel, whoever's it is.
    bench_sizes: dict | list = field(default_factory=lambda: {
        "cuda": [(1 << 20,), (1 << 26,)],
        "cpu": [(1 << 16,), (1 << 20,), (1 << 22,)],
    })
    sweep_sizes: dict | list = field(default_factory=lambda: {
        "cuda": [(1 << k,) for k in range(12, 29, 2)],
        "cpu": [(1 << k,) for k in range(10, 23, 2)],
    })

    def __post_init__(self) -> None:
        self.bench_sizes = _per_device(self.bench_sizes)
        self.sweep_sizes = _per_device(self.sweep_sizes)

    def op(self, name: str) -> OpSpec:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(f"no op {name!r} in this spec; ops: {[o.name for o in self.ops]}")

    def sizes_for(self, device: str, sweep: bool = False) -> list[tuple]:
        table = self.sweep_sizes if sweep else self.bench_sizes
        return table.get(device) or table.get("cuda") or []


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def randn(shape, dtype, device, generator) -> torch.Tensor:
    """Normal random values drawn on the CPU in float64 (same values on every device for one
    seed), then cast."""
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype)


def element_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def upcast(t):
    """float64 for floating tensors; anything else as it is."""
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
