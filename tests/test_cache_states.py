"""`kwb cache` states judged per build against today's sources, on real builds: an edit and a
revert (the entry is fresh and prune keeps the build the loader uses), a failed compile (its
own state, not damage), a lock left by a killed builder (cleared by the next good load), and
a build stopped mid-compile (interrupted)."""
from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from click.testing import CliRunner
from conftest import TINY_CPP, write_tiny_kernel

from cache_tools.commands import cache as cache_cli
from kwb_store import layout

# One xdist worker runs this module (--dist loadgroup): its module fixture builds a cache
# with real processes (80-95 s on 2 cores), and a second worker would build it again.
pytestmark = pytest.mark.xdist_group("test_cache_states")

# One process: build the tiny kernel, build an edit of its header, fail a compile of a broken
# edit, then revert the header (today's sources are those of the first build again). A second
# kernel ("bad") never compiles.
EDIT_FAIL_REVERT = """
import sys, torch, workbench as wb
from pathlib import Path
tiny, bad = Path(sys.argv[1]), Path(sys.argv[2])
header = tiny / "value.h"
original = header.read_text()
assert wb.load(tiny, device="cpu").build.compiled
header.write_text(original.replace("1.0", "2.0"))
k = wb.load(tiny, device="cpu")
assert k.build.compiled and k.add_value(torch.zeros(1)).item() == 2.0
header.write_text("#pragma once\\n#define VALUE 1.0 +\\n")
for folder in (tiny, bad):
    try:
        wb.load(folder, device="cpu")
    except wb.BuildError:
        pass
    else:
        raise SystemExit(f"{folder} compiled")
header.write_text(original)
"""

BAD_CPP = TINY_CPP.replace("at::add(x,", "at::add(undeclared_tensor,")

LOAD = """
import sys, torch, workbench as wb
k = wb.load(sys.argv[1], device="cpu")
print(k.build.compiled, k.add_value(torch.zeros(1)).item())
"""


def run(*args, root: Path, **kw):
    return CliRunner().invoke(cache_cli, [*args, "--root", str(root)], catch_exceptions=False, **kw)


def listing(root: Path) -> dict[str, dict]:
    res = run("list", "--json", root=root)
    assert res.exit_code == 0, res.output
    return {e["kernel"]: e for e in json.loads(res.output)["entries"]}


def entry_of(root: Path, name: str) -> Path:
    (entry,) = root.glob(f"kwb_{name}-*")
    return entry


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    base = tmp_path_factory.mktemp("cachestates")
    root = base / "cache"
    root.mkdir()
    tiny = write_tiny_kernel(base / "tiny")
    bad = write_tiny_kernel(base / "bad", cpp=BAD_CPP)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(root), MAX_JOBS="2")
    res = subprocess.run([sys.executable, "-c", EDIT_FAIL_REVERT, str(tiny), str(bad)], capture_output=True, text=True,
                         env=env, timeout=900, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"root": root, "tiny": tiny, "bad": bad}


@pytest.fixture
def cache(built, tmp_path) -> Path:
    """A copy of the built cache to change at will (sources stay where they were built)."""
    copy = tmp_path / "torch_extensions"
    shutil.copytree(built["root"], copy, symlinks=True)
    return copy


def test_after_an_edit_and_a_revert_the_entry_is_fresh_and_prune_keeps_its_build(cache, built):
    entry = entry_of(cache, "tiny")
    assert (entry / "build-cpu" / layout.FAILURE_RECORD).exists(), "the broken edit's failure is on record"
    tiny = listing(cache)["tiny"]
    assert tiny["state"] == "fresh", tiny
    states = sorted(v["state"] for v in tiny["versions"])
    assert states == ["fresh", "stale"], tiny["versions"]
    (today,) = [v["name"] for v in tiny["versions"] if v["state"] == "fresh"]
    (edited,) = [v["name"] for v in tiny["versions"] if v["state"] == "stale"]
    res = run("verify", root=cache)
    assert res.exit_code == 0 and "0 broken, 0 stale" in res.output, res.output

    before = snapshot(cache)
    res = run("prune", "--stale", "--dry-run", root=cache)
    assert res.exit_code == 0, res.output
    assert edited in res.output and today not in res.output, res.output
    assert snapshot(cache) == before
    res = run("prune", "--stale", root=cache)
    assert res.exit_code == 0 and edited in res.output, res.output
    for mode in (["--older-than", "0s"], ["--max-size", "0"], ["--keep-latest", "1"]):
        res = run("prune", *mode, root=cache)
        assert res.exit_code == 0 and (entry / f"{today}{layout.LIBRARY_SUFFIX}").exists(), (mode, res.output)
    tiny = listing(cache)["tiny"]
    assert tiny["state"] == "fresh" and [v["name"] for v in tiny["versions"]] == [today], tiny

    # what the states say is what a fresh process does: it loads that build, compiling nothing
    res = subprocess.run([sys.executable, "-c", LOAD, str(built["tiny"])], capture_output=True, text=True, timeout=600,
                         env=dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache)), check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.split() == ["False", "1.0"]


def test_a_failed_compile_is_its_own_state_and_not_damage(cache, built):
    entries = listing(cache)
    bad = entries["bad"]
    assert bad["state"] == "failed", bad
    assert "the last compile failed" in bad["reasons"][0] and "undeclared_tensor" in bad["reasons"][0], bad
    res = run("verify", root=cache)
    assert res.exit_code == 0, res.output
    assert "0 broken" in res.output and "1 failed" in res.output and "failed bad" in res.output, res.output
    res = CliRunner().invoke(cache_cli, ["list", "--root", str(cache)], color=True)
    row = next(line for line in res.output.splitlines() if "bad" in line)
    assert "\x1b[91mfailed" in row, row  # its own colour: broken is plain red

    # the tiny kernel's broken edit, saved again: its builds are both stale now, and the failed
    # compile came after the newest of them, so a load now fails as it did
    header = built["tiny"] / "value.h"
    original = header.read_text()
    try:
        header.write_text("#pragma once\n#define VALUE 1.0 +\n")
        tiny = listing(cache)["tiny"]
        assert tiny["state"] == "failed", tiny
        assert sorted(v["state"] for v in tiny["versions"]) == ["stale", "stale"]
    finally:
        header.write_text(original)


def _dead_owner(lock: Path) -> None:
    lock.write_text(json.dumps({"pid": 999_999_999, "host": os.uname().nodename, "started": time.time(), "what": "x (cpu)"}))


def test_a_good_load_after_a_killed_builder_clears_its_stale_lock(cache, built):
    import workbench as wb

    lock = entry_of(cache, "tiny") / layout.LOCK_NAME
    _dead_owner(lock)
    assert listing(cache)["tiny"]["state"] == "stale lock"
    k = wb.load(built["tiny"], device="cpu", build_directory=str(cache))  # found in the cache: no lock taken
    assert not k.build.compiled and k.add_value(torch.zeros(1)).item() == 1.0
    assert lock.read_text() == ""
    assert listing(cache)["tiny"]["state"] == "fresh"

    # a build (the failed kernel, fixed) under a lock its killed builder left: the record goes,
    # and so does the failure record once the build finishes
    bad = built["bad"] / "tiny.cpp"
    text = bad.read_text()
    entry = entry_of(cache, "bad")
    _dead_owner(entry / layout.LOCK_NAME)
    assert listing(cache)["bad"]["state"] == "stale lock"
    try:
        bad.write_text(TINY_CPP.replace("VALUE * SCALE", "VALUE"))
        k = wb.load(built["bad"], device="cpu", build_directory=str(cache))
        assert k.build.compiled
    finally:
        bad.write_text(text)
        os.utime(bad)
    assert (entry / layout.LOCK_NAME).read_text() == ""
    assert not (entry / "build-cpu" / layout.FAILURE_RECORD).exists()
    bad_entry = listing(cache)["bad"]
    assert bad_entry["state"] == "stale" and bad_entry["versions"][0]["state"] == "stale", bad_entry  # source put back


def _start_build(folder: Path, root: Path) -> tuple[subprocess.Popen, Path]:
    """A load of a new kernel, in its own process group (as a shell runs it), once its compile
    has started."""
    p = subprocess.Popen([sys.executable, "-c", LOAD, str(folder)], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         text=True, start_new_session=True, env=dict(os.environ, TORCH_EXTENSIONS_DIR=str(root)))
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        marker = next(root.glob(f"kwb_{folder.name}-*/build-cpu/{layout.COMPILE_MARKER}"), None)
        if marker is not None:
            time.sleep(0.5)  # the compiler is running
            return p, marker.parent.parent
        if p.poll() is not None:
            raise AssertionError(f"the build ended before it was stopped: {p.stderr.read()[-2000:]}")
        time.sleep(0.05)
    os.killpg(p.pid, signal.SIGKILL)
    raise AssertionError("the build never started compiling")


@pytest.mark.parametrize("how", ["ctrl-c", "kill -9"])
def test_a_build_stopped_mid_compile_reads_interrupted(tmp_path, how):
    root = tmp_path / "torch_extensions"
    root.mkdir()
    folder = write_tiny_kernel(tmp_path / "stopped", value="7.0")
    p, entry = _start_build(folder, root)
    if how == "ctrl-c":
        os.killpg(p.pid, signal.SIGINT)  # what a terminal sends the whole foreground group
    else:
        p.send_signal(signal.SIGKILL)  # the loader alone; its compilers die with it
    _, err = p.communicate(timeout=120)
    assert p.returncode != 0
    assert not list(entry.glob("*" + layout.MANIFEST_SUFFIX))
    assert not (entry / "build-cpu" / layout.FAILURE_RECORD).exists(), err[-2000:]
    stopped = listing(root)["stopped"]
    if how == "kill -9":  # the killed loader's name stays in the lock until unlock or the next load
        assert stopped["state"] == "stale lock", stopped
        assert any("stopped before finishing" in r for r in stopped["reasons"]), stopped
        assert run("unlock", "--all", root=root).exit_code == 0
        stopped = listing(root)["stopped"]
    assert stopped["state"] == "interrupted", stopped
    assert "stopped before finishing" in stopped["reasons"][0]
    res = run("verify", root=root)
    assert res.exit_code == 0 and "1 interrupted" in res.output, res.output
