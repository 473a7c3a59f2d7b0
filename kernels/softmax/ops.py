"""softmax's Python face: fake kernels for torch.compile, and autograd.

register() is called by the loader with the ops of one build.
"""
import torch


def _check_x(op, name, x):
    torch._check(x.dim() >= 1, lambda: f"{op}: {name} must have at least one dimension (softmax runs along the last), got a 0-d tensor")


def register(ops):
    @torch.library.register_fake(ops.qualname("softmax"))
    def _(x):
        _check_x("softmax", "x", x)
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @torch.library.register_fake(ops.qualname("softmax_backward"))
    def _(grad, y):
        _check_x("softmax_backward", "y", y)
        return torch.empty(y.shape, dtype=y.dtype, device=y.device)

    def setup_context(ctx, inputs, output):
        ctx.save_for_backward(output)  # grad_x = y * (grad - sum(grad * y)): y is all it needs

    def backward(ctx, grad):
        (y,) = ctx.saved_tensors
        return ops.softmax_backward(grad, y)

    torch.library.register_autograd(ops.qualname("softmax"), backward, setup_context=setup_context)
