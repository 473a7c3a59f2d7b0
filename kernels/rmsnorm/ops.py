"""rmsnorm's Python face (as pytorch/extension-cpp's ops.py): typed public functions over this
build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.rmsnorm); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def rmsnorm(x: Tensor, weight: Tensor, eps: float = 1e-6) -> Tensor:
    """RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight. weight has x's last
    dimension as its length. Differentiable in x and weight."""
    return _ops.rmsnorm_forward(x, weight, eps)[0]


def rmsnorm_forward(x: Tensor, weight: Tensor, eps: float = 1e-6) -> tuple[Tensor, Tensor]:
    """(y, rstd): rmsnorm's output and the per-row 1/rms its backward takes (fp32, fp64 for fp64 x)."""
    return _ops.rmsnorm_forward(x, weight, eps)


def rmsnorm_backward(grad: Tensor, x: Tensor, weight: Tensor, rstd: Tensor) -> tuple[Tensor, Tensor]:
    """(grad_x, grad_weight) from the forward's rstd."""
    return _ops.rmsnorm_backward(grad, x, weight, rstd)


def _check(op, x, weight):
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (the one normalized), got a 0-d tensor")
    torch._check(weight.dim() == 1 and weight.shape[0] == x.shape[-1],
                 lambda: f"{op}: weight must be 1-D with x's last dimension ({x.shape[-1]}) as its length, got shape {list(weight.shape)}")


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("rmsnorm_forward")
    def _(x, weight, eps=1e-6):
        _check("rmsnorm_forward", x, weight)
        stat = torch.float64 if x.dtype == torch.float64 else torch.float32
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty(x.shape[:-1], dtype=stat, device=x.device)

    @ops.register_fake("rmsnorm_backward")
    def _(grad, x, weight, rstd):
        _check("rmsnorm_backward", x, weight)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty_like(weight)

    def setup_context(ctx, inputs, output):
        x, weight, _eps = inputs
        _, rstd = output
        ctx.mark_non_differentiable(rstd)
        ctx.set_materialize_grads(False)
        ctx.save_for_backward(x, weight, rstd)

    def backward(ctx, grad, _grad_rstd):
        if grad is None:
            return None, None, None
        x, weight, rstd = ctx.saved_tensors
        grad_x, grad_weight = ops.rmsnorm_backward(grad, x, weight, rstd)
        return grad_x, grad_weight, None

    torch.library.register_autograd(ops.qualname("rmsnorm_forward"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (rmsnorm, rmsnorm_forward, rmsnorm_backward)}
