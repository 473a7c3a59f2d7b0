"""relu_scale's Python face (as pytorch/extension-cpp's ops.py): typed public functions over
this build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build (their namespace is chosen at
load time; workbench/jit/include/kwb_library.h) and returns the public functions, which the loaded
kernel exposes (k.relu_scale); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()
# The mask pays from here on a GPU: its two-output op costs 3.6 us more a step on the host, which
# a step of 2^20 elements (launch-bound on the H100: 11 us for 2^20 fp16) shows and one of 2^22
# hides. Not on the CPU, where packing and unpacking the bits (a scalar loop) cost more than the
# bytes they save: a 2^22 fp32 step took 19.3 ms with the mask, 7.8 ms without, eager's 18.5
# (2-core machine, interleaved; fp64: 41.8, 45.3 and 55.8 ms).
MASK_FROM = 1 << 22


def relu_scale(x: Tensor, alpha: float) -> Tensor:
    """max(x, 0) * alpha, elementwise, in x's dtype (fp32 arithmetic for half types).
    Differentiable in x; the gradient at x == 0 is 0, as torch.relu's."""
    if x.requires_grad and torch.is_grad_enabled() and x.numel() >= MASK_FROM and x.device.type != "cpu":
        # for the backward, a bit per element (!(x <= 0)) instead of x itself: the training step
        # moves 10% fewer bytes in fp32 than torch.compile's, 21% fewer in 16-bit types
        return _ops.relu_scale_train(x, alpha)[0]
    return _ops.relu_scale(x, alpha)


def relu_scale_backward(grad: Tensor, x: Tensor, alpha: float) -> Tensor:
    """The gradient of relu_scale: 0 where x <= 0, else grad * alpha (NaN x included, as torch.relu's)."""
    return _ops.relu_scale_backward(grad, x, alpha)


def relu_scale_train(x: Tensor, alpha: float) -> tuple[Tensor, Tensor]:
    """relu_scale's training forward: (y, mask), mask a uint8 tensor of (n + 7) // 8 bytes
    whose bit j of byte i says not x[8 i + j] <= 0 (x flattened; set for NaN). relu_scale calls it when x
    requires grad, and its backward reads the mask instead of x."""
    return _ops.relu_scale_train(x, alpha)


def relu_scale_masked_backward(grad: Tensor, mask: Tensor, alpha: float) -> Tensor:
    """The gradient of relu_scale from relu_scale_train's mask: grad * alpha where the bit is set, else 0."""
    return _ops.relu_scale_masked_backward(grad, mask, alpha)


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("relu_scale")
    def _(x, alpha):
        # Outputs are always contiguous (non-contiguous inputs are copied first).
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    @ops.register_fake("relu_scale_backward")
    def _(grad, x, alpha):
        return torch.empty(x.shape, dtype=x.dtype, device=x.device)

    def setup_context(ctx, inputs, output):
        x, alpha = inputs
        ctx.save_for_backward(x)
        ctx.alpha = alpha

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        # dy/dx = 0 where x <= 0, else alpha (0 at x == 0 and alpha at NaN, as torch.relu's gradient)
        return ops.relu_scale_backward(grad, x, ctx.alpha), None

    torch.library.register_autograd(ops.qualname("relu_scale"), backward, setup_context=setup_context)

    @ops.register_fake("relu_scale_train")
    def _(x, alpha):
        return (torch.empty(x.shape, dtype=x.dtype, device=x.device),
                torch.empty(((x.numel() + 7) // 8,), dtype=torch.uint8, device=x.device))

    @ops.register_fake("relu_scale_masked_backward")
    def _(grad, mask, alpha):
        return torch.empty(grad.shape, dtype=grad.dtype, device=grad.device)

    def setup_train_context(ctx, inputs, output):
        ctx.save_for_backward(output[1])
        ctx.alpha = inputs[1]

    def train_backward(ctx, grad, _grad_mask):
        (mask,) = ctx.saved_tensors
        return ops.relu_scale_masked_backward(grad, mask, ctx.alpha), None

    torch.library.register_autograd(ops.qualname("relu_scale_train"), train_backward, setup_context=setup_train_context)
    return {f.__name__: f for f in (relu_scale, relu_scale_backward, relu_scale_train, relu_scale_masked_backward)}
