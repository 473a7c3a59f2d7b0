"""vector_add's Python face (as pytorch/extension-cpp's ops.py): a typed public function over
this build's op and its fake kernel for torch.compile. Its autograd is C++
(vector_add_autograd.cpp), as is the entry the public function calls (vector_add_python.cpp):
a call costs what eager's a + b does (benchmarks/cpu_call_overhead.py), not the Python layers
of a torch.ops call.

register(ops) is called by the loader with the ops of one build and returns the public
function, which the loaded kernel exposes (k.vector_add); k.op("vector_add") is the op itself.
"""
import torch
from torch import Tensor
from torch.overrides import has_torch_function

_ops = None  # this build's ops, set by register()
_entry = None  # this build's Python entry (vector_add_python.cpp)


def vector_add(a: Tensor, b: Tensor) -> Tensor:
    """a + b, elementwise; a and b of one shape, dtype and device. Differentiable in both."""
    # torch.compile traces the op; __torch_function__ overrides see it; the entry skips both
    if torch.compiler.is_compiling() or has_torch_function((a, b)):
        return _ops.vector_add(a, b)
    return _entry.vector_add(a, b)


def register(ops):
    global _ops, _entry
    _ops, _entry = ops, ops.entry

    @ops.register_fake("vector_add")
    def _(a, b):
        torch._check(a.shape == b.shape, lambda: f"vector_add: b must have the same shape as a (a: {list(a.shape)}, b: {list(b.shape)})")
        torch._check(a.dtype == b.dtype, lambda: f"vector_add: b must have the same dtype as a (a: {a.dtype}, b: {b.dtype})")
        return torch.empty(a.shape, dtype=a.dtype, device=a.device)

    return {"vector_add": vector_add}
