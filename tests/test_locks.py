"""Builds racing each other, and a builder killed with SIGKILL mid-build, with real processes."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import torch

import workbench as wb
from cache_tools import layout
from conftest import write_tiny_kernel
from workbench.build.sources import resolve

LOAD_AND_REPORT = """
import json, torch, workbench as wb
k = wb.load({folder!r})
print(json.dumps({{"compiled": k.build.compiled, "value": k.add_value(torch.zeros(1)).item()}}))
"""


def test_several_processes_build_once_and_all_get_a_working_module(tmp_path):
    folder = write_tiny_kernel(tmp_path / "tiny", value="8.0")
    procs = [subprocess.Popen([sys.executable, "-c", LOAD_AND_REPORT.format(folder=str(folder))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r["value"] == 8.0 for r in results)
    assert sum(r["compiled"] for r in results) == 1, results


def test_a_build_killed_mid_way_never_blocks_the_next_load(tmp_path, cache_root, capfd):
    folder = write_tiny_kernel(tmp_path / "tiny", value="9.0")
    lock = layout.entry_dir(cache_root, resolve(folder).ident) / layout.LOCK_NAME
    victim = subprocess.Popen([sys.executable, "-c", LOAD_AND_REPORT.format(folder=str(folder))],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    # Wait until it holds the lock and is compiling, then kill it without a chance to clean up.
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if lock.exists() and lock.read_text().strip():
            break
        time.sleep(0.05)
    else:
        victim.kill()
        raise AssertionError("the builder never took the lock")
    time.sleep(1.0)
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert json.loads(lock.read_text())["pid"] == victim.pid, "the dead builder's name stays in the lock"

    start = time.monotonic()
    k = wb.load(folder)
    assert k.add_value(torch.zeros(1)).item() == 9.0
    waited = time.monotonic() - start
    assert waited < 120  # the rebuild itself; no waiting on the dead owner
    err = capfd.readouterr().err
    assert f"pid {victim.pid} was interrupted" in err
    assert lock.read_text() == "", "a finished build leaves the lock empty"
