"""vector_add: c = a + b — reference, inputs, tolerances, bytes model, sizes."""
from workbench.spec import KernelSpec, OpSpec, bytes_of, randn


def reference(a, b):
    return a + b


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator))


# a step moves the forward's bytes alone: both inputs' gradients are the output's gradient as it is
SPEC = KernelSpec(ops=[OpSpec("vector_add", reference, make_inputs, bytes_moved=bytes_of(3), step_bytes=bytes_of(3),
                              grad_inputs=(0, 1))])  # a, b -> c
