"""vector_add's Python face (as pytorch/extension-cpp's ops.py): the public function and the op's
fake kernel for torch.compile. The public function is the build's C++ entry itself
(vector_add_python.cpp), a builtin with no Python frame, so a call costs only the dispatcher's
path below it (what that costs on the CPU: vector_add_python.cpp). Its autograd is C++ too
(vector_add_autograd.cpp).

register(ops) is called by the loader with the ops of one build and returns the public
function, which the loaded kernel exposes (k.vector_add); k.op("vector_add") is the op itself.
"""
import torch
from torch import Tensor


def register(ops):
    entry, op = ops.entry.vector_add, ops.vector_add.default

    @ops.register_fake("vector_add")
    def _(a, b):
        torch._check(a.shape == b.shape, lambda: f"vector_add: b must have the same shape as a (a: {list(a.shape)}, b: {list(b.shape)})")
        torch._check(a.dtype == b.dtype, lambda: f"vector_add: b must have the same dtype as a (a: {a.dtype}, b: {b.dtype})")
        return torch.empty(a.shape, dtype=a.dtype, device=a.device)

    # torch.compile cannot trace a builtin: it traces this instead, the op itself
    def vector_add(a: Tensor, b: Tensor) -> Tensor:
        return op(a, b)

    try:
        torch.compiler.substitute_in_graph(entry, skip_signature_check=True)(vector_add)
    except ValueError as e:  # registered already: this build's entry, loaded again in this process
        if "Duplicate" not in str(e):
            raise

    return {"vector_add": entry}
