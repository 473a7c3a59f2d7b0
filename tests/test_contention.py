"""Timings taken while other processes hold the cores are noticed: measured again, and where
still not trusted, marked, left out of speedups and plots, and counted in the report's head."""
from __future__ import annotations

import os
import subprocess
import sys
import time

import pytest
import torch

import workbench as wb
from workbench import timing
from workbench.harness.benchmark import Session
from workbench.report import plots

SPIN = "import time\nend = time.time() + 60\nwhile time.time() < end: pass\n"  # stops by itself


@pytest.fixture
def busy_cores():
    """One spinning process per core (each ends by itself within a minute)."""
    if not os.path.exists("/proc/stat"):
        pytest.skip("reads other processes' CPU time from /proc/stat (Linux)")
    spinners = [subprocess.Popen([sys.executable, "-c", SPIN]) for _ in range(os.cpu_count() or 1)]
    time.sleep(0.5)
    yield
    for p in spinners:
        p.kill()
        p.wait()


def test_the_share_of_the_cores_others_use_is_measured(busy_cores):
    share = timing.CpuShare()
    time.sleep(0.5)
    assert share.others() > timing.BUSY


def test_samples_taken_beside_busy_processes_are_not_trusted(busy_cores):
    x = torch.randn(1 << 16)
    stats = timing.measure(lambda: x * 2, timing.CpuTimer(), budget_s=0.05, min_samples=5, max_samples=20)
    assert stats.busy > timing.BUSY
    assert timing.distrust(stats).startswith("noisy: other processes used")


@pytest.mark.slow
def test_a_bench_on_busy_cores_marks_its_rows_and_gives_no_speedups(busy_cores):
    x = torch.randn(1 << 16)
    session = Session("cpu")
    report = wb.bench(lambda t: t * 2, lambda t: t * 2, inputs=(x,), baselines="eager", session=session)
    rows = [r for r in report.rows if r["median_us"] is not None]
    assert rows and all(r["trust"].startswith("noisy") for r in rows)
    assert all(r["speedup_vs_eager"] is None for r in rows)
    assert session.remeasured == len(rows)  # each measured twice before it was marked
    assert plots._timed(rows) == []  # and no plot draws them
    head = session.quietness(report.rows)
    assert head.startswith("Machine busy") and f"{len(rows)} of {len(rows)} timings not trusted" in head


def test_a_trusted_timing_has_no_mark():
    quiet = timing.Stats(1e-3, 0.99e-3, 1.01e-3, 50, "t", busy=0.02)
    assert timing.distrust(quiet) == ""
    assert timing.distrust(timing.Stats(1e-3, 0.5e-3, 1.5e-3, 50, "t", busy=0.0)).startswith("noisy: p20-p80 spread")


def test_a_plot_of_nothing_but_noisy_timings_says_so_instead_of_failing():
    row = {"kernel": "k", "op": "o", "dtype": "float32", "provider": "kwb", "method": "perf_counter", "numel": 10, "shape": "10",
           "median_us": 1.0, "p20_us": 1.0, "p80_us": 1.0, "pct_of_ceiling": 5.0, "speedup_vs_eager": None, "speedup_vs_compile": None,
           "trust": "noisy: other processes used 67% of the cores"}
    for draw in (plots.latency, plots.pct_of_ceiling, plots.speedup):
        fig = draw([row])
        assert "no timing to plot" in " ".join(t.get_text() for ax in fig.axes for t in ax.texts)
