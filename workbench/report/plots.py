"""Plots of results, drawn from the CSV files (workbench.results), never from live runs, so a
figure can be redrawn from what the repository holds:

    rows = wb.results.read("benchmarks/results/nvidia-h100-80gb-hbm3/bench.csv")
    fig = plots.latency(rows, kernel="relu_scale")     # latency vs size, p20-p80 bands
    fig = plots.pct_of_ceiling(rows)                   # % of the copy ceiling at one size, a panel per kernel
    fig = plots.speedup(rows)                          # kwb over eager and torch.compile, a panel per kernel
    fig = plots.check_errors(report_or_rows)           # relative-error range per output and dtype, a panel per kernel
    plots.save(fig, "out/latency")                     # out/latency.png and out/latency.svg

Figures are matplotlib Figure objects (no pyplot state): they display in a notebook, save
anywhere, and need no display. Each title names the device and the versions. Every figure
reads without a legend hunt: rows are named on the axis, one short legend sits below the
panels, and series that share a panel differ in colour and marker.
"""
from __future__ import annotations

import math
from collections import OrderedDict
from pathlib import Path

from matplotlib.figure import Figure

from ..harness.compare import histogram_edges
from .render import size_text

PROVIDER_STYLE = {"kwb": {"color": "#d62728", "marker": "D"}, "eager": {"color": "#1f77b4", "marker": "o"},
                  "torch.compile": {"color": "#2ca02c", "marker": "s"}}
OTHER_STYLES = [{"color": c, "marker": m} for c, m in zip(["#9467bd", "#8c564b", "#e377c2", "#7f7f7f", "#bcbd22", "#17becf"],
                                                        ["^", "v", "P", "X", "h", "*"])]
DTYPE_COLORS = {"float32": "#1f77b4", "float64": "#9467bd", "float16": "#ff7f0e", "bfloat16": "#2ca02c"}
# A legend longer than this hides what it explains; every figure's legends stay within it.
MAX_LEGEND = 8
# A labelled row (7.5 pt tick text is ~0.1 in) with room between rows, and a panel's title,
# x ticks and x label (~0.9 in at 10/8/8 pt).
ROW_IN, PANEL_IN = 0.2, 0.9


def _style(provider: str, order: list[str]) -> dict:
    if provider in PROVIDER_STYLE:
        return dict(PROVIDER_STYLE[provider])
    if provider not in order:
        order.append(provider)
    return dict(OTHER_STYLES[order.index(provider) % len(OTHER_STYLES)])


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
    return _message(f"{what}: no timing to plot. All {len(noisy)} were taken while other processes used the cores\n"
                    f"(bench.csv's trust column: {noisy[0]['trust']}); run again on a quiet machine.")


def _message(text: str) -> Figure:
    """A figure that holds only text: why a plot has nothing to draw."""
    fig = Figure(figsize=(6.4, 1.6), layout="constrained")
    ax = fig.subplots()
    ax.axis("off")
    ax.text(0.5, 0.5, text, ha="center", va="center", fontsize=9, wrap=True)
    return fig


def _groups(rows, *keys) -> OrderedDict[tuple, list[dict]]:
    out: OrderedDict[tuple, list[dict]] = OrderedDict()
    for r in rows:
        out.setdefault(tuple(r[k] for k in keys), []).append(r)
    return out


def _figure_legend(fig: Figure, handles: list, labels: list[str]) -> None:
    """One legend for the whole figure, below the panels, outside every one of them (a legend
    inside a panel covered its lines; one as long as the series list collapsed the layout; one
    above the panels ran into the suptitle)."""
    if not handles:
        return
    if len(handles) > MAX_LEGEND:
        raise ValueError(f"{len(handles)} legend entries: label those series on the axes instead")
    # as many columns as fit the figure's width: an 8 pt entry takes ~0.07 in a character
    # beside its 0.6 in of marker and padding
    entry = 0.07 * max(len(label) for label in labels) + 0.6
    ncol = max(1, min(len(handles), int(fig.get_figwidth() // entry)))
    ncol = math.ceil(len(handles) / math.ceil(len(handles) / ncol))  # rows filled evenly
    # the legend's rows (~0.2 in at 8 pt) add to the figure rather than take from the panels
    fig.set_figheight(fig.get_figheight() + 0.2 * math.ceil(len(handles) / ncol) + 0.1)
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, fontsize=8, frameon=False)


def _suptitle(fig: Figure, text: str) -> None:
    """The figure's title, each line wrapped to the figure's width (a one-panel figure is
    narrower than the device and versions line): 10 pt text averages ~0.085 in a character."""
    import textwrap

    width = max(20, int(fig.get_figwidth() / 0.085))
    lines = [w for line in text.split("\n") for w in textwrap.wrap(line, width) or [""]]
    fig.set_figheight(fig.get_figheight() + 0.17 * max(0, len(lines) - 2))  # lines past the two the sizes allow for
    fig.suptitle("\n".join(lines), fontsize=10)


def _unique_handles(axes) -> tuple[list, list[str]]:
    seen: OrderedDict[str, object] = OrderedDict()
    for ax in axes:
        for h, label in zip(*ax.get_legend_handles_labels()):
            seen.setdefault(label, h)
    return list(seen.values()), list(seen)


def _kernel_grid(rows_per_kernel: OrderedDict[str, list[str]], panel_in: float):
    """One panel per kernel, two to a line, each with its rows labelled on the y axis (row i at
    y=i, top down). Panels side by side share a row pitch, so a row reads across both."""
    kernels = list(rows_per_kernel)
    ncols = 1 if len(kernels) == 1 else 2
    lines = [kernels[i:i + ncols] for i in range(0, len(kernels), ncols)]
    heights = [max(len(rows_per_kernel[k]) for k in line) for line in lines]
    fig = Figure(figsize=(panel_in * ncols, sum(h * ROW_IN + PANEL_IN for h in heights) + 0.9), layout="constrained")
    grid = fig.add_gridspec(len(lines), ncols, height_ratios=heights)
    axes = OrderedDict()
    for i, kern in enumerate(kernels):
        ax = fig.add_subplot(grid[i // ncols, i % ncols])
        labels = rows_per_kernel[kern]
        ax.set_yticks(range(len(labels)), labels, fontsize=7.5)
        ax.set_ylim(heights[i // ncols] - 0.5, -0.5)
        ax.tick_params(axis="y", length=0)
        ax.tick_params(axis="x", labelsize=8)
        ax.set_title(kern, fontsize=10, loc="left", fontweight="bold")
        ax.grid(True, axis="x", which="major", alpha=0.3)
        for y in range(len(labels)):  # a faint band on every other row guides the eye along it
            if y % 2:
                ax.axhspan(y - 0.5, y + 0.5, color="0.94", lw=0, zorder=0)
        axes[kern] = ax
    return fig, axes


def _dodge(j: int, n: int) -> float:
    """Vertical offset of the j-th of n markers on one row: equal values stay visible side by side."""
    return (j - (n - 1) / 2) * min(0.22, 0.6 / max(n, 1))


def latency(rows: list[dict], kernel: str | None = None) -> Figure:
    """Median time per call against size, one panel per (op, dtype), a line per provider with
    its p20-p80 band; CUDA-graph timings dashed."""
    rows = [r for r in rows if kernel is None or r["kernel"] == kernel]
    if (empty := _nothing_trusted(rows, "latency")) is not None:
        return empty
    rows = _timed(rows)
    panels = _groups(rows, "kernel", "op", "dtype")
    if not panels:
        raise ValueError(f"no timed rows{' for kernel ' + repr(kernel) if kernel else ''} to plot")
    dtypes = list(OrderedDict.fromkeys(k[2] for k in panels))
    ops = list(OrderedDict.fromkeys(k[:2] for k in panels))
    fig = Figure(figsize=(4.6 * len(dtypes), 3.4 * len(ops) + 1.0), layout="constrained")
    axes = fig.subplots(len(ops), len(dtypes), squeeze=False)
    order: list[str] = []
    for (kern, op, dtype), prow in panels.items():
        ax = axes[ops.index((kern, op))][dtypes.index(dtype)]
        for (provider, method), pts in _groups(prow, "provider", "method").items():
            pts = sorted(pts, key=lambda r: r["numel"])
            x = [r["numel"] for r in pts]
            style = _style(provider, order)
            graph = method == "cuda_graph"
            ax.plot(x, [r["median_us"] for r in pts], ms=4, ls="--" if graph else "-", lw=2.2 if provider == "kwb" else 1.4,
                    label=f"{provider} (CUDA graph)" if graph else provider, mfc="white" if graph else style["color"], **style)
            ax.fill_between(x, [r["p20_us"] for r in pts], [r["p80_us"] for r in pts], color=style["color"], alpha=0.18, lw=0)
        ax.set_xscale("log", base=2)
        ax.set_yscale("log")
        ax.set_title(f"{op}, {dtype}", fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("time per call (us)")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes.flat:
        if not ax.has_data():
            ax.set_visible(False)
    handles, labels = _unique_handles(axes.flat)
    # a provider's CUDA-graph entry under its own (the legend fills column by column)
    providers = list(OrderedDict.fromkeys(label.removesuffix(" (CUDA graph)") for label in labels))
    pairs = sorted(zip(handles, labels), key=lambda hl: (providers.index(hl[1].removesuffix(" (CUDA graph)")), hl[1]))
    _figure_legend(fig, [h for h, _ in pairs], [label for _, label in pairs])
    _suptitle(fig, f"{kernel or 'kernels'}: latency, median per call and its p20-p80 band (lower is faster)\n{env_title(rows)}")
    return fig


def _largest(rows):
    """Per (kernel, op, dtype), the rows at its largest size."""
    out = []
    for grp in _groups(rows, "kernel", "op", "dtype").values():
        top = max(r["numel"] for r in grp)
        out += [r for r in grp if r["numel"] == top]
    return out


def _by_row(rows, *keys) -> OrderedDict[tuple, list[dict]]:
    """Groups by `keys`, each level in the order it first appears under its parent (a "shape"
    level by size): one op's outputs, dtypes and sizes sit on adjacent rows."""
    first: dict[tuple, int] = {}
    for i, r in enumerate(rows):
        for n in range(1, len(keys) + 1):
            first.setdefault(tuple(r[k] for k in keys[:n]), i)

    def order(r):
        return tuple(r.get("numel") or 0 if keys[n - 1] == "shape" else first[tuple(r[k] for k in keys[:n])]
                     for n in range(1, len(keys) + 1))

    return _groups(sorted(rows, key=order), *keys)


def _row_label(op: str, dtype: str, shape: str) -> str:
    return f"{op} · {dtype} · {size_text(shape)}"


def pct_of_ceiling(rows: list[dict], numel: int | None = None) -> Figure:
    """Achieved bandwidth as % of the measured copy ceiling, one panel per kernel, a row per
    (op, dtype, size) and a marker per provider, at `numel` elements (default: each op's
    largest size): how close each gets to the memory limit."""
    # the rows with a bytes model: a busy machine can leave only rows without one (a matmul's)
    # trusted, and the figure then says why it is empty rather than failing the report
    rows = [r for r in rows if r["method"] != "cuda_graph" and r.get("pct_of_ceiling") is not None]
    if (empty := _nothing_trusted(rows, "% of the copy ceiling")) is not None:
        return empty
    rows = _timed(rows)
    rows = [r for r in rows if r["numel"] == numel] if numel is not None else _largest(rows)
    if not rows:
        raise ValueError("no rows with a bytes model to plot" + (f" at {numel} elements" if numel else ""))
    by_kernel = _groups(rows, "kernel")
    fig, axes = _kernel_grid(OrderedDict((k, [_row_label(*key[1:]) for key in _by_row(krows, "kernel", "op", "dtype", "shape")])
                                         for (k,), krows in by_kernel.items()), panel_in=6.6)
    providers = list(OrderedDict.fromkeys(r["provider"] for r in rows))
    order: list[str] = []
    # Above 100% happens where data stays in a cache (a CPU's output can sit in a write-back
    # last-level cache past the timed window): the axis shows it rather than clipping it.
    top = max(110, 1.05 * max(r["pct_of_ceiling"] for r in rows))
    for (kern,), krows in by_kernel.items():
        ax = axes[kern]
        for y, grp in enumerate(_by_row(krows, "kernel", "op", "dtype", "shape").values()):
            for j, provider in enumerate(providers):
                hit = next((r for r in grp if r["provider"] == provider), None)
                if hit is not None:
                    ax.plot([hit["pct_of_ceiling"]], [y + _dodge(j, len(providers))], ls="none", ms=5, label=provider,
                            **_style(provider, order))
        ax.axvline(100, color="black", lw=1, ls="--")
        ax.set_xlim(0, top)
        ax.set_xlabel("% of the device-to-device copy ceiling", fontsize=8)
    _figure_legend(fig, *_unique_handles(axes.values()))
    _suptitle(fig, f"Bandwidth against the memory limit (copy ceiling {rows[0]['ceiling_gbps']:.0f} GB/s, dashed), "
                 f"each op's largest size\n{env_title(rows)}")
    return fig


def ceiling_by_size(rows: list[dict], kernel: str | None = None) -> Figure:
    """% of the copy ceiling against size, one panel per (op, dtype), a line per provider:
    where each implementation starts to be limited by memory rather than by launches."""
    rows = [r for r in rows if (kernel is None or r["kernel"] == kernel)
            and r["method"] != "cuda_graph" and r.get("pct_of_ceiling") is not None]
    if (empty := _nothing_trusted(rows, "% of the copy ceiling by size")) is not None:
        return empty
    rows = _timed(rows)
    panels = _groups(rows, "kernel", "op", "dtype")
    if not panels:
        raise ValueError(f"no rows with a bytes model{' for kernel ' + repr(kernel) if kernel else ''} to plot")
    fig = Figure(figsize=(4.6 * min(3, len(panels)), 3.4 * math.ceil(len(panels) / 3) + 1.0), layout="constrained")
    axes = fig.subplots(math.ceil(len(panels) / 3), min(3, len(panels)), squeeze=False).ravel()
    order: list[str] = []
    for ax, ((kern, op, dtype), prow) in zip(axes, panels.items()):
        for (provider,), pts in _groups(prow, "provider").items():
            pts = sorted(pts, key=lambda r: r["numel"])
            ax.plot([r["numel"] for r in pts], [r["pct_of_ceiling"] for r in pts], ms=4,
                    lw=2.2 if provider == "kwb" else 1.4, label=provider, **_style(provider, order))
        ax.axhline(100, color="black", lw=1, ls="--")
        ax.set_xscale("log", base=2)
        ax.set_ylim(0, max(110, 1.05 * max(r["pct_of_ceiling"] for r in prow)))
        ax.set_title(f"{op} · {dtype}", fontsize=10)
        ax.set_xlabel("elements")
        ax.set_ylabel("% of the copy ceiling")
        ax.grid(True, which="both", alpha=0.3)
    for ax in axes[len(panels):]:
        fig.delaxes(ax)
    _figure_legend(fig, *_unique_handles(axes[:len(panels)]))
    _suptitle(fig, f"Bandwidth against size (copy ceiling {rows[0]['ceiling_gbps']:.0f} GB/s, dashed)\n{env_title(rows)}")
    return fig


SPEEDUP_BASELINES = (("speedup_vs_eager", "over eager PyTorch", {"color": "#1f77b4", "marker": "o"}),
                     ("speedup_vs_compile", "over torch.compile", {"color": "#2ca02c", "marker": "s"}),
                     ("speedup_vs_vendor", "over the vendor route", {"color": "#9467bd", "marker": "^"}))


def speedup(rows: list[dict]) -> Figure:
    """kwb's speedup over eager PyTorch, torch.compile (and a vendor library where timed), one
    panel per kernel, a row per (op, dtype, size); right of the 1x line is faster."""
    from matplotlib.ticker import FuncFormatter, LogLocator, NullFormatter

    kwb = [r for r in rows if r["provider"] == "kwb" and r["method"] != "cuda_graph"]
    if (empty := _nothing_trusted(kwb, "speedup")) is not None:  # kwb's rows: a trusted eager row draws nothing
        return empty
    kwb = _timed(kwb)
    baselines = [b for b in SPEEDUP_BASELINES if any(r.get(b[0]) is not None for r in kwb)]
    if not kwb:
        raise ValueError("no kwb rows to plot speedups for")
    if not baselines:  # kwb's timings trusted, every baseline's not (or none timed): nothing to divide by
        noisy = [r for r in rows if r["provider"] != "kwb" and r["method"] != "cuda_graph"
                 and r.get("median_us") is not None and r.get("trust")]
        why = (f"all {len(noisy)} baseline timings were taken while other processes used the cores "
               f"(bench.csv's trust column: {noisy[0]['trust']}); run again on a quiet machine." if noisy
               else "no baseline (eager, torch.compile) was timed.")
        return _message(f"speedup: no speedup to plot: {why}")
    vendors = sorted({r["provider"] for r in _timed(rows)} - {"kwb", "eager", "torch.compile"})
    if vendors:  # name the library the vendor column was timed against
        baselines = [(c, f"over {', '.join(vendors)}" if c == "speedup_vs_vendor" else name, style) for c, name, style in baselines]
    by_kernel = _groups(kwb, "kernel")

    fig, axes = _kernel_grid(OrderedDict((k, [_row_label(*key[1:]) for key in _by_row(krows, "kernel", "op", "dtype", "shape")]) for (k,), krows in by_kernel.items()),
                             panel_in=6.6)
    values = [r[c] for r in kwb for c, _, _ in baselines if r.get(c)]
    lo, hi = min(values + [1.0]), max(values + [1.0])
    for (kern,), krows in by_kernel.items():
        ax = axes[kern]
        for y, grp in enumerate(_by_row(krows, "kernel", "op", "dtype", "shape").values()):
            for j, (column, name, style) in enumerate(baselines):
                if grp[0].get(column):
                    ax.plot([grp[0][column]], [y + _dodge(j, len(baselines))], ls="none", ms=5, label=name, **style)
        ax.axvline(1.0, color="black", lw=1)
        ax.set_xscale("log", base=2)
        ax.set_xlim(lo / 1.25, hi * 1.25)
        ax.xaxis.set_major_locator(LogLocator(base=2, subs=(1.0, 1.5) if hi / lo < 8 else (1.0,)))
        ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}x"))
        ax.xaxis.set_minor_formatter(NullFormatter())
        ax.set_xlabel("speedup of kwb (baseline time / kwb time; >1x: kwb faster)", fontsize=8)
    _figure_legend(fig, *_unique_handles(axes.values()))
    _suptitle(fig, f"kwb speedup\n{env_title(kwb)}")
    return fig


def _error_summary(counts: list[float], edges: list[float]) -> dict | None:
    """Where a histogram's elements lie: the whole range, the middle 90% and the median bin."""
    total = sum(counts)
    if not total:
        return None
    nonzero = [i for i, c in enumerate(counts) if c]
    cum, at = 0.0, {}
    for i, c in enumerate(counts):
        cum += c
        for q in (0.05, 0.5, 0.95):
            if q not in at and cum >= q * total:
                at[q] = i
    return {"lo": edges[nonzero[0]], "hi": edges[nonzero[-1] + 1], "p5": edges[at[0.05]], "p95": edges[at[0.95] + 1],
            "median": (edges[at[0.5]] + edges[at[0.5] + 1]) / 2}


def check_errors(source) -> Figure:
    """Where the relative errors |out - ref| / |ref| of the checked elements with |ref| >= atol
    lie, one panel per kernel, a row per (op, output, dtype): the whole range (thin), the middle
    90% of elements (thick), the median (dot) and the dtype's rtol (black bar)."""
    if hasattr(source, "error_histograms"):
        from ..harness.results import environment

        rows = source.error_histograms()
        title = f"{source.target}: {environment(source.device).title()}"
    else:
        rows = list(source)
        title = env_title(rows)
    if not rows:
        raise ValueError("no error histogram rows to plot (no element was compared)")
    edges = histogram_edges()
    summaries: OrderedDict[str, list] = OrderedDict()
    for (kern, op, what, dtype), pts in _by_row(rows, "kernel", "op", "what", "dtype").items():
        counts = [0.0] * (len(edges) - 1)
        for r in pts:
            counts[min(range(len(edges) - 1), key=lambda i: abs(edges[i] - r["log10_lo"]))] += r["count"]
        rtols = [r["rtol"] for r in pts if r.get("rtol") not in (None, "")]
        if (s := _error_summary(counts, edges)) is not None:
            label = f"{op} {what}" if what != "output" else op
            summaries.setdefault(kern, []).append((f"{label} · {dtype}", dtype, s, max(rtols) if rtols else None))
    fig, axes = _kernel_grid(OrderedDict((k, [row[0] for row in v]) for k, v in summaries.items()), panel_in=6.2)
    for kern, entries in summaries.items():
        ax = axes[kern]
        for y, (_, dtype, s, rtol) in enumerate(entries):
            color = DTYPE_COLORS.get(dtype, "#7f7f7f")
            ax.hlines(y, s["lo"], s["hi"], color=color, lw=1, alpha=0.6)
            ax.hlines(y, s["p5"], s["p95"], color=color, lw=4.5, label=dtype)
            ax.plot([s["median"]], [y], "o", ms=4, mfc="white", mec=color)
            if rtol:
                ax.plot([math.log10(rtol)], [y], "|", color="black", ms=9, mew=1.6, label="rtol")
        ax.set_xlim(edges[0] - 0.3, edges[-1] + 0.3)
        ax.set_xticks(range(int(edges[0]), int(edges[-1]) + 1, 2),
                      [f"1e{v}" if v else "1" for v in range(int(edges[0]), int(edges[-1]) + 1, 2)], fontsize=7.5)
        ax.set_xlabel("relative error (leftmost: exact or below 1e-16)", fontsize=8)
    handles, labels = _unique_handles(axes.values())
    # dtypes first, then what the marks mean
    order = sorted(range(len(labels)), key=lambda i: labels[i] == "rtol")
    _figure_legend(fig, [handles[i] for i in order], [labels[i] for i in order])
    _suptitle(fig, "Check: relative error against the float64 reference; thick: middle 90% of elements, thin: all, "
                 f"dot: median\n{title}")
    return fig


def _save_png(fig: Figure, path: Path, dpi: int) -> None:
    """fig as a PNG in 256 colours: a plot's flat fills and anti-aliased text lose nothing a
    reader sees, and the file shrinks to ~40% (a full report's speedup.png: 868 KB -> 333 KB,
    1.4 s more on the 2-core machine), which keeps the results the repository holds small
    enough to travel."""
    import io

    from PIL import Image  # matplotlib's own dependency

    drawn = io.BytesIO()
    fig.savefig(drawn, format="png", dpi=dpi)
    with Image.open(drawn) as image:
        rgba = image.convert("RGBA")
    flat = Image.new("RGB", rgba.size, "white")
    flat.paste(rgba, mask=rgba.getchannel("A"))
    flat.quantize(colors=256, method=Image.Quantize.MEDIANCUT, dither=Image.Dither.NONE).save(path, optimize=True)


def save(fig: Figure, stem) -> list[Path]:
    """Write fig as <stem>.png (150 dpi, 256 colours) and <stem>.svg; returns both paths."""
    stem = Path(stem)
    stem.parent.mkdir(parents=True, exist_ok=True)
    import matplotlib

    paths = []
    for ext, extra in ((".png", {"dpi": 150}), (".svg", {})):
        path = stem.with_suffix(ext)
        # SVG text stays text (searchable, a third of the size) rather than glyph outlines.
        with matplotlib.rc_context({"svg.fonttype": "none"}):
            if ext == ".png":
                _save_png(fig, path, **extra)
            else:
                fig.savefig(path, **extra)
        paths.append(path)
        # the layout the PNG was drawn with holds for the SVG: solving it again was a third of a
        # save (4.3 of 15 s for a report's three figures on the 2-core machine)
        fig.set_layout_engine("none")
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
    bench_rows = pick(results.read(bench_csv)) if results.stored(bench_csv) else []
    error_rows = results.latest_run(results.read(errors_csv)) if results.stored(errors_csv) else []
    return plot_all(bench_rows, error_rows, out if out is not None else folder / "plots")
