"""polynomial_activation: y = x^2 + x + 1 — reference, inputs, tolerances, bytes model, sizes."""
from workbench.spec import KernelSpec, OpSpec, element_bytes, numel, randn


def reference(x):
    return x * x + x + 1


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator),)


def reference_backward(grad, x):
    return grad * (2 * x + 1)


def make_backward_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator))


def bytes_moved(shape, dtype):  # read x, write y
    return 2 * numel(shape) * element_bytes(dtype)


def bytes_moved_backward(shape, dtype):  # read grad and x, write grad_x
    return 3 * numel(shape) * element_bytes(dtype)


SPEC = KernelSpec(
    ops=[
        OpSpec("polynomial_activation", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0,)),
        OpSpec("polynomial_activation_backward", reference_backward, make_backward_inputs, bytes_moved=bytes_moved_backward),
    ],
)
