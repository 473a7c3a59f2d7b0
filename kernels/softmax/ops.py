"""softmax's Python face (as pytorch/extension-cpp's ops.py): typed public functions over this
build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.softmax); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def softmax(x: Tensor) -> Tensor:
    """torch.softmax(x, dim=-1): rows of all -inf, NaN and +inf come out as PyTorch's do.
    Differentiable in x."""
    return _ops.softmax(x)


def softmax_backward(grad: Tensor, y: Tensor) -> Tensor:
    """The gradient of softmax from its output y: y * (grad - sum(grad * y)) along each row."""
    return _ops.softmax_backward(grad, y)


def _check_x(op, name, x):
    torch._check(x.dim() >= 1, lambda: f"{op}: {name} must have at least one dimension (softmax runs along the last), got a 0-d tensor")


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("softmax")
    def _(x):
        _check_x("softmax", "x", x)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @ops.register_fake("softmax_backward")
    def _(grad, y):
        _check_x("softmax_backward", "y", y)
        return torch.empty(y.shape, dtype=y.dtype, device=y.device)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)  # grad_x = y * (grad - sum(grad * y)): y is all it needs

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return ops.softmax_backward(grad, y)

    torch.library.register_autograd(ops.qualname("softmax"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (softmax, softmax_backward)}
