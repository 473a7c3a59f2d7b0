"""Plots render from CSV files alone: image files appear, non-empty, titled with the device;
each figure reads at a glance: a panel per kernel, short legends outside the data, no layout
warning from matplotlib."""
from __future__ import annotations

import warnings

import pytest
from matplotlib.backends.backend_agg import FigureCanvasAgg

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
    assert labels == {"time per call (us)"}
    assert "median per call and its p20-p80 band" in fig._suptitle.get_text()
    assert len([ax for ax in fig.axes if ax.get_visible()]) == 4  # 2 ops x 2 dtypes
    legend = [t.get_text() for t in fig.legends[0].get_texts()]
    assert "kwb" in legend and "kwb (CUDA graph)" in legend
    bar = plots.pct_of_ceiling(rows)
    assert "copy ceiling" in bar.axes[0].get_xlabel()


def test_plots_refuse_rows_with_nothing_to_draw():
    with pytest.raises(ValueError, match="no timed rows"):
        plots.latency([], "relu_scale")
    with pytest.raises(ValueError, match="no error histogram rows"):
        plots.check_errors([])


def test_the_error_histogram_draws_from_a_check_report_too():
    import torch

    import workbench as wb

    report = wb.check(lambda x: x * 2, lambda x: x * 2, inputs=[(torch.randn(100),), (torch.randn(50, dtype=torch.float64),)], seed=1)
    fig = _drawn(plots.check_errors(report))
    assert len(fig.axes) == 1  # one kernel
    rows = [t.get_text() for t in fig.axes[0].get_yticklabels()]
    assert any("float32" in r for r in rows) and any("float64" in r for r in rows)


def test_a_kernel_timed_at_one_size_gets_no_latency_figure(tmp_path):
    rows = [r for r in _write_results(tmp_path / "data") if r["numel"] == max(x["numel"] for x in _write_results(tmp_path / "x"))]
    written = plots.plot_all(rows, [], tmp_path / "plots")
    assert sorted({p.stem for p in written}) == ["pct_of_ceiling", "speedup"]


# ---- readable at a glance ------------------------------------------------------------------

KERNELS = ["bias_gelu", "layernorm", "linear_gelu", "lltm", "polynomial_activation", "relu_scale", "rmsnorm", "softmax",
           "vector_add", "extra_kernel"]
NOISY_US = 123456.0  # a timing no plot may show: its row is marked untrusted


def _many_kernels():
    """What `kwb run --full` writes for ten kernels: two ops, three dtypes, two sizes, three
    providers and a vendor route each, a CUDA-graph timing at the small size, one noisy row;
    error histograms of six outputs per op (the report whose legend held ~60 entries)."""
    env = results.Environment("cuda", DEVICE, "2.11.0+cu130", "13.0", "0.1.0+abc", "2026-11-22T10:00:00+00:00", "run-1")
    bench, errors = [], []
    edges = histogram_edges()
    for i, kern in enumerate(KERNELS):
        for op in (kern, f"{kern} fwd+bwd"):
            for dtype in ("float32", "float16", "bfloat16"):
                for n in (1 << 20, 1 << 26):
                    for provider, t in (("kwb", 1.0), ("eager", 1.5 + i / 10), ("torch.compile", 1.1), ("cublas_lt", 1.05)):
                        med = t * n / 1e7 + 3
                        for method in ("cuda_events", "cuda_graph") if n == 1 << 20 else ("cuda_events",):
                            bench.append(dict(kernel=kern, op=op, provider=provider, dtype=dtype, shape=str(n), numel=n, method=method,
                                              median_us=med, p20_us=med * 0.95, p80_us=med * 1.05, samples=100, gbps=8 * n / med / 1e3,
                                              pct_of_ceiling=100 * 8 * n / med / 1e3 / 3000,
                                              speedup_vs_eager=(1.5 + i / 10) / t if provider == "kwb" else None,
                                              speedup_vs_compile=1.1 / t if provider == "kwb" else None,
                                              speedup_vs_vendor=1.05 / t if provider == "kwb" else None,
                                              status="ok", ceiling_gbps=3000.0, trust="", **env.columns()))
            for what in ("output", "grad x", "grad weight", "grad bias", "grad a", "grad b"):
                for dtype, rtol in (("float32", 1e-5), ("float16", 1e-3), ("bfloat16", 8e-3)):
                    errors += [dict(kernel=kern, op=op, what=what, dtype=dtype, log10_lo=edges[b], log10_hi=edges[b + 1], count=b % 7 + 1,
                                    rtol=rtol, **env.columns()) for b in range(20 + i, 44 + i)]
    noisy = dict(bench[0], median_us=NOISY_US, p20_us=NOISY_US, p80_us=NOISY_US, pct_of_ceiling=NOISY_US, speedup_vs_eager=NOISY_US,
                 speedup_vs_compile=NOISY_US, trust="other processes used the cores", numel=1 << 28, shape=str(1 << 28))
    return bench + [noisy], errors


def _drawn(fig):
    """fig laid out and drawn as savefig draws it, any warning (a collapsed layout) an error."""
    FigureCanvasAgg(fig)
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        fig.canvas.draw()
    return fig


def _assert_readable(fig):
    _drawn(fig)
    axes = [ax for ax in fig.axes if ax.get_visible()]
    for ax in axes:  # a layout that gave up leaves panels squashed to slivers
        box = ax.get_window_extent()
        assert box.width > 100 and box.height > 30, (ax.get_title(), box)
    legends = list(fig.legends) + [ax.get_legend() for ax in axes if ax.get_legend() is not None]
    title = fig._suptitle.get_window_extent() if fig._suptitle is not None else None
    if title is not None:  # a one-panel figure is narrower than the device line
        assert title.x0 >= 0 and title.x1 <= fig.bbox.x1 and title.y1 <= fig.bbox.y1, "title off the figure"
    for legend in legends:
        assert len(legend.get_texts()) <= plots.MAX_LEGEND, [t.get_text() for t in legend.get_texts()]
        box = legend.get_window_extent()
        assert box.x0 >= 0 and box.y0 >= 0 and box.x1 <= fig.bbox.x1 and box.y1 <= fig.bbox.y1, "legend off the figure"
        for ax in axes:
            assert not box.overlaps(ax.get_window_extent()), f"legend over the panel {ax.get_title()!r}"
        if title is not None:
            assert not box.overlaps(title), "legend over the title"
    return axes


def _shown_values(fig):
    out = []
    for ax in fig.axes:
        for line in ax.get_lines():
            out += [float(v) for v in line.get_xdata()] + [float(v) for v in line.get_ydata()]
    return out


def test_speedup_is_a_panel_per_kernel_with_labelled_rows():
    bench, _ = _many_kernels()
    axes = _assert_readable(plots.speedup(bench))
    assert [ax.get_title(loc="left") for ax in axes] == KERNELS
    # a row per (op, dtype, size), named on the axis rather than in a legend
    assert len(axes[0].get_yticklabels()) == 2 * 3 * 2
    assert axes[0].get_yticklabels()[0].get_text() == "bias_gelu · float32 · 2^20"
    (legend,) = plots.speedup(bench).legends
    assert [t.get_text() for t in legend.get_texts()] == ["over eager PyTorch", "over torch.compile", "over cublas_lt"]
    # series sharing a panel differ in colour and in marker
    styles = {(line.get_color(), line.get_marker()) for line in axes[0].get_lines() if line.get_marker() not in ("None", None, "")}
    assert len(styles) == 3 and len({c for c, _ in styles}) == 3 and len({m for _, m in styles}) == 3


def test_check_errors_is_a_panel_per_kernel_and_a_short_legend():
    _, errors = _many_kernels()
    axes = _assert_readable(plots.check_errors(errors))
    assert [ax.get_title(loc="left") for ax in axes] == KERNELS
    labels = [t.get_text() for t in axes[0].get_yticklabels()]
    assert len(labels) == 2 * 6 * 3
    # one op's outputs and dtypes on adjacent rows, in the order the check wrote them
    assert labels[:4] == ["bias_gelu · float32", "bias_gelu · float16", "bias_gelu · bfloat16", "bias_gelu grad x · float32"]


def test_pct_of_ceiling_and_latency_keep_legends_off_the_data():
    bench, _ = _many_kernels()
    axes = _assert_readable(plots.pct_of_ceiling(bench))
    assert [ax.get_title(loc="left") for ax in axes] == KERNELS
    axes = _assert_readable(plots.latency(bench, "softmax"))
    assert len(axes) == 2 * 3  # ops x dtypes
    _assert_readable(plots.ceiling_by_size(bench, "softmax"))
    # what a notebook draws for one op in one dtype: one narrow panel, eight legend entries
    one = [r for r in bench if r["op"] == "softmax" and r["dtype"] == "float32"]
    assert len(_assert_readable(plots.latency(one, "softmax"))) == 1
    _assert_readable(plots.ceiling_by_size(one, "softmax"))
    _, errors = _many_kernels()
    _assert_readable(plots.check_errors([e for e in errors if e["op"] == "softmax" and e["what"] == "output"]))


def test_untrusted_rows_are_left_out_of_every_plot():
    bench, _ = _many_kernels()
    # the noisy row is the largest size: pct_of_ceiling would pick it if it counted
    for fig in (plots.speedup(bench), plots.pct_of_ceiling(bench), plots.latency(bench, "bias_gelu"),
                plots.ceiling_by_size(bench, "bias_gelu")):
        assert NOISY_US not in _shown_values(fig)


def test_a_plot_whose_every_row_is_untrusted_says_so_while_other_rows_are_trusted():
    """A busy 2-core run: the rows with a bytes model all marked noisy, a FLOP-only row (a
    matmul's) trusted. The ceiling plot says it has nothing to show; it used to raise and fail
    the whole `kwb run` (exit 2)."""
    bench, _ = _many_kernels()
    rows = [dict(r, trust="other processes used the cores") for r in bench if r["kernel"] == "softmax"]
    rows.append(dict(rows[0], kernel="linear_gelu", op="linear_gelu", pct_of_ceiling=None, gbps=None, tflops=1.0, trust=""))
    beside_eager = [*rows[:-1], dict(rows[0], provider="eager", trust="")]  # a trusted baseline, every kwb row untrusted
    for fig in (plots.pct_of_ceiling(rows), plots.ceiling_by_size(rows), plots.latency(rows, "softmax"),
                plots.speedup(beside_eager)):
        assert any("no timing to plot" in t.get_text() for t in _drawn(fig).findobj(lambda a: hasattr(a, "get_text")))


def test_the_speedup_plot_says_why_when_every_baseline_is_untrusted_and_kwb_is_not():
    """`kwb run` beside the GPU test suite: kwb's rows trusted, every eager and compile row noisy,
    so no row has a speedup. It used to raise and end the run with a usage error (exit 2)."""
    bench, _ = _many_kernels()
    rows = [dict(r, trust="other processes used the cores") if r["provider"] != "kwb" else r for r in bench]
    rows = [dict(r, speedup_vs_eager=None, speedup_vs_compile=None, speedup_vs_vendor=None) for r in rows]
    texts = [t.get_text() for t in _drawn(plots.speedup(rows)).findobj(lambda a: hasattr(a, "get_text"))]
    assert any("no speedup to plot" in t and "baseline timings" in t for t in texts)
    only_kwb = [r for r in rows if r["provider"] == "kwb"]
    texts = [t.get_text() for t in _drawn(plots.speedup(only_kwb)).findobj(lambda a: hasattr(a, "get_text"))]
    assert any("no baseline" in t for t in texts)


def test_saving_every_plot_warns_of_nothing(tmp_path):
    bench, errors = _many_kernels()
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        written = plots.plot_all([r for r in bench if r["kernel"] in KERNELS[:3]], errors, tmp_path)
    assert {p.stem for p in written} >= {"speedup", "check_errors", "pct_of_ceiling", "latency_bias_gelu"}


def test_a_saved_png_keeps_what_the_figure_drew_in_256_colours(tmp_path):
    import numpy as np
    from PIL import Image

    rows = _write_results(tmp_path)
    fig = plots.speedup(rows)
    canvas = FigureCanvasAgg(fig)
    fig.set_dpi(150)
    canvas.draw()
    drawn = np.asarray(canvas.buffer_rgba())[..., :3].astype(int)
    png, _ = plots.save(fig, tmp_path / "out" / "speedup")
    with Image.open(png) as image:
        assert image.mode == "P"
        saved = np.asarray(image.convert("RGB")).astype(int)
    assert saved.shape == drawn.shape
    # every pixel within a few levels of what Agg drew: markers, text and bands all survive
    assert np.percentile(np.abs(saved - drawn), 99.9) <= 12
    assert np.abs(saved - drawn).mean() < 1.0
