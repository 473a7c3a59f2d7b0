"""wb.raw_op(): a raw kernel's launch function as a torch op (torch.library.custom_op), so it
works under autograd, torch.compile(fullgraph=True) and torch.library.opcheck, and wb.check /
wb.bench take it like any function.

    @wb.raw_op(fake=lambda x, alpha: torch.empty_like(x))
    def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
        y = torch.empty_like(x)
        k(triton.cdiv(x.numel(), 256), 256, (x, y, alpha, x.numel()))
        return y

Running the cell again (an edited kernel, an edited launch function) keeps the op and puts the
new functions behind it: torch registers an op name once a process, and a new registration
costs more than the edit loop has. An op whose signature changed gets a new name, with a notice.
"""
from __future__ import annotations

import re
import threading
from dataclasses import dataclass

from . import notices

NAMESPACE = "kwb_raw"


@dataclass
class _Registered:
    op: object      # torch's CustomOpDef
    schema: str
    cpu: bool = False       # a CPU implementation was given (then a redefinition without one refuses CPU)
    backward: bool = False  # a backward was given (then a redefinition without one refuses differentiation)


_ops: dict[str, _Registered] = {}
_lock = threading.Lock()


def _infer_schema(fn, mutates_args) -> str:
    try:
        from torch.library import infer_schema  # torch 2.5+
    except ImportError:
        from torch._library.infer_schema import infer_schema
    return infer_schema(fn, mutates_args=mutates_args)


def raw_op(fn=None, *, name: str | None = None, fake=None, backward=None, setup_context=None, cpu=None,
           mutates_args=()):
    """A torch op (a CustomOpDef) whose CUDA implementation is fn, as a decorator or a call.

    fn: typed (torch.library.custom_op infers the schema from the annotations); it allocates the
        outputs and launches raw kernels on them.
    name: "namespace::op"; default "kwb_raw::<fn's name>".
    fake: (same arguments) -> outputs of the right shape, dtype and device, for torch.compile and
        meta tensors: required.
    backward, setup_context: as torch.library.register_autograd takes them (optional).
    cpu: an implementation for CPU tensors (optional): tests and machines without a GPU.
    mutates_args: the arguments fn writes into, as custom_op takes them.
    """
    if fn is None:
        return lambda f: raw_op(f, name=name, fake=fake, backward=backward, setup_context=setup_context, cpu=cpu,
                                mutates_args=mutates_args)
    if not callable(fn):
        raise TypeError(f"raw_op: fn must be the launch function, got {type(fn).__name__}")
    if fake is None or not callable(fake):
        raise ValueError(f"raw_op {fn.__name__}: fake= is required, a function of the same arguments returning outputs "
                         "of the right shape and dtype (torch.empty_like(x), say), for torch.compile and meta tensors")
    if setup_context is not None and backward is None:
        raise ValueError(f"raw_op {fn.__name__}: setup_context= goes with backward=")
    qualname = name or f"{NAMESPACE}::{fn.__name__}"
    if not re.fullmatch(r"[A-Za-z_]\w*::[A-Za-z_]\w*", qualname):
        raise ValueError(f"raw_op: name must be 'namespace::op' (C identifiers), got {qualname!r}")
    schema = _infer_schema(fn, tuple(mutates_args))
    import torch

    with _lock:
        known = _ops.get(qualname)
        if known is not None and known.schema != schema:
            n = 2
            while f"{qualname}_v{n}" in _ops and _ops[f"{qualname}_v{n}"].schema != schema:
                n += 1
            notices.say(f"kwb: {qualname}'s signature changed ({known.schema} -> {schema}); torch registers an op once a "
                        f"process, so this one is {qualname}_v{n}")
            qualname = f"{qualname}_v{n}"
            known = _ops.get(qualname)
        if known is None:
            op = torch.library.custom_op(qualname, mutates_args=tuple(mutates_args), device_types="cuda")(fn)
            _ops[qualname] = known = _Registered(op, schema)
    op = known.op
    # A second definition of the op puts its functions behind it; what it leaves out that the
    # last one gave must stop working too, not keep the old code running.
    op.register_kernel("cuda", fn)
    if cpu is not None or known.cpu:
        op.register_kernel("cpu", cpu or _refuse(f"{qualname} has no CPU implementation in its latest definition"))
    op.register_fake(fake)
    if backward is not None or known.backward:
        op.register_autograd(backward or _refuse(f"{qualname} has no backward in its latest definition"),
                             setup_context=setup_context)
    known.cpu, known.backward = cpu is not None, backward is not None
    return op


def _refuse(message: str):
    def refuse(*args, **kwargs):
        raise NotImplementedError(message)
    return refuse
