"""rmsnorm's Python face: the public function rmsnorm(), fake kernels for torch.compile, and
autograd.

register() is called by the loader with the ops of one build; it returns {"rmsnorm": rmsnorm},
which the loaded kernel exposes as k.rmsnorm.
"""
import torch


def _check(op, x, weight):
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (the one normalized), got a 0-d tensor")
    torch._check(weight.dim() == 1 and weight.shape[0] == x.shape[-1],
                 lambda: f"{op}: weight must be 1-D with x's last dimension ({x.shape[-1]}) as its length, got shape {list(weight.shape)}")


def register(ops):
    @torch.library.register_fake(ops.qualname("rmsnorm_forward"))
    def _(x, weight, eps=1e-6):
        _check("rmsnorm_forward", x, weight)
        stat = torch.float64 if x.dtype == torch.float64 else torch.float32
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty(x.shape[:-1], dtype=stat, device=x.device)

    @torch.library.register_fake(ops.qualname("rmsnorm_backward"))
    def _(grad, x, weight, rstd):
        _check("rmsnorm_backward", x, weight)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device), torch.empty_like(weight)

    def setup_context(ctx, inputs, output):
        x, weight, eps = inputs
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

    def rmsnorm(x, weight, eps=1e-6):
        """RMSNorm over the last dimension: x / sqrt(mean(x^2) + eps) * weight. weight has x's last
        dimension as its length. Differentiable in x and weight."""
        return ops.rmsnorm_forward(x, weight, eps)[0]

    return {"rmsnorm": rmsnorm}
