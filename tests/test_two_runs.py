"""benchmarks/two_runs.py applies the issue's rule to two full runs: a row counts as behind only
where its interval is wholly below 1 in both, and a gap at the copy ceiling in both is marked."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from workbench.harness import results

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "two_runs.py"


def _row(op, shape, speedup, lo, hi, pct, method="cuda_events", provider="kwb"):
    return {"kernel": "k", "op": op, "provider": provider, "dtype": "float32", "shape": shape, "method": method,
            "median_us": 1.0, "speedup_vs_compile": speedup, "speedup_vs_compile_lo": lo, "speedup_vs_compile_hi": hi,
            "pct_of_ceiling": pct}


def _run(tmp_path, name, rows):
    path = tmp_path / name / "bench.csv"
    path.parent.mkdir()
    results.append(path, rows)
    return path


def test_only_rows_behind_in_both_runs_are_named_and_the_ceiling_is_marked(tmp_path):
    first = _run(tmp_path, "full", [
        _row("behind", "1024", 0.97, 0.96, 0.98, 80.0),
        _row("behind_once", "1024", 0.97, 0.96, 0.98, 80.0),
        _row("at_ceiling", "4096", 0.99, 0.985, 0.995, 99.0),
        _row("level", "1024", 0.99, 0.97, 1.01, 80.0),
        _row("behind", "1024", 0.5, 0.4, 0.6, 80.0, provider="eager"),  # baselines' rows are not kwb's
    ])
    second = _run(tmp_path, "full2", [
        _row("behind", "1024", 0.96, 0.95, 0.97, 81.0),
        _row("behind_once", "1024", 0.99, 0.98, 1.002, 80.0),
        _row("at_ceiling", "4096", 0.99, 0.985, 0.995, 98.0),
        _row("level", "1024", 0.97, 0.96, 0.98, 80.0),
    ])
    out = subprocess.run([sys.executable, str(SCRIPT), str(first), str(second)], capture_output=True, text=True, check=True).stdout
    assert "4 kwb rows in both runs; behind compile in both: 2 (1 at 97% of the copy ceiling or more in both, 1 not)" in out
    lines = [line for line in out.splitlines() if line.startswith("| k |")]
    assert [line.split(" | ")[1] for line in lines] == ["behind", "at_ceiling"]  # the kernel's to close first
    assert "×0.970 (0.960-0.980) | ×0.960 (0.950-0.970) | 80.0 / 81.0 | no" in lines[0]
    assert lines[1].endswith("| yes |")


def test_a_missing_file_is_named(tmp_path):
    done = subprocess.run([sys.executable, str(SCRIPT), str(tmp_path / "a.csv"), str(tmp_path / "b.csv")],
                          capture_output=True, text=True, check=False)
    assert done.returncode == 2 and "a.csv: no such bench.csv" in done.stderr
