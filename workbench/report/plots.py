"""Plots of results, drawn from the CSV files (workbench.results), never from live runs, so a
figure can be redrawn from what the repository holds:

    rows = wb.results.read("benchmarks/results/nvidia-h100-80gb-hbm3/bench.csv")
    fig = plots.latency(rows, kernel="relu_scale")     # latency vs size, p20-p80 bands
    fig = plots.pct_of_ceiling(rows)                   # % of the copy ceiling at one size
    fig = plots.speedup(rows)                          # kwb over eager and over torch.compile
    fig = plots.check_errors(report_or_rows)           # relative-error histogram per dtype
    plots.save(fig, "out/latency")                     # out/latency.png and out/latency.svg

Figures are matplotlib Figure objects (no pyplot state): they display in a notebook, save
anywhere, and need no display. Each title names the device and the versions.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

from matplotlib.figure import Figure

from ..harness.compare import histogram_edges
from .render import size_text

PROVIDER_STYLE = {"kwb": dict(color="#d62728", lw=2.2), "eager": dict(color="#1f77b4"), "torch.compile": dict(color="#2ca02c")}
OTHER_COLORS = ["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"]
DTYPE_COLORS = {"float32": "#1f77b4", "float64": "#9467bd", "float16": "#ff7f0e", "bfloat16": "#2ca02c"}


def _style(provider: str, order: list[str]) -> dict:
    if provider in PROVIDER_STYLE:
        return dict(PROVIDER_STYLE[provider])
    if provider not in order:
        order.append(provider)
    return dict(color=OTHER_COLORS[order.index(provider) % len(OTHER_COLORS)])


def env_title(rows: list[dict]) -> str:
    if not rows:
        return ""
    r = rows[0]
    cuda = f", CUDA {r['cuda']}" if r.get("cuda") not in (None, "", "none") else ""
    when = (r.get("timestamp") or "")[:10]
    return f"{r['device_name']} · torch {r['torch']}{cuda} · kwb {r.get('kwb_version', '')} · {when}"


def _timed(rows):
    """Rows with a trusted timing (a noisy one is in the tables, not in the plots)."""
    return [r for r in rows if r.get("median_us") is not None and not r.get("trust")]


def _nothing_trusted(rows, what: str) -> Figure | None:
    """Where every timing of `rows` is marked noisy: a figure that says so (a notebook on a busy
    machine shows why its plot is empty) instead of an error; None where there is none such."""
    noisy = [r for r in rows if r.get("median_us") is not None and r.get("trust")]
    if not noisy or _timed(rows):
        return None
    fig = Figure(figsize=(6.4, 1.6), layout="constrained")
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, f"{what}: no timing to plot. All {len(noisy)} were taken while other processes used the cores\n"
                      f"(bench.csv's trust column: {noisy[0]['trust']}); run again on a quiet machine.",
            ha="center", va="center", fontsize=9, wrap=True)
    return fig


def _groups(rows, *keys) -> "OrderedDict[tuple, list[dict]]":
    out: "OrderedDict[tuple, list[dict]]" = OrderedDict()
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def latency(rows: list[dict], kernel: str | None = None) -> Figure:
    """Median time per call against size, one panel per (op, dtype), a line per provider with
    its p20-p80 band; CUDA-graph timings dashed."""
    if (empty := _nothing_trusted(rows, "latency")) is not None:
        return empty
    rows = _timed([r for r in rows if kernel is None or r["kernel"] == kernel])
    panels = _groups(rows, "kernel", "op", "dtype")
    if not panels:
        raise ValueError(f"no timed rows{' for kernel ' + repr(kernel) if kernel else ''} to plot")
    dtypes = list(OrderedDict.fromkeys(k[2] for k in panels))
    ops = list(OrderedDict.fromkeys(k[:2] for k in panels))
    fig = Figure(figsize=(4.6 * len(dtypes), 3.6 * len(ops) + 0.6), layout="constrained")
    axes = fig.subplots(len(ops), len(dtypes), squeeze=False)
    order: list[str] = []
    for (kern, op, dtype), prow in panels.items():
        ax = axes[ops.index((kern, op))][dtypes.index(dtype)]
        for (provider, method), pts in _groups(prow, "provider", "method").items():
            pts = sorted(pts, key=lambda r: r["numel"])
            x = [r["numel"] for r in pts]
            style = _style(provider, order)
            graph = method == "cuda_graph"
            ax.plot(x, [r["median_us"] for r in pts], marker="o", ms=3.5, ls="--" if graph else "-",
                    label=f"{provider} (graph)" if graph else provider, **style)
            ax.fill_between(x, [r["p20_us"] for r in pts], [r["p80_us"] for r in pts], color=style["color"], alpha=0.18, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{op}, {dtype}", fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("time per call (us), median, p20-p80 band")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes.flat:
        if not ax.has_data():
            ax.set_visible(False)
    fig.suptitle(f"{kernel or 'kernels'}: latency\n{env_title(rows)}", fontsize=10)
    return fig


def _largest(rows):
    """Per (kernel, op, dtype), the rows at its largest size."""
    out = []
    for _, grp in _groups(rows, "kernel", "op", "dtype").items():
        top = max(r["numel"] for r in grp)
        out += [r for r in grp if r["numel"] == top]
    return out


def pct_of_ceiling(rows: list[dict], numel: int | None = None) -> Figure:
    """Achieved bandwidth as % of the measured copy ceiling, a bar per provider, at `numel`
    elements (default: each op's largest size): how close each gets to the memory limit."""
    if (empty := _nothing_trusted(rows, "% of the copy ceiling")) is not None:
        return empty
    rows = [r for r in _timed(rows) if r["method"] != "cuda_graph" and r.get("pct_of_ceiling") is not None]
    rows = [r for r in rows if r["numel"] == numel] if numel is not None else _largest(rows)
    if not rows:
        raise ValueError("no rows with a bytes model to plot" + (f" at {numel} elements" if numel else ""))
    groups = _groups(rows, "kernel", "op", "dtype")
    providers = list(OrderedDict.fromkeys(r["provider"] for r in rows))
    fig = Figure(figsize=(max(6.0, 1.1 * len(groups) * max(1, len(providers)) * 0.6 + 2), 4.6), layout="constrained")
    ax = fig.subplots()
    width = 0.8 / len(providers)
    order: list[str] = []
    for j, provider in enumerate(providers):
        xs, ys = [], []
        for i, grp in enumerate(groups.values()):
            hit = next((r for r in grp if r["provider"] == provider), None)
            if hit is not None:
                xs.append(i + (j - (len(providers) - 1) / 2) * width)
                ys.append(hit["pct_of_ceiling"])
        bars = ax.bar(xs, ys, width=width, label=provider, color=_style(provider, order)["color"])
        ax.bar_label(bars, fmt="%.0f", fontsize=7, padding=1)
    ceiling = rows[0]["ceiling_gbps"]
    ax.axhline(100, color="black", lw=1, ls="--")
    ax.text(len(groups) - 0.5, 101, f"copy ceiling, {ceiling:.0f} GB/s", ha="right", va="bottom", fontsize=8)
    ax.set_xticks(range(len(groups)), [f"{op}\n{dtype}, {size_text(grp[0]['shape'])}" for (k, op, dtype), grp in groups.items()], fontsize=8)
    ax.set_ylabel("% of the device-to-device copy ceiling")
    # Above 100% happens where data stays in a cache (a CPU's output can sit in a write-back
    # last-level cache past the timed window): the bar shows it rather than clipping it.
    ax.set_ylim(0, max(115, 1.1 * max(r["pct_of_ceiling"] for r in rows)))
    ax.legend(fontsize=8, loc="upper left", ncol=len(providers))
    ax.grid(True, axis="y", alpha=0.3)
    fig.suptitle(f"Bandwidth against the memory limit\n{env_title(rows)}", fontsize=10)
    return fig


def ceiling_by_size(rows: list[dict], kernel: str | None = None) -> Figure:
    """% of the copy ceiling against size, one panel per (op, dtype), a line per provider:
    where each implementation starts to be limited by memory rather than by launches."""
    if (empty := _nothing_trusted(rows, "% of the copy ceiling by size")) is not None:
        return empty
    rows = [r for r in _timed(rows) if (kernel is None or r["kernel"] == kernel)
            and r["method"] != "cuda_graph" and r.get("pct_of_ceiling") is not None]
    panels = _groups(rows, "kernel", "op", "dtype")
    if not panels:
        raise ValueError(f"no rows with a bytes model{' for kernel ' + repr(kernel) if kernel else ''} to plot")
    fig = Figure(figsize=(4.6 * min(3, len(panels)), 3.6 * math.ceil(len(panels) / 3) + 0.6), layout="constrained")
    axes = fig.subplots(math.ceil(len(panels) / 3), min(3, len(panels)), squeeze=False).ravel()
    order: list[str] = []
    for ax, ((kern, op, dtype), prow) in zip(axes, panels.items()):
        for provider, pts in _groups(prow, "provider").items():
            pts = sorted(pts, key=lambda r: r["numel"])
            ax.plot([r["numel"] for r in pts], [r["pct_of_ceiling"] for r in pts], marker="o", ms=3.5,
                    label=provider[0], **_style(provider[0], order))
        ax.axhline(100, color="black", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, max(110, 1.05 * max(r["pct_of_ceiling"] for r in prow)))
        ax.set_title(f"{op} · {dtype}", fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("% of the copy ceiling")
        ax.grid(True, which="both", alpha=0.3)
        ax.legend(fontsize=8)
    for ax in axes[len(panels):]:
        ax.set_visible(False)
    fig.suptitle(f"Bandwidth against size (copy ceiling {rows[0]['ceiling_gbps']:.0f} GB/s)\n{env_title(rows)}", fontsize=10)
    return fig


def speedup(rows: list[dict]) -> Figure:
    """kwb's speedup over eager PyTorch and over torch.compile against size, a line per
    (op, dtype); above 1 is faster."""
    if (empty := _nothing_trusted(rows, "speedup")) is not None:
        return empty
    kwb = [r for r in _timed(rows) if r["provider"] == "kwb" and r["method"] != "cuda_graph"]
    if not kwb:
        raise ValueError("no kwb rows to plot speedups for")
    fig = Figure(figsize=(12, 4.2), layout="constrained")
    axes = fig.subplots(1, 2, sharey=True)
    for ax, column, name in ((axes[0], "speedup_vs_eager", "eager PyTorch"), (axes[1], "speedup_vs_compile", "torch.compile")):
        ops = list(OrderedDict.fromkeys(r["op"] for r in kwb))
        for (kern, op, dtype), pts in _groups(kwb, "kernel", "op", "dtype").items():
            pts = sorted((r for r in pts if r.get(column) is not None), key=lambda r: r["numel"])
            if pts:  # colour says the dtype, line style the op
                ax.plot([r["numel"] for r in pts], [r[column] for r in pts], marker="o", ms=3.5,
                        color=DTYPE_COLORS.get(dtype), ls=["-", "--", ":", "-."][ops.index(op) % 4], label=f"{op}, {dtype}")
        ax.axhline(1.0, color="black", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("elements")
        ax.set_title(f"over {name}", fontsize=10)
        ax.grid(True, which="both", alpha=0.3)
    handles, labels = axes[0].get_legend_handles_labels() if axes[0].has_data() else axes[1].get_legend_handles_labels()
    try:  # one legend, off the data ("outside" placement: matplotlib 3.7+)
        fig.legend(handles, labels, loc="outside right center", fontsize=7)
    except ValueError:
        fig.legend(handles, labels, loc="center right", fontsize=7)
    axes[0].set_ylabel("speedup (baseline time / kwb time)")
    fig.suptitle(f"kwb speedup\n{env_title(kwb)}", fontsize=10)
    return fig


def check_errors(source) -> Figure:
    """Distribution of the relative error |out - ref| / |ref| over the checked elements with
    |ref| >= atol, one panel per dtype, a line per (op, output), the rtol dotted."""
    if hasattr(source, "error_histograms"):
        from ..harness.results import environment

        rows = source.error_histograms()
        title = f"{source.target}: {environment(source.device).title()}"
    else:
        rows = list(source)
        title = env_title(rows)
    if not rows:
        raise ValueError("no error histogram rows to plot (no element was compared)")
    dtypes = list(OrderedDict.fromkeys(r["dtype"] for r in rows))
    fig = Figure(figsize=(4.4 * len(dtypes), 3.8), layout="constrained")
    axes = fig.subplots(1, len(dtypes), squeeze=False)[0]
    edges = histogram_edges()
    for ax, dtype in zip(axes, dtypes):
        mine = [r for r in rows if r["dtype"] == dtype]
        for (kern, op, what), pts in _groups(mine, "kernel", "op", "what").items():
            counts = [0.0] * (len(edges) - 1)
            for r in pts:
                counts[min(range(len(edges) - 1), key=lambda i: abs(edges[i] - r["log10_lo"]))] += r["count"]
            total = sum(counts) or 1.0
            ax.stairs([c / total for c in counts], edges, label=f"{op} {what}" if what != "output" else op, lw=1.5)
        rtols = [r["rtol"] for r in mine if r.get("rtol") not in (None, "")]
        if rtols:
            x = math.log10(max(rtols))
            ax.axvline(x, color="black", ls=":", lw=1)
            ax.text(x, 1.0, " rtol", fontsize=8, va="top", transform=ax.get_xaxis_transform())
        ax.set_title(dtype, fontsize=10)
        ax.set_xlabel("log10 relative error (leftmost bin: exact or below 1e-16)")
        ax.set_ylabel("share of elements")
        ax.set_ylim(0, 1.05)
        ax.grid(True, alpha=0.3)
        ax.legend(fontsize=7, loc="upper center")
    fig.suptitle(f"Check: relative error against the float64 reference\n{title}", fontsize=10)
    return fig


def save(fig: Figure, stem) -> list[Path]:
    """Write fig as <stem>.png (150 dpi) and <stem>.svg; returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    paths = []
    for ext, extra in ((".png", dict(dpi=150)), (".svg", {})):
        path = stem.with_suffix(ext)
        # SVG text stays text (searchable, a third of the size) rather than glyph outlines.
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            fig.savefig(path, **extra)
        paths.append(path)
    return paths


def plot_all(bench_rows: list[dict], error_rows: list[dict], out) -> list[Path]:
    """Every figure these rows support, saved under `out`: latency_<kernel> (for a kernel timed
    at two sizes or more), pct_of_ceiling, speedup, check_errors (PNG and SVG each)."""
    out = Path(out)
    written: list[Path] = []
    for kernel in OrderedDict.fromkeys(r["kernel"] for r in bench_rows):
        # latency against size needs two sizes: `kwb run` without --full times one (and its 9
        # one-point figures were 2/3 of the report's 10 s on the 2-core machine)
        if len({r["numel"] for r in _timed(bench_rows) if r["kernel"] == kernel}) >= 2:
            written += save(latency(bench_rows, kernel), out / f"latency_{kernel}")
    if any(r.get("pct_of_ceiling") is not None for r in bench_rows):
        written += save(pct_of_ceiling(bench_rows), out / "pct_of_ceiling")
    if any(r.get("speedup_vs_eager") is not None or r.get("speedup_vs_compile") is not None
           for r in bench_rows if r["provider"] == "kwb"):
        written += save(speedup(bench_rows), out / "speedup")
    if error_rows:
        written += save(check_errors(error_rows), out / "check_errors")
    return written


def plot_results(folder, out=None, latest: str = "run") -> list[Path]:
    """Every plot of a results folder (its bench.csv and check_errors.csv) into out (default
    folder/plots). latest="run": the newest run's rows; "each": the newest row of every
    measurement, across runs."""
    from ..harness import results

    folder = Path(folder)
    pick = results.latest_run if latest == "run" else results.latest_per_measurement
    bench_csv, errors_csv = folder / "bench.csv", folder / "check_errors.csv"
    bench_rows = pick(results.read(bench_csv)) if bench_csv.exists() else []
    error_rows = results.latest_run(results.read(errors_csv)) if errors_csv.exists() else []
    return plot_all(bench_rows, error_rows, out if out is not None else folder / "plots")
