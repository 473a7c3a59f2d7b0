"""relu_scale and vector_add's CUDA implementations on a GPU: huge sizes, unaligned views, the
current stream, fp64 gradcheck and opcheck, torch.compile (the harness check of every dtype
and awkward shape is test_every_kernel.py's)."""
from __future__ import annotations

import re

import pytest
import torch

import workbench as wb

pytestmark = pytest.mark.cuda

DTYPES = [torch.float32, torch.float16, torch.bfloat16]


@pytest.fixture(scope="module")
def kernels():
    return {name: wb.load(name, device="cuda") for name in ("relu_scale", "vector_add")}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_unaligned_views_take_the_scalar_path_correctly(kernels, dtype):
    base = torch.randn(1025, device="cuda", dtype=dtype)
    x = base[1:]  # contiguous, but 2 or 4 bytes past a 16-byte boundary
    torch.testing.assert_close(kernels["relu_scale"].relu_scale(x, 2.0), (x.float().clamp_min(0) * 2).to(dtype))
    y = torch.randn(1025, device="cuda", dtype=dtype)[3:]
    torch.testing.assert_close(kernels["vector_add"].vector_add(base[3:], y), (base[3:].float() + y.float()).to(dtype))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n", [1, 3, 6, 1023, 1024, 1026, 4099])
def test_views_8_bytes_past_a_16_byte_boundary_take_the_vector_path_with_its_tail(kernels, dtype, n):
    # The map's vectors are 8 bytes for two inputs and 16 for one, 8 where only 8-byte aligned: such
    # a view takes 8-byte vectors either way, and n % vector leaves a tail of 0, 1, 2 or 3 elements.
    from workbench.harness import launches

    def widths(fn, args, k):  # map_kernel<T, K, kVec, ...>'s kVec of each launch
        names = [launch.name for launch in launches.profile(fn, args)]
        return [int(m.group(1)) for m in (re.search(rf"map_kernel<[^,]+, {k}, (\d+),", name) for name in names) if m]

    size = torch.empty((), dtype=dtype).element_size()
    vec = 8 // size
    a = torch.randn(n + vec, device="cuda", dtype=dtype)[vec:]
    b = torch.randn(n + vec, device="cuda", dtype=dtype)[vec:]
    assert a.data_ptr() % 16 == 8
    torch.testing.assert_close(kernels["vector_add"].vector_add(a, b), (a.float() + b.float()).to(dtype), rtol=0, atol=0)
    assert widths(kernels["vector_add"].vector_add, (a, b), 2) == [vec]
    relu = kernels["relu_scale"].relu_scale
    torch.testing.assert_close(relu(a, 2.0), (a.float().clamp_min(0) * 2).to(dtype), rtol=0, atol=0)
    assert widths(relu, (a, 2.0), 1) == [vec]
    aligned = torch.randn(n, device="cuda", dtype=dtype)  # one input, 16-byte aligned: 16-byte vectors
    torch.testing.assert_close(relu(aligned, 2.0), (aligned.float().clamp_min(0) * 2).to(dtype), rtol=0, atol=0)
    assert widths(relu, (aligned, 2.0), 1) == [16 // size]


def test_more_than_2_pow_31_elements(kernels):
    n = (1 << 31) + 37
    x = torch.full((n,), 2.0, device="cuda", dtype=torch.float16)
    x[1::3] = -1.0  # nonzero expected values everywhere else: an unwritten element cannot pass as 0
    y = kernels["relu_scale"].relu_scale(x, 2.0)
    expected = torch.where(x > 0, 4.0, 0.0).to(torch.float16)
    assert torch.equal(y, expected)
    del x, y, expected
    torch.cuda.empty_cache()


def test_runs_on_the_current_stream(kernels):
    x = torch.randn(1 << 22, device="cuda")
    s = torch.cuda.Stream()
    with torch.cuda.stream(s):
        torch.cuda._sleep(10_000_000)  # keep the side stream busy: a kernel on another stream would race ahead
        y = kernels["relu_scale"].relu_scale(x * 1, 3.0)
    s.synchronize()
    torch.testing.assert_close(y, x.clamp_min(0) * 3.0)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_relu_scale_with_a_nan_alpha_is_nan_everywhere_as_eager(kernels, dtype):
    x = torch.tensor([-1.0, 0.0, 2.0, float("nan")] * 300, dtype=dtype, device="cuda")
    y = kernels["relu_scale"].relu_scale(x, float("nan"))
    assert torch.isnan(y).all() and torch.isnan(torch.relu(x) * float("nan")).all()


def _random_bit_patterns(n, dtype):
    """Every class of 16-bit value: normals, subnormals, zeros of both signs, infinities, NaNs."""
    return torch.randint(-(1 << 15), 1 << 15, (n,), dtype=torch.int16, device="cuda").view(dtype)


def _assert_bitwise(got, expected):
    same = (got.view(torch.int16) == expected.view(torch.int16)) | (got.isnan() & expected.isnan())
    assert same.all(), f"{(~same).sum().item()} of {same.numel()} differ, first at {(~same).nonzero()[0].item()}"


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
@pytest.mark.parametrize("n", [(1 << 20) + 7, 1 << 16])
def test_vector_add_16_bit_is_bitwise_eager(kernels, dtype, n):
    """The packed 16-bit add (two elements an instruction) against eager's fp32 sum rounded once,
    on random bit patterns: tails past the last vector, subnormals, signed zeros, inf - inf."""
    a, b = _random_bit_patterns(n, dtype), _random_bit_patterns(n, dtype)
    _assert_bitwise(kernels["vector_add"].vector_add(a, b), a + b)
    _assert_bitwise(kernels["vector_add"].vector_add(a, a.neg()), a + a.neg())


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16], ids=str)
def test_vector_add_16_bit_special_values_every_pair(kernels, dtype):
    """Every pair of +-0, +-smallest subnormal, +-max, +-inf, NaN, +-1: 121 elements (a tail past
    the last vector) and the first 120 (none, the tail-free kernel), bit for bit as eager."""
    info = torch.finfo(dtype)
    specials = torch.tensor([0.0, -0.0, info.smallest_normal * info.eps, -info.smallest_normal * info.eps, info.max,
                             -info.max, float("inf"), float("-inf"), float("nan"), 1.0, -1.0], dtype=dtype, device="cuda")
    k = specials.numel()
    a, b = specials.repeat_interleave(k), specials.repeat(k)
    for n in (k * k, k * k - 1):
        _assert_bitwise(kernels["vector_add"].vector_add(a[:n], b[:n]), a[:n] + b[:n])


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_relu_scale_backward_is_eager_where_the_gradient_is_nan(kernels, dtype):
    """The backward multiplies every element and then selects: a NaN or inf gradient where x <= 0
    still gives 0, and a NaN x passes grad * alpha, as the gradient of relu(x) * alpha does."""
    n = (1 << 18) + 3
    x = torch.randn(n, device="cuda", dtype=dtype)
    x[::7] = 0.0
    x[2::13] = float("nan")
    g = torch.randn(n, device="cuda", dtype=dtype)
    g[::3] = float("nan")
    g[1::11] = float("inf")
    got = kernels["relu_scale"].relu_scale_backward(g, x, 1.5)
    leaf = x.detach().requires_grad_()
    (torch.relu(leaf) * 1.5).backward(g)
    torch.testing.assert_close(got, leaf.grad, rtol=0, atol=0, equal_nan=True)
    expected = torch.where(x <= 0, 0.0, g.float() * 1.5).to(dtype)
    torch.testing.assert_close(got, expected, rtol=0, atol=0, equal_nan=True)


def test_device_mismatch_is_rejected(kernels):
    with pytest.raises(RuntimeError, match="vector_add: b must be on the same device as a"):
        kernels["vector_add"].vector_add(torch.randn(3, device="cuda"), torch.randn(3))


@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
def test_backward_gradcheck_and_opcheck_on_cuda(kernels, dtype):
    rs, va = kernels["relu_scale"], kernels["vector_add"]
    x = torch.randn(199, device="cuda", dtype=dtype)
    x = (x + 0.1 * x.sign()).requires_grad_()
    if dtype == torch.float64:
        assert torch.autograd.gradcheck(lambda t: rs.relu_scale(t, 1.5), (x,))
    torch.library.opcheck(rs.op("relu_scale").default, (x, 1.5))
    torch.library.opcheck(va.op("vector_add").default, (x, torch.randn_like(x, requires_grad=True)))


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("n, offset", [(1, 0), (9, 0), (4097, 0), (1000, 1), (1 << 20, 3), ((1 << 22) + 5, 0),
                                       ((1 << 22) + 7, 1)])
def test_the_training_forward_and_its_masked_backward_on_cuda(kernels, dtype, n, offset, monkeypatch):
    """The bit-per-element training path, aligned and not, at tails of every length mod 8:
    outputs and gradients as eager's (NaN x included), the mask's bits as not x <= 0."""
    rs = kernels["relu_scale"]
    monkeypatch.setitem(rs.relu_scale.__globals__, "MASK_FROM", 0)
    x = torch.randn(n + offset, device="cuda", dtype=dtype)[offset:]
    x[::5] = 0.0
    x[1::7] = float("nan")
    g = torch.randn(n + offset, device="cuda", dtype=dtype)[offset:]
    leaf = x.detach().requires_grad_()  # the view itself: 2 to 6 bytes past a 16-byte boundary where offset > 0
    y = rs.relu_scale(leaf, 1.5)
    assert "relu_scale_train" in y.grad_fn.name()
    y.backward(g)
    torch.testing.assert_close(y.detach(), (torch.relu(x.float()) * 1.5).to(dtype), equal_nan=True)
    torch.testing.assert_close(leaf.grad, torch.where(x <= 0, 0.0, g.float() * 1.5).to(dtype), equal_nan=True)
    _, mask = rs.relu_scale_train(x, 1.5)
    bits = ((mask.repeat_interleave(8) >> torch.arange(8, device="cuda", dtype=torch.uint8).repeat(mask.numel())) & 1)[:n]
    assert torch.equal(bits.bool(), ~(x <= 0))
    torch.library.opcheck(rs.op("relu_scale_masked_backward").default, (g, mask, 1.5))
    # opcheck compares eager with AOT outputs by assert_close without equal_nan: finite x only,
    # at the same unaligned offset
    finite = torch.empty(n + offset, device="cuda", dtype=dtype)[offset:]
    finite.copy_(x.nan_to_num(1.0))
    torch.library.opcheck(rs.op("relu_scale_train").default, (finite.requires_grad_(), 1.5))


def test_torch_compile_on_cuda(kernels):
    rs, va = kernels["relu_scale"], kernels["vector_add"]
    f = torch.compile(lambda a, b: rs.relu_scale(va.vector_add(a, b), 2.0) + 1, fullgraph=True)
    a, b = torch.randn(1128, device="cuda"), torch.randn(1128, device="cuda")
    torch.testing.assert_close(f(a, b), (a + b).clamp_min(0) * 2 + 1)


def test_load_inline_cuda_runs(tmp_path):
    k = wb.load_inline("square_gpu_test", cuda="""
__global__ void square_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}
void square_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n) square_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}""", cpp="""
void square_launch(const float* x, float* y, int64_t n, cudaStream_t s);
at::Tensor square(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x);
  square_launch(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), kwb::current_stream(x));
  return y;
}""", functions=["square"])
    x = torch.randn(1000, device="cuda")
    torch.testing.assert_close(k.square(x), x * x)
