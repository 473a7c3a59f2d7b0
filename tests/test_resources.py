"""Each GPU function's resource use: ptxas's report parsed, the occupancy calculator's rule, the
columns kwb bench fills from a profiler trace, the manifest field, and a real build that
spills (nvcc, no GPU) flagged and listed by `kwb cache info`; the launch columns on a GPU."""
from __future__ import annotations

import csv
import json

import pytest
import torch

import workbench as wb
from cache_tools.resource_rows import short_name
from kwb_store.manifest import Manifest
from kwb_store.resources import (
    FunctionResources,
    functions_of,
    occupancy,
    resident_blocks,
)
from workbench.harness import launches, results
from workbench.jit import ptxas

# ptxas's words as nvcc 13.0 --resource-usage printed them (a kernel with a local array, one
# that spilled under -maxrregcount, one plain extern "C" kernel)
PTXAS = """\
ptxas info    : 0 bytes gmem
ptxas info    : Compiling entry function '_Z4kernILi128EEvPf' for 'sm_90'
ptxas info    : Function properties for _Z4kernILi128EEvPf
    256 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 32 registers, used 1 barriers, 256 bytes cumulative stack size, 512 bytes smem
ptxas info    : Compile time = 31.422 ms
ptxas warning : For profile sm_90 adjusting per thread register count of 16 to lower bound of 24
ptxas info    : Compiling entry function '_Z5heavyPKfPfi' for 'sm_90'
ptxas info    : Function properties for _Z5heavyPKfPfi
    1624 bytes stack frame, 1612 bytes spill stores, 3152 bytes spill loads
ptxas info    : Used 24 registers, used 0 barriers, 1624 bytes cumulative stack size
ptxas info    : Compiling entry function 'plain' for 'sm_80'
ptxas info    : Function properties for plain
    0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 8 registers, used 0 barriers, 360 bytes cmem[0]
"""


def test_ptxas_report_is_parsed_per_function():
    kern, heavy, plain = ptxas.parse_ptxas(PTXAS, "k.cu")
    assert (kern.mangled, kern.arch, kern.registers, kern.stack_bytes, kern.static_smem, kern.barriers) == (
        "_Z4kernILi128EEvPf", "sm_90", 32, 256, 512, 1)
    assert not kern.spills and kern.source == "k.cu"
    assert (heavy.registers, heavy.spill_stores, heavy.spill_loads) == (24, 1612, 3152) and heavy.spills
    assert (plain.arch, plain.registers, plain.constant_bytes, plain.static_smem) == ("sm_80", 8, 360, 0)


def test_a_function_without_its_used_line_is_not_reported():
    assert ptxas.parse_ptxas("ptxas info    : Compiling entry function 'cut' for 'sm_90'\n") == []


@pytest.mark.parametrize("regs, smem, block, want", [
    (32, 0, 256, 1.0),       # 8 blocks of 8 warps: the SM's 64 warps
    (64, 0, 256, 0.5),       # 2048 registers a warp: 32 warps fit
    (98, 0, 256, 0.25),      # 98 -> 3328 a warp (units of 256): 19 warps, 2 blocks of 8
    (32, 102400, 128, 0.125),  # 100 KiB + 1 KiB reserved a block: 2 blocks of 4 warps
    (32, 0, 32, 0.5),        # 32 block slots of one warp
    (32, 0, 2048, 0.0),      # over the 1024-thread block limit: cannot launch
    (255, 0, 1024, 0.0),     # 255 registers x 1024 threads: more than the register file
])
def test_theoretical_occupancy_on_sm_90(regs, smem, block, want):
    assert occupancy(regs, smem, block, "sm_90") == pytest.approx(want)


def test_max_threads_a_block_follows_the_register_count():
    f = FunctionResources("k", "k", "k.cu", "sm_90", 98, 0, 0, 0, 0, 0)
    assert f.max_threads_per_block() == 608  # 19 warps
    assert FunctionResources("k", "k", "k.cu", "sm_90", 32, 0, 0, 0, 0, 0).max_threads_per_block() == 1024
    assert resident_blocks(32, 0, 256, "8.6") == 6  # sm_86: 48 warps an SM


def test_short_names_drop_parameters_and_anonymous_namespaces():
    name = "void (anonymous namespace)::forward_kernel<float, 4, true>(float const*, float*, (anonymous namespace)::T)"
    assert short_name(name) == "forward_kernel<float, 4, true>"
    assert short_name("plain") == "plain"


def test_manifests_from_before_the_field_read_with_no_functions(tmp_path):
    data = {f: "x" for f in ("name", "kind", "ident", "device", "folder", "base", "key", "library", "library_sha256", "build_log")}
    data.update(library_size=1, sources={}, headers={}, config={}, compilers={}, built_at=1.0, build_seconds=1.0, format=1)
    path = tmp_path / "m.json"
    path.write_text(json.dumps(data))
    m = Manifest.read(path)
    assert m is not None and m.resources == {}
    data["resources"] = "not a dict"
    path.write_text(json.dumps(data))
    assert Manifest.read(path) is None


def _kernel_event(name, dur, block, regs, smem):
    return {"ph": "X", "cat": "kernel", "name": name, "dur": dur,
            "args": {"block": block, "grid": [132, 1, 1], "registers per thread": regs, "shared memory": smem}}


def test_bench_columns_take_the_longest_launch_of_the_builds_own_kernels():
    own = FunctionResources("void (anonymous namespace)::norm_fwd<float>(P)", "_Z...", "n.cu", "sm_90", 40, 8, 8, 16, 256, 0)
    trace = {"traceEvents": [
        _kernel_event("sm90_xmma_gemm_f32f32_tf32", 500.0, [128, 1, 1], 200, 40000),  # a library's kernel, longer
        _kernel_event("void (anonymous namespace)::norm_fwd<float>(P)", 20.0, [256, 1, 1], 40, 256),
        {"ph": "X", "cat": "cuda_runtime", "name": "cudaLaunchKernel", "dur": 3.0},
    ]}
    found = launches.from_trace(trace)
    assert [l.threads for l in found] == [128, 256]
    row = launches.bench_columns(found, [own], "sm_90")
    assert row == {"gpu_kernel": "norm_fwd<float>", "block": "256x1x1", "registers": 40, "smem_bytes": 256,
                   "spill_bytes": 16, "occupancy_pct": 75.0}  # 40 registers: 51 warps fit, 6 blocks of 8
    # none of the build's own: the longest launch, spills unknown
    assert launches.bench_columns(found, [], "sm_90")["gpu_kernel"] == "sm90_xmma_gemm_f32f32_tf32"
    assert launches.bench_columns([], [own], "sm_90") == {}


def test_an_older_bench_csv_gains_the_new_columns_and_keeps_its_rows(tmp_path):
    old = results.BENCH_COLUMNS[: results.BENCH_COLUMNS.index("run_id") + 1]
    path = tmp_path / "bench.csv"
    with open(path, "w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=old)
        w.writeheader()
        w.writerow({c: "" for c in old} | {"kernel": "softmax", "provider": "kwb", "median_us": "12.5"})
    results.append(path, [dict.fromkeys(results.BENCH_COLUMNS) | {"kernel": "lltm", "registers": 40}])
    rows = results.read(path)
    assert [r["kernel"] for r in rows] == ["softmax", "lltm"]
    assert rows[0]["median_us"] == 12.5 and rows[0]["registers"] is None and rows[1]["registers"] == 40
    # a header that is not an older schema is still refused
    path.write_text("kernel,other\n")
    with pytest.raises(results.SchemaError, match="other"):
        results.append(path, [dict.fromkeys(results.BENCH_COLUMNS)])


SPILLS = r"""
#include <cuda_runtime.h>
__global__ void heavy(const float* x, float* y, int n) {
  float a[32];
#pragma unroll
  for (int i = 0; i < 32; ++i) a[i] = x[threadIdx.x + i * n];
  float s = 0;
#pragma unroll
  for (int j = 1; j < 32; ++j)
#pragma unroll
    for (int i = 0; i < 32; ++i) s += a[i] * a[(i + j) % 32];
  y[threadIdx.x] = s;
}
void launch_heavy(const float* x, float* y, int n) { heavy<<<1, 32>>>(x, y, n); }
"""


@pytest.mark.nvcc
def test_a_build_records_its_functions_and_flags_a_spill(tmp_path, capfd):
    folder = tmp_path / "spilly"
    folder.mkdir()
    (folder / "spilly.cpp").write_text('#include "kwb_library.h"\nKWB_LIBRARY(m) {}\n')
    (folder / "spilly.cu").write_text(SPILLS)
    k = wb.load(folder, device="cuda", extra_cuda_cflags=["-maxrregcount=24"])
    (heavy,) = functions_of(k.build.manifest.resources)
    assert heavy.name == "heavy(float const*, float*, int)" and heavy.registers <= 24 and heavy.spills
    assert heavy.source.endswith("spilly.cu")
    err = capfd.readouterr().err
    assert "spilly: heavy (sm_90) spills registers to local memory" in err
    from click.testing import CliRunner

    from workbench.cli import main

    shown = CliRunner().invoke(main, ["cache", "info", "spilly", "--json"])
    assert shown.exit_code == 0, shown.output
    (fn,) = json.loads(shown.output)[0]["builds"][0]["functions"]
    assert fn["spill_stores"] == heavy.spill_stores and fn["max_threads_per_block"] == heavy.max_threads_per_block()


@pytest.mark.cuda
def test_bench_rows_on_a_gpu_carry_the_launch(tmp_path):
    report = wb.bench("softmax", device="cuda", dtypes=["float32"], sizes=[(4096, 4096)], baselines="eager", backward=False)
    (row,) = [r for r in report.rows if r["provider"] == "kwb" and r["method"] != "cuda_graph"]
    assert row["gpu_kernel"].startswith("forward_"), row
    assert row["registers"] > 0 and row["block"] and 0 < row["occupancy_pct"] <= 100
    k = wb.load("softmax", device="cuda")
    ours = [f for f in functions_of(k.build.manifest.resources) if short_name(f.name) == row["gpu_kernel"] and f.arch == launches.device_arch()]
    assert ours and ours[0].registers == row["registers"]
    assert torch.cuda.is_available()


@pytest.mark.cuda
def test_profiling_a_call_adds_no_warning_to_the_output():
    import warnings

    x = torch.ones(1024, device="cuda")
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # torch.profiler's "Profiler clears events ..." printed in every kwb run
        found = launches.profile(lambda t: t * 2, (x,))
    assert found and all(launch.name for launch in found)
