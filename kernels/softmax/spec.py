"""softmax over the last dimension — reference, inputs, tolerances, bytes model, sizes.
A shape is the tensor's shape; softmax runs along its last dimension."""
import torch
from workbench.spec import (
    KernelSpec,
    OpSpec,
    Tolerance,
    bytes_of,
    randn,
    row_shapes,
    row_sizes,
)


def reference(x):
    return torch.softmax(x, dim=-1)


def make_inputs(shape, dtype, device, generator):
    # Spread 3: exp(x - max) spans ~e^-20..1, where a wrong max or a lost rescale shows.
    return (randn(shape, dtype, device, generator, scale=3.0),)


# Outputs are probabilities of about 1/cols (2.4e-4 at 4096): the absolute bounds sit far below
# that, so a wrong small value cannot hide under atol. Half types: one rounding of the output
# (bf16 2^-8, two units 7.8e-3). fp32: the exp of (x - max), rounded in fp32, and a sum over up
# to 262144 terms: 1e-5 relative.
TOLERANCES = {
    torch.float64: Tolerance(1e-15, 1e-12, 1e-12),
    torch.float32: Tolerance(1e-10, 1e-5, 1e-6),
    torch.float16: Tolerance(1e-7, 2e-3, 1e-3),
    torch.bfloat16: Tolerance(1e-6, 1.6e-2, 8e-3),
}
# grad_x = y * (grad - sum(grad * y)) cancels where grad is close to the row's dot product:
# the error is then relative to y * |grad|, not to grad_x. Half types take y as the forward
# rounded it: bf16 at 17 columns (y ~ 0.06) had grad_x off by 1.4e-3 (0.0016 for 0.0031) on
# the H100, as eager bf16 is; the norm-wise bound stays tight.
GRAD_TOLERANCES = {
    torch.float64: Tolerance(1e-14, 1e-10, 1e-12),
    torch.float32: Tolerance(1e-8, 1e-3, 1e-5),
    torch.float16: Tolerance(5e-4, 8e-3, 2e-3),
    torch.bfloat16: Tolerance(4e-3, 3e-2, 1.6e-2),
}

SPEC = KernelSpec(
    # a step: x -> y, then grad, y -> grad_x
    ops=[OpSpec("softmax", reference, make_inputs, bytes_moved=bytes_of(2), step_bytes=bytes_of(5), grad_inputs=(0,),  # x -> y
                tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES)],
    shapes=row_shapes(),
    bench_sizes=row_sizes(),
    sweep_sizes=row_sizes(sweep=True),
)
