"""Programmatic dependent launch (kwb_cuda.cuh's launch_kernel) on a GPU: a kernel dispatched
while the one before it still runs must not read that one's output, or write memory it still
reads, before it ends. Chains of dependent kwb kernels, back to back on one stream and replayed
from a CUDA graph, against PyTorch and against the same chain one op at a time, in this process
(PDL unless the environment sets KWB_PDL=0) and in fresh processes with KWB_PDL=1, unset and 0,
each with the launch call the profiler sees (cudaLaunchKernelExC with PDL, cudaLaunchKernel
without); and the bits of PDL launches against plain ones."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import pytest
import torch
import torch.nn.functional as F

import workbench as wb

pytestmark = pytest.mark.cuda


def launch_calls(fn) -> list[str]:
    """The runtime calls that launched the kernels of one call of fn, as the profiler names them:
    CUPTI records cudaLaunchKernelExC (cudaLaunchKernelEx's C entry) for a launch with
    attributes, cudaLaunchKernel for <<<>>>."""
    import json
    import tempfile

    from torch.profiler import ProfilerActivity, profile
    fn()  # loaded, its launch decision made
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        fn()
        torch.cuda.synchronize()
    fd, path = tempfile.mkstemp(suffix=".json")
    os.close(fd)
    try:
        prof.export_chrome_trace(path)
        with open(path) as f:
            events = json.load(f)["traceEvents"]
    finally:
        os.unlink(path)
    return sorted({e["name"] for e in events if e.get("cat") == "cuda_runtime" and "Launch" in e.get("name", "")})


# 2^24 fp32 elements, 64 MB a tensor: a map kernel of ~60 us, many waves, so a kernel that read
# its input early would read it half written
N = 1 << 24
STEPS = 40


@pytest.fixture(scope="module")
def kernels():
    return {name: wb.load(name, device="cuda") for name in ("vector_add", "relu_scale", "rmsnorm", "layernorm")}


def _map_chain(k, x, ones):
    # each step reads the step before's output; freed outputs come back from the caching
    # allocator as later steps' outputs, so an early write would clobber a tensor still being read
    for _ in range(STEPS):
        x = k["vector_add"].vector_add(x, ones)
        x = k["relu_scale"].relu_scale(x, 1.0)
    return x


def check_map_chain(kernels):
    x0 = torch.randint(-20, 20, (N,), device="cuda").float()  # small integers: every step is exact
    ones = torch.ones(N, device="cuda")
    expected = x0.clone()
    for _ in range(STEPS):
        expected = (expected + 1).clamp_min(0)
    assert torch.equal(_map_chain(kernels, x0, ones), expected)


def check_map_chain_in_a_graph(kernels):
    x0 = torch.randint(-20, 20, (N,), device="cuda").float()
    ones = torch.ones(N, device="cuda")
    _map_chain(kernels, x0, ones)  # loaded and warm before capture
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        # a copy node first: the chain's first kernel follows a memcpy, not a kernel
        out = _map_chain(kernels, x0.clone(), ones)
    for start in (0.0, 5.0, -7.0):  # new inputs each replay: the output must follow them
        x0.copy_(torch.randint(-20, 20, (N,), device="cuda").float() + start)
        graph.replay()
        expected = x0.clone()
        for _ in range(STEPS):
            expected = (expected + 1).clamp_min(0)
        assert torch.equal(out, expected)


def _norm_chain(kernels, x, w, b, serial: bool):
    """rmsnorm -> layernorm -> rmsnorm and the gradients of x and w. serial: the host waits for
    the GPU after every op, forward and backward (tensor hooks run between the backward's nodes),
    so no op's kernels can overlap the op's before (the launches inside one op can: the test in
    fresh processes compares against plain launches)."""
    def pause(t):
        if serial:
            torch.cuda.synchronize()
        return t

    x = x.detach().requires_grad_(True)
    w = w.detach().requires_grad_(True)
    h = x
    for op in ("rmsnorm", "layernorm", "rmsnorm"):
        h = kernels[op].rmsnorm(h, w) if op == "rmsnorm" else kernels[op].layernorm(h, w, b)
        if serial:
            h.register_hook(pause)
        h = pause(h)
    (gx, gw) = torch.autograd.grad(h.float().square().sum(), (x, w))
    return h.detach(), pause(gx), gw


def norm_chain_inputs(dtype, shape):
    g = torch.Generator(device="cuda").manual_seed(1)
    x = torch.randn(shape, device="cuda", dtype=dtype, generator=g)
    w = torch.rand(shape[1], device="cuda", dtype=dtype, generator=g) + 0.5
    b = torch.randn(shape[1], device="cuda", dtype=dtype, generator=g)
    return x, w, b


def check_norm_chain(kernels, dtype, shape):
    x, w, b = norm_chain_inputs(dtype, shape)
    got, gx, gw = _norm_chain(kernels, x, w, b, serial=False)
    # the norms sum in a fixed order (no atomics): back to back or one op at a time, the same
    # bits, so any difference is a kernel that read or wrote while the one before still ran
    for name, chained, serial in zip(("output", "grad x", "grad w"), (got, gx, gw),
                                     _norm_chain(kernels, x, w, b, serial=True)):
        assert torch.equal(chained, serial), f"{name}: back to back differs from one op at a time"
    # and against PyTorch in fp32 from the same inputs (kwb's norms compute in fp32 too)
    xr, wr = x.float().requires_grad_(True), w.float().requires_grad_(True)
    n = (shape[1],)
    ref = F.rms_norm(F.layer_norm(F.rms_norm(xr, n, wr, 1e-6), n, wr, b.float(), 1e-5), n, wr, 1e-6)
    (rx, rw) = torch.autograd.grad(ref.square().sum(), (xr, wr))
    # bf16: three roundings of each element between the norms, a bf16 ulp (2^-8) each
    tol = {"atol": 5e-2, "rtol": 3e-2} if dtype == torch.bfloat16 else {"atol": 1e-3, "rtol": 1e-3}
    torch.testing.assert_close(got.float(), ref, **tol)
    torch.testing.assert_close(gx.float(), rx, **tol)
    if dtype == torch.float32:
        torch.testing.assert_close(gw, rw, atol=tol["atol"] * shape[0] ** 0.5, rtol=tol["rtol"])
    else:
        # grad w sums thousands of rows that cancel, from inputs rounded three times, into one
        # bf16 value: element by element it can be all error where the sum is near zero (13 of
        # 1024 at 4096 x 1024 on the H100), so it is held norm-wise (eager bf16 on the CPU: 5.3e-2)
        rel = ((gw.float() - rw).norm() / rw.norm()).item()
        assert rel < 1e-2, f"grad w: relative L2 error {rel:.2e}, more than 1e-2"


def test_a_chain_of_dependent_maps_matches_eager(kernels):
    check_map_chain(kernels)


def test_a_chain_of_dependent_maps_replayed_from_a_cuda_graph(kernels):
    check_map_chain_in_a_graph(kernels)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=str)
@pytest.mark.parametrize("shape", [(4096, 1024), (999, 4096), (37, 3000)])
def test_chained_norm_forward_and_backward_match_eager(kernels, dtype, shape):
    check_norm_chain(kernels, dtype, shape)


def _needs_sm90():
    if torch.cuda.get_device_capability() < (9, 0):
        pytest.skip("programmatic dependent launch needs compute capability 9.0 or more")


# In a fresh process (kwb reads KWB_PDL once a process): the chains above, then which call
# launched the map and the norm. Unset (the default) and KWB_PDL=1 must launch with PDL; KWB_PDL=0
# (or off, false, no) and a build from compute_80 PTX (no griddepcontrol.wait in it: that is
# sm_90 PTX) on this sm_90 device must launch with <<<>>>.
@pytest.mark.parametrize(("env", "pdl"), [({"KWB_PDL": "1"}, True), ({}, True), ({"KWB_PDL": "0"}, False),
                                          ({"KWB_PDL": "Off"}, False),
                                          ({"KWB_PDL": "1", "KWB_CUDA_ARCH": "8.0+PTX"}, False)],
                         ids=["KWB_PDL=1", "default", "KWB_PDL=0", "KWB_PDL=Off", "KWB_PDL=1-built-for-8.0+PTX"])
def test_chains_and_the_launch_call_in_a_fresh_process(env, pdl):
    _needs_sm90()
    script = textwrap.dedent(f"""
        import sys
        sys.path.insert(0, {os.path.dirname(__file__)!r})
        import torch, workbench as wb
        import test_pdl_gpu as t
        k = {{name: wb.load(name, device="cuda") for name in ("vector_add", "relu_scale", "rmsnorm", "layernorm")}}
        t.check_map_chain(k)
        t.check_map_chain_in_a_graph(k)
        for dtype in (torch.float32, torch.bfloat16):
            t.check_norm_chain(k, dtype, (999, 4096))
        x = torch.randn(4096, 1024, device="cuda", dtype=torch.bfloat16)
        w = torch.rand(1024, device="cuda", dtype=torch.bfloat16)
        print("map", t.launch_calls(lambda: k["vector_add"].vector_add(x, x)))
        print("norm", t.launch_calls(lambda: k["rmsnorm"].rmsnorm(x, w)))
    """)
    child_env = {key: value for key, value in os.environ.items() if key != "KWB_PDL"}
    done = subprocess.run([sys.executable, "-c", script], check=False, env=dict(child_env, **env), capture_output=True,
                          text=True, timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = done.stdout.strip().splitlines()[-2:]
    assert [line.split()[0] for line in lines] == ["map", "norm"], done.stdout[-2000:]
    for line in lines:
        assert ("LaunchKernelEx" in line) == pdl and "Launch" in line, line


# The kernels are deterministic (fixed-order sums, no atomics), so a launch with PDL must give the
# bits a plain launch gives: the norm chain, and bias_gelu's training step at 8192 x 8192 (its
# forward and the backward's partial sums launch plainly, the column sums after them with PDL).
BITS_SCRIPT = """
import sys
sys.path.insert(0, {tests!r})
import torch, workbench as wb
import test_pdl_gpu as t
k = {{name: wb.load(name, device="cuda") for name in ("rmsnorm", "layernorm", "bias_gelu")}}
out = {{}}
for dtype in (torch.float32, torch.bfloat16):
    x, w, b = t.norm_chain_inputs(dtype, (4096, 1024))
    out[f"norms {{dtype}}"] = t._norm_chain(k, x, w, b, serial=False)
    g = torch.Generator(device="cuda").manual_seed(2)
    x = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g).requires_grad_(True)
    bias = torch.randn(8192, device="cuda", dtype=dtype, generator=g).requires_grad_(True)
    grad = torch.randn(8192, 8192, device="cuda", dtype=dtype, generator=g)
    y = k["bias_gelu"].bias_gelu(x, bias, "tanh")
    out[f"bias_gelu {{dtype}}"] = (y.detach(), *torch.autograd.grad(y, (x, bias), grad))
torch.save({{key: [v.cpu() for v in vs] for key, vs in out.items()}}, {path!r})
"""


def test_pdl_and_plain_launches_give_the_same_bits(tmp_path):
    _needs_sm90()
    results = {}
    for flag in ("1", "0"):
        path = str(tmp_path / f"pdl{flag}.pt")
        script = BITS_SCRIPT.format(tests=os.path.dirname(__file__), path=path)
        done = subprocess.run([sys.executable, "-c", script], check=False, env=dict(os.environ, KWB_PDL=flag),
                              capture_output=True, text=True, timeout=600)
        assert done.returncode == 0, done.stderr[-3000:]
        results[flag] = torch.load(path)
    for key, plain in results["0"].items():
        for i, (a, b) in enumerate(zip(results["1"][key], plain)):
            assert torch.equal(a, b), f"{key}, output {i}: KWB_PDL=1 differs from plain launches"
