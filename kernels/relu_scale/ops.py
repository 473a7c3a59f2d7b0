"""relu_scale's Python face: fake kernels for torch.compile, and autograd.

register() is called by the loader with the ops of one build (their namespace is chosen at
load time; see kernels/common/kwb_library.h).
"""
import torch


def register(ops):
    @torch.library.register_fake(ops.qualname("relu_scale"))
    def _(x, alpha):
        # Outputs are always contiguous (non-contiguous inputs are copied first).
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @torch.library.register_fake(ops.qualname("relu_scale_backward"))
    def _(grad, x, alpha):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def setup_context(ctx, inputs, output):
        x, alpha = inputs
        ctx.save_for_backward(x)
        ctx.alpha = alpha

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # dy/dx = alpha where x > 0, else 0 (0 at x == 0, as torch.relu's gradient)
        return ops.relu_scale_backward(grad, x, ctx.alpha), None

    torch.library.register_autograd(ops.qualname("relu_scale"), backward, setup_context=setup_context)
