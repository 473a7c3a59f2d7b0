"""polynomial_activation's Python face: fake kernels for torch.compile, and autograd.

register() is called by the loader with the ops of one build.
"""
import torch


def register(ops):
    @torch.library.register_fake(ops.qualname("polynomial_activation"))
    def _(x):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @torch.library.register_fake(ops.qualname("polynomial_activation_backward"))
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
