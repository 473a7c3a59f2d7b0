"""Builds racing each other, and a builder killed with SIGKILL mid-build, with real processes."""
from __future__ import annotations

import json
import signal
import subprocess
import sys
import time

import pytest
import torch
from conftest import write_tiny_kernel

import workbench as wb
from kwb_store import layout
from workbench.jit.sources import resolve

LOAD_AND_REPORT = """
import json, torch, workbench as wb
k = wb.load({folder!r})
print(json.dumps({{"compiled": k.build.compiled, "value": k.add_value(torch.zeros(1)).item()}}))
"""


@pytest.mark.slow
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


HOLD_LOCK = """
import sys, time
from pathlib import Path
from kwb_store.locks import BuildLock
with BuildLock(Path(sys.argv[1]), "tiny (cpu)"):
    print("holding", flush=True)
    time.sleep(600)
"""

WAIT_FOR_LOCK = """
import sys
from pathlib import Path
from kwb_store.locks import BuildLock
try:
    with BuildLock(Path(sys.argv[1]), "tiny (cpu)"):
        print("got it")
except TimeoutError as e:
    print("timeout:", e)
"""


def test_a_stopped_builder_is_named_and_KWB_LOCK_TIMEOUT_ends_the_wait(tmp_path):
    lock = tmp_path / "entry" / "lock"
    holder = subprocess.Popen([sys.executable, "-c", HOLD_LOCK, str(lock)], stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout.readline().strip() == "holding"
        holder.send_signal(signal.SIGSTOP)  # a builder stopped (Ctrl-Z, a debugger): its flock stays
        env = dict(__import__("os").environ, KWB_LOCK_TIMEOUT="2")
        started = time.monotonic()
        res = subprocess.run([sys.executable, "-c", WAIT_FOR_LOCK, str(lock)], capture_output=True, text=True,
                             timeout=120, env=env, check=False)
        assert time.monotonic() - started < 60
        assert res.stdout.startswith("timeout: kwb: gave up after waiting 2 s (KWB_LOCK_TIMEOUT)"), res.stdout + res.stderr
        assert f"pid {holder.pid} is stopped" in res.stderr and "kill -CONT" in res.stderr, res.stderr
        bad = subprocess.run([sys.executable, "-c", WAIT_FOR_LOCK, str(lock)], capture_output=True, text=True,
                             timeout=120, env=dict(env, KWB_LOCK_TIMEOUT="soon"), check=False)
        assert "KWB_LOCK_TIMEOUT must be a number of seconds >= 0, got 'soon'" in bad.stderr
    finally:
        holder.kill()
        holder.wait()
    res = subprocess.run([sys.executable, "-c", WAIT_FOR_LOCK, str(lock)], capture_output=True, text=True, timeout=120, check=False)
    assert res.stdout.strip() == "got it", "a killed holder's flock is gone"


def test_loaders_in_a_fresh_root_probe_the_compiler_once_between_them(tmp_path):
    # 16 loaders in a fresh root each probed the compiler before reaching the build lock (about
    # 8 of 22 s on the 2-core machine): now one probes and the others read its answers.
    import os
    import shutil

    folder = write_tiny_kernel(tmp_path / "tiny", value="4.0")
    log = tmp_path / "cxx.log"
    wrapper = tmp_path / "bin" / "c++"
    wrapper.parent.mkdir()
    wrapper.write_text(f'#!/bin/sh\necho "$*" >> {log}\nexec {shutil.which("c++")} "$@"\n')
    wrapper.chmod(0o755)
    env = {k: v for k, v in os.environ.items() if k != "KWB_CXX"}
    env.update(CXX=str(wrapper), TORCH_EXTENSIONS_DIR=str(tmp_path / "fresh-root"))
    procs = [subprocess.Popen([sys.executable, "-c", LOAD_AND_REPORT.format(folder=str(folder))], env=env,
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(4)]
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        assert json.loads(out.strip().splitlines()[-1])["value"] == 4.0
    calls = log.read_text().splitlines()
    probes = {"version": [c for c in calls if c.strip() == "--version"],
              "libstdc++": [c for c in calls if "kwb-cxx-probe-" in c]}
    assert {what: len(lines) for what, lines in probes.items()} == {"version": 1, "libstdc++": 1}, calls
    for other in ("-dM", "kwb-omp-probe-"):  # probed only where a build needs them: at most once
        assert len([c for c in calls if other in c]) <= 1, calls
