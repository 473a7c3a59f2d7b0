"""Which of kwb's rows are behind a baseline in two runs: the rows whose 95% speedup interval
(bench.csv's speedup_vs_<baseline>_lo/_hi) lies wholly below 1 in both, each marked at the copy
ceiling where both runs reached CEILING_PCT of it (there a gap is within noise: the issue's rule).

    python benchmarks/two_runs.py RUN1/bench.csv RUN2/bench.csv [--against compile|eager]

A row behind in one run only is noise between runs; behind in both, it is the kernel's to close.
Prints a Markdown table, those at the ceiling last; exits 0 either way (it reports, it does not judge).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
from workbench.harness import results

CEILING_PCT = 97.0


def _number(text) -> float | None:
    try:
        return float(text)
    except (TypeError, ValueError):
        return None


def kwb_rows(path: Path) -> dict[tuple, dict]:
    """kwb's rows of one bench.csv, by (kernel, op, dtype, shape, method)."""
    return {(r["kernel"], r["op"], r["dtype"], r["shape"], r["method"]): r
            for r in results.read(path) if r.get("provider") == "kwb"}


def behind_in_both(first: dict, second: dict, against: str) -> list[dict]:
    """The rows behind `against` in both runs, with each run's speedup, interval and % of ceiling."""
    column = f"speedup_vs_{against}"
    found = []
    for key, a in first.items():
        b = second.get(key)
        if b is None:
            continue
        his = [_number(r.get(f"{column}_hi")) for r in (a, b)]
        if any(h is None or h >= 1 for h in his):
            continue
        pcts = [_number(r.get("pct_of_ceiling")) for r in (a, b)]
        found.append({"key": key, "runs": [(_number(r.get(column)), _number(r.get(f"{column}_lo")), h, p)
                                           for r, h, p in zip((a, b), his, pcts)],
                      "at_ceiling": all(p is not None and p >= CEILING_PCT for p in pcts)})
    return sorted(found, key=lambda f: (f["at_ceiling"], f["key"]))


def table(found: list[dict]) -> str:
    lines = ["| kernel | op | dtype | shape | timed | run 1 | run 2 | % of ceiling | at the ceiling |",
             "|---|---|---|---|---|---|---|---|---|"]
    for f in found:
        kernel, op, dtype, shape, method = f["key"]
        runs = [f"×{s:.3f} ({lo:.3f}-{hi:.3f})" for s, lo, hi, _ in f["runs"]]
        pct = " / ".join("-" if p is None else f"{p:.1f}" for *_, p in f["runs"])
        lines.append(f"| {kernel} | {op} | {dtype} | {shape} | {'graph' if method == 'cuda_graph' else 'events'} | "
                     f"{runs[0]} | {runs[1]} | {pct} | {'yes' if f['at_ceiling'] else 'no'} |")
    return "\n".join(lines)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("first", type=Path)
    parser.add_argument("second", type=Path)
    parser.add_argument("--against", choices=["compile", "eager"], default="compile")
    args = parser.parse_args(argv)
    for path in (args.first, args.second):
        if results.stored(path) is None:
            parser.error(f"{path}: no such bench.csv")
    first, second = kwb_rows(args.first), kwb_rows(args.second)
    found = behind_in_both(first, second, args.against)
    close = [f for f in found if not f["at_ceiling"]]
    print(f"{len(first.keys() & second.keys())} kwb rows in both runs; behind {args.against} in both: {len(found)} "
          f"({len(found) - len(close)} at {CEILING_PCT:g}% of the copy ceiling or more in both, {len(close)} not)\n")
    print(table(found))
    return 0


if __name__ == "__main__":
    sys.exit(main())
