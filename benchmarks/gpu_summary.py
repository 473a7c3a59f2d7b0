#!/usr/bin/env python
"""gpu_run.sh's closing step: its key=value facts, the GPU suite's JUnit counts, the sanitizer's
and the notebooks' outcomes, as one JSON file (benchmarks/results/<device>/gpu_run.json).

    python benchmarks/gpu_summary.py FACTS OUT_DIR JSON_PATH
"""
from __future__ import annotations

import json
import re
import sys
import xml.etree.ElementTree as ET
from pathlib import Path

REQUIRED = ("commit", "date", "torch", "cuda", "build_all_cold_s", "kwb_run_cold_s", "kwb_run_cold_rc", "kwb_run_cached_s",
            "kwb_run_cached_rc", "pytest_passed", "pytest_failed", "sanitizer_errors", "notebooks_ok", "notebooks_failed")


# Facts that are text even where they read as numbers: a short hash 0228551 became the int 228551,
# and one like 1e51234 would become a float.
TEXT_FACTS = ("commit", "date", "pytest_failures")


def facts(path: Path) -> dict:
    out = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition("=")
        if key not in TEXT_FACTS and re.fullmatch(r"-?\d+", value):
            out[key] = int(value)
        elif key not in TEXT_FACTS and re.fullmatch(r"-?\d+\.\d+", value):
            out[key] = float(value)
        else:
            out[key] = value
    return out


def pytest_counts(xml: Path) -> dict:
    if not xml.exists():
        return {}
    suites = ET.parse(xml).getroot()
    suites = [suites] if suites.tag == "testsuite" else list(suites)
    total = {k: sum(int(s.get(k, 0)) for s in suites) for k in ("tests", "failures", "errors", "skipped")}
    failed = [f"{c.get('classname')}::{c.get('name')}" for s in suites for c in s.iter("testcase")
              if c.find("failure") is not None or c.find("error") is not None]
    return {"pytest_passed": total["tests"] - total["failures"] - total["errors"] - total["skipped"],
            "pytest_failed": total["failures"] + total["errors"], "pytest_skipped": total["skipped"],
            "pytest_failed_tests": failed}


def sanitizer(path: Path) -> dict:
    if not path.exists():
        return {}
    data = json.loads(path.read_text())
    return {"sanitizer_errors": data["errors"], "sanitizer_hazards": data["hazards"],
            "sanitizer_runs": len(data["runs"]), "sanitizer_unfinished": data["unfinished"]}


def notebooks(log: Path) -> dict:
    if not log.exists():
        return {}
    text = log.read_text()
    ok = re.findall(r"^(\S+\.ipynb): ok in", text, re.MULTILINE)
    failed = re.findall(r"^(\S+\.ipynb): FAILED", text, re.MULTILINE)
    return {"notebooks_ok": len(ok), "notebooks_failed": len(failed), "notebooks_failed_names": failed}


def main(facts_path: str, out_dir: str, json_path: str) -> None:
    out = Path(out_dir)
    summary = facts(Path(facts_path))
    env = (out / "env.txt").read_text().splitlines() if (out / "env.txt").exists() else []
    m = re.match(r"torch (\S+) CUDA (\S+) (.*)", env[0]) if env else None
    if m:
        summary.update(torch=m.group(1), cuda=m.group(2), device=m.group(3))
    nvcc = next((line for line in env if "release" in line), None)
    if nvcc:
        summary["nvcc"] = nvcc.strip()
    summary.update(pytest_counts(out / "pytest.xml"))
    summary.update(sanitizer(Path(json_path).parent / "sanitize.json"))  # the run folder's
    summary.update(notebooks(out / "notebooks.log"))
    # Every figure docs/results.md reads is a key, null where its stage did not run (a lease that
    # ran out, a stage not asked for), with the stages left out named.
    stages = {"build": "build_all_cold_s", "run": "kwb_run_cold_s", "tolerance": "tolerance_s",
              "extension": "extension_loop_s", "pytest": "pytest_s",
              "sanitize": "sanitize_s", "jit": "jit_loop_s", "notebooks": "notebooks_s"}
    summary["stages_not_run"] = [name for name, key in stages.items() if key not in summary]
    for key in REQUIRED:
        summary.setdefault(key, None)
    Path(json_path).write_text(json.dumps(summary, indent=2) + "\n")
    print(json.dumps(summary, indent=2))


if __name__ == "__main__":
    main(*sys.argv[1:4])
