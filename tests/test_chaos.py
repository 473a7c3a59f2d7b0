"""benchmarks/chaos.py, the reliability run a user can start, runs here: a short kill -9 part
and a short edits part, every attempt judged, the table printed, exit 0 when none failed."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

CHAOS = Path(__file__).resolve().parents[1] / "benchmarks" / "chaos.py"


@pytest.mark.slow
def test_a_short_chaos_run_recovers_every_attempt(tmp_path):
    done = subprocess.run([sys.executable, str(CHAOS), "--only", "kill9", "--only", "edits", "--seconds", "2",
                           "--min-rounds", "2", "--loaders", "3", "--edit-window", "3", "--hang-seconds", "300",
                           "--seed", "7", "--out", str(tmp_path)], capture_output=True, text=True, timeout=1200, check=False)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    table = (tmp_path / "chaos.md").read_text()
    assert "| kill9 | 2 | 2 | 0 | 0 | 0 | 0 |" in table, table
    assert "| edits |" in table and "No attempt was wrong, crashed or hung." in table, table


def test_bad_arguments_are_named():
    done = subprocess.run([sys.executable, str(CHAOS), "--seconds", "0"], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 2 and "--seconds must be a positive number of seconds" in done.stderr
