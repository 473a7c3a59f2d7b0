"""The harness on a GPU: poisoning catches an unwritten element of a CUDA kernel, CUDA events
and CUDA-graph timings come out, and `kwb run` leaves the GPU report."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch
from workbench.spec import randn

import workbench as wb
from workbench.harness import benchmark, results, timing

pytestmark = pytest.mark.cuda

# y = 2x, except that the last element is never written (the classic `i < n - 1` slip).
SKIP_LAST_CUDA = """
__global__ void twice_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n - 1) y[i] = 2.0f * x[i];
}
void twice_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
  if (n) twice_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}"""
TWICE_CPP = """
void twice_launch(const float* x, float* y, int64_t n, cudaStream_t s);
at::Tensor twice(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x);
  twice_launch(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), kwb::current_stream(x));
  return y;
}"""


@pytest.mark.parametrize("style", ["on the device", "on the CPU, then moved"])
def test_the_inputs_function_gets_a_generator_it_can_draw_with(style):
    """Users write torch.randn(shape, device=device, generator=gen); older code draws on the CPU
    and moves the result. Both check a CUDA function; the first draws with a CUDA generator."""
    seen = []

    def inputs(shape, dtype, device, gen):
        seen.append(gen.device.type)
        if style == "on the device":
            return (torch.randn(shape, device=device, generator=gen).to(dtype),)
        return (torch.randn(shape, generator=gen).to(device, dtype),)

    report = wb.check(lambda x: x * 2, lambda x: x * 2, inputs=inputs, device="cuda", dtypes=["float32"],
                      shapes=[(1,), (199,)], seed=1)
    assert report.passed, report
    assert seen[0] == "cuda" and (set(seen) == {"cuda"} if style == "on the device" else "cpu" in seen)


def test_an_unwritten_element_of_a_cuda_kernel_is_caught():
    k = wb.load_inline("skip_last_gpu", cuda=SKIP_LAST_CUDA, cpp=TWICE_CPP, functions=["twice"])
    report = wb.check(k.twice, lambda x: x * 2, inputs=lambda s, d, dev, g: (randn(s, d, dev, g),),
                      device="cuda", dtypes=["float32"], seed=3)
    failed = {c.shape for c in report.failures}
    assert (1128,) in failed and (1,) in failed and (0,) not in failed
    case = next(c for c in report.failures if c.shape == (1128,))
    mismatch = case.comparisons[0].first_mismatches[0]
    assert mismatch.index == (1127,) and mismatch.out != mismatch.out  # NaN: the poison, not a lucky value


def test_cuda_events_time_every_provider_and_small_sizes_also_get_graph_replays():
    session = benchmark.new_session("cuda")
    assert 500e9 < session.ceiling < 20e12  # a measured HBM copy, in bytes per second
    report = wb.bench("relu_scale", device="cuda", ops=["relu_scale"], dtypes=["float32"], sizes=[(1 << 12,), (1 << 24,)],
                      session=session, seed=1)
    assert report.ok, report.rows
    small = {(r["provider"], r["method"]) for r in report.rows if r["numel"] == 1 << 12}
    assert small == {(p, m) for p in ("kwb", "eager", "torch.compile") for m in ("cuda_events", "cuda_graph")}
    big = {r["method"] for r in report.rows if r["numel"] == 1 << 24}
    assert big == {"cuda_events"}  # ~60 us: no graph needed
    for r in report.rows:
        assert r["samples"] >= 10 and r["p20_us"] <= r["median_us"] <= r["p80_us"]
        assert r["device_name"] == torch.cuda.get_device_name() and r["cuda"] == torch.version.cuda
    graph_kwb = next(r for r in report.rows if r["provider"] == "kwb" and r["method"] == "cuda_graph")
    graph_eager = next(r for r in report.rows if r["provider"] == "eager" and r["method"] == "cuda_graph")
    if not (graph_kwb["trust"] or graph_eager["trust"]):  # speedups compare within one method, trusted timings only
        assert graph_kwb["speedup_vs_eager"] == pytest.approx(graph_eager["median_us"] / graph_kwb["median_us"])


def test_timed_in_turns_on_a_gpu_rows_keep_their_launch_columns_and_graph_replays():
    """kwb run on a GPU times in turns by default: the same rows as one after the other (CUDA
    events, and graph replays for the small size), kwb's launch columns filled, each provider's
    host time learned apart (torch.compile's guards take longer to enqueue than kwb's call)."""
    session = benchmark.new_session("cuda")
    assert session.in_turns and not benchmark.new_session("cuda", in_turns=False).in_turns
    report = wb.bench("relu_scale", device="cuda", ops=["relu_scale"], dtypes=["float32"], sizes=[(1 << 12,), (1 << 22,)],
                      session=session, seed=1)
    assert report.ok, report.rows
    small = {(r["provider"], r["method"]) for r in report.rows if r["numel"] == 1 << 12}
    assert small == {(p, m) for p in ("kwb", "eager", "torch.compile") for m in ("cuda_events", "cuda_graph")}
    big = [r for r in report.rows if r["numel"] == 1 << 22]
    assert {r["provider"] for r in big} == {"kwb", "eager", "torch.compile"} and {r["method"] for r in big} == {"cuda_events"}
    kwb = next(r for r in big if r["provider"] == "kwb")
    assert kwb["gpu_kernel"] and kwb["registers"]
    for r in report.rows:
        assert r["samples"] >= 10 and r["p20_us"] <= r["median_us"] <= r["p80_us"]
    assert len(session.timer.host_s) >= 3  # one host time a function timed


def test_the_event_timer_flushes_twice_the_l2():
    t = timing.CudaEventTimer()
    l2 = torch.cuda.get_device_properties(0).L2_cache_size
    assert t.flush_buffer.numel() * 4 == 2 * l2
    samples = t.samples(lambda: torch.empty(1 << 20, device="cuda").fill_(1.0), 5)
    assert len(samples) == 5 and all(s > 0 for s in samples)


def test_host_time_before_a_launch_stays_out_of_the_samples():
    # 200 us of host work before a ~2 us kernel: without the spin kernel holding the GPU
    # while samples are queued, each sample would read ~200 us (the GPU idles meanwhile).
    x = torch.ones(1024, device="cuda")

    def slow_host_then_tiny_kernel():
        t = time.perf_counter()
        while time.perf_counter() - t < 200e-6:
            pass
        x.add_(1.0)

    timer = timing.CudaEventTimer()
    timer.samples(slow_host_then_tiny_kernel, 3)  # as measure() does: a short first batch, discarded
    samples = timer.samples(slow_host_then_tiny_kernel, 64)
    assert sorted(samples)[51] < 50e-6, sorted(samples)  # p80: without the hold, all would be ~200 us


def test_kwb_run_on_the_gpu_writes_the_gpu_report(tmp_path):
    res = subprocess.run([sys.executable, "-m", "workbench.cli", "run", "relu_scale", "--dtype", "bf16", "--sizes", "2^12,2^20",
                          "--out", str(tmp_path)], capture_output=True, text=True, timeout=900, env=dict(os.environ), check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No GPU" not in res.stderr
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert folder.name == results.environment("cuda").slug
    rows = results.read(folder / "bench.csv")
    assert {r["device"] for r in rows} == {"cuda"} and all(r["status"] == "ok" for r in rows)
    assert {r["method"] for r in rows} == {"cuda_events", "cuda_graph"}
    trusted_sizes = {r["numel"] for r in rows if not r["trust"]}  # timings on busy cores are in no plot
    assert (folder / "plots" / "latency_relu_scale.png").exists() == (len(trusted_sizes) >= 2)


def test_a_provider_whose_graph_capture_fails_fails_its_own_graph_row_only():
    """Every provider's graph of a case shares one memory pool. A capture that fails (here a
    host sync while capturing) can leave that pool still recording, and its side stream current;
    the other providers' graph rows must still be timed, and on the stream they began on."""
    def syncs(x):
        if float(x[0]) != float(x[0]):  # .item() inside a capture: CUDA refuses the sync
            raise AssertionError("NaN input")
        return x * 2

    x = torch.randn(4096, device="cuda")
    stream = torch.cuda.current_stream()
    report = wb.bench(syncs, lambda t: t * 2, inputs=[(x,)], seed=2)
    graph = {r["provider"]: r for r in report.rows if r["method"] == "cuda_graph"}
    assert set(graph) == {"kwb", "eager", "torch.compile"}
    assert graph["kwb"]["status"].startswith("error: CUDA graph capture"), graph["kwb"]["status"]
    for provider in ("eager", "torch.compile"):
        assert graph[provider]["status"] == "ok" and graph[provider]["median_us"] > 0, graph[provider]
    assert torch.cuda.current_stream() == stream
