"""rmsnorm: RMSNorm over the last dimension — reference, inputs, tolerances, bytes model,
sizes. A shape is x's shape; weight has its last dimension as its length."""
import torch
from workbench.spec import (
    ROW_NORM_GRAD_TOLERANCES,
    ROW_NORM_TOLERANCES,
    KernelSpec,
    OpSpec,
    bytes_of,
    randn,
    row_shapes,
    row_sizes,
)

EPS = 1e-6


def reference(x, weight):
    """RMSNorm as people write it in PyTorch (benchmarks/reference/h100_baselines.md times this expression)."""
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS) * weight


def make_inputs(shape, dtype, device, generator):
    # x off-center (mean 1, spread 2); weight of order 1, never all ones
    return randn(shape, dtype, device, generator, scale=2.0, shift=1.0), randn(shape[-1:], dtype, device, generator, shift=1.0)


SPEC = KernelSpec(
    # a step: x, w -> y, then grad, x, w -> grad_x, grad_w (the rows' rstd, 1/cols of it, left out)
    ops=[OpSpec("rmsnorm", reference, make_inputs, bytes_moved=bytes_of(2, 1), step_bytes=bytes_of(5, 3),
                grad_inputs=(0, 1),  # x, w -> y
                tolerances=ROW_NORM_TOLERANCES, grad_tolerances=ROW_NORM_GRAD_TOLERANCES)],
    shapes=row_shapes(),
    bench_sizes=row_sizes(),
    sweep_sizes=row_sizes(sweep=True),
)
