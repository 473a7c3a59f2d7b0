"""lltm's Python face (as pytorch/extension-cpp's ops.py): typed public functions over this
build's ops, their fake kernels for torch.compile, and autograd.

register(ops) is called by the loader with the ops of one build and returns the public
functions, which the loaded kernel exposes (k.lltm); k.op(name) is the dispatcher op itself.
"""
import torch
from torch import Tensor

_ops = None  # this build's ops, set by register()


def lltm(input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor, old_cell: Tensor) -> tuple[Tensor, Tensor]:
    """One step of the LLTM cell: returns (new_h, new_cell).

    input [batch, features], weights [3 * state, state + features], bias [3 * state],
    old_h and old_cell [batch, state]; all of one dtype and device. Differentiable in all five.
    """
    new_h, new_cell, _, _ = _ops.lltm_forward(input, weights, bias, old_h, old_cell)
    return new_h, new_cell


def lltm_forward(input: Tensor, weights: Tensor, bias: Tensor, old_h: Tensor,
                 old_cell: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(new_h, new_cell, X, gates): the step and what its backward takes (X = [old_h, input],
    the gates before their nonlinearities)."""
    return _ops.lltm_forward(input, weights, bias, old_h, old_cell)


def lltm_backward(grad_h: Tensor, grad_cell: Tensor, X: Tensor, gates: Tensor, weights: Tensor, bias: Tensor,
                  old_cell: Tensor) -> tuple[Tensor, Tensor, Tensor, Tensor]:
    """(grad_X, grad_weights, grad_bias, grad_old_cell) from lltm_forward's X and gates."""
    return _ops.lltm_backward(grad_h, grad_cell, X, gates, weights, bias, old_cell)


def register(ops):
    global _ops
    _ops = ops

    @ops.register_fake("lltm_forward")
    def _(input, weights, bias, old_h, old_cell):
        batch, state = old_h.shape
        torch._check(weights.shape == (3 * state, state + input.shape[1]),
                     lambda: f"lltm_forward: weights must have shape [{3 * state}, {state + input.shape[1]}], got {list(weights.shape)}")
        def new(*shape):
            return torch.empty(shape, dtype=input.dtype, device=input.device)
        return new(batch, state), new(batch, state), new(batch, state + input.shape[1]), new(batch, 3 * state)

    @ops.register_fake("lltm_backward")
    def _(grad_h, grad_cell, X, gates, weights, bias, old_cell):
        def new(t):
            return torch.empty(t.shape, dtype=t.dtype, device=t.device)
        return new(X), new(weights), new(bias), new(old_cell)

    def setup_context(ctx, inputs, output):
        _input, weights, bias, old_h, old_cell = inputs
        _, _, X, gates = output
        ctx.mark_non_differentiable(X, gates)
        ctx.set_materialize_grads(False)  # X and gates get no zero gradients: 26 us a step saved (kernels/lltm/NOTES.md)
        ctx.save_for_backward(X, gates, weights, bias, old_cell)
        ctx.state = old_h.shape[1]

    def backward(ctx, grad_h, grad_cell, _grad_X, _grad_gates):
        X, gates, weights, bias, old_cell = ctx.saved_tensors
        if grad_h is None:  # only new_cell was used
            grad_h = torch.zeros_like(old_cell)
        if grad_cell is None:  # only new_h was used
            grad_cell = torch.zeros_like(old_cell)
        grad_X, grad_weights, grad_bias, grad_old_cell = ops.lltm_backward(grad_h, grad_cell, X, gates, weights, bias, old_cell)
        # X = [old_h, input]: its gradient's two column blocks (views; no copy)
        grad_old_h, grad_input = grad_X[:, :ctx.state], grad_X[:, ctx.state:]
        return grad_input, grad_weights, grad_bias, grad_old_h, grad_old_cell

    torch.library.register_autograd(ops.qualname("lltm_forward"), backward, setup_context=setup_context)
    return {f.__name__: f for f in (lltm, lltm_forward, lltm_backward)}
