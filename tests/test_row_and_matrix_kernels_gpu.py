"""softmax, layernorm, rmsnorm and linear_gelu on a CUDA GPU: rows from 1 to 262144 (the
register paths and the two-pass path, in 16-byte vectors and element by element); the
large sizes; -inf and NaN in softmax; the teaching variants of linear_gelu validated like the shipped
op; torch.compile (the harness check and opcheck of every kernel are test_every_kernel.py's)."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

import workbench as wb

pytestmark = pytest.mark.cuda

NAMES = ("softmax", "layernorm", "rmsnorm", "linear_gelu")


@pytest.fixture(scope="module")
def k():
    return {name: wb.load(name, device="cuda") for name in NAMES}


def _row_args(kernel, shape, dtype, seed=0):
    return kernel.spec.make_inputs(shape, dtype, "cuda", torch.Generator().manual_seed(seed))


# Row lengths around every path boundary: register path (1 to 4 vectors a thread, 1 to 1024
# threads a row), the backward's smaller register path, the two-pass path, and odd lengths
# that go element by element.
ROW_LENGTHS = [1, 7, 256, 1000, 2049, 4096, 8191, 8192, 8200, 16384, 16392, 65536, 262144, 262147]


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_row_lengths_from_1_to_262147_forward_and_backward(k, name, dtype):
    spec = k[name].spec.SPEC.ops[0]
    shapes = [(3, n) for n in ROW_LENGTHS]
    report = wb.check(k[name], device="cuda", dtypes=[dtype], shapes=shapes)
    assert report.passed, str(report)
    assert len(report.cases) == len(shapes) and spec.grad_inputs


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
def test_the_large_size_bf16_16384x4096(k, name):
    report = wb.check(k[name], device="cuda", dtypes=["bf16"], shapes=[(16384, 4096)])
    assert report.passed, str(report)


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_exact_rows_at_every_width_with_row_groups_past_the_end(k, name, dtype):
    """Rows that fill 32-256 threads of 4 vectors exactly take the compile-time forward, where
    RMSNorm reads the weight beside x: 16-bit rows of 1024-8192, fp32 rows of 512 and 2048 (fp32
    1024 is a warp of 8 vectors, fp32 4096 the two-read kernel). Row counts leave the last block's
    row groups empty where a block holds several rows (4 rows at 32 threads, 2 at 64)."""
    widths = [512, 1024, 2048] if dtype == torch.float32 else [1024, 2048, 4096, 8192]
    shapes = [(rows, cols) for cols in widths for rows in (1, 5, 4099)]
    report = wb.check(k[name], device="cuda", dtypes=[dtype], shapes=shapes)
    assert report.passed, str(report)
    assert len(report.cases) == len(shapes)


@pytest.mark.parametrize("name", ["layernorm", "rmsnorm"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_the_staged_backward_at_every_row_count(k, name, dtype):
    """Rows of 128 to 1024 16-byte vectors take the staged backward (a persistent grid; two
    rows a step below 512 vectors; from 512 a wide shape by dtype and op: fp32 one row of two
    vectors a thread, 16-bit LayerNorm two rows of two, 16-bit RMSNorm one row of four): one
    row, two, an odd count, and more rows than the grid holds with a step left half full, in
    the narrowest and widest rows of each shape; rows of 640 vectors (160-320 threads); and
    rows of 544, which the wide shapes cannot split into whole warps and the narrow one takes."""
    vec = 4 if dtype == torch.float32 else 8
    widest = 1024 * vec
    shapes = [(1, 1024), (2, 1024), (3, widest), (1001, 2048), (4099, 1024), (2053, widest), (517, widest // 2),
              (65, 640 * vec), (33, 544 * vec)]
    report = wb.check(k[name], device="cuda", dtypes=[dtype], shapes=shapes)
    assert report.passed, str(report)
    assert len(report.cases) == len(shapes)


@pytest.mark.parametrize("name", ["softmax", "layernorm", "rmsnorm"])
@pytest.mark.parametrize("cols", [64, 4096, 20000])
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float32])  # fp32 4096 aligned: the two-read norms
def test_unaligned_data_takes_the_scalar_path(k, name, cols, dtype):
    """x starting one element past a 16-byte boundary: no 16-byte vectors, same results."""
    args = _row_args(k[name], (5, cols), dtype)
    buf = torch.empty(5 * cols + 1, dtype=dtype, device="cuda")
    x = buf[1:].view(5, cols)
    x.copy_(args[0])
    assert x.data_ptr() % 16 != 0
    fn = {"softmax": k["softmax"].softmax, "layernorm": k["layernorm"].layernorm, "rmsnorm": k["rmsnorm"].rmsnorm}[name]
    spec = k[name].spec.SPEC.ops[0]
    tol = spec.tolerance(dtype)
    expected = spec.reference(*(a.double() for a in args)).to(dtype)
    # the scalar path sums in another order than the vector path: equal up to the tolerance
    # (plus one bf16 rounding of the output)
    slack = 2 ** -8 if dtype == torch.bfloat16 else 0.0
    torch.testing.assert_close(fn(x, *args[1:]), expected, atol=tol.atol + slack, rtol=tol.rtol)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("cols", [4, 1024, 3000, 4096, 20000])  # 1024 and 4096: rows that fill their threads exactly
def test_softmax_infinite_and_nan_rows_give_what_pytorch_gives(k, cols, dtype):
    x = (torch.randn(8, cols, device="cuda") * 3).to(dtype)
    x[0] = float("-inf")                         # all -inf: NaN
    x[1, ::2] = float("-inf")                    # some -inf: zeros there
    x[2, cols // 2] = float("nan")               # NaN: the row NaN
    x[3, -1] = float("inf")                      # +inf: the row NaN
    x[4] = x[4] * 1e4                            # large: no overflow
    x[5, : cols // 2] = float("-inf")            # -inf first, then values (the online rescale)
    x[6] = float("-inf")                         # one finite value, far below zero: threads
    x[6, 0] = -300.0                             # of only -inf must write 0, not 0 * exp(300)
    x[7] = float("-inf")
    x[7, -1] = 5.0
    got, expected = k["softmax"].softmax(x).float(), torch.softmax(x.double(), -1).to(dtype).float()
    tol = (1e-6, 1e-5) if dtype == torch.float32 else (1e-6, 1.6e-2)
    torch.testing.assert_close(got, expected, atol=tol[0], rtol=tol[1], equal_nan=True)
    assert torch.isnan(got[0]).all() and not torch.isnan(got[1]).any() and not torch.isnan(got[5]).any()
    assert got[6, 0] == 1 and got[7, -1] == 1 and not torch.isnan(got[6:]).any()


@pytest.mark.parametrize("cols", [4096, 20000])
def test_softmax_rows_sum_to_one_and_are_shift_invariant(k, cols):
    x = torch.randn(64, cols, device="cuda")
    y = k["softmax"].softmax(x)
    torch.testing.assert_close(y.double().sum(-1), torch.ones(64, device="cuda", dtype=torch.float64), atol=1e-5, rtol=0)
    # x + 48 rounds x to 2^-18 (fp32 in [32, 64)): softmax may move by ~2e-6 relative, no more
    torch.testing.assert_close(k["softmax"].softmax(x + 48.0), y, atol=1e-9, rtol=1e-4)
    yb = k["softmax"].softmax(x.bfloat16())
    torch.testing.assert_close(yb.double().sum(-1), torch.ones(64, device="cuda", dtype=torch.float64), atol=2e-2, rtol=0)


def test_layernorm_zero_mean_unit_variance_per_row(k):
    x = torch.randn(33, 5000, device="cuda") * 4 + 10
    ones, zeros = torch.ones(5000, device="cuda"), torch.zeros(5000, device="cuda")
    y = k["layernorm"].layernorm(x, ones, zeros, 0.0).double()
    torch.testing.assert_close(y.mean(-1), torch.zeros(33, device="cuda", dtype=torch.float64), atol=1e-5, rtol=0)
    torch.testing.assert_close(y.var(-1, unbiased=False), torch.ones(33, device="cuda", dtype=torch.float64), atol=1e-5, rtol=0)


@pytest.mark.parametrize("cols", [2048, 4096, 20000])
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_layernorm_statistics_hold_far_from_zero_and_with_an_outlier(k, cols, offset):
    """Rows around 1000 and rows with one value 1e4 away: a one-pass E[x^2] - E[x]^2 (or one
    shifted by an outlier) loses the variance there; the (count, mean, M2) merges must not.
    2048: the register path; 4096: fp32's two-read path (norm_forward_reread); 20000: the
    two-pass path."""
    gen = torch.Generator(device="cuda").manual_seed(cols)
    x = torch.randn(4, cols, device="cuda", generator=gen) + offset
    x[1, 0] += 1e4                     # an outlier first in the row
    x[2, -1] -= 1e4                    # and last
    w = torch.randn(cols, device="cuda", generator=gen)
    b = torch.randn(cols, device="cuda", generator=gen)
    y, mean, rstd = k["layernorm"].layernorm_forward(x, w, b, 1e-5)
    xd = x.double()
    # fp32 means near 1000 carry a few 1e-4 of rounding (ulp 6e-5; benchmarks/
    # layernorm_stats_model.py, a numpy model of the kernels' merge trees: 2.2e-4 at 20000,
    # 7.4e-5 at 4096), and the variance stays within ~1e-6 relative, where a one-pass sum
    # shifted by the outlier lost 5e-3 of it at 20000 and 5.4e-4 at 4096 in the same model.
    torch.testing.assert_close(mean.double(), xd.mean(-1), atol=1e-4 + abs(offset) * 1e-6, rtol=1e-6)
    torch.testing.assert_close(rstd.double(), (xd.var(-1, unbiased=False) + 1e-5).rsqrt(), atol=0, rtol=1e-4)
    # y inherits the mean's error times |w| (up to ~4.5 over 20000 normal weights): 2e-3 at worst
    expected = F.layer_norm(xd, (cols,), w.double(), b.double(), 1e-5)
    torch.testing.assert_close(y.double(), expected, atol=4e-3 + abs(offset) * 4e-6, rtol=1e-3)


# ---- linear_gelu ---------------------------------------------------------------------------


@pytest.mark.parametrize("variant", ["linear_gelu_naive", "linear_gelu_tiled"])
@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_teaching_variants_are_validated_like_the_rest(k, variant, approximate):
    spec = k["linear_gelu"].spec
    report = wb.check(getattr(k["linear_gelu"], variant), spec.reference, inputs=spec.inputs_for(approximate), device="cuda",
                      dtypes=["float32", "bf16"], shapes=spec.SHAPES, tolerance=spec.TOLERANCES, name=variant)
    assert report.passed, str(report)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_bf16_8192x4096_to_16384(k, approximate):
    spec = k["linear_gelu"].spec
    x, w, b, a = spec.inputs_for(approximate)((8192, 4096, 16384), torch.bfloat16, "cuda", torch.Generator().manual_seed(1))
    got = k["linear_gelu"].linear_gelu(x, w, b, a).float()
    expected = F.gelu(F.linear(x.float(), w.float(), b.float()), approximate=a)
    torch.testing.assert_close(got, expected, atol=3e-2, rtol=2e-2)


@pytest.mark.parametrize("approximate", ["none", "tanh"])
def test_linear_gelu_skinny_kernel_matches_the_reference_where_it_applies(k, approximate):
    spec = k["linear_gelu"].spec
    # fp32, k a multiple of 4: row blocks of 16 (m = 33, 49, 65 end one part-way); column blocks
    # of 8 up to 16 rows (n = 17, 9) and of 16 past them (n = 37, 24, 760); k past a chunk's end
    # (1128, 516, 260, 132); an empty k
    shapes = [s for s in spec.SHAPES if s[1] % 4 == 0] + [(65, 516, 24), (64, 1024, 8), (16, 260, 9), (24, 132, 37)]
    report = wb.check(k["linear_gelu"].linear_gelu_skinny, spec.reference, inputs=spec.inputs_for(approximate),
                      device="cuda", dtypes=["float32"], shapes=shapes, tolerance=spec.TOLERANCES,
                      name="linear_gelu_skinny")
    assert report.passed, str(report)


def test_linear_gelu_skinny_kernel_names_what_it_needs(k):
    lg = k["linear_gelu"]
    w, b = torch.randn(8, 6, device="cuda"), torch.randn(8, device="cuda")
    with pytest.raises(RuntimeError, match="needs fp32 data, k a multiple of 4"):
        lg.linear_gelu_skinny(torch.randn(3, 6, device="cuda"), w, b)
    with pytest.raises(RuntimeError, match="needs fp32 data, k a multiple of 4"):
        lg.linear_gelu_skinny(torch.randn(3, 8, device="cuda", dtype=torch.bfloat16),
                              torch.randn(8, 8, device="cuda", dtype=torch.bfloat16),
                              torch.randn(8, device="cuda", dtype=torch.bfloat16))
    with pytest.raises(RuntimeError, match="needs fp32 data, k a multiple of 4"):  # an empty batch too
        lg.linear_gelu_skinny(torch.empty(0, 6, device="cuda"), w, b)
    x = torch.randn(3, 9, device="cuda")[:, 1:]  # k = 8, rows 36 bytes apart: copied, then aligned
    w8 = torch.randn(5, 8, device="cuda")
    expected = F.gelu(F.linear(x.double(), w8.double(), b[:5].double()))
    torch.testing.assert_close(lg.linear_gelu_skinny(x, w8, b[:5]).double(), expected, atol=1e-5, rtol=1e-5)
    x_off = torch.randn(3 * 8 + 1, device="cuda")[1:].view(3, 8)  # contiguous, 4 bytes past alignment
    with pytest.raises(RuntimeError, match="16-byte aligned"):
        lg.linear_gelu_skinny(x_off, w8, b[:5])
    expected = F.gelu(F.linear(x_off.double(), w8.double(), b[:5].double()))  # the route falls back to cuBLAS
    torch.testing.assert_close(lg.linear_gelu(x_off, w8, b[:5]).double(), expected, atol=1e-5, rtol=1e-5)


@pytest.mark.parametrize("m", [1, 2, 16, 17, 32, 33, 300])  # either side of the skinny route's 2..32 rows and its shapes' 16
def test_linear_gelu_fp32_routes_agree_with_the_reference_and_gradients(k, m):
    spec = k["linear_gelu"].spec
    args = spec.inputs_for("none")((m, 768, 3072), torch.float32, "cuda", torch.Generator().manual_seed(m))
    leaves = [t.detach().clone().requires_grad_() for t in args[:3]]
    y = k["linear_gelu"].linear_gelu(*leaves, "none")
    ref_leaves = [t.detach().double().requires_grad_() for t in args[:3]]
    ref = spec.reference(*ref_leaves, "none")
    torch.testing.assert_close(y.double(), ref, atol=1e-5, rtol=1e-5)
    g = torch.randn_like(y)
    got = torch.autograd.grad(y, leaves, g)
    expected = torch.autograd.grad(ref, ref_leaves, g.double())
    for a, e in zip(got, expected):
        torch.testing.assert_close(a.double(), e, atol=1e-3, rtol=1e-4)
    with torch.no_grad():  # the y-only route: same values
        torch.testing.assert_close(k["linear_gelu"].linear_gelu(*args), y.detach(), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
@pytest.mark.parametrize("shape", [(2, 16, 768, 3072), (5, 1, 40, 24), (3, 1, 33, 37), (0, 4, 8, 16), (4, 1, 0, 8)])
def test_linear_gelu_16bit_erf_product_then_bias_gelu_pass(k, dtype, shape):
    # the erf form in 16 bits outside the CUTLASS product: mm, then bias + GELU in one pass (16-byte
    # vectors where cols allow: 3072 and 24; one element at a time: 37); no rows; k = 0 (y = GELU(b))
    *batch, kk, n = shape
    gen = torch.Generator(device="cuda").manual_seed(sum(shape))
    x = torch.randn(*batch, kk, device="cuda", generator=gen).to(dtype)
    w = (torch.randn(n, kk, device="cuda", generator=gen) / max(kk, 1) ** 0.5).to(dtype)
    b = torch.randn(n, device="cuda", generator=gen).to(dtype)
    with torch.no_grad():
        got = k["linear_gelu"].linear_gelu(x, w, b)
    expected = F.gelu(F.linear(x.float(), w.float(), b.float()))
    assert got.dtype == dtype and got.shape == (*batch, n)
    torch.testing.assert_close(got.float(), expected, atol=2e-2, rtol=1.6e-2)


def test_linear_gelu_gradcheck_fp64_cuda(k):
    x = torch.randn(3, 4, 6, dtype=torch.float64, device="cuda", requires_grad=True)
    w = torch.randn(5, 6, dtype=torch.float64, device="cuda", requires_grad=True)
    b = torch.randn(5, dtype=torch.float64, device="cuda", requires_grad=True)
    for a in ("none", "tanh"):
        assert torch.autograd.gradcheck(lambda x, w, b, a=a: k["linear_gelu"].linear_gelu(x, w, b, a), (x, w, b))


# ---- opcheck and torch.compile on CUDA -------------------------------------------------------


def test_torch_compile_on_cuda(k):
    sm, ln, rn, lg = (k[n] for n in NAMES)

    def f(x, w, b, wl, bl):
        h = rn.rmsnorm(ln.layernorm(x, w, b), w) + sm.softmax(x)
        return lg.linear_gelu(h, wl, bl, "tanh")

    args = [torch.randn(64, 256, device="cuda", dtype=torch.bfloat16) for _ in range(1)]
    args += [torch.randn(256, device="cuda", dtype=torch.bfloat16), torch.randn(256, device="cuda", dtype=torch.bfloat16),
             torch.randn(128, 256, device="cuda", dtype=torch.bfloat16) / 16, torch.randn(128, device="cuda", dtype=torch.bfloat16)]
    x, w, b, wl, bl = (a.float() for a in args)
    h = rn.spec.reference(F.layer_norm(x, (256,), w, b), w) + torch.softmax(x, -1)
    expected = F.gelu(F.linear(h, wl, bl), approximate="tanh")
    got = torch.compile(f, fullgraph=True)(*args).float()
    torch.testing.assert_close(got, expected, atol=6e-2, rtol=3e-2)


def test_half_and_double_are_handled_clearly(k):
    x = torch.randn(4, 8, device="cuda", dtype=torch.float64)
    with pytest.raises(TypeError, match="softmax: x has dtype Double; the CUDA implementation supports Float, Half, BFloat16"):
        k["softmax"].softmax(x)
    for dtype in (torch.float16, torch.bfloat16, torch.float32):
        torch.testing.assert_close(k["softmax"].softmax(x.to(dtype)).float(), torch.softmax(x, -1).float(), atol=1e-3, rtol=1e-2)


def _hopper():
    return torch.cuda.get_device_capability() == (9, 0)


def _cutlass() -> bool:
    from workbench.jit import arch_units

    return bool(arch_units.cutlass_include_dirs())


needs_hopper = pytest.mark.skipif(not torch.cuda.is_available() or not _hopper(),
                                  reason="the CUTLASS product is built for sm_90a, which runs on compute capability 9.0 (H100, H200)")
needs_cutlass = pytest.mark.skipif(not _cutlass(), reason="CUTLASS's headers are not installed (pip install -e '.[cutlass]', "
                                                          "or CUTLASS_PATH): linear_gelu builds without its sm_90a route")


@needs_hopper
@needs_cutlass
@pytest.mark.parametrize("dtype", ["bf16", "fp16"])
def test_linear_gelu_sm90a_matches_the_reference_on_tile_edges(k, dtype):
    spec = k["linear_gelu"].spec
    # k and n multiples of 8 (TMA's 16 bytes); m, n and k short of, at and past the 128 x 128 x 64
    # tile and its 1 x 2 cluster: one row, one partial tile, a cluster's second tile all or partly
    # past n, several waves of tiles
    shapes = [(1, 8, 8), (3, 40, 264), (127, 64, 256), (129, 72, 520), (200, 128, 136), (130, 64, 128), (300, 1032, 2056),
              (1000, 264, 776), (4100, 256, 4104)]
    report = wb.check(k["linear_gelu"].linear_gelu_sm90a, spec.reference, inputs=spec.inputs_for("none"), device="cuda",
                      dtypes=[dtype], shapes=shapes, tolerance=spec.TOLERANCES, name="linear_gelu_sm90a")
    assert report.passed, str(report)


@needs_hopper
@needs_cutlass
@pytest.mark.parametrize("dtype", [torch.bfloat16, torch.float16])
def test_linear_gelu_sm90a_route_keeps_the_product_for_the_backward(k, dtype):
    lg, spec = k["linear_gelu"], k["linear_gelu"].spec
    # 4100 x 4104 outputs: past the route's 2^24, so both ops take the CUTLASS product, with a
    # partial tile in m and in n (the training forward's kernel stores pre there too)
    x, w, b, a = spec.inputs_for("none")((4100, 264, 4104), dtype, "cuda", torch.Generator().manual_seed(3))
    y, pre = lg.linear_gelu_forward(x, w, b, a)
    pre_ref = F.linear(x.double(), w.double(), b.double())
    torch.testing.assert_close(pre.double(), pre_ref, atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(y.double(), F.gelu(pre_ref), atol=2e-2, rtol=1e-2)
    torch.testing.assert_close(lg.linear_gelu(x, w, b, a), y)  # the same product and epilogue math, without pre
    # the route taken: bit for bit the CUTLASS op's answer (cuBLAS's route would round the product first)
    torch.testing.assert_close(lg.linear_gelu(x, w, b, a), lg.linear_gelu_sm90a(x, w, b, a), atol=0, rtol=0)
    # gradients through the op, against float64, no further off than eager PyTorch's in this dtype
    def grads(fn, dt):
        args = [t.detach().to(dt).requires_grad_() for t in (x, w, b)]
        return torch.autograd.grad(fn(*args).double().square().sum(), args)

    want = grads(lambda *t: F.gelu(F.linear(*t)), torch.float64)
    eager = grads(lambda *t: F.gelu(F.linear(*t)), dtype)
    for got, ref, exact in zip(grads(lambda *t: lg.linear_gelu(*t, a), dtype), eager, want):
        assert (got.double() - exact).abs().max() <= 2 * (ref.double() - exact).abs().max() + 1e-3


@needs_hopper
@needs_cutlass
def test_linear_gelu_sm90a_names_what_it_cannot_take(k):
    lg = k["linear_gelu"]
    x = torch.randn(16, 12, device="cuda", dtype=torch.bfloat16)  # k = 12: rows 24 bytes apart
    w, b = torch.randn(8, 12, device="cuda", dtype=torch.bfloat16), torch.randn(8, device="cuda", dtype=torch.bfloat16)
    with pytest.raises(RuntimeError, match="k and n must be multiples of 8"):
        lg.linear_gelu_sm90a(x, w, b)
    with pytest.raises(ValueError, match="swizzle must be 1, 2, 4 or 8"):
        lg.linear_gelu_sm90a(x, w, b, "none", 0, 3)
    with pytest.raises(ValueError, match="config 4 is the tanh form"):
        lg.linear_gelu_sm90a(x, w, b, "none", 4)
    with pytest.raises(ValueError, match="config must be 0 .* to 8, got 9"):
        lg.linear_gelu_sm90a(x, w, b, "none", 9)
    with pytest.raises(TypeError, match="supports Half, BFloat16"):
        lg.linear_gelu_sm90a(x.float(), w.float(), b.float())
    # the shipped op takes another route where this one cannot
    expected = F.gelu(F.linear(x.double(), w.double(), b.double()))
    torch.testing.assert_close(lg.linear_gelu(x, w, b).double(), expected, atol=2e-2, rtol=1e-2)
