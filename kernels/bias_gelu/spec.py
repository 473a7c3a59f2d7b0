"""bias_gelu: y = GELU(x + bias) over the last dimension — reference, inputs, tolerances,
bytes model, sizes. Two entries, one per form of GELU; both call the op bias_gelu."""
import torch
import torch.nn.functional as F
from workbench.spec import (
    AWKWARD_SIZES,
    DEFAULT_TOLERANCES,
    KernelSpec,
    OpSpec,
    Tolerance,
    bytes_of,
    randn,
)

# fp32: GELU's exp (or erf) and its derivative's cancelling terms (2e-6 relative on the CPU),
# and grad_bias's sums over thousands of rows (kernels/bias_gelu/NOTES.md); half types keep
# the defaults: their one rounding at the end dominates.
TOLERANCES = {**DEFAULT_TOLERANCES, torch.float32: Tolerance(1e-6, 1e-5, 1e-6)}
GRAD_TOLERANCES = {**DEFAULT_TOLERANCES, torch.float32: Tolerance(1e-4, 1e-5, 2e-6)}


def reference(x, bias, approximate):
    return F.gelu(x + bias, approximate=approximate)


def inputs_for(approximate):
    def make_inputs(shape, dtype, device, generator):
        return (randn(shape, dtype, device, generator), randn(shape[-1:], dtype, device, generator), approximate)
    return make_inputs


bytes_moved = bytes_of(2, 1)  # read x and bias, write y
step_bytes = bytes_of(5, 3)  # then read grad, x and bias, write grad_x and grad_bias
# (5, 4096): the backward's one-launch path for 5-128 rows at its first length; (2053, 40): 10
# and 5 column vectors (the forward's flat index mod a small divisor over many blocks) and the
# backward's 4-row blocks, the last one short
SHAPES = [(3, n) for n in AWKWARD_SIZES] + [(0, 64), (3, 5, 17), (33, 4096), (1031, 768), (2, 3, 1030), (5, 4096),
                                            (2053, 40)]
SIZES = {"cuda": [(256, 4096), (8192, 8192)], "cpu": [(256, 1024), (1024, 4096)]}

SPEC = KernelSpec(
    ops=[
        OpSpec("bias_gelu_tanh", reference, inputs_for("tanh"), bytes_moved=bytes_moved, step_bytes=step_bytes, grad_inputs=(0, 1), calls="bias_gelu",
               tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES),
        OpSpec("bias_gelu_erf", reference, inputs_for("none"), bytes_moved=bytes_moved, step_bytes=step_bytes, grad_inputs=(0, 1), calls="bias_gelu",
               tolerances=TOLERANCES, grad_tolerances=GRAD_TOLERANCES),
    ],
    shapes=SHAPES,
    bench_sizes=SIZES,
    sweep_sizes={"cuda": [(1024, n) for n in (1024, 4096, 16384)] + [(8192, 8192), (16384, 8192)],
                 "cpu": [(256, 1024), (1024, 1024), (1024, 4096)]},
)
