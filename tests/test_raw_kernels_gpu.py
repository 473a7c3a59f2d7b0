"""Raw kernels launched on a GPU: results against references on awkward sizes, the current and
other streams, half and bfloat16 values, dynamic shared memory past 48 KiB, the launch limits,
and wb.raw_op over a launch (autograd, torch.compile(fullgraph=True), opcheck, wb.check/bench)."""
from __future__ import annotations

import pytest
import torch
from test_raw_kernels import RELU_SCALE

import workbench as wb

pytestmark = [pytest.mark.cuda, pytest.mark.nvrtc]

HALF_AXPY = """
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void axpy_half(const __half* x, __half* y, __half a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __hadd(__hmul(a, x[i]), y[i]);
}
extern "C" __global__ void axpy_bf16(const __nv_bfloat16* x, __nv_bfloat16* y, __nv_bfloat16 a, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = __float2bfloat16(__bfloat162float(a) * __bfloat162float(x[i]) + __bfloat162float(y[i]));
}
"""

BLOCK_SUM = """
// each block sums its slice through dynamic shared memory (as many floats as threads x per)
extern "C" __global__ void block_sum(const float* x, float* out, int per) {
  extern __shared__ float tile[];
  int base = blockIdx.x * blockDim.x * per;
  for (int j = 0; j < per; ++j) tile[threadIdx.x * per + j] = x[base + threadIdx.x * per + j];
  __syncthreads();
  if (threadIdx.x == 0) {
    float s = 0.f;
    for (int j = 0; j < blockDim.x * per; ++j) s += tile[j];
    out[blockIdx.x] = s;
  }
}
"""


def _blocks(n: int, threads: int = 256) -> int:
    return (n + threads - 1) // threads


@pytest.mark.parametrize("n", [1, 37, 199, 760, 1128, 1 << 20])
def test_relu_scale_matches_the_reference(n):
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    x = torch.randn(n, device="cuda")
    y = torch.full_like(x, float("nan"))  # every element must be written
    k(_blocks(n), 256, (x, y, 1.5, n))
    torch.testing.assert_close(y, torch.relu(x) * 1.5, rtol=0, atol=0)


def test_a_launch_goes_on_the_current_stream_or_the_one_given():
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    side = torch.cuda.Stream()
    x = torch.randn(1 << 22, device="cuda")
    y = torch.empty_like(x)
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        k(_blocks(x.numel()), 256, (x, y, 2.0, x.numel()))
    z = torch.empty_like(x)
    k(_blocks(x.numel()), 256, (x, z, 3.0, x.numel()), stream=side)
    side.synchronize()
    torch.testing.assert_close(y, torch.relu(x) * 2.0)
    torch.testing.assert_close(z, torch.relu(x) * 3.0)


def test_half_and_bfloat16_values_are_packed_as_their_types():
    n = 1000
    for name, dtype in (("axpy_half", torch.float16), ("axpy_bf16", torch.bfloat16)):
        k = wb.cuda_kernel(HALF_AXPY, name)
        x, y = torch.randn(n, device="cuda", dtype=dtype), torch.randn(n, device="cuda", dtype=dtype)
        want = (x.float() * 0.5 + y.float()).to(dtype)
        k(_blocks(n), 256, (x, y, 0.5, n))
        torch.testing.assert_close(y, want, atol=1e-2, rtol=1e-2)


def test_dynamic_shared_memory_past_48_kib():
    k = wb.cuda_kernel(BLOCK_SUM, "block_sum")
    threads, per, blocks = 256, 64, 7  # 64 KiB of shared memory a block
    x = torch.randn(blocks * threads * per, device="cuda")
    out = torch.empty(blocks, device="cuda")
    k(blocks, threads, (x, out, per), shared_mem=threads * per * 4)
    torch.testing.assert_close(out, x.view(blocks, -1).sum(1), rtol=1e-4, atol=1e-3)


def test_launch_limits_and_device_are_checked():
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    x = torch.randn(8, device="cuda")
    with pytest.raises(wb.LaunchError, match="must be a CUDA tensor, got one on cpu"):
        k(1, 32, (x.cpu(), x, 1.0, 8))
    with pytest.raises(wb.KwbError, match=r"block|threads"):
        k(1, (1024, 2), (x, x, 1.0, 8))


def test_a_cubin_for_another_architecture_says_so():
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale", arch="8.0")
    major, _ = torch.cuda.get_device_capability()
    if major == 8:
        pytest.skip("this GPU runs sm_80 code")
    x = torch.randn(8, device="cuda")
    with pytest.raises(wb.KwbError, match="it was compiled for sm_80"):
        k(1, 32, (x, x, 1.0, 8))


def test_an_edit_gives_new_results_in_the_same_process():
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    for alpha in ("1.0f", "4.0f"):
        k = wb.cuda_kernel(RELU_SCALE.replace("* alpha;", f"* alpha * {alpha};"), "relu_scale")
        k(_blocks(1000), 256, (x, y, 1.0, 1000))
        torch.testing.assert_close(y, torch.relu(x) * float(alpha[:-1]))


def _gpu_relu_scale_op():
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")

    def relu_scale(x: torch.Tensor, alpha: float) -> torch.Tensor:
        x = x.contiguous()
        y = torch.empty_like(x)
        k(_blocks(x.numel()), 256, (x, y, alpha, x.numel()))
        return y

    def setup(ctx, inputs, output):
        ctx.save_for_backward(inputs[0])
        ctx.alpha = inputs[1]

    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x > 0) * ctx.alpha, None

    return wb.raw_op(relu_scale, name="kwb_raw_gpu::relu_scale", fake=lambda x, alpha: torch.empty_like(x),
                     backward=backward, setup_context=setup)


def test_a_raw_op_under_autograd_compile_and_opcheck():
    op = _gpu_relu_scale_op()
    x = torch.randn(1128, device="cuda", requires_grad=True)
    y = op(x, 1.5)
    torch.testing.assert_close(y, torch.relu(x) * 1.5)
    y.sum().backward()
    torch.testing.assert_close(x.grad, (x > 0).float() * 1.5)
    compiled = torch.compile(lambda t: op(t, 2.0) * 3, fullgraph=True)
    torch.testing.assert_close(compiled(x.detach()), torch.relu(x.detach()) * 6.0)
    torch.library.opcheck(op, (torch.randn(199, device="cuda", requires_grad=True), 0.5))


def test_wb_check_and_bench_take_a_raw_op():
    op = _gpu_relu_scale_op()
    reference = lambda x, alpha: torch.relu(x) * alpha
    report = wb.check(op, reference, inputs=lambda shape, dtype, device, gen: (
        torch.randn(shape, device=device, generator=gen).to(dtype), 1.5), device="cuda", dtypes=["float32"],
        shapes=[(1,), (760,), (1 << 20,)])
    assert report.passed, report
    timing = wb.bench(op, reference, inputs=(torch.randn(1 << 22, device="cuda"), 1.5), baselines="eager")
    assert {r["provider"] for r in timing.rows} >= {"kwb", "eager"} and all(r["status"] == "ok" for r in timing.rows), timing


def test_the_stream_handle_reaches_the_driver(monkeypatch):
    from workbench.jit import cuda_driver

    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    seen = []
    real = cuda_driver.launch
    monkeypatch.setattr(cuda_driver, "launch", lambda *a: (seen.append(a[4]), real(*a)))
    side = torch.cuda.Stream()
    x = torch.randn(64, device="cuda")
    k(1, 64, (x, x, 1.0, 64), stream=side)
    with torch.cuda.stream(side):
        k(1, 64, (x, x, 1.0, 64))
    k(1, 64, (x, x, 1.0, 64))
    assert seen == [side.cuda_stream, side.cuda_stream, torch.cuda.current_stream().cuda_stream]


def test_a_launch_from_a_new_thread_works():
    import threading

    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    x = torch.randn(1000, device="cuda")
    y = torch.empty_like(x)
    errors = []

    def work():
        try:
            k(_blocks(1000), 256, (x, y, 2.0, 1000))
            torch.cuda.synchronize()
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(e)

    t = threading.Thread(target=work)
    t.start()
    t.join()
    assert not errors, errors
    torch.testing.assert_close(y, torch.relu(x) * 2.0)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs two GPUs to launch on the other one")
def test_a_launch_on_another_device_leaves_the_current_one():
    k = wb.cuda_kernel(RELU_SCALE, "relu_scale")
    x = torch.randn(100, device="cuda:1")
    before = torch.cuda.current_device()
    k(1, 128, (x, x, 1.0, 100))
    torch.cuda.synchronize(1)
    assert torch.cuda.current_device() == before
