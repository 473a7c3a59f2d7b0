"""softmax, layernorm, rmsnorm and linear_gelu on the CPU: the properties each must have,
gradcheck in float64, torch.compile, non-contiguous inputs, and clear errors on bad input. The
harness check (rows longer than the CUDA register paths hold included) and opcheck of every
kernel are in test_every_kernel.py."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F

import workbench as wb

NAMES = ("softmax", "layernorm", "rmsnorm", "linear_gelu")
KERNELS = {name: wb.load(name, device="cpu") for name in NAMES}
SM, LN, RN, LG = (KERNELS[n] for n in NAMES)


# ---- properties ---------------------------------------------------------------------------


@pytest.mark.parametrize("cols", [1, 37, 1128, 20000])
def test_softmax_rows_sum_to_one_and_are_shift_invariant(cols):
    x = torch.randn(5, cols, dtype=torch.float64) * 4
    y = SM.softmax(x)
    torch.testing.assert_close(y.sum(-1), torch.ones(5, dtype=torch.float64), atol=1e-12, rtol=0)
    assert (y >= 0).all()
    shift = torch.randn(5, 1, dtype=torch.float64) * 100
    torch.testing.assert_close(SM.softmax(x + shift), y, atol=1e-12, rtol=1e-9)


def test_softmax_large_and_infinite_inputs_give_what_pytorch_gives():
    inf, nan = float("inf"), float("nan")
    x = torch.tensor([[1e4, 1e4 - 1, -1e4, 0.0],  # no overflow: exp(x - max)
                      [-inf, -inf, -inf, -inf],    # all -inf: NaN, as torch.softmax
                      [-inf, 1.0, -inf, 2.0],      # -inf entries: exact zeros
                      [nan, 1.0, 2.0, 3.0],        # a NaN poisons its row
                      [inf, 1.0, 2.0, 3.0]])       # so does +inf (inf - inf)
    got, expected = SM.softmax(x), torch.softmax(x, dim=-1)
    torch.testing.assert_close(got, expected, equal_nan=True)
    assert torch.isnan(got[1]).all() and not torch.isnan(got[2]).any() and got[2, 0] == 0 and got[2, 2] == 0


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("where", [0, 5, 20, 36])  # in a full vector of lanes or in the tail
@pytest.mark.parametrize("value", [float("nan"), float("inf")])
def test_softmax_a_nan_or_inf_anywhere_in_a_long_row_makes_the_row_nan(dtype, where, value):
    x = torch.randn(3, 37, dtype=dtype)
    x[1, where] = value
    got = SM.softmax(x)
    torch.testing.assert_close(got, torch.softmax(x, dim=-1), equal_nan=True)
    assert torch.isnan(got[1]).all() and not torch.isnan(got[0]).any()


@pytest.mark.parametrize("cols", [2, 37, 4096, 9000])
def test_layernorm_output_has_zero_mean_unit_variance_per_row_before_the_affine_part(cols):
    x = torch.randn(7, cols, dtype=torch.float64) * 5 + 3
    y = LN.layernorm(x, torch.ones(cols, dtype=torch.float64), torch.zeros(cols, dtype=torch.float64), 0.0)
    torch.testing.assert_close(y.mean(-1), torch.zeros(7, dtype=torch.float64), atol=1e-12, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(7, dtype=torch.float64), atol=1e-10, rtol=0)


def test_layernorm_statistics_are_the_rows_mean_and_inverse_std():
    x = torch.randn(4, 3, 50, dtype=torch.float64)
    _, mean, rstd = LN.layernorm_forward(x, torch.ones(50, dtype=torch.float64), torch.zeros(50, dtype=torch.float64), 1e-5)
    assert mean.shape == rstd.shape == (4, 3)
    torch.testing.assert_close(mean, x.mean(-1))
    torch.testing.assert_close(rstd, torch.rsqrt(x.var(-1, unbiased=False) + 1e-5))


def test_rmsnorm_output_has_unit_mean_square_per_row():
    x = torch.randn(6, 333, dtype=torch.float64) * 3 + 1
    y = RN.rmsnorm(x, torch.ones(333, dtype=torch.float64), 0.0)
    torch.testing.assert_close(y.pow(2).mean(-1), torch.ones(6, dtype=torch.float64), atol=1e-12, rtol=0)


def test_layernorm_matches_torch_layer_norm_default_eps():
    x, w, b = torch.randn(3, 8, 64), torch.randn(64), torch.randn(64)
    torch.testing.assert_close(LN.layernorm(x, w, b), F.layer_norm(x, (64,), w, b), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_takes_any_leading_dimensions(approximate):
    x, w, b = torch.randn(2, 3, 5, 16), torch.randn(7, 16) / 4, torch.randn(7)
    y = LG.linear_gelu(x, w, b, approximate)
    assert y.shape == (2, 3, 5, 7)
    torch.testing.assert_close(y, F.gelu(F.linear(x, w, b), approximate=approximate), atol=1e-5, rtol=1e-5)


def test_linear_gelu_y_only_op_is_differentiable_too():
    """Called directly (not through the public function) with tensors that need gradients, the
    y-only op recomputes the product in backward: same gradients as the reference."""
    args = [torch.randn(4, 6, dtype=torch.float64, requires_grad=True), torch.randn(5, 6, dtype=torch.float64, requires_grad=True),
            torch.randn(5, dtype=torch.float64, requires_grad=True)]
    got = torch.autograd.grad(LG.op("linear_gelu")(*args, "tanh").sum(), args)
    expected = torch.autograd.grad(F.gelu(F.linear(*args), approximate="tanh").sum(), args)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)


def test_linear_gelu_is_differentiated_in_cpp():
    """Both forward ops' gradients come from C++ autograd kernels (linear_gelu_autograd.cpp),
    through the public function and through torch.ops alike, and forward mode's tangents are
    refused by name, never dropped, whichever way the op is called."""
    x, w, b = (torch.randn(*s, dtype=torch.float64) for s in ((4, 6), (5, 6), (5,)))
    leaves = [t.clone().requires_grad_() for t in (x, w, b)]
    y, pre = LG.op("linear_gelu_forward")(*leaves, "none")
    assert "LinearGeluForward" in y.grad_fn.name() and not pre.requires_grad
    assert "LinearGeluY" in LG.op("linear_gelu")(*leaves, "none").grad_fn.name()
    assert "LinearGeluForward" in LG.linear_gelu(*leaves).grad_fn.name()
    got = torch.autograd.grad(LG.linear_gelu(*leaves).square().sum(), leaves)
    expected = torch.autograd.grad(F.gelu(F.linear(*leaves)).square().sum(), leaves)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e)
    import torch.autograd.forward_ad as fwAD

    with fwAD.dual_level():
        dual = fwAD.make_dual(x, torch.ones_like(x))
        for call in (LG.op("linear_gelu"), LG.op("linear_gelu_forward"), LG.linear_gelu, LG.linear_gelu_forward):
            for grad_mode in (torch.enable_grad, torch.no_grad):
                with grad_mode(), pytest.raises(RuntimeError, match="jvp is not implemented"):
                    call(dual, w, b, "none")


def test_linear_gelu_training_step_under_torch_compile():
    """torch.compile traces the C++ autograd kernel's forward and backward (the fake kernels
    give the shapes): the compiled step's gradients are eager PyTorch's."""
    def step(x, w, b):
        return LG.linear_gelu(x, w, b, "tanh").square().sum()

    leaves = [torch.randn(*s).requires_grad_() for s in ((3, 7, 24), (10, 24), (10,))]
    got = torch.autograd.grad(torch.compile(step, fullgraph=True)(*leaves), leaves)
    expected = torch.autograd.grad(F.gelu(F.linear(*leaves), approximate="tanh").square().sum(), leaves)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-4, rtol=1e-4)


# ---- gradcheck in float64 -----------------------------------------------------------------


def test_gradcheck_softmax():
    x = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(SM.softmax, (x,))


def test_gradcheck_layernorm():
    x = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    w, b = (torch.randn(7, dtype=torch.float64, requires_grad=True) for _ in range(2))
    assert torch.autograd.gradcheck(lambda x, w, b: LN.layernorm(x, w, b, 1e-5), (x, w, b))


def test_gradcheck_rmsnorm():
    x = torch.randn(3, 5, 7, dtype=torch.float64, requires_grad=True)
    w = torch.randn(7, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w: RN.rmsnorm(x, w, 1e-6), (x, w))


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_gradcheck_linear_gelu(approximate):
    x = torch.randn(2, 3, 6, dtype=torch.float64, requires_grad=True)
    w = torch.randn(5, 6, dtype=torch.float64, requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, w, b: LG.linear_gelu(x, w, b, approximate), (x, w, b))


# ---- torch.compile(fullgraph=True) --------------------------------------------------------


def test_torch_compile_fullgraph_row_kernels_and_linear_gelu():
    def f(x, w, b, wl, bl):
        h = LN.layernorm(x, w, b)
        h = RN.rmsnorm(h, w) + SM.softmax(h)
        return LG.linear_gelu(h, wl, bl, "tanh")

    args = (torch.randn(4, 33), torch.randn(33), torch.randn(33), torch.randn(9, 33) / 6, torch.randn(9))
    x, w, b, wl, bl = args
    h = F.layer_norm(x, (33,), w, b)
    h = RN.spec.reference(h, w) + torch.softmax(h, -1)
    expected = F.gelu(F.linear(h, wl, bl), approximate="tanh")
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(*args), expected, atol=1e-5, rtol=1e-5)


def test_torch_compile_training_step_gradients():
    def f(x, w, b):
        return (LN.layernorm(x, w, b) * SM.softmax(x)).sum()

    leaves = [t.requires_grad_() for t in (torch.randn(6, 40), torch.randn(40), torch.randn(40))]
    got = torch.autograd.grad(torch.compile(f, fullgraph=True)(*leaves), leaves)
    expected = torch.autograd.grad((F.layer_norm(leaves[0], (40,), leaves[1], leaves[2]) * torch.softmax(leaves[0], -1)).sum(), leaves)
    for g, e in zip(got, expected):
        torch.testing.assert_close(g, e, atol=1e-5, rtol=1e-5)


# ---- non-contiguous inputs ----------------------------------------------------------------


def test_non_contiguous_inputs():
    x = torch.randn(40, 24, dtype=torch.float64).t()  # 24 x 40, transposed strides
    w, b = torch.randn(80, dtype=torch.float64)[::2], torch.randn(80, dtype=torch.float64)[::2]
    assert not x.is_contiguous() and not w.is_contiguous()
    torch.testing.assert_close(SM.softmax(x), torch.softmax(x, -1))
    torch.testing.assert_close(LN.layernorm(x, w, b), F.layer_norm(x, (40,), w, b, 1e-5))
    torch.testing.assert_close(RN.rmsnorm(x, w), RN.spec.reference(x, w))
    wl = torch.randn(40, 7, dtype=torch.float64).t()
    torch.testing.assert_close(LG.linear_gelu(x, wl, b[:7]), F.gelu(F.linear(x, wl, b[:7])))


# ---- bad input: the message names the op and the argument ---------------------------------


def _ln(**replace):
    args = {"x": torch.randn(2, 4), "weight": torch.randn(4), "bias": torch.randn(4), "eps": 1e-5}
    args.update(replace)
    return LN.layernorm(**args)


def _rn(**replace):
    args = {"x": torch.randn(2, 4), "weight": torch.randn(4), "eps": 1e-6}
    args.update(replace)
    return RN.rmsnorm(**args)


def _lg(**replace):
    args = {"x": torch.randn(2, 4), "weight": torch.randn(3, 4), "bias": torch.randn(3), "approximate": "none"}
    args.update(replace)
    return LG.linear_gelu(**args)


def _ln_backward(**replace):
    x, w = torch.randn(2, 4), torch.randn(4)
    _, mean, rstd = LN.layernorm_forward(x, w, torch.randn(4))
    args = {"grad": torch.randn(2, 4), "x": x, "weight": w, "mean": mean, "rstd": rstd}
    args.update(replace)
    return LN.layernorm_backward(*args.values())


BAD_INPUT = [
    ("softmax half", lambda: SM.softmax(torch.randn(2, 4).half()), TypeError,
     "softmax: x has dtype Half; the CPU implementation supports Float, Double"),
    ("softmax int", lambda: SM.softmax(torch.ones(2, 4, dtype=torch.int32)), TypeError, "softmax: x has dtype Int"),
    ("softmax 0-d", lambda: SM.softmax(torch.tensor(1.0)), RuntimeError,
     "softmax: x must have at least one dimension (softmax runs along the last), got a 0-d tensor"),
    ("softmax backward shape", lambda: SM.softmax_backward(torch.randn(2, 5), torch.randn(2, 4)), RuntimeError,
     "softmax_backward: grad must have the same shape as y"),
    ("softmax backward dtype", lambda: SM.softmax_backward(torch.randn(2, 4, dtype=torch.float64), torch.randn(2, 4)), TypeError,
     "softmax_backward: grad must have the same dtype as y"),
    ("layernorm weight length", lambda: _ln(weight=torch.randn(5)), RuntimeError,
     "layernorm_forward: weight must be 1-D with x's last dimension (4) as its length, got shape [5]"),
    ("layernorm bias length", lambda: _ln(bias=torch.randn(3)), RuntimeError,
     "layernorm_forward: bias must be 1-D with x's last dimension (4) as its length, got shape [3]"),
    ("layernorm bias dtype", lambda: _ln(bias=torch.randn(4, dtype=torch.float64)), TypeError,
     "layernorm_forward: bias must have the same dtype as x"),
    ("layernorm eps negative", lambda: _ln(eps=-1.0), ValueError, "layernorm_forward: eps must be a finite number >= 0, got -1"),
    ("layernorm eps nan", lambda: _ln(eps=float("nan")), ValueError, "layernorm_forward: eps must be a finite number >= 0, got nan"),
    ("layernorm 0-d", lambda: _ln(x=torch.tensor(1.0)), RuntimeError,
     "layernorm_forward: x must have at least one dimension (the one normalized), got a 0-d tensor"),
    ("layernorm half", lambda: _ln(x=torch.randn(2, 4).half()), TypeError,
     "layernorm_forward: x has dtype Half; the CPU implementation supports Float, Double"),
    ("layernorm backward mean dtype", lambda: _ln_backward(mean=torch.zeros(2, dtype=torch.float64)), TypeError,
     "layernorm_backward: mean must be Float for Float x (as the forward returns it), got Double"),
    ("layernorm backward rstd rows", lambda: _ln_backward(rstd=torch.ones(3)), RuntimeError,
     "layernorm_backward: rstd must hold one value per row of x (2), got shape [3]"),
    ("layernorm backward grad shape", lambda: _ln_backward(grad=torch.randn(2, 5)), RuntimeError,
     "layernorm_backward: grad must have the same shape as x"),
    ("rmsnorm weight 2-D", lambda: _rn(weight=torch.randn(1, 4)), RuntimeError,
     "rmsnorm_forward: weight must be 1-D with x's last dimension (4) as its length, got shape [1, 4]"),
    ("rmsnorm weight device dtype", lambda: _rn(weight=torch.randn(4, dtype=torch.float64)), TypeError,
     "rmsnorm_forward: weight must have the same dtype as x"),
    ("rmsnorm eps", lambda: _rn(eps=-1e-6), ValueError, "rmsnorm_forward: eps must be a finite number >= 0"),
    ("linear_gelu weight in_features", lambda: _lg(weight=torch.randn(3, 5)), RuntimeError,
     "linear_gelu: weight must be 2-D [out_features, 4] (x's last dimension as its second), got shape [3, 5]"),
    ("linear_gelu weight 1-D", lambda: _lg(weight=torch.randn(4)), RuntimeError, "linear_gelu: weight must be 2-D [out_features, 4]"),
    ("linear_gelu bias length", lambda: _lg(bias=torch.randn(4)), RuntimeError,
     "linear_gelu: bias must be 1-D with weight's first dimension (3) as its length, got shape [4]"),
    ("linear_gelu approximate", lambda: _lg(approximate="fast"), ValueError,
     "linear_gelu: approximate must be 'none' (the erf form) or 'tanh', got 'fast'"),
    ("linear_gelu dtype", lambda: _lg(weight=torch.randn(3, 4, dtype=torch.float64)), TypeError,
     "linear_gelu: weight must have the same dtype as x"),
    ("linear_gelu 0-d", lambda: _lg(x=torch.tensor(1.0)), RuntimeError, "linear_gelu: x must have at least one dimension"),
    ("linear_gelu naive on cpu", lambda: LG.linear_gelu_naive(torch.randn(2, 4), torch.randn(3, 4), torch.randn(3)), RuntimeError,
     "linear_gelu_naive: a CUDA kernel kept for teaching (NOTES.md); on the CPU use linear_gelu"),
    ("linear_gelu skinny on cpu", lambda: LG.linear_gelu_skinny(torch.randn(2, 4), torch.randn(3, 4), torch.randn(3)),
     RuntimeError, "linear_gelu_skinny: linear_gelu's CUDA kernel for small fp32 batches (NOTES.md); on the CPU use linear_gelu"),
    ("linear_gelu backward pre shape",
     lambda: LG.linear_gelu_backward(torch.randn(2, 3), torch.randn(2, 4), torch.randn(3, 4), torch.randn(2, 4)), RuntimeError,
     "linear_gelu_backward: pre must have shape [2, 3] (x's leading dimensions, then weight's first), got [2, 4]"),
]


@pytest.mark.parametrize("call,error,message", [c[1:] for c in BAD_INPUT], ids=[c[0] for c in BAD_INPUT])
def test_bad_input_is_rejected_with_a_clear_message(call, error, message):
    with pytest.raises(error, match=re.escape(message)):
        call()


def test_empty_inputs():
    assert SM.softmax(torch.randn(0, 5)).shape == (0, 5)
    assert SM.softmax(torch.randn(3, 0)).shape == (3, 0)
    x = torch.randn(0, 6, requires_grad=True)
    w, b = torch.randn(6, requires_grad=True), torch.randn(6, requires_grad=True)
    LN.layernorm(x, w, b).sum().backward()
    assert torch.equal(w.grad, torch.zeros(6)) and torch.equal(b.grad, torch.zeros(6))
    assert LG.linear_gelu(torch.randn(0, 4), torch.randn(3, 4), torch.randn(3)).shape == (0, 3)
    torch.testing.assert_close(LG.linear_gelu(torch.randn(2, 0), torch.randn(3, 0), torch.ones(3)), F.gelu(torch.ones(2, 3)))
