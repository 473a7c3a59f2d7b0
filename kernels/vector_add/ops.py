"""vector_add's Python face: a fake kernel for torch.compile, and autograd.

register() is called by the loader with the ops of one build.
"""
import torch


def register(ops):
    @torch.library.register_fake(ops.qualname("vector_add"))
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
