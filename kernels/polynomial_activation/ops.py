"""polynomial_activation's Python face (as pytorch/extension-cpp's ops.py): typed public
functions over this build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.polynomial_activation); k.op(name) is the
dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def polynomial_activation(x: Tensor) -> Tensor:
    """x^2 + x + 1, elementwise, in x's dtype (fp32 arithmetic for half types). Differentiable in x."""
    return _ops.polynomial_activation(x)


def polynomial_activation_backward(grad: Tensor, x: Tensor) -> Tensor:
    """The gradient of polynomial_activation: grad * (2x + 1). grad has x's shape and dtype."""
    return _ops.polynomial_activation_backward(grad, x)


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("polynomial_activation")
    def _(x):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @ops.register_fake("polynomial_activation_backward")
    def _(grad, x):
        torch._check(grad.shape == x.shape, lambda: f"polynomial_activation_backward: grad must have the same shape as x (x: {list(x.shape)}, grad: {list(grad.shape)})")
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return ops.polynomial_activation_backward(grad, x)  # d(x^2 + x + 1)/dx = 2x + 1

    torch.library.register_autograd(ops.qualname("polynomial_activation"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (polynomial_activation, polynomial_activation_backward)}
