"""What a kernel's spec.py declares: for each op, a reference, an input generator, tolerances
per dtype, and a bytes/flops model; for the kernel, the shapes to check and the sizes to time.

The correctness and timing harnesses (workbench.harness.correctness, .benchmark) read only this,
so a kernel of your own gets the same checks and timings by writing a spec.py beside its
sources (importing this module as `workbench.spec`):

    SPEC = KernelSpec(ops=[OpSpec("relu_scale", reference, make_inputs, bytes_moved=bytes_of(2))])

Below the classes: helpers for inputs (randn), bytes models (bytes_of), the shapes and sizes of
ops over rows (row_shapes, row_sizes), and tolerance presets by what an op computes.

`reference` is the op written the plain PyTorch way, with no upcasting of its own. The harness
calls it twice over: on float64 copies of the inputs, as the reference the kernel must match,
and on the inputs as they are, as the eager baseline that the kernel is timed against (and,
compiled, as the torch.compile baseline).
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

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

# A normalization over a row (LayerNorm, RMSNorm), outputs of order one: half types get one
# output rounding (bf16 two units = 7.8e-3, atol for values near 0); fp32 sums the statistics
# of up to 262144 values. Gradients: grad_x subtracts row means from grad * w (cancellation),
# and the parameter gradients add up thousands of rows.
ROW_NORM_TOLERANCES = {
    torch.float64: Tolerance(1e-12, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-5, 1e-5, 1e-6),
    torch.float16: Tolerance(2e-3, 2e-3, 1e-3),
    torch.bfloat16: Tolerance(1.6e-2, 1.6e-2, 8e-3),
}
ROW_NORM_GRAD_TOLERANCES = {
    torch.float64: Tolerance(1e-10, 1e-10, 1e-11),
    torch.float32: Tolerance(1e-4, 1e-3, 1e-5),
    torch.float16: Tolerance(1e-2, 1e-2, 2e-3),
    torch.bfloat16: Tolerance(8e-2, 3e-2, 1.6e-2),
}

# A matrix product rounded once to the dtype, then nonlinear functions (LLTM, Linear + GELU):
# half types get twice the elementwise bounds; fp32 sums k products in cuBLAS's order. The
# weight and bias gradients sum over every row of the batch, so their error grows with it;
# the norm-wise bound stays tight: it is what catches a wrong formula.
MATMUL_TOLERANCES = {
    torch.float64: Tolerance(1e-12, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-5, 1e-5, 1e-6),
    torch.float16: Tolerance(2e-3, 2e-3, 2e-3),
    torch.bfloat16: Tolerance(2e-2, 1.6e-2, 1e-2),
}
MATMUL_GRAD_TOLERANCES = {
    torch.float64: Tolerance(1e-10, 1e-10, 1e-11),
    torch.float32: Tolerance(1e-3, 1e-4, 1e-5),
    torch.float16: Tolerance(6e-2, 1e-2, 4e-3),
    torch.bfloat16: Tolerance(5e-1, 6e-2, 2e-2),
}


@dataclass
class OpSpec:
    """One op of a kernel.

    reference(*inputs): the op written the plain PyTorch way (see the module's docstring).
    make_inputs(shape, dtype, device, generator): the op's arguments, drawn from `generator`,
        a generator on `device` (never all zeros: zeros hide unwritten outputs).
    bytes_moved(shape, dtype) / flops(shape, dtype): the fewest bytes the op must move (each
        input read once, each output written once) and its floating-point operations.
    step_bytes(shape, dtype): the fewest bytes a training step (the forward, then the backward of
        a given output gradient) must move, so step rows get GB/s and % of the copy ceiling too;
        None where no one count fits every provider's step.
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
    step_bytes: Callable | None = None
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
        list for both); sweep_sizes: a longer list for `kwb bench --sweep`.
    quick: `kwb run`'s one timed size and dtype per device ({"cuda": ((4096, 4096), torch.bfloat16)});
        a device not named gets, where the kernel supports it, its largest bench size in bfloat16
        on CUDA and its middle bench size in float32 on the CPU."""

    ops: list[OpSpec]
    dtypes: dict[str, tuple] = field(default_factory=lambda: {
        "cpu": (torch.float32, torch.float64),
        "cuda": (torch.float32, torch.float16, torch.bfloat16),
    })
    shapes: list[tuple] = field(default_factory=lambda: [(n,) for n in AWKWARD_SIZES] + [(7, 33), (3, 5, 17), ((1 << 20) + 3,)])
    # CUDA: up to 2^26, the baselines' size; the CPU stops at 2^22, where glibc's fresh mmap a
    # call costs more than the kernel (both in benchmarks/reference/workbench_choices.md).
    bench_sizes: dict | list = field(default_factory=lambda: {
        "cuda": [(1 << 20,), (1 << 26,)],
        "cpu": [(1 << 16,), (1 << 20,), (1 << 22,)],
    })
    sweep_sizes: dict | list = field(default_factory=lambda: {
        "cuda": [(1 << k,) for k in range(12, 29, 2)],
        "cpu": [(1 << k,) for k in range(10, 23, 2)],
    })

    quick: dict = field(default_factory=dict)

    def __post_init__(self) -> None:
        self.bench_sizes = _per_device(self.bench_sizes)
        self.sweep_sizes = _per_device(self.sweep_sizes)

    def quick_for(self, device: str) -> tuple[tuple, torch.dtype]:
        """(size, dtype) `kwb run` times without --full: one row per op and mode. On CUDA the
        largest bench size (the headline table's); on the CPU the middle one, since the largest
        there made `kwb run` take 67 s with its builds cached on the 2-core machine, most of it
        validating and flushing caches around 4M-element tensors."""
        if device in self.quick:
            size, dtype = self.quick[device]
            return tuple(size), dtype
        sizes = sorted(self.sizes_for(device), key=numel)
        size = (sizes[-1] if device == "cuda" else sizes[(len(sizes) - 1) // 2]) if sizes else ()
        supported = list(self.dtypes.get(device, ()))
        preferred = torch.bfloat16 if device == "cuda" else torch.float32
        return size, preferred if preferred in supported or not supported else supported[0]

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


def randn(shape, dtype, device, generator, scale: float = 1.0, shift: float = 0.0) -> torch.Tensor:
    """Normal random values (times scale, plus shift) drawn in float64 on the generator's
    device (a CPU generator draws on the CPU, as a CUDA one on the GPU), then cast and moved."""
    values = torch.randn(shape, generator=generator, dtype=torch.float64, device=generator.device)
    if scale != 1.0 or shift != 0.0:
        values = values * scale + shift
    return values.to(device=device, dtype=dtype)


def element_bytes(dtype: torch.dtype) -> int:
    return torch.empty((), dtype=dtype).element_size()


def bytes_of(tensors: int, vectors: int = 0) -> Callable:
    """A bytes model, (shape, dtype) -> bytes: `tensors` tensors of the op's shape and `vectors`
    vectors as long as its last dimension (a bias, a weight), each read or written once.
    relu_scale is bytes_of(2) (read x, write y); bias_gelu bytes_of(2, 1)."""
    def bytes_moved(shape, dtype) -> int:
        return (tensors * numel(shape) + (vectors * shape[-1] if vectors else 0)) * element_bytes(dtype)
    return bytes_moved


# Row lengths from 256 to 262144: where a row fits a warp, a block, the registers, or none.
ROW_SWEEP = tuple(1 << k for k in range(8, 19))


def row_shapes() -> list[tuple]:
    """Shapes for an op over the last dimension: three rows of each awkward length, no rows,
    rows sharing a block (17, 64), 16-byte vectors and their tails (2049, 4096), widths that
    fill their threads exactly (exact_rows: 256-8192), the narrow ones with a last block short
    of rows (5 x 256, 5 x 512, 5 x 1024, 3 x 2048), and rows longer than a register path holds
    (8200, 16400: forward 8192 fp32 / 16384 bf16)."""
    return [(3, n) for n in AWKWARD_SIZES] + [(0, 64), (3, 5, 17), (130, 64), (5, 256), (5, 512), (5, 1024), (3, 2048),
                                              (5, 2049), (33, 4096), (3, 8192), (2, 8200), (2, 16400)]


def row_sizes(sweep: bool = False) -> dict:
    """Bench sizes (rows, cols) for an op over rows, per device: 4096 x 1024 and 16384 x 4096 on
    a GPU; sweep: every ROW_SWEEP length at 2^26 elements (2^20 on the CPU)."""
    if sweep:
        return {"cuda": [((1 << 26) // n, n) for n in ROW_SWEEP], "cpu": [((1 << 20) // n, n) for n in ROW_SWEEP[:7]]}
    return {"cuda": [(4096, 1024), (16384, 4096)], "cpu": [(256, 1024), (1024, 4096)]}


def upcast(t):
    """float64 for floating tensors; anything else as it is."""
    return t.double() if isinstance(t, torch.Tensor) and t.is_floating_point() else t
