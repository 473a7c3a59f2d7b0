"""What a kernel's spec.py declares: for each op, a reference, an input generator, tolerances
per dtype, and a bytes/flops model; for the kernel, the shapes to check and the sizes to time.

The correctness and timing harnesses read only this, so a kernel of your own gets the same
checks by writing a spec.py beside its sources.
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
    atol: float
    rtol: float


# Defaults for elementwise work computed in fp32 (half types round once on output).
DEFAULT_TOLERANCES = {
    torch.float64: Tolerance(1e-12, 1e-12),
    torch.float32: Tolerance(1e-6, 1e-6),
    torch.float16: Tolerance(1e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-2, 8e-3),
}


@dataclass
class OpSpec:
    """One op of a kernel.

    reference(*inputs) computes the expected output, upcasting inside (float64 for float32 and
    float64 inputs, float32 at least for half types), and returns it in the inputs' dtype's
    precision or higher. make_inputs(shape, dtype, device, generator) returns the op's
    arguments (tensors never all zeros). bytes_moved / flops take (shape, dtype)."""

    name: str
    reference: Callable
    make_inputs: Callable
    tolerances: dict = field(default_factory=lambda: dict(DEFAULT_TOLERANCES))
    bytes_moved: Callable | None = None
    flops: Callable | None = None
    grad_inputs: tuple[int, ...] = ()  # indices of the arguments that take gradients

    def tolerance(self, dtype: torch.dtype) -> Tolerance:
        return self.tolerances[dtype]


@dataclass
class KernelSpec:
    ops: list[OpSpec]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {
        "cpu": (torch.float32, torch.float64),
        "cuda": (torch.float32, torch.float16, torch.bfloat16),
    })
    shapes: list[tuple] = field(default_factory=lambda: [(n,) for n in AWKWARD_SIZES] + [(7, 33), (3, 5, 17), (1 << 16,)])
    bench_sizes: list[tuple] = field(default_factory=lambda: [(1 << 20,), (1 << 24,), (1 << 26,)])

    def op(self, name: str) -> OpSpec:
        for o in self.ops:
            if o.name == name:
                return o
        raise KeyError(f"no op {name!r} in this spec; ops: {[o.name for o in self.ops]}")


def numel(shape) -> int:
    n = 1
    for s in shape:
        n *= s
    return n


def randn(shape, dtype, device, generator) -> torch.Tensor:
    """Normal random values drawn on the CPU in float64 (same values on every device for one
    seed), then cast."""
    return torch.randn(shape, generator=generator, dtype=torch.float64).to(device=device, dtype=dtype)


def upcast(t: torch.Tensor) -> torch.Tensor:
    return t.double() if t.is_floating_point() else t
