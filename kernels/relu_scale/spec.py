"""relu_scale: y = max(x, 0) * alpha — reference, inputs, tolerances, bytes model, sizes."""
import torch
from workbench.spec import AWKWARD_SIZES, KernelSpec, OpSpec, bytes_of, randn

ALPHA = 1.5


def reference(x, alpha):
    # torch.relu, not clamp_min: at x == 0 relu's gradient is 0, the op's convention, where
    # clamp_min's is 1 (the harness caught the difference on fp16 inputs rounded to exact 0).
    return torch.relu(x) * alpha


def with_zeros(x):
    """Exact zeros at every 1009th element from the 8th: the kink, where the gradient's
    convention shows (small shapes keep their random values)."""
    x.view(-1)[7::1009] = 0.0
    return x


def make_inputs(shape, dtype, device, generator):
    return (with_zeros(randn(shape, dtype, device, generator)), ALPHA)


def reference_backward(grad, x, alpha):
    # x <= 0 gives 0, so a NaN x passes grad * alpha: relu's backward tests its output <= 0
    return torch.where(x <= 0, 0.0, grad * alpha)


def make_backward_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), with_zeros(randn(shape, dtype, device, generator)), ALPHA)


# The awkward sizes, and one past ops.MASK_FROM (2^22), where a training step saves a bit per
# element instead of x: the check covers both backward paths.
SHAPES = [(n,) for n in AWKWARD_SIZES] + [(7, 33), (3, 5, 17), ((1 << 20) + 3,), ((1 << 22) + 3,)]

SPEC = KernelSpec(
    shapes=SHAPES,
    ops=[
        # no step_bytes: past 2^22 kwb's step keeps a bit an element for the backward where eager and
        # Inductor read x again (5 tensors' bytes against about 4), so no one count fits all three
        OpSpec("relu_scale", reference, make_inputs, bytes_moved=bytes_of(2), grad_inputs=(0,)),  # read x, write y
        OpSpec("relu_scale_backward", reference_backward, make_backward_inputs,
               bytes_moved=bytes_of(3)),  # read grad and x, write grad_x
    ],
)
