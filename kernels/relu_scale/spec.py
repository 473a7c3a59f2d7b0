"""relu_scale: y = max(x, 0) * alpha — reference, inputs, tolerances, bytes model, sizes."""
import torch

from workbench.spec import KernelSpec, OpSpec, element_bytes, numel, randn

ALPHA = 1.5


def reference(x, alpha):
    return torch.clamp_min(x, 0) * alpha


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), ALPHA)


def reference_backward(grad, x, alpha):
    return torch.where(x > 0, grad * alpha, 0.0)


def make_backward_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator), ALPHA)


def bytes_moved(shape, dtype):  # read x, write y
    return 2 * numel(shape) * element_bytes(dtype)


def bytes_moved_backward(shape, dtype):  # read grad and x, write grad_x
    return 3 * numel(shape) * element_bytes(dtype)


SPEC = KernelSpec(
    ops=[
        OpSpec("relu_scale", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0,)),
        OpSpec("relu_scale_backward", reference_backward, make_backward_inputs, bytes_moved=bytes_moved_backward),
    ],
)
