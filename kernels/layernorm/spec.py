"""layernorm: LayerNorm over the last dimension — reference, inputs, tolerances, bytes model,
sizes. A shape is x's shape; weight and bias have its last dimension as their length."""
import torch.nn.functional as F
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

EPS = 1e-5


def reference(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias, EPS)


def make_inputs(shape, dtype, device, generator):
    # x off-center (mean 2, spread 3): a kernel that skips the mean, or computes the variance as
    # E[x^2] - E[x]^2, shows; weight and bias of order 1 and never all ones/zeros.
    return (randn(shape, dtype, device, generator, scale=3.0, shift=2.0), randn(shape[-1:], dtype, device, generator, shift=1.0),
            randn(shape[-1:], dtype, device, generator))


SPEC = KernelSpec(
    # a step: x, w, b -> y, then grad, x, w -> grad_x, grad_w, grad_b (the rows' stats left out)
    ops=[OpSpec("layernorm", reference, make_inputs, bytes_moved=bytes_of(2, 2), step_bytes=bytes_of(5, 5),
                grad_inputs=(0, 1, 2),  # x, w, b -> y
                tolerances=ROW_NORM_TOLERANCES, grad_tolerances=ROW_NORM_GRAD_TOLERANCES)],
    shapes=row_shapes(),
    bench_sizes=row_sizes(),
    sweep_sizes=row_sizes(sweep=True),
)
