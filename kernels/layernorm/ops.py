"""layernorm's Python face (as pytorch/extension-cpp's ops.py): typed public functions over
this build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.layernorm); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def layernorm(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> Tensor:
    """LayerNorm over the last dimension: (x - mean) / sqrt(var + eps) * weight + bias, as
    F.layer_norm(x, x.shape[-1:], weight, bias, eps). weight and bias have x's last
    dimension as their length. Differentiable in x, weight and bias."""
    return _ops.layernorm_forward(x, weight, bias, eps)[0]


def layernorm_forward(x: Tensor, weight: Tensor, bias: Tensor, eps: float = 1e-5) -> tuple[Tensor, Tensor, Tensor]:
    """(y, mean, rstd): layernorm's output and the per-row statistics its backward takes
    (fp32, fp64 for fp64 x)."""
    return _ops.layernorm_forward(x, weight, bias, eps)


def layernorm_backward(grad: Tensor, x: Tensor, weight: Tensor, mean: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor, Tensor]:
    """(grad_x, grad_weight, grad_bias) from the forward's mean and rstd."""
    return _ops.layernorm_backward(grad, x, weight, mean, rstd)


def _check(op, x, weight, bias=None):
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (the one normalized), got a 0-d tensor")
    torch._check(weight.dim() == 1 and weight.shape[0] == x.shape[-1],
                 lambda: f"{op}: weight must be 1-D with x's last dimension ({x.shape[-1]}) as its length, got shape {list(weight.shape)}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == x.shape[-1],
                     lambda: f"{op}: bias must be 1-D with x's last dimension ({x.shape[-1]}) as its length, got shape {list(bias.shape)}")


def _stat(x):
    """A per-row statistic as the forward returns it: fp32, fp64 for fp64 x."""
    dtype = torch.float64 if x.dtype == torch.float64 else torch.float32
    return torch.empty(x.shape[:-1], dtype=dtype, device=x.device)


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("layernorm_forward")
    def _(x, weight, bias, eps=1e-5):
        _check("layernorm_forward", x, weight, bias)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), _stat(x), _stat(x)

    @ops.register_fake("layernorm_backward")
    def _(grad, x, weight, mean, rstd):
        _check("layernorm_backward", x, weight)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty_like(weight), torch.empty_like(weight)

    def setup_context(ctx, inputs, output):
        x, weight, _bias, _eps = inputs
        _, mean, rstd = output
        ctx.mark_non_differentiable(mean, rstd)
        ctx.set_materialize_grads(False)  # no zero gradients for mean and rstd: nobody differentiates them
        ctx.save_for_backward(x, weight, mean, rstd)

    def backward(ctx, grad, _grad_mean, _grad_rstd):
        if grad is None:
            return None, None, None, None
        x, weight, mean, rstd = ctx.saved_tensors
        grad_x, grad_weight, grad_bias = ops.layernorm_backward(grad, x, weight, mean, rstd)
        return grad_x, grad_weight, grad_bias, None

    torch.library.register_autograd(ops.qualname("layernorm_forward"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (layernorm, layernorm_forward, layernorm_backward)}
