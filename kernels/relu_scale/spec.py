"""relu_scale: y = max(x, 0) * alpha — reference, inputs, tolerances, bytes model, sizes."""
import torch

from workbench.spec import KernelSpec, OpSpec, numel, randn, upcast

ALPHA = 1.5


def reference(x, alpha):
    return torch.clamp_min(upcast(x), 0) * alpha


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), ALPHA)


def reference_backward(grad, x, alpha):
    return torch.where(upcast(x) > 0, upcast(grad) * alpha, 0.0)


def make_backward_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator), ALPHA)


def bytes_moved(shape, dtype):  # read x, write y
    return 2 * numel(shape) * torch.finfo(dtype).bits // 8


SPEC = KernelSpec(
    ops=[
        OpSpec("relu_scale", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0,)),
        OpSpec("relu_scale_backward", reference_backward, make_backward_inputs,
               bytes_moved=lambda s, d: 3 * numel(s) * torch.finfo(d).bits // 8),
    ],
)
