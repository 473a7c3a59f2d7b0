"""Check and bench results as tables: rich for the terminal, Markdown for reports and
notebooks, plain text for str(). Reads rows; computes nothing but groupings."""
from __future__ import annotations

from collections import OrderedDict

from ..harness.intervals import verdict


def size_text(shape: str) -> str:
    """'67108864' -> '2^26'; other shapes as they are ('16384x4096', '1048579')."""
    if shape and "x" not in shape and shape.isdigit():
        n = int(shape)
        if n > 1 and n & (n - 1) == 0:
            return f"2^{n.bit_length() - 1}"
    return shape or "scalar"


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 kernel', '2 kernels', '0 kernels'."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def _fmt(v, spec: str = ".3g", missing: str = "") -> str:
    return missing if v is None or v == "" else format(v, spec)


NAME_COLUMNS = ("op",)


def _add_columns(table, headers, body, justify) -> None:
    """The columns of a rich table that never cuts a cell with '…': a name column is kept as
    wide as its longest name (the others wrap instead), any other cell folds where it must."""
    from rich.text import Text

    for i, h in enumerate(headers):
        if h in NAME_COLUMNS:
            longest = max((Text.from_markup(cells[i]).cell_len for cells in body), default=0)
            table.add_column(h, justify=justify(h), no_wrap=True, overflow="fold", min_width=max(longest, len(h)))
        else:
            table.add_column(h, justify=justify(h), overflow="fold")


# ---- check -----------------------------------------------------------------------------------


def check_groups(report) -> list[dict]:
    """One row per (kernel, op, what, dtype): how many shapes passed and the worst errors."""
    groups: OrderedDict[tuple, dict] = OrderedDict()
    for r in report.rows():
        key = (r["kernel"], r["op"], r["what"], r["dtype"])
        g = groups.setdefault(key, {"kernel": r["kernel"], "op": r["op"], "what": r["what"], "dtype": r["dtype"], "shapes": [], "failed": [],
                                    "max_abs": 0.0, "max_rel": 0.0, "rel_l2": 0.0, "atol": r["atol"], "rtol": r["rtol"], "rel_l2_tol": r["rel_l2_tol"],
                                    "worst": ""})
        g["shapes"].append(r["shape"])
        if not r["passed"]:
            g["failed"].append(r["shape"])
        if isinstance(r["rel_l2"], float) and (r["rel_l2"] > g["rel_l2"] or not g["worst"]):
            g["worst"] = r["shape"]  # the shape of the largest relative L2 error, named beside it
        for k in ("max_abs", "max_rel", "rel_l2"):
            if isinstance(r[k], float):
                g[k] = max(g[k], r[k])
    return list(groups.values())


def _rel_l2_text(g) -> str:
    return f"{g['rel_l2']:.2e}" + (f" at {size_text(g['worst'])}" if g["worst"] != "" else "")


def _tol_text(g) -> str:
    if g["atol"] == "":
        return ""
    l2 = f", l2 {g['rel_l2_tol']:.0e}" if g["rel_l2_tol"] != "" else ""
    return f"atol {g['atol']:.0e}, rtol {g['rtol']:.0e}{l2}"


def failure_lines(report) -> list[str]:
    lines = []
    for r in report.rows():
        if not r["passed"]:
            lines.append(f"{r['kernel']}.{r['op']} {r['what']}, {r['dtype']}, shape [{r['shape']}]: {r['detail']}")
    return lines


def check_header(report) -> str:
    total = len(report.cases)
    failed = len(report.failures)
    verdict = "all passed" if report.passed else f"{failed} of {counted(total, 'case')} FAILED"
    return (f"check {report.target} on {report.device}: {counted(total, 'case')}, {verdict} "
            f"(seed {report.seed}: pass seed={report.seed} / --seed {report.seed} to repeat these inputs)")


def check_table(report, verbose: bool = False):
    from rich.table import Table

    table = Table(title=check_header(report), title_justify="left")
    cols = ["op", "checked", "dtype", "shape" if verbose else "shapes", "max abs", "max rel", "rel L2", "tolerance", "result"]
    body = []
    if verbose:
        for r in report.rows():
            tol = _tol_text(r) if r["atol"] != "" else ""
            body.append([r["op"], r["what"], r["dtype"], size_text(r["shape"]), _fmt(r["max_abs"], ".2e"), _fmt(r["max_rel"], ".2e"),
                         _fmt(r["rel_l2"], ".2e"), tol, "[green]pass[/]" if r["passed"] else "[red]FAIL[/]"])
    else:
        for g in check_groups(report):
            n, bad = len(g["shapes"]), len(g["failed"])
            result = f"[green]{n}/{n} pass[/]" if not bad else f"[red]{bad}/{n} FAIL[/]"
            shapes = ", ".join(size_text(s) for s in g["shapes"][:4]) + (f", ... ({n})" if n > 4 else "")
            body.append([g["op"], g["what"], g["dtype"], shapes, f"{g['max_abs']:.2e}", f"{g['max_rel']:.2e}", _rel_l2_text(g),
                         _tol_text(g), result])
    _add_columns(table, cols, body, lambda c: "right" if c.startswith(("max", "rel")) else "left")
    for cells in body:
        table.add_row(*cells)
    return table


def print_check(console, report, verbose: bool = False) -> None:
    """A check report on a rich console: the table, each failure, each note."""
    from rich.markup import escape

    console.print(check_table(report, verbose))
    for line in failure_lines(report):
        console.print(f"[red]FAIL[/] {escape(line)}", soft_wrap=True)
    for note in report.notes:
        console.print(f"note: {escape(note)}", soft_wrap=True)


def check_text(report) -> str:
    lines = [check_header(report)]
    for g in check_groups(report):
        n, bad = len(g["shapes"]), len(g["failed"])
        lines.append(f"  {g['op']:<24} {g['what']:<10} {g['dtype']:<9} {n - bad}/{n} pass  max abs {g['max_abs']:.2e}  "
                     f"max rel {g['max_rel']:.2e}  rel L2 {_rel_l2_text(g)}  (tolerance {_tol_text(g)})")
    lines += [f"  FAIL {line}" for line in failure_lines(report)]
    lines += [f"  note: {n}" for n in report.notes]
    return "\n".join(lines)


def check_markdown(report) -> str:
    lines = [f"**{check_header(report)}**", "",
             "| op | checked | dtype | shapes | max abs | max rel | rel L2 | tolerance | result |", "|---|---|---|---|---|---|---|---|---|"]
    for g in check_groups(report):
        n, bad = len(g["shapes"]), len(g["failed"])
        result = f"{n}/{n} pass" if not bad else f"**{bad}/{n} FAIL**"
        lines.append(f"| {g['op']} | {g['what']} | {g['dtype']} | {', '.join(size_text(s) for s in g['shapes'])} | {g['max_abs']:.2e} | "
                     f"{g['max_rel']:.2e} | {_rel_l2_text(g)} | {_tol_text(g)} | {result} |")
    fails = failure_lines(report)
    if fails:
        lines += ["", "Failures:", ""] + [f"- {f}" for f in fails]
    return "\n".join(lines) + "\n"


# ---- bench -----------------------------------------------------------------------------------

BENCH_HEADERS = ["op", "dtype", "size", "provider", "method", "median us (p20-p80)", "GB/s", "% of copy", "TFLOP/s", "× eager", "× compile"]
NOISY = 0.5  # p20-p80 wider than half the median: the row says so


LAUNCH_HEADERS = ["regs", "occupancy %"]  # GPU rows of kwb: the launch of its longest kernel


def _headers(rows) -> list[str]:
    vendor = any(r.get("speedup_vs_vendor") is not None for r in rows)
    launch = any(r.get("registers") is not None for r in rows)
    return BENCH_HEADERS + (["× vendor"] if vendor else []) + (LAUNCH_HEADERS if launch else [])


def launch_cells(r: dict) -> list[str]:
    """Registers a thread (spilled bytes flagged) and the theoretical occupancy of the row's launch."""
    regs = "" if r.get("registers") is None else str(r["registers"])
    if r.get("spill_bytes"):
        regs += f" SPILLS {r['spill_bytes']} B"
    return [regs, _fmt(r.get("occupancy_pct"), ".0f")]


def bench_cells(r: dict, vendor: bool = False, launch: bool = False) -> list[str]:
    if r.get("median_us") is None:
        timing = r["status"]
    else:
        timing = f"{r['median_us']:.2f} ({r['p20_us']:.2f}-{r['p80_us']:.2f})"
        if r.get("trust") or (r["p80_us"] - r["p20_us"]) > NOISY * r["median_us"]:
            timing += " noisy"
    cells = [r["op"], r["dtype"], size_text(r["shape"]), r["provider"], "graph" if r["method"] == "cuda_graph" else "",
             timing, _fmt(r.get("gbps"), ".0f"), _fmt(r.get("pct_of_ceiling"), ".1f"), _fmt(r.get("tflops"), ".1f"),
             speedup_text(r, "speedup_vs_eager"), speedup_text(r, "speedup_vs_compile")]
    return cells + ([_fmt(r.get("speedup_vs_vendor"), ".2f")] if vendor else []) + (launch_cells(r) if launch else [])


def speedup_text(r: dict, column: str) -> str:
    """'1.23', with its 95% interval where the row has one: '0.98 (0.96-1.00)'."""
    text = _fmt(r.get(column), ".2f")
    lo, hi = r.get(f"{column}_lo"), r.get(f"{column}_hi")
    return f"{text} ({lo:.2f}-{hi:.2f})" if text and lo is not None and hi is not None else text


STANDING_BASELINES = (("torch.compile", "speedup_vs_compile"), ("eager", "speedup_vs_eager"))


def standings(rows: list[dict]) -> dict[str, dict[str, list[dict]]]:
    """kwb's rows by where they stand against each baseline, from their speedups' 95% intervals:
    {'torch.compile': {'ahead': [...], 'level': [...], 'behind': [...]}, 'eager': {...}}."""
    out = {}
    for baseline, column in STANDING_BASELINES:
        groups: dict[str, list[dict]] = {"ahead": [], "level": [], "behind": []}
        for r in rows:
            lo, hi = r.get(f"{column}_lo"), r.get(f"{column}_hi")
            if r["provider"] == "kwb" and lo is not None and hi is not None:
                groups[verdict((lo, hi))].append(r)
        out[baseline] = groups
    return out


def _row_name(r: dict) -> str:
    graph = ", graph" if r["method"] == "cuda_graph" else ""
    return f"{r['op']} {r['dtype']} {size_text(r['shape'])}{graph}"


def standings_line(rows: list[dict]) -> str:
    """'kwb against torch.compile: 120 ahead, 40 level, 5 behind; against eager: ...' (95%
    intervals); '' where no row has an interval."""
    groups = standings(rows)
    parts = [f"against {b}: {len(by['ahead'])} ahead, {len(by['level'])} level, {len(by['behind'])} behind"
             for b, by in groups.items() if any(by.values())]
    return f"kwb's rows {'; '.join(parts)} (95% intervals of the speedups)" if parts else ""


def standings_markdown(rows: list[dict]) -> str:
    """The counts of kwb's rows ahead of, level with and behind each baseline, then every row
    behind, by name and speedup; '' where no row has an interval."""
    groups = standings(rows)
    if not any(g for by in groups.values() for g in by.values()):
        return ""
    lines = [("The 95% interval of each speedup, a bootstrap over the rounds in which kwb and the baseline were timed "
             "in turns: *behind* where the whole interval is below 1, *ahead* where it is above, else *level*."), "",
             "| against | ahead | level | behind |", "|---|---|---|---|"]
    lines += [f"| {b} | {len(by['ahead'])} | {len(by['level'])} | {len(by['behind'])} |" for b, by in groups.items()]
    for (baseline, column), by in zip(STANDING_BASELINES, groups.values()):
        if by["behind"]:
            lines += ["", f"Behind {baseline}:", ""]
            lines += [f"- {_row_name(r)}: ×{speedup_text(r, column)}" for r in by["behind"]]
    return "\n".join(lines) + "\n"


def bench_header(env, ceiling_gbps) -> str:
    return f"{env.title()}; copy ceiling {ceiling_gbps:.0f} GB/s (measured in this run); kwb {env.kwb_version}"


def bench_table(rows: list[dict], title: str = ""):
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    headers = _headers(rows)
    body = []
    for r in rows:
        cells = bench_cells(r, "× vendor" in headers, LAUNCH_HEADERS[0] in headers)
        if r["provider"] == "kwb":
            cells = [f"[bold]{c}[/]" for c in cells]
        body.append(cells)
    _add_columns(table, headers, body, lambda h: "left" if h in ("op", "dtype", "size", "provider", "method") else "right")
    for cells in body:
        table.add_row(*cells)
    return table


def bench_text(report) -> str:
    headers = _headers(report.rows)
    lines = [bench_header(report.env, report.ceiling / 1e9), " | ".join(headers)]
    lines += [" | ".join(bench_cells(r, "× vendor" in headers, LAUNCH_HEADERS[0] in headers)) for r in report.rows]
    lines += [f"note: {n}" for n in report.notes]
    return "\n".join(lines)


def bench_markdown(rows: list[dict], env=None) -> str:
    lines = []
    if env is not None and rows:
        lines += [f"*{bench_header(env, rows[0]['ceiling_gbps'])}*", ""]
    headers = _headers(rows)
    lines += ["| " + " | ".join(headers) + " |", "|" + "---|" * len(headers)]
    for r in rows:
        cells = bench_cells(r, "× vendor" in headers, LAUNCH_HEADERS[0] in headers)
        if r["provider"] == "kwb":
            cells = [f"**{c}**" if c else c for c in cells]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines) + "\n"


def bench_report_markdown(report) -> str:
    """A BenchReport in a notebook: the environment line, every row, then its notes."""
    return "\n".join([bench_markdown(report.rows, report.env), *(f"\n*note: {n}*" for n in report.notes)])


def headline(rows: list[dict]) -> tuple[list[str], list[list[str]]]:
    """The kernel beside its baselines at each op's largest size, a row per (op, dtype):
    (header, rows of cells)."""
    by_key: OrderedDict[tuple, dict] = OrderedDict()
    for r in rows:
        if r["method"] == "cuda_graph" or r.get("median_us") is None:
            continue
        by_key.setdefault((r["kernel"], r["op"], r["dtype"]), {}).setdefault(r["numel"], {})[r["provider"]] = r
    providers = list(OrderedDict.fromkeys(p for sizes in by_key.values() for per in sizes.values() for p in per))
    head = ["op", "dtype", "size"] + providers + ["kwb % of copy", "× eager", "× compile"]
    body = []
    for (kernel, op, dtype), sizes in by_key.items():
        largest = sizes[max(sizes)]
        k = largest.get("kwb", {})
        cells = [op, dtype, size_text(next(iter(largest.values()))["shape"])]
        cells += [f"{largest[p]['median_us']:.1f} us" + (" noisy" if largest[p].get("trust") else "") if p in largest else ""
                  for p in providers]
        cells += [_fmt(k.get("pct_of_ceiling"), ".1f"), speedup_text(k, "speedup_vs_eager"), speedup_text(k, "speedup_vs_compile")]
        body.append(cells)
    return head, body


def headline_markdown(rows: list[dict]) -> str:
    head, body = headline(rows)
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    lines += ["| " + " | ".join(cells) + " |" for cells in body]
    return "\n".join(lines) + "\n"


def headline_table(rows: list[dict], title: str = ""):
    from rich.table import Table

    head, body = headline(rows)
    table = Table(title=title, title_justify="left")
    _add_columns(table, head, body, lambda h: "left" if h in ("op", "dtype", "size") else "right")
    for cells in body:
        table.add_row(*cells)
    return table
