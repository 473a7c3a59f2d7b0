"""polynomial_activation, bias_gelu and lltm on a GPU: gradcheck in float64, torch.compile,
unaligned views (the scalar path), the large sizes, the current stream and device
mismatches (the harness check and opcheck of every kernel are test_every_kernel.py's)."""
from __future__ import annotations

import re

import pytest
import torch
import torch.nn.functional as F
from gelu_grads import fp32_gelu_grads_against_float64

import workbench as wb
from workbench.harness import launches

pytestmark = pytest.mark.cuda

NAMES = ("polynomial_activation", "bias_gelu", "lltm")
DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def kernels():
    return {name: wb.load(name, device="cuda") for name in NAMES}


def lltm_inputs(k, batch, features, state, dtype, requires_grad=False, seed=0):
    args = k.spec.make_inputs((batch, features, state), dtype, "cuda", torch.Generator().manual_seed(seed))
    return tuple(a.detach().clone().requires_grad_(requires_grad) for a in args)


def lltm_backward_args(k, fwd_args, grad_h, grad_cell, fwd_outs=None):
    """k.lltm_backward's arguments, picked by the names in the ops' schemas: the gradients of
    new_h and new_cell, the forward's inputs, and what else the forward returns for backward
    (gates, X, ...). So these tests follow the ops' signatures rather than hard-code them."""
    fwd = k.op("lltm_forward").default._schema
    named = dict(zip((a.name for a in fwd.arguments), fwd_args))
    named.update(zip((r.name for r in fwd.returns), fwd_outs if fwd_outs is not None else k.lltm_forward(*fwd_args)))
    named.update(grad_h=grad_h, grad_cell=grad_cell)
    return tuple(named[a.name] for a in k.op("lltm_backward").default._schema.arguments)


def misaligned(shape, dtype, seed=0, scale=1.0):
    """A contiguous CUDA tensor whose data starts one element past an allocation (so not on a
    16-byte boundary): the kernels must take their scalar path for it."""
    n = 1
    for s in shape:
        n *= s
    gen = torch.Generator().manual_seed(seed)
    buf = (torch.randn(n + 1, generator=gen, dtype=torch.float64) * scale).to("cuda", dtype)
    t = buf[1:].view(shape)
    assert t.is_contiguous() and t.data_ptr() % 16 != 0
    return t


def close(got, expected, tol, what=""):
    """got (any dtype) against an upcast reference, at a spec Tolerance."""
    torch.testing.assert_close(got.detach().float(), expected.detach().float(), atol=tol.atol, rtol=tol.rtol,
                               msg=lambda m: f"{what}: {m}" if what else m)


# ---- gradcheck in float64 on the GPU -------------------------------------------------------


def test_gradcheck_polynomial_activation_cuda(kernels):
    x = torch.randn(3, 5, 7, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(kernels["polynomial_activation"].polynomial_activation, (x,))


@pytest.mark.parametrize("cols", [7, 8])  # a tail, and whole 16-byte vectors of doubles
@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_gradcheck_bias_gelu_cuda(kernels, approximate, cols):
    bg = kernels["bias_gelu"]
    x = torch.randn(3, 5, cols, device="cuda", dtype=torch.float64, requires_grad=True)
    b = torch.randn(cols, device="cuda", dtype=torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(lambda x, b: bg.bias_gelu(x, b, approximate), (x, b))


@pytest.mark.parametrize("state", [5, 8])
def test_gradcheck_lltm_cuda(kernels, state):
    k = kernels["lltm"]
    args = lltm_inputs(k, 3, 4, state, torch.float64, requires_grad=True)
    assert torch.autograd.gradcheck(k.lltm, args)


# ---- torch.compile -------------------------------------------------------------------------


def test_torch_compile_on_cuda(kernels):
    pa, bg, ll = kernels["polynomial_activation"], kernels["bias_gelu"], kernels["lltm"]

    def f(x, b):
        return pa.polynomial_activation(bg.bias_gelu(x, b, "tanh")) + bg.bias_gelu(x, b)

    x, b = torch.randn(33, 256, device="cuda"), torch.randn(256, device="cuda")
    expected = pa.spec.reference(bg.spec.reference(x, b, "tanh")) + bg.spec.reference(x, b, "none")
    torch.testing.assert_close(torch.compile(f, fullgraph=True)(x, b), expected, atol=1e-5, rtol=1e-5)

    def g(*args):
        h, c = ll.lltm(*args)
        return h * 2 + c

    args = lltm_inputs(ll, 16, 32, 128, torch.float32)
    h, c = ll.spec.reference(*args)
    torch.testing.assert_close(torch.compile(g, fullgraph=True)(*args), h * 2 + c, atol=1e-4, rtol=1e-4)


# ---- unaligned views: the scalar path ------------------------------------------------------


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_polynomial_activation_unaligned(kernels, dtype):
    pa = kernels["polynomial_activation"]
    tol = pa.spec.SPEC.op("polynomial_activation").tolerance(dtype)
    x, g = misaligned((5 * 1024,), dtype, 1), misaligned((5 * 1024,), dtype, 2)
    close(pa.polynomial_activation(x), pa.spec.reference(x.float()), tol, "forward")
    close(pa.polynomial_activation_backward(g, x), pa.spec.reference_backward(g.float(), x.float()), tol, "backward")


@pytest.mark.parametrize("which", ["x", "bias", "grad"])
@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_bias_gelu_unaligned(kernels, dtype, approximate, which):
    bg = kernels["bias_gelu"]
    op = bg.spec.SPEC.op("bias_gelu_tanh" if approximate == "tanh" else "bias_gelu_erf")
    gen = torch.Generator().manual_seed(3)
    aligned = lambda *shape: torch.randn(*shape, generator=gen, dtype=torch.float64).to("cuda", dtype)
    x = misaligned((5, 1024), dtype, 1) if which == "x" else aligned(5, 1024)
    b = misaligned((1024,), dtype, 2) if which == "bias" else aligned(1024)
    g = misaligned((5, 1024), dtype, 4) if which == "grad" else aligned(5, 1024)
    close(bg.bias_gelu(x, b, approximate), bg.spec.reference(x.float(), b.float(), approximate), op.tolerance(dtype), "forward")
    grad_x, grad_b = bg.bias_gelu_backward(g, x, b, approximate)
    xr, br = (t.detach().to(torch.float32, copy=True).requires_grad_() for t in (x, b))
    ref_x, ref_b = torch.autograd.grad(bg.spec.reference(xr, br, approximate), (xr, br), g.float())
    gtol = op.tolerance(dtype, grad=True)
    close(grad_x, ref_x, gtol, "grad x")
    close(grad_b, ref_b, gtol, "grad bias")


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_lltm_unaligned(kernels, dtype):
    # state 64 fills whole 16-byte vectors at every dtype: only the misaligned old_cell, bias and
    # grad_h keep the kernels off their vector path
    k = kernels["lltm"]
    op = k.spec.SPEC.op("lltm")
    batch, features, state = 33, 20, 64
    input, weights, _, old_h, _ = lltm_inputs(k, batch, features, state, dtype)
    bias = misaligned((3 * state,), dtype, 1, scale=1 / 8)  # the spec's 1/sqrt(state)
    old_cell = misaligned((batch, state), dtype, 2)
    assert bias.data_ptr() % 16 != 0
    args = (input, weights, bias, old_h, old_cell)
    outs = k.lltm_forward(*args)
    new_h, new_cell = outs[:2]
    up = [a.detach().to(torch.float32, copy=True).requires_grad_() for a in args]
    ref_h, ref_c = k.spec.reference(*up)
    close(new_h, ref_h, op.tolerance(dtype), "new_h")
    close(new_cell, ref_c, op.tolerance(dtype), "new_cell")
    grad_h = misaligned((batch, state), dtype, 3)
    grad_cell = torch.randn(batch, state, generator=torch.Generator().manual_seed(4), dtype=torch.float64).to("cuda", dtype)
    grads = dict(zip((r.name for r in k.op("lltm_backward").default._schema.returns),
                     k.lltm_backward(*lltm_backward_args(k, args, grad_h, grad_cell, outs))))
    ref_grads = torch.autograd.grad((ref_h, ref_c), up, (grad_h.float(), grad_cell.float()))
    ref = dict(zip(("grad_input", "grad_weights", "grad_bias", "grad_old_h", "grad_old_cell"), ref_grads))
    if "grad_X" in grads:  # the gradient of X = [old_h, input]
        ref["grad_X"] = torch.cat([ref["grad_old_h"], ref["grad_input"]], 1)
    assert {"grad_weights", "grad_bias", "grad_old_cell"} <= set(grads)
    for name, g in grads.items():
        close(g, ref[name], op.tolerance(dtype, grad=True), name)


@pytest.mark.parametrize("state,features", [(48, 64), (44, 7), (48, 0)])
@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64], ids=str)
def test_lltm_forward_x_is_the_exact_concatenation(kernels, dtype, state, features):
    k = kernels["lltm"]
    batch = 67  # past the small-step batches: the cat kernel, then addmm
    input, weights, bias, old_h, old_cell = lltm_inputs(k, batch, features, state, dtype)
    wide = torch.randn(batch, 2 * state, device="cuda").to(dtype)
    # contiguous; a strided view; inputs one element past 16-byte alignment (no features: an empty input)
    odd = (misaligned((batch, state), dtype, 5), misaligned((batch, features), dtype, 6) if features else input)
    for h, x in ((old_h, input), (wide[:, ::2], input), odd):
        outs = dict(zip((r.name for r in k.op("lltm_forward").default._schema.returns),
                        k.lltm_forward(x, weights, bias, h, old_cell)))
        assert torch.equal(outs["X"], torch.cat([h, x], 1))


@pytest.mark.parametrize("batch", [1, 5, 16, 32])  # the one-launch forward: either side of its 4-row pass, and its edge
@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64], ids=str)
def test_lltm_small_batch_forward_reads_strided_views_and_returns_x_and_gates(kernels, dtype, batch):
    k = kernels["lltm"]
    op = k.spec.SPEC.op("lltm")
    features, state = 19, 40
    input, weights, bias, old_h, old_cell = lltm_inputs(k, batch, features, state, dtype, seed=batch)
    wide = torch.zeros(batch, 2 * features, dtype=dtype, device="cuda")
    wide[:, ::2] = input
    tall = torch.zeros(2 * batch, state, dtype=dtype, device="cuda")
    tall[::2] = old_h
    views = (wide[:, ::2], weights.t().contiguous().t(), bias, tall[::2], old_cell)
    assert not views[0].is_contiguous() and not views[1].is_contiguous()
    new_h, new_cell, X, gates = k.lltm_forward(*views)
    assert torch.equal(X, torch.cat([old_h, input], 1))
    up = [a.to(torch.float64) for a in (input, weights, bias, old_h, old_cell)]
    close(gates, F.linear(torch.cat([up[3], up[0]], 1), up[1], up[2]), op.tolerance(dtype), "gates")
    ref_h, ref_c = k.spec.reference(*up)
    close(new_h, ref_h, op.tolerance(dtype), "new_h")
    close(new_cell, ref_c, op.tolerance(dtype), "new_cell")


@pytest.mark.parametrize("batch", [1, 16, 32])  # the small-batch backward: a lane a row, up to a full warp
@pytest.mark.parametrize("dtype", [*DTYPES, torch.float64], ids=str)
def test_lltm_small_batch_backward_matches_autograd_with_strided_gradients(kernels, dtype, batch):
    k = kernels["lltm"]
    op = k.spec.SPEC.op("lltm")
    args = lltm_inputs(k, batch, 19, 40, dtype, seed=batch)
    outs = k.lltm_forward(*args)
    gen = torch.Generator().manual_seed(batch + 1)
    grad_h, grad_cell = (torch.randn(40, batch, generator=gen, dtype=torch.float64).to("cuda", dtype).t() for _ in range(2))
    assert batch == 1 or not grad_h.is_contiguous()
    grads = dict(zip((r.name for r in k.op("lltm_backward").default._schema.returns),
                     k.lltm_backward(*lltm_backward_args(k, args, grad_h, grad_cell, outs))))
    up = [a.to(torch.float64).requires_grad_() for a in args]
    ref_grads = torch.autograd.grad(k.spec.reference(*up), up, (grad_h.double(), grad_cell.double()))
    ref = dict(zip(("grad_input", "grad_weights", "grad_bias", "grad_old_h", "grad_old_cell"), ref_grads))
    ref["grad_X"] = torch.cat([ref["grad_old_h"], ref["grad_input"]], 1)
    assert {"grad_X", "grad_weights", "grad_bias", "grad_old_cell"} == set(grads)
    for name, g in grads.items():
        close(g, ref[name], op.tolerance(dtype, grad=True), name)


@pytest.mark.parametrize("shape, small", [((16, 32, 128), True), ((32, 1, 351), True), ((32, 2, 351), False),
                                          ((33, 20, 64), False)])
def test_lltm_small_steps_take_their_kernels_up_to_the_bound_and_agree_past_it(kernels, shape, small):
    # lltm.h's lltm_small_step: batch <= 32 and batch * (state + features) <= 11264 (32 x 352)
    k = kernels["lltm"]
    op = k.spec.SPEC.op("lltm")
    args = lltm_inputs(k, *shape, torch.bfloat16, seed=sum(shape))
    grad_h, grad_cell = (torch.randn(shape[0], shape[2], device="cuda", dtype=torch.bfloat16) for _ in range(2))
    names = [launch.name for launch in launches.profile(
        lambda *a: k.lltm_backward(*lltm_backward_args(k, a, grad_h, grad_cell)), args)]
    assert any("forward_small_kernel" in n for n in names) == small, names
    assert any("backward_small_kernel" in n for n in names) == small, names
    leaves = [a.detach().clone().requires_grad_() for a in args]
    up = [a.detach().double().requires_grad_() for a in args]
    h, c = k.lltm(*leaves)
    ref_h, ref_c = k.spec.reference(*up)
    close(h, ref_h, op.tolerance(torch.bfloat16), "new_h")
    close(c, ref_c, op.tolerance(torch.bfloat16), "new_cell")
    got = torch.autograd.grad((h, c), leaves, (grad_h, grad_cell))
    expected = torch.autograd.grad((ref_h, ref_c), up, (grad_h.double(), grad_cell.double()))
    for name, g, e in zip(("input", "weights", "bias", "old_h", "old_cell"), got, expected):
        close(g, e, op.tolerance(torch.bfloat16, grad=True), f"grad {name}")


def test_lltm_backward_of_an_x_without_columns_takes_the_product_path(kernels):
    k = kernels["lltm"]
    B, S = 4, 3
    zeros = lambda *shape: torch.zeros(*shape, device="cuda")
    grad_X, grad_weights, grad_bias, grad_old_cell = k.lltm_backward(
        torch.ones(B, S, device="cuda"), torch.ones(B, S, device="cuda"), zeros(B, 0), zeros(B, 3 * S), zeros(3 * S, 0),
        zeros(3 * S), zeros(B, S))
    assert grad_X.shape == (B, 0) and grad_weights.shape == (3 * S, 0) and grad_bias.shape == (3 * S,)
    # gates 0: i = o = 1/2, g = 0, tanh(old_cell) = 0; dcell = 1 + 1 * 1/2 = 1.5
    torch.testing.assert_close(grad_old_cell, torch.full((B, S), 1.5, device="cuda"))


# ---- the large sizes ----------------------------------------------------------------------


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_bias_gelu_bf16_8192x8192(kernels, approximate):
    bg = kernels["bias_gelu"]
    gen = torch.Generator(device="cuda").manual_seed(5)
    x = torch.randn(8192, 8192, device="cuda", generator=gen).bfloat16().requires_grad_()
    b = torch.randn(8192, device="cuda", generator=gen).bfloat16().requires_grad_()
    g = torch.randn(8192, 8192, device="cuda", generator=gen).bfloat16()
    y = bg.bias_gelu(x, b, approximate)
    assert y.dtype == torch.bfloat16 and y.shape == x.shape
    grad_x, grad_b = torch.autograd.grad(y, (x, b), g)
    xr, br = x.detach().float().requires_grad_(), b.detach().float().requires_grad_()
    ref = F.gelu(xr + br, approximate=approximate)
    torch.testing.assert_close(y.float(), ref.detach(), atol=1e-2, rtol=1.6e-2)
    ref_x, ref_b = torch.autograd.grad(ref, (xr, br), g.float())
    del ref, y
    torch.testing.assert_close(grad_x.float(), ref_x, atol=1e-2, rtol=1.6e-2)
    # grad_bias: a sum of 8192 rows (of order 50): one bf16 rounding at the end
    torch.testing.assert_close(grad_b.float(), ref_b, atol=5e-2, rtol=1.6e-2)
    assert torch.isfinite(grad_b.float()).all() and ref_b.abs().max() > 10  # a real sum, not a zero or a row
    del x, b, g, grad_x, grad_b, xr, br, ref_x, ref_b
    torch.cuda.empty_cache()


@pytest.mark.parametrize("approximate", ["tanh", "none"])
def test_bias_gelu_fp32_grads_of_8192x8192_hold_the_spec_bound(kernels, approximate):
    # the tanh form's 1 - sigmoid cancelled above x ~ 2 (2e-6 an element, eager fp32 1.2e-6), and
    # 8192 rows summed that into a grad_bias 1e-4 off (kwb run --full, seed 1999399800, H100)
    kwb_x, eager_x, beyond = fp32_gelu_grads_against_float64(kernels["bias_gelu"], 8192, 8192, approximate, "cuda")
    assert kwb_x <= 1.5 * eager_x, f"grad_x: {kwb_x:.2e} off float64, eager fp32 {eager_x:.2e}"
    assert beyond <= 0, f"grad_bias: {beyond:.2e} beyond 1e-4 + 1e-5 |ref| of float64"
    torch.cuda.empty_cache()


@pytest.mark.parametrize("approximate", ["tanh", "none"])
@pytest.mark.parametrize("rows", [16388, 16516])
def test_bias_gelu_fp32_two_vectors_a_thread_with_a_ragged_last_block(kernels, approximate, rows):
    # fp32 from 2^22 vectors takes two 16-byte vectors a thread, i and i + 128, in blocks of 128
    # (bias_gelu.cu). rows x 1028 is past that bound, and its last block holds 4 vectors (16388
    # rows: the first vector of some threads) or 132 (16516: every first vector, some second
    # ones); each row's 257 vectors move the bias's phase against the blocks'
    bg = kernels["bias_gelu"]
    gen = torch.Generator(device="cuda").manual_seed(6)
    x = torch.randn(rows, 1028, device="cuda", generator=gen)
    b = torch.randn(1028, device="cuda", generator=gen)
    assert x.numel() // 4 >= 1 << 22 and (x.numel() // 4) % 256 in (4, 132)
    y = bg.bias_gelu(x, b, approximate)
    torch.testing.assert_close(y, F.gelu(x + b, approximate=approximate), atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16, torch.float32], ids=str)
@pytest.mark.parametrize("rows, vec", [(3, 4), (16319, 4), (16321, 8)])
def test_bias_gelu_16bit_vector_width_either_side_of_2_pow_22_vectors(kernels, dtype, rows, vec):
    # 16-bit types take 8-byte vectors (4 elements) below 2^22 16-byte vectors and 16-byte ones from
    # there (kwb_bias_gelu.cuh); fp32 takes 16-byte ones (4 elements) at every size. Rows of 2056
    # columns are 257 16-bit 16-byte vectors: 16319 rows fall just below the bound, 16321 just past
    # it, and the bias's phase moves against the blocks each row.
    bg = kernels["bias_gelu"]
    cols = 2056
    gen = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
    b = torch.randn(cols, device="cuda", generator=gen).to(dtype)
    assert (rows * cols // 8 >= 1 << 22) == (vec == 8)
    vec = 4 if dtype == torch.float32 else vec
    for approximate in ("tanh", "none"):
        y = bg.bias_gelu(x, b, approximate)
        ref = F.gelu(x.float() + b.float(), approximate=approximate)
        torch.testing.assert_close(y.float(), ref, atol=1e-2, rtol=1.6e-2)
    names = [launch.name for launch in launches.profile(bg.bias_gelu, (x, b, "none"))]
    vecs = [int(m.group(1)) for m in (re.search(r"forward_kernel<[^,]+, (\d+),", name) for name in names) if m]
    assert vecs == [vec], names
    del x, y, ref
    torch.cuda.empty_cache()


def test_lltm_fp32_batch_4096_features_1024_state_1024(kernels):
    k = kernels["lltm"]
    tf32 = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = False  # full fp32 products on both sides
    try:
        args = lltm_inputs(k, 4096, 1024, 1024, torch.float32, requires_grad=True)
        up = tuple(a.detach().clone().requires_grad_() for a in args)
        h, c = k.lltm(*args)
        ref_h, ref_c = k.spec.reference(*up)
        torch.testing.assert_close(h, ref_h, atol=2e-4, rtol=2e-4)
        torch.testing.assert_close(c, ref_c, atol=2e-4, rtol=2e-4)
        gen = torch.Generator(device="cuda").manual_seed(6)
        gh, gc = (torch.randn(4096, 1024, device="cuda", generator=gen) for _ in range(2))
        grads = torch.autograd.grad((h, c), args, (gh, gc))
        ref_grads = torch.autograd.grad((ref_h, ref_c), up, (gh, gc))
        for name, g, r in zip(("input", "weights", "bias", "old_h", "old_cell"), grads, ref_grads):
            assert g.shape == r.shape
            torch.testing.assert_close(g, r, atol=1e-3, rtol=1e-3, msg=lambda m, name=name: f"grad {name}: {m}")
    finally:
        torch.backends.cuda.matmul.allow_tf32 = tf32
    torch.cuda.empty_cache()


# ---- streams and devices -------------------------------------------------------------------


def test_runs_on_the_current_stream(kernels):
    pa, bg, ll = kernels["polynomial_activation"], kernels["bias_gelu"], kernels["lltm"]
    x = torch.randn(1024, 4096, device="cuda")
    b = torch.randn(4096, device="cuda")
    g = torch.randn(1024, 4096, device="cuda")
    largs = lltm_inputs(ll, 512, 256, 256, torch.float32)
    gh = torch.randn(512, 256, device="cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        torch.cuda._sleep(10_000_000)  # keep the side stream busy: a kernel on another stream would race ahead
        y_pa = pa.polynomial_activation(x * 1)
        g_pa = pa.polynomial_activation_backward(g * 1, x * 1)
        y_bg = bg.bias_gelu(x * 1, b * 1, "tanh")
        torch.cuda._sleep(10_000_000)
        gx_bg, gb_bg = bg.bias_gelu_backward(g * 1, x * 1, b * 1, "none")
        torch.cuda._sleep(10_000_000)
        copies = tuple((a * 1).requires_grad_() for a in largs)
        h, c = ll.lltm(*copies)
        torch.cuda._sleep(10_000_000)
        lgrads = torch.autograd.grad((h, c), copies, (gh * 1, gh * 2))
    s.synchronize()
    torch.testing.assert_close(y_pa, pa.spec.reference(x))
    torch.testing.assert_close(g_pa, pa.spec.reference_backward(g, x))
    torch.testing.assert_close(y_bg, F.gelu(x + b, approximate="tanh"), atol=1e-5, rtol=1e-5)
    xr, br = x.clone().requires_grad_(), b.clone().requires_grad_()
    ref_x, ref_b = torch.autograd.grad(F.gelu(xr + br), (xr, br), g)
    torch.testing.assert_close(gx_bg, ref_x, atol=1e-5, rtol=1e-5)
    torch.testing.assert_close(gb_bg, ref_b, atol=1e-3, rtol=1e-4)
    up = tuple(a.clone().requires_grad_() for a in largs)
    ref_h, ref_c = ll.spec.reference(*up)
    torch.testing.assert_close(h, ref_h, atol=1e-4, rtol=1e-4)
    torch.testing.assert_close(c, ref_c, atol=1e-4, rtol=1e-4)
    ref_grads = torch.autograd.grad((ref_h, ref_c), up, (gh, gh * 2))
    for got, ref in zip(lgrads, ref_grads):
        torch.testing.assert_close(got, ref, atol=1e-3, rtol=1e-3)


def _lltm_on(k, where):
    args = dict(zip(("input", "weights", "bias", "old_h", "old_cell"), lltm_inputs(k, 3, 4, 8, torch.float32)))
    args[where] = args[where].cpu()
    return k.lltm(**args)


DEVICE_MISMATCH = [
    ("polynomial_activation", lambda k: k.polynomial_activation_backward(torch.randn(4), torch.randn(4, device="cuda")),
     "polynomial_activation_backward: grad must be on the same device as x"),
    ("bias_gelu", lambda k: k.bias_gelu(torch.randn(2, 4, device="cuda"), torch.randn(4)),
     "bias_gelu: bias must be on the same device as x"),
    ("bias_gelu", lambda k: k.bias_gelu_backward(torch.randn(2, 4), torch.randn(2, 4, device="cuda"),
                                                 torch.randn(4, device="cuda")),
     "bias_gelu_backward: grad must be on the same device as x"),
    ("lltm", lambda k: _lltm_on(k, "old_cell"), "lltm_forward: old_cell must be on the same device as input"),
    ("lltm", lambda k: _lltm_on(k, "weights"), "lltm_forward: weights must be on the same device as input"),
    ("lltm", lambda k: _lltm_on(k, "bias"), "lltm_forward: bias must be on the same device as input"),
]


@pytest.mark.parametrize("name,call,message", DEVICE_MISMATCH, ids=[m[2].split(":")[0] + "-" + m[2].split()[1] for m in DEVICE_MISMATCH])
def test_device_mismatch_is_rejected(kernels, name, call, message):
    with pytest.raises(RuntimeError, match=re.escape(message)):
        call(kernels[name])


def test_half_types_are_accepted_and_double_too(kernels):
    # the CUDA implementation's dtypes: fp32, fp16, bf16 and fp64 (the CPU one: fp32, fp64)
    pa = kernels["polynomial_activation"]
    for dtype in DTYPES + [torch.float64]:
        x = torch.randn(37, device="cuda").to(dtype)
        y = pa.polynomial_activation(x)
        assert y.dtype == dtype
        torch.testing.assert_close(y.float(), pa.spec.reference(x.float()), atol=1e-2, rtol=8e-3)
    with pytest.raises(TypeError, match=re.escape("polynomial_activation: x has dtype Long; the CUDA implementation supports")):
        pa.polynomial_activation(torch.ones(3, dtype=torch.int64, device="cuda"))
