"""Plots render from CSV files alone: image files appear, non-empty, titled with the device."""
from __future__ import annotations

import pytest

from workbench import plots, results
from workbench.harness.compare import histogram_edges

DEVICE = "NVIDIA H100 80GB HBM3"


def _write_results(folder):
    env = results.Environment("cuda", DEVICE, "2.11.0+cu130", "13.0", "0.1.0+abc", "2026-11-22T10:00:00+00:00", "run-1")
    rows = []
    for op in ("relu_scale", "relu_scale_backward"):
        for dtype in ("float32", "bfloat16"):
            for k, n in enumerate((1 << 20, 1 << 24, 1 << 26)):
                for provider, t in (("kwb", 1.0), ("eager", 1.9), ("torch.compile", 1.2)):
                    med = t * n / 1e7 + 3
                    for method in ("cuda_events", "cuda_graph") if k == 0 else ("cuda_events",):
                        rows.append(dict(kernel="relu_scale", op=op, provider=provider, dtype=dtype, shape=str(n), numel=n, method=method,
                                         median_us=med, p20_us=med * 0.95, p80_us=med * 1.05, samples=100, gbps=8 * n / med / 1e3,
                                         pct_of_ceiling=100 * 8 * n / med / 1e3 / 3000, speedup_vs_eager=1.9 / t, speedup_vs_compile=1.2 / t,
                                         status="ok", ceiling_gbps=3000.0, **env.columns()))
    rows.append(dict(kernel="relu_scale", op="relu_scale", provider="torch.compile", dtype="float32", shape="7", numel=7,
                     method="cuda_events", status="error: compile failed", ceiling_gbps=3000.0, **env.columns()))
    results.append(folder / "bench.csv", rows)
    edges = histogram_edges()
    errors = [dict(kernel="relu_scale", op="relu_scale", what=what, dtype=dtype, log10_lo=edges[i], log10_hi=edges[i + 1],
                   count=10 * (i % 5 + 1), rtol=1e-6 if dtype == "float32" else 8e-3, **env.columns())
              for what in ("output", "grad x") for dtype in ("float32", "bfloat16") for i in range(20, 40)]
    results.append(folder / "check_errors.csv", errors)
    return rows


def test_every_plot_renders_from_the_csv_files(tmp_path):
    _write_results(tmp_path)
    written = plots.plot_results(tmp_path)
    names = sorted(p.name for p in written)
    assert names == sorted(f"{stem}.{ext}" for stem in ("latency_relu_scale", "pct_of_ceiling", "speedup", "check_errors")
                           for ext in ("png", "svg"))
    for p in written:
        data = p.read_bytes()
        assert len(data) > 5000, p
        if p.suffix == ".png":
            assert data[:8] == b"\x89PNG\r\n\x1a\n"
        else:
            text = data.decode()
            assert "<svg" in text and DEVICE in text and "torch 2.11.0+cu130" in text


def test_axes_say_what_they_show(tmp_path):
    rows = _write_results(tmp_path)
    fig = plots.latency(rows, "relu_scale")
    labels = {ax.get_ylabel() for ax in fig.axes if ax.get_visible()}
    assert labels == {"time per call (us), median, p20-p80 band"}
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 4  # 2 ops x 2 dtypes
    legend = [t.get_text() for t in fig.axes[0].get_legend().get_texts()]
    assert "kwb" in legend and "kwb (graph)" in legend
    bar = plots.pct_of_ceiling(rows)
    assert "copy ceiling" in bar.axes[0].get_ylabel()


def test_plots_refuse_rows_with_nothing_to_draw():
    with pytest.raises(ValueError, match="no timed rows"):
        plots.latency([], "relu_scale")
    with pytest.raises(ValueError, match="no error histogram rows"):
        plots.check_errors([])


def test_the_error_histogram_draws_from_a_check_report_too():
    import torch

    import workbench as wb

    report = wb.check(lambda x: x * 2, lambda x: x * 2, inputs=[(torch.randn(100),), (torch.randn(50, dtype=torch.float64),)], seed=1)
    fig = plots.check_errors(report)
    assert [ax.get_title() for ax in fig.axes] == ["float32", "float64"]


def test_a_kernel_timed_at_one_size_gets_no_latency_figure(tmp_path):
    rows = [r for r in _write_results(tmp_path / "data") if r["numel"] == max(x["numel"] for x in _write_results(tmp_path / "x"))]
    written = plots.plot_all(rows, [], tmp_path / "plots")
    assert sorted({p.stem for p in written}) == ["pct_of_ceiling", "speedup"]
