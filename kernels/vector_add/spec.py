"""vector_add: c = a + b — reference, inputs, tolerances, bytes model, sizes."""
from workbench.spec import KernelSpec, OpSpec, element_bytes, numel, randn


def reference(a, b):
    return a + b


def make_inputs(shape, dtype, device, generator):
    return (randn(shape, dtype, device, generator), randn(shape, dtype, device, generator))


def bytes_moved(shape, dtype):  # read a and b, write c
    return 3 * numel(shape) * element_bytes(dtype)


SPEC = KernelSpec(ops=[OpSpec("vector_add", reference, make_inputs, bytes_moved=bytes_moved, grad_inputs=(0, 1))])
