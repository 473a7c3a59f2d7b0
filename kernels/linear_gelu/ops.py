"""linear_gelu's Python face (as pytorch/extension-cpp's ops.py): typed public functions over
this build's ops and their fake kernels for torch.compile.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.linear_gelu); k.op(name) is the dispatcher op
itself (k.op("linear_gelu") is the y-only op below). Autograd is C++ (linear_gelu_autograd.cpp),
so a training step runs no Python between its forward and backward.

Two forward ops: linear_gelu gives y alone (for tanh on cuBLASLt, the product and the GELU in
one kernel); linear_gelu_forward also keeps the product before the GELU, which the backward
needs. The public function picks the first when no gradient is wanted.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def linear_gelu(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """GELU(x @ weight.T + bias), as F.gelu(F.linear(x, weight, bias), approximate=approximate).

    x [..., in_features], weight [out_features, in_features], bias [out_features]; one dtype
    and device. approximate: 'none' (the erf form) or 'tanh'. Differentiable in x, weight
    and bias.
    """
    for name, value in (("x", x), ("weight", weight), ("bias", bias)):
        if not isinstance(value, Tensor):
            raise TypeError(f"linear_gelu: {name} must be a Tensor, got {type(value).__name__}")
    if torch.is_grad_enabled() and (x.requires_grad or weight.requires_grad or bias.requires_grad):
        return _ops.linear_gelu_forward(x, weight, bias, approximate)[0]
    return _ops.linear_gelu(x, weight, bias, approximate)


def linear_gelu_forward(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none") -> tuple[Tensor, Tensor]:
    """(y, pre): linear_gelu's output and the product before the GELU, which the backward takes."""
    return _ops.linear_gelu_forward(x, weight, bias, approximate)


def linear_gelu_backward(grad: Tensor, x: Tensor, weight: Tensor, pre: Tensor,
                         approximate: str = "none") -> tuple[Tensor, Tensor, Tensor]:
    """(grad_x, grad_weight, grad_bias) from linear_gelu_forward's pre."""
    return _ops.linear_gelu_backward(grad, x, weight, pre, approximate)


def linear_gelu_naive(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """linear_gelu by the tutorials' kernel, one thread per output (for teaching; CUDA)."""
    return _ops.linear_gelu_naive(x, weight, bias, approximate)


def linear_gelu_tiled(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """linear_gelu by a shared-memory tiled kernel (for teaching; CUDA)."""
    return _ops.linear_gelu_tiled(x, weight, bias, approximate)


def linear_gelu_skinny(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none") -> Tensor:
    """linear_gelu by the skinny kernel, the fp32 route for 2-32 rows (CUDA; k a multiple of 4)."""
    return _ops.linear_gelu_skinny(x, weight, bias, approximate)


def linear_gelu_sm90a(x: Tensor, weight: Tensor, bias: Tensor, approximate: str = "none", config: int = 0,
                      swizzle: int = 2, raster: int = 1) -> Tensor:
    """linear_gelu by the CUTLASS product with bias + GELU in its epilogue, the erf route for
    large 16-bit products on the H100 (compute capability 9.0; k and n multiples of 8). config
    0 is the shipped tile; swizzle (1, 2, 4, 8) and raster (0 heuristic, 1 along m, 2 along n)
    choose how its persistent grid walks the tiles (the defaults are the shipped route's).
    Raises where it cannot run."""
    return _ops.linear_gelu_sm90a(x, weight, bias, approximate, config, swizzle, raster)


def _check(op, x, weight, bias=None):
    torch._check(x.dim() >= 1, lambda: f"{op}: x must have at least one dimension (its features), got a 0-d tensor")
    torch._check(weight.dim() == 2 and weight.shape[1] == x.shape[-1],
                 lambda: f"{op}: weight must be 2-D [out_features, {x.shape[-1]}] (x's last dimension as its second), got shape {list(weight.shape)}")
    if bias is not None:
        torch._check(bias.dim() == 1 and bias.shape[0] == weight.shape[0],
                     lambda: f"{op}: bias must be 1-D with weight's first dimension ({weight.shape[0]}) as its length, got shape {list(bias.shape)}")


def _out(x, weight):
    return torch.empty((*x.shape[:-1], weight.shape[0]), dtype=x.dtype, device=x.device)


def register(ops):
    global _ops
    _ops = ops

    for name in ("linear_gelu", "linear_gelu_naive", "linear_gelu_tiled", "linear_gelu_skinny", "linear_gelu_sm90a"):
        def fake(x, weight, bias, approximate="none", *_schedule, name=name):  # _sm90a's config, swizzle, raster
            _check(name, x, weight, bias)
            return _out(x, weight)
        ops.register_fake(name, fake)

    @ops.register_fake("linear_gelu_forward")
    def _(x, weight, bias, approximate="none"):
        _check("linear_gelu_forward", x, weight, bias)
        return _out(x, weight), _out(x, weight)

    @ops.register_fake("linear_gelu_backward")
    def _(grad, x, weight, pre, approximate="none"):
        _check("linear_gelu_backward", x, weight)
        return torch.empty_like(x), torch.empty_like(weight), weight.new_empty(weight.shape[:1])

    # autograd: linear_gelu_autograd.cpp (the y-only op's backward recomputes the product)
    return {f.__name__: f for f in (linear_gelu, linear_gelu_forward, linear_gelu_backward, linear_gelu_naive, linear_gelu_tiled,
                                  linear_gelu_skinny, linear_gelu_sm90a)}
