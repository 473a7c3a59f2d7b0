"""vector_add's Python face (as pytorch/extension-cpp's ops.py): a typed public function over
this build's op, its fake kernel for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
function, which the loaded kernel exposes (k.vector_add); k.op("vector_add") is the op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def vector_add(a: Tensor, b: Tensor) -> Tensor:
    """a + b, elementwise; a and b of one shape, dtype and device. Differentiable in both."""
    return _ops.vector_add(a, b)


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("vector_add")
    def _(a, b):
        torch._check(a.shape == b.shape, lambda: f"vector_add: b must have the same shape as a (a: {list(a.shape)}, b: {list(b.shape)})")
        torch._check(a.dtype == b.dtype, lambda: f"vector_add: b must have the same dtype as a (a: {a.dtype}, b: {b.dtype})")
        return torch.empty(a.shape, dtype=a.dtype, device=a.device)

    def setup_context(ctx, inputs, output):
        pass

    def backward(ctx, grad):
        # d(a + b)/da = d(a + b)/db = 1
        return grad, grad

    torch.library.register_autograd(ops.qualname("vector_add"), backward, setup_context=setup_context)
    return {"vector_add": vector_add}
