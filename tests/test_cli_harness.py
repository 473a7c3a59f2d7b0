"""`kwb check`, `kwb bench` and `kwb run` as a user runs them, in fresh processes."""
from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch

from workbench import results

FAULTS = str(Path(__file__).parent / "fixtures" / "planted_faults")
NO_GPU = {"CUDA_VISIBLE_DEVICES": ""}  # the same run on any machine: a GPU machine hides its GPU


def kwb(*args: str, env: dict | None = None, timeout: float = 900) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "workbench.cli", *args], capture_output=True, text=True, timeout=timeout,
                          env={**os.environ, **(env or {})}, check=False)


@pytest.mark.slow
def test_kwb_run_on_the_cpu_builds_checks_times_and_writes_the_report(tmp_path):
    res = kwb("run", "--out", str(tmp_path), env=NO_GPU)
    assert res.returncode == 0, res.stdout + res.stderr
    assert "No GPU on this machine" in res.stderr
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    assert folder.name.startswith("cpu-")
    index = (folder / "index.md").read_text()
    assert "No GPU on this machine" in index.splitlines()[2]
    for section in ("## Summary", "## Speed at each op's largest size", "## Plots", "## Correctness", "## Every timing"):
        assert section in index
    bench = results.read(folder / "bench.csv")
    ops = {r["op"] for r in bench}
    kernels_ii = {"softmax", "layernorm", "rmsnorm", "linear_gelu_tanh", "linear_gelu_erf"}
    forward = {"relu_scale", "relu_scale_backward", "vector_add", "polynomial_activation", "polynomial_activation_backward",
               "bias_gelu_tanh", "bias_gelu_erf", "lltm"} | kernels_ii
    with_grads = {"relu_scale", "vector_add", "polynomial_activation", "bias_gelu_tanh", "bias_gelu_erf", "lltm"} | kernels_ii
    assert ops == forward | {op + " fwd+bwd" for op in with_grads}  # training steps by default
    for op in ops:  # linear_gelu's vendor route (cuBLASLt) is CUDA-only: no vendor rows on the CPU
        assert {r["provider"] for r in bench if r["op"] == op} == {"kwb", "eager", "torch.compile"}
    assert all(r["status"] == "ok" and r["median_us"] > 0 for r in bench)
    assert len({r["run_id"] for r in bench}) == 1
    import workbench as wb
    for name in wb.list_kernels():  # without --full: one size and one dtype a kernel, its spec's quick_for
        size, dtype = wb.load(name, device="cpu").spec.SPEC.quick_for("cpu")
        timed = {(r["dtype"], str(r["shape"])) for r in bench if r["kernel"] == name}
        assert timed == {("float32", "x".join(map(str, size)))} and dtype == torch.float32, (name, timed)
    assert "building 9 kernels (cpu), side by side" in res.stderr
    assert re.search(r"kwb run took \d+ s: start-up \d+ s, builds \d+ s, checks \d+ s, timing \d+ s \(.*torch.compile compiling \d+ s", res.stderr)
    checks = results.read(folder / "check.csv")
    assert checks and all(r["passed"] for r in checks)
    assert {r["shape"] for r in checks} >= {"0", "1", "37", "199", "760", "1128"}
    pngs = sorted(p.name for p in (folder / "plots").glob("*.png"))
    # a timing taken on busy cores is in no plot, and the speedup plot is of kwb's rows: on a busy
    # machine every kwb row can be untrusted while an eager row (its own speedup 1.0) is trusted
    trusted_kwb = [r for r in bench if not r["trust"] and r["provider"] == "kwb"]
    want = ["check_errors.png", "pct_of_ceiling.png"] + \
        (["speedup.png"] if any(r["speedup_vs_eager"] or r["speedup_vs_compile"] for r in trusted_kwb) else [])
    assert pngs == want  # one size a kernel: no latency-vs-size
    assert re.search(r"Machine (quiet|busy): .*timings not trusted", index)
    assert all(f"plots/{name}" in index for name in pngs)
    [own] = (folder / "runs").iterdir()  # the run's own page and plots, kept; `latest` names it
    assert (folder / "latest").resolve() == own.resolve() and (own / "index.md").read_text() == index
    assert sorted(p.name for p in (own / "plots").glob("*.png")) == pngs
    assert "==== relu_scale (cpu)" in (folder / "build.log").read_text()


@pytest.mark.slow
def test_kwb_run_full_times_every_dtype_at_every_bench_size(tmp_path):
    res = kwb("run", "relu_scale", "--full", "--device", "cpu", "--baselines", "eager", "--no-backward", "--out", str(tmp_path))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = results.read(next(tmp_path.glob("*/bench.csv")))
    assert {(r["op"], r["dtype"], r["numel"]) for r in rows} == {
        (op, dtype, n) for op in ("relu_scale", "relu_scale_backward") for dtype in ("float32", "float64")
        for n in (1 << 16, 1 << 20, 1 << 22)}


@pytest.mark.slow
def test_kwb_run_exits_1_when_a_check_fails_and_still_writes_the_report(tmp_path):
    res = kwb("run", FAULTS, "--device", "cpu", "--dtype", "float32", "--sizes", "1001", "--baselines", "none", "--out", str(tmp_path))
    assert res.returncode == 1, res.stdout + res.stderr
    assert "check of planted_faults" in res.stderr and "cases failed" in res.stderr
    [folder] = [p for p in tmp_path.iterdir() if p.is_dir()]
    index = (folder / "index.md").read_text()
    assert "FAIL" in index and "[36]: got nan" in index
    wrong = [r for r in results.read(folder / "bench.csv") if r["status"] != "ok"]
    assert {r["op"] for r in wrong} == {"skip_last", "odd_tail", "bf16_inside", "nan_at_middle", "wrong_dtype"}


TINY_SPEC = """
import torch
from workbench.spec import KernelSpec, OpSpec, randn


def reference(x):
    return x + 1.0


def reference_with_branch(x):
    if x.sum() > -1e30:  # a Python branch on tensor data: a graph break, so fullgraph fails
        return x + 1.0
    return x


def make_inputs(shape, dtype, device, gen):
    if shape == (37,) and BROKEN:
        raise ValueError("no inputs for 37")
    return (randn(shape, dtype, device, gen),)


BROKEN = {broken}
SPEC = KernelSpec(ops=[OpSpec("add_value", {reference}, make_inputs)], dtypes={{"cpu": (torch.float64,)}},
                  bench_sizes=[(1000,)])
"""


@pytest.mark.slow
def test_kwb_run_survives_a_broken_spec_and_a_failing_baseline(tmp_path):
    from conftest import write_tiny_kernel

    folder = write_tiny_kernel(tmp_path / "tiny")
    # the baseline torch.compile cannot compile: reported in its rows, but the kernel is fine
    (folder / "spec.py").write_text(TINY_SPEC.format(broken=False, reference="reference_with_branch"))
    res = kwb("run", str(folder), "--device", "cpu", "--out", str(tmp_path / "a"))
    assert res.returncode == 0, res.stdout + res.stderr
    rows = results.read(next((tmp_path / "a").glob("*/bench.csv")))
    status = {r["provider"]: r["status"] for r in rows}
    assert status["kwb"] == "ok" and status["eager"] == "ok" and status["torch.compile"].startswith("error: ")
    # a spec that raises for one shape: that case fails, the report is still written, exit 1
    (folder / "spec.py").write_text(TINY_SPEC.format(broken=True, reference="reference"))
    res = kwb("run", str(folder), "--device", "cpu", "--out", str(tmp_path / "b"))
    assert res.returncode == 1, res.stdout + res.stderr
    index = next((tmp_path / "b").glob("*/index.md")).read_text()
    assert "1 of 9 FAIL" in index and "spec: ValueError: no inputs for 37" in index


def test_kwb_check_shows_the_first_mismatch_and_the_seed(tmp_path):
    res = kwb("check", FAULTS, "--device", "cpu", "--dtype", "fp32", "--seed", "42")
    assert res.returncode == 1
    assert "FAIL planted_faults.skip_last output, float32, shape [37]" in res.stdout and "[36]: got nan" in res.stdout
    assert "seed 42" in res.stdout
    ok = kwb("check", "vector_add", "--device", "cpu", "--dtype", "float64")
    assert ok.returncode == 0 and "9/9 pass" in ok.stdout and "grad a" in ok.stdout


@pytest.mark.slow
def test_kwb_bench_appends_to_the_devices_csv(tmp_path):
    res = kwb("bench", "relu_scale", "--device", "cpu", "--dtype", "float32", "--sizes", "2^10,1000", "--baselines", "eager",
              "--no-backward", "--out", str(tmp_path))
    assert res.returncode == 0, res.stderr
    [csv_path] = list(tmp_path.glob("*/bench.csv"))
    rows = results.read(csv_path)
    assert {(r["op"], r["provider"], r["numel"]) for r in rows} == {
        (op, p, n) for op in ("relu_scale", "relu_scale_backward") for p in ("kwb", "eager") for n in (1024, 1000)}
    assert "appended 8 rows" in res.stdout


def test_bad_usage_exits_2_naming_the_option(tmp_path):
    cases = [
        (["check", "relu_scale", "--device", "cpu", "--dtype", "bf16"], "dtypes: relu_scale on cpu supports float32, float64"),
        (["check", "--dtype", "int4"], "dtype 'int4' is not one of"),
        (["bench", "relu_scale", "--sizes", "big"], "--sizes"),
        (["bench", "relu_scale", "--baselines", "numpy"], "--baselines"),
        (["bench", "relu_scale", "--sizes", "2^10", "--sweep"], "not both"),
        (["run", "--device", "cuda"], "no GPU is visible"),
    ]
    for args, message in cases:
        res = kwb(*args, env=NO_GPU)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert message in res.stderr, (args, res.stderr)


def test_an_unknown_kernel_name_exits_2_at_once_with_the_closest_name(tmp_path):
    report = tmp_path / "report"
    for args in (["run", "relu_scal", "--out", str(report)], ["build", "relu_scal"], ["check", "relu_scal"],
                 ["bench", "relu_scal"], ["list", "relu_scal"]):
        res = kwb(*args, env=NO_GPU, timeout=120)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "no kernel 'relu_scal'; did you mean relu_scale?" in res.stderr, (args, res.stderr)
        assert "copy ceiling" not in res.stderr and "building" not in res.stderr, (args, res.stderr)
    res = kwb("run", "nosuch", env=NO_GPU, timeout=120)
    assert res.returncode == 2 and "no kernel 'nosuch'" in res.stderr and "did you mean" not in res.stderr
    assert not report.exists()  # nothing written, not even the folder
    for args in (["cache", "info", "relu_scal"], ["cache", "clean", "relu_scal"], ["cache", "info", "nosuch"]):
        res = kwb(*args, "--root", str(tmp_path), "--force", env=NO_GPU, timeout=120)
        assert res.returncode == 2, (args, res.stdout, res.stderr)
        assert "no entry named" in res.stderr and ("did you mean relu_scale?" in res.stderr) == ("relu_scal" in args)


def test_a_folder_path_is_not_judged_as_a_kernel_name(tmp_path, monkeypatch):
    from workbench.jit.sources import unknown_name_error

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine").mkdir()
    assert unknown_name_error("relu_scale") is None
    for path in ("mine", "./relu_scal", "~/relu_scal", "somewhere/relu_scal", str(tmp_path)):
        assert unknown_name_error(path) is None, path
    assert "did you mean relu_scale?" in unknown_name_error("relu_scal")


def test_a_run_stopped_before_its_end_leaves_the_last_report_as_it_was(tmp_path, monkeypatch):
    from types import SimpleNamespace

    import pytest

    from workbench import runner
    from workbench.harness import benchmark
    from workbench.jit import parallel
    from workbench.jit.errors import KernelNotFoundError
    from workbench.report import folder as report_files

    def failing_loads(message):
        return lambda names, device=None, on_done=None: [parallel.Loaded(n, None, KernelNotFoundError(message), 0.0)
                                                         for n in names]

    monkeypatch.setattr(benchmark, "new_session", lambda device, env=None, in_turns=None: SimpleNamespace(ceiling=1e9, seconds={}))
    monkeypatch.setattr(parallel, "load_all", failing_loads("first run's error"))
    first = runner.run(["relu_scale"], device="cpu", out=tmp_path)
    folder = first.folder
    assert first.index == folder / "index.md" and "first run's error" in (folder / "build.log").read_text()
    [own] = (folder / "runs").iterdir()
    assert (own / "index.md").read_text() == first.index.read_text()
    assert (own / "build.log").read_text() == (folder / "build.log").read_text()
    assert (folder / "latest").resolve() == own.resolve()
    before = {name: (folder / name).read_bytes() for name in ("index.md", "build.log")}

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt
    monkeypatch.setattr(parallel, "load_all", failing_loads("second run's error"))
    monkeypatch.setattr(report_files, "write_plots", interrupted)
    with pytest.raises(KeyboardInterrupt):
        runner.run(["relu_scale"], device="cpu", out=tmp_path)
    assert {name: (folder / name).read_bytes() for name in before} == before
    assert [p for p in (folder / "runs").iterdir() if (p / "index.md").exists()] == [own]
    assert (folder / "latest").resolve() == own.resolve()
    with pytest.raises(ValueError, match="did you mean relu_scale"):
        runner.run(["relu_scal"], device="cpu", out=tmp_path)
    assert {name: (folder / name).read_bytes() for name in before} == before


def test_kwb_version_is_the_version_reports_record_and_one_is_singular(tmp_path, monkeypatch):
    from types import SimpleNamespace

    from rich.console import Console

    from workbench import runner
    from workbench.harness import benchmark
    from workbench.harness.results import kwb_version
    from workbench.jit import parallel
    from workbench.jit.errors import KernelNotFoundError
    from workbench.report.render import counted

    code = "import sys; from workbench.cli import main\ntry: main(['--version'])\nexcept SystemExit: pass\nassert 'torch' not in sys.modules"
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr
    assert res.stdout.strip() == f"kwb {kwb_version()}"  # 0.1.0+<git describe> in a checkout, as bench.csv records it
    assert [counted(n, "kernel") for n in (0, 1, 2)] == ["0 kernels", "1 kernel", "2 kernels"]
    assert counted(1, "entry", "entries") == "1 entry" and counted(3, "entry", "entries") == "3 entries"
    monkeypatch.setattr(benchmark, "new_session", lambda device, env=None, in_turns=None: SimpleNamespace(ceiling=1e9, seconds={}))
    monkeypatch.setattr(parallel, "load_all", lambda names, device=None, on_done=None:
                        [parallel.Loaded(n, None, KernelNotFoundError("planted"), 0.0) for n in names])
    console = Console(record=True, width=200)
    runner.run(["relu_scale"], device="cpu", out=tmp_path, console=console)
    text = console.export_text()
    assert "kwb run: 1 kernel on" in text and "building 1 kernel (cpu)\n" in text, text
