"""extension_cpp's Python side, as pytorch/extension-cpp writes it: a documented function over
the op, its fake kernel for torch.compile, and its autograd. Import it once the library is
loaded (by setup.py's build and `import extension_cpp`, or by kwb: wb.load(<this project>))."""
import torch
from torch import Tensor

__all__ = ["mymuladd"]


def mymuladd(a: Tensor, b: Tensor, c: float) -> Tensor:
    """a * b + c in one kernel (CPU or CUDA, float32)."""
    return torch.ops.extension_cpp.mymuladd.default(a, b, c)


@torch.library.register_fake("extension_cpp::mymuladd")
def _(a, b, c):
    torch._check(a.shape == b.shape)
    torch._check(a.dtype == torch.float)
    torch._check(b.dtype == torch.float)
    torch._check(a.device == b.device)
    return torch.empty_like(a)


def _backward(ctx, grad):
    a, b = ctx.saved_tensors
    grad_a = torch.ops.extension_cpp.mymul.default(grad, b) if ctx.needs_input_grad[0] else None
    grad_b = torch.ops.extension_cpp.mymul.default(grad, a) if ctx.needs_input_grad[1] else None
    return grad_a, grad_b, None


def _setup_context(ctx, inputs, output):
    a, b, _c = inputs
    saved_a = a if ctx.needs_input_grad[1] else None
    saved_b = b if ctx.needs_input_grad[0] else None
    ctx.save_for_backward(saved_a, saved_b)


torch.library.register_autograd("extension_cpp::mymuladd", _backward, setup_context=_setup_context)


@torch.library.register_fake("extension_cpp::mymul")
def _(a, b):
    torch._check(a.shape == b.shape)
    torch._check(a.dtype == torch.float)
    return torch.empty_like(a)
