"""bias_gelu's Python face (as pytorch/extension-cpp's ops.py): typed public functions over
this build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.bias_gelu); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def bias_gelu(x: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """GELU(x + bias), bias broadcast along x's last dimension, as F.gelu(x + bias,
    approximate=approximate): 'none' (the erf form) or 'tanh'. Differentiable in x and bias."""
    return _ops.bias_gelu(x, bias, approximate)


def bias_gelu_backward(grad: Tensor, x: Tensor, bias: Tensor, approximate: str = "none") -> tuple[Tensor, Tensor]:
    """The gradients of bias_gelu: (grad_x, grad_bias), grad_bias summed over every row of x."""
    return _ops.bias_gelu_backward(grad, x, bias, approximate)


def _check_bias(op, x, bias):
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (the one bias runs along), got a 0-d tensor")
    torch._check(bias.dim() == 1 and bias.shape[0] == x.shape[-1],
                 lambda: f"{op}: bias must be 1-D with x's last dimension ({x.shape[-1]}) as its length, got shape {list(bias.shape)}")


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("bias_gelu")
    def _(x, bias, approximate="none"):
        _check_bias("bias_gelu", x, bias)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @ops.register_fake("bias_gelu_backward")
    def _(grad, x, bias, approximate="none"):
        _check_bias("bias_gelu_backward", x, bias)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty(bias.shape, dtype=bias.dtype, device=bias.device)

    def setup_context(ctx, inputs, output):
        x, bias, approximate = inputs
        ctx.save_for_backward(x, bias)
        ctx.approximate = approximate

    def backward(ctx, grad):
        x, bias = ctx.saved_tensors
        grad_x, grad_bias = ops.bias_gelu_backward(grad, x, bias, ctx.approximate)
        return grad_x, grad_bias, None

    torch.library.register_autograd(ops.qualname("bias_gelu"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (bias_gelu, bias_gelu_backward)}
