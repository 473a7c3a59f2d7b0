"""benchmarks/gpu_summary.py turns gpu_run.sh's key=value facts into gpu_run.json: numbers as
numbers, and the commit and date as text even where they read as numbers."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "benchmarks" / "gpu_summary.py"


def _summary(tmp_path, facts: str) -> dict:
    out = tmp_path / "out"
    out.mkdir()
    (out / "gpu_run.facts").write_text(facts)
    (out / "env.txt").write_text("torch 2.11.0+cu130 CUDA 13.0 NVIDIA H100 80GB HBM3\n")
    json_path = tmp_path / "run" / "gpu_run.json"
    json_path.parent.mkdir()
    subprocess.run([sys.executable, str(SCRIPT), str(out / "gpu_run.facts"), str(out), str(json_path)],
                   check=True, capture_output=True, text=True)
    return json.loads(json_path.read_text())


def test_a_hash_of_digits_stays_the_hash_and_numbers_stay_numbers(tmp_path):
    s = _summary(tmp_path, "date=2026-12-06T21:36:30Z\ncommit=0228551\nkwb_run_cold_rc=0\n"
                           "kwb_run_cold_s=93.8\npytest_failures=\n")
    assert s["commit"] == "0228551"
    assert s["date"] == "2026-12-06T21:36:30Z"
    assert s["kwb_run_cold_rc"] == 0 and isinstance(s["kwb_run_cold_rc"], int)
    assert s["kwb_run_cold_s"] == 93.8
    assert s["pytest_failures"] == ""
    assert s["device"] == "NVIDIA H100 80GB HBM3"
    assert "build" in s["stages_not_run"] and "run" not in s["stages_not_run"]


def test_a_hash_that_reads_as_a_float_stays_the_hash(tmp_path):
    assert _summary(tmp_path, "commit=1e51234\n")["commit"] == "1e51234"
