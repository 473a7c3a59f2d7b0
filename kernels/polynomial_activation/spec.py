"""polynomial_activation: y = x^2 + x + 1 — reference, inputs, tolerances, bytes model, sizes."""
from workbench.spec import KernelSpec, OpSpec, bytes_of, randn


def reference(x):
    return x * x + x + 1


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator),)


def reference_backward(grad, x):
    return grad * (2 * x + 1)


def make_backward_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator))


SPEC = KernelSpec(
    ops=[
        # a step: x -> y, then grad and x -> grad_x
        OpSpec("polynomial_activation", reference, make_inputs, bytes_moved=bytes_of(2), step_bytes=bytes_of(5),
               grad_inputs=(0,)),  # x -> y
        OpSpec("polynomial_activation_backward", reference_backward, make_backward_inputs,
               bytes_moved=bytes_of(3)),  # grad and x -> grad_x
    ],
)
