"""`kwb cache ...` on real caches: builds made by kwb (a kernel folder, load_inline) and by
torch.utils.cpp_extension (load_inline, and load with an in-process rebuild that leaves
name_v1.so), then each state made by hand from them (stale, orphaned, broken, building with a
live process, stale locks), and the safety rules of clean, prune and unlock."""
from __future__ import annotations

import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner
from conftest import write_tiny_kernel

from cache_tools import api, removal
from cache_tools.commands import cache as cache_cli
from kwb_store import layout

# One xdist worker runs this module (--dist loadgroup): its module fixture builds a cache
# with real processes (80-95 s on 2 cores), and a second worker would build it again.
pytestmark = pytest.mark.xdist_group("test_cache_tools")

PLAIN_CPP = """\
#include <torch/library.h>
#include <ATen/ops/add.h>
at::Tensor add_one(const at::Tensor& x) { return at::add(x, NUMBER); }
TORCH_LIBRARY(NAMESPACE, m) { m.def("add_one(Tensor x) -> Tensor", &add_one); }
"""

BUILD_ALL = """
import sys, torch, workbench as wb
import torch.utils.cpp_extension as ce
from pathlib import Path
tiny, plain = Path(sys.argv[1]), Path(sys.argv[2])
wb.load(tiny, device="cpu")
wb.load_inline("kwbinl", cpp="at::Tensor twice(const at::Tensor& x) { return x * 2; }", functions=["twice"], device="cpu")
m = ce.load_inline(name="tinl", cpp_sources="int64_t add_one(int64_t x) { return x + 1; }", functions=["add_one"])
assert m.add_one(1) == 2
text = plain.read_text()
plain.write_text(text.replace("NUMBER", "1").replace("NAMESPACE", "tplain_a"))
ce.load(name="tplain", sources=[str(plain)], is_python_module=False)
plain.write_text(text.replace("NUMBER", "2").replace("NAMESPACE", "tplain_b"))   # torch rebuilds as tplain_v1
ce.load(name="tplain", sources=[str(plain)], is_python_module=False)
assert torch.ops.tplain_b.add_one(torch.zeros(1)).item() == 2
"""


def test_this_module_runs_on_one_xdist_worker(request):
    """The group above holds only where pytest-xdist can group (pytest 9.2 silently stopped it,
    and the module fixture was then built twice): fail, not slow down, when it does not."""
    if not getattr(request.config.option, "loadgroup", False):  # pytest-xdist sets it in each worker
        pytest.skip("not run under pytest-xdist's --dist loadgroup")
    assert request.node.nodeid.endswith("@test_cache_tools"), request.node.nodeid


def tiny_entry(cache: Path) -> Path:
    (entry,) = cache.glob("kwb_tiny-*")  # a kernel folder of one's own: kwb_<name>-<digest>
    return entry


def run(*args, root: Path, **kw):
    return CliRunner().invoke(cache_cli, [*args, "--root", str(root)], catch_exceptions=False, **kw)


def listing(root: Path) -> dict[str, dict]:
    res = run("list", "--json", root=root)
    assert res.exit_code == 0, res.output
    return {e["kernel"]: e for e in json.loads(res.output)["entries"]}


def snapshot(folder: Path) -> dict:
    return {str(p.relative_to(folder)): (p.lstat().st_size, p.lstat().st_mtime_ns) for p in sorted(folder.rglob("*"))}


@pytest.fixture(scope="module")
def built(tmp_path_factory) -> dict:
    """One cache with a build of each origin, built by a real process."""
    base = tmp_path_factory.mktemp("cachetools")
    root = base / "cache"
    root.mkdir()
    tiny = write_tiny_kernel(base / "tiny")
    plain = base / "plain.cpp"
    plain.write_text(PLAIN_CPP)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(root), MAX_JOBS="2")
    res = subprocess.run([sys.executable, "-c", BUILD_ALL, str(tiny), str(plain)], capture_output=True, text=True,
                         env=env, timeout=900, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    return {"root": root, "tiny": tiny, "plain": plain}


@pytest.fixture
def cache(built, tmp_path) -> Path:
    """A copy of the built cache to change at will (sources stay where they were built)."""
    copy = tmp_path / "torch_extensions"
    shutil.copytree(built["root"], copy, symlinks=True)
    return copy


def test_list_shows_each_origin_with_versions_sizes_and_fresh_state(cache):
    entries = listing(cache)
    assert set(entries) == {"tiny", "kwbinl", "tinl", "tplain"}
    assert entries["tiny"]["origin"] == "kwb kernel"
    assert entries["kwbinl"]["origin"] == "kwb load_inline"
    assert entries["tinl"]["origin"] == "load_inline"
    assert entries["tplain"]["origin"] == "torch extension"
    assert [v["name"] for v in entries["tplain"]["versions"]] == ["tplain", "tplain_v1"]
    assert entries["tiny"]["tag"].startswith("py3") and entries["tiny"]["last_loaded"], entries["tiny"]
    for e in entries.values():
        assert e["state"] == "fresh", e
        assert e["bytes"] > 10_000 and e["last_built"]
    res = run("list", root=cache)
    assert res.exit_code == 0
    assert "4 entries" in res.output and "4 fresh" in res.output and "tplain" in res.output


def test_stale_when_a_source_changes_or_the_build_is_for_another_torch(cache, built):
    tiny_cpp, plain = built["tiny"] / "value.h", built["plain"]
    header, source = tiny_cpp.read_text(), plain.read_text()
    times = {p: (p.stat().st_atime_ns, p.stat().st_mtime_ns) for p in (tiny_cpp, plain)}
    try:
        tiny_cpp.write_text(header.replace("1.0", "2.0"))
        time.sleep(0.01)
        plain.write_text(source + "\n// edited\n")
        entries = listing(cache)
        assert entries["tiny"]["state"] == "stale"
        assert any("changed since the build" in r and "value.h" in r for r in entries["tiny"]["reasons"])
        assert entries["tplain"]["state"] == "stale" and "plain.cpp" in entries["tplain"]["reasons"][0]
    finally:
        tiny_cpp.write_text(header)
        plain.write_text(source)
        for p, t in times.items():  # torch's builds are judged by mtime: put them back too
            os.utime(p, ns=t)
    # a cache written by another torch: torch's layout under another tag, and a kwb manifest
    # whose versions name another torch (re-keyed, so it is a consistent manifest)
    other = cache / "py311_cu118"
    other.mkdir()
    shutil.copytree(cache / "tinl", other / "tinl", symlinks=True)
    entry = tiny_entry(cache)
    manifest = next(entry.glob("*.json"))
    data = json.loads(manifest.read_text())
    data["config"]["versions"]["torch"] = "2.4.0+cu118"
    _rekey(data)
    manifest.write_text(json.dumps(data))
    res = run("list", "--json", root=cache)
    got = {(e["tag"], e["name"]): e for e in json.loads(res.output)["entries"]}
    assert got[("py311_cu118", "tinl")]["state"] == "stale"
    assert "built for py311_cu118" in got[("py311_cu118", "tinl")]["reasons"][0]
    tiny = next(e for e in got.values() if e["kernel"] == "tiny")
    assert tiny["state"] == "stale" and any("built for torch 2.4.0+cu118" in r for r in tiny["reasons"])


def _rekey(m: dict) -> None:
    import hashlib

    blob = json.dumps({"format": layout.FORMAT, "config": m["config"], "sources": m["sources"]}, sort_keys=True)
    m["base"] = hashlib.sha256(blob.encode()).hexdigest()
    m["key"] = hashlib.sha256((m["base"] + json.dumps(m["headers"], sort_keys=True)).encode()).hexdigest()


def test_orphaned_when_the_sources_are_gone(cache, built):
    moved = built["tiny"].with_name("tiny-away")
    built["tiny"].rename(moved)
    try:
        entries = listing(cache)
        assert entries["tiny"]["state"] == "orphaned"
        assert "source gone" in entries["tiny"]["reasons"][0]
        res = run("prune", "--orphaned", root=cache)
        assert res.exit_code == 0 and "tiny" in res.output and "freed" in res.output
        assert not list(cache.glob("kwb_tiny-*")) and (cache / "tplain").exists()
    finally:
        moved.rename(built["tiny"])


def test_broken_libraries_missing_or_truncated_apart_from_failed_and_interrupted_builds(cache):
    lib = next(tiny_entry(cache).glob("*.so"))
    data = lib.read_bytes()
    lib.write_bytes(data[: len(data) // 2])                                # cut short
    (cache / "tplain" / "tplain_v1.so").unlink()                           # build.ninja's target gone
    tinl = cache / "tinl" / "tinl.so"
    tinl.write_bytes(tinl.read_bytes()[:4096])                             # a truncated ELF
    stopped = cache / "kwb_stopped"                                        # a build that never finished
    (stopped / "build-cpu").mkdir(parents=True)
    (stopped / "build-cpu" / "stopped.o").write_bytes(b"\x7fELF")
    (stopped / "lock").write_text("")
    failed = cache / "kwb_failed"                                          # a compile that failed
    shutil.copytree(stopped, failed)
    (failed / "build-cpu" / "build.log").write_text("x.cpp:1:1: error: expected ';'\n")
    (failed / "build-cpu" / layout.FAILURE_RECORD).write_text(json.dumps(
        {"failed_at": time.time(), "log": str(failed / "build-cpu" / "build.log"), "sources": {}, "error": "expected ';'"}))
    entries = listing(cache)
    assert entries["tiny"]["state"] == "broken" and "bytes, the build wrote" in entries["tiny"]["reasons"][0]
    assert entries["tplain"]["state"] == "broken" and "tplain_v1.so was never linked" in entries["tplain"]["reasons"][0]
    assert entries["tinl"]["state"] == "broken" and "truncated" in entries["tinl"]["reasons"][0]
    assert entries["stopped"]["state"] == "interrupted" and "build-cpu" in entries["stopped"]["reasons"][0]
    assert entries["failed"]["state"] == "failed" and "build.log" in entries["failed"]["reasons"][0]
    res = run("verify", root=cache)
    assert res.exit_code == 1
    assert "3 broken" in res.output and "1 failed, 1 interrupted" in res.output


def test_verify_checks_content_against_the_manifest_without_importing(cache):
    res = run("verify", root=cache)
    assert res.exit_code == 0, res.output
    assert "checked 4 entries: 0 broken" in res.output
    lib = next(tiny_entry(cache).glob("*.so"))
    data = bytearray(lib.read_bytes())
    data[-100] ^= 0xFF                                                     # same size, other bytes
    lib.write_bytes(bytes(data))
    assert listing(cache)["tiny"]["state"] == "fresh", "list stays cheap: no hashing of libraries"
    res = run("verify", "--json", root=cache)
    assert res.exit_code == 1
    broken = json.loads(res.output)["broken"]
    assert [b["kernel"] for b in broken] == ["tiny"] and "sha256" in broken[0]["reasons"][0]


def test_verify_refuses_a_manifest_naming_another_library_as_a_load_does(cache):
    # once it passed verify while the load refused it; both judge the file the manifest names
    manifest = next(tiny_entry(cache).glob("*.json"))
    data = json.loads(manifest.read_text())
    library = tiny_entry(cache) / data["library"]
    (library.parent / "other.so").write_bytes(library.read_bytes()[:-1])
    data["library"] = "other.so"
    manifest.write_text(json.dumps(data))
    res = run("verify", "--json", root=cache)
    assert res.exit_code == 1, res.output
    (broken,) = json.loads(res.output)["broken"]
    assert broken["kernel"] == "tiny" and "other.so" in " ".join(broken["reasons"]), broken


HOLD_KWB_LOCK = """
import fcntl, json, os, socket, sys, time
fd = os.open(sys.argv[1], os.O_RDWR | os.O_CREAT)
fcntl.flock(fd, fcntl.LOCK_EX)
os.pwrite(fd, json.dumps({"pid": os.getpid(), "host": socket.gethostname(), "what": "tiny (cpu)"}).encode(), 0)
print("held", flush=True)
time.sleep(120)
"""

HOLD_TORCH_LOCK = """
import fcntl, os, sys, time
if sys.argv[2] == "baton":   # torch 2.13's FileBaton.try_acquire: the file is the lock
    fd = os.open(sys.argv[1], os.O_CREAT | os.O_EXCL)
else:                        # torch 2.15's filelock: an flock on a file that stays
    fd = os.open(sys.argv[1], os.O_CREAT | os.O_RDWR)
    fcntl.flock(fd, fcntl.LOCK_EX)
print("held", flush=True)
time.sleep(120)
"""


def _holder(code: str, lock: Path, *args: str) -> subprocess.Popen:
    p = subprocess.Popen([sys.executable, "-c", code, str(lock), *args], stdout=subprocess.PIPE, text=True)
    assert p.stdout.readline().strip() == "held"
    return p


def test_building_entries_are_named_and_never_removed_or_unlocked(cache):
    (cache / "tplain" / "lock").unlink(missing_ok=True)
    holders = {"tiny": _holder(HOLD_KWB_LOCK, tiny_entry(cache) / "lock"),
               "tinl": _holder(HOLD_TORCH_LOCK, cache / "tinl" / "lock", "filelock"),
               "tplain": _holder(HOLD_TORCH_LOCK, cache / "tplain" / "lock", "baton")}
    try:
        folders = {"tiny": tiny_entry(cache), "tinl": cache / "tinl", "tplain": cache / "tplain"}
        before = {k: snapshot(f) for k, f in folders.items()}
        entries = listing(cache)
        for name, p in holders.items():
            assert entries[name]["state"] == "building" and entries[name]["lock"]["pid"] == p.pid, entries[name]
        res = run("clean", "--all", root=cache)
        assert res.exit_code == 1
        assert res.output.count("a build") == 3 and re.search(r"^removed \S*kwbinl", res.output, re.MULTILINE)
        assert {k: snapshot(f) for k, f in folders.items()} == before
        res = run("unlock", "--all", root=cache)
        assert res.exit_code == 1 and all(f"pid {p.pid}" in res.output for p in holders.values())
        assert (cache / "tplain" / "lock").exists()
        res = run("prune", "--max-size", "0", root=cache)
        assert res.exit_code == 0 and all(f.exists() for f in folders.values())
    finally:
        for p in holders.values():
            p.kill()
            p.wait()


def _fake_torch(folder: Path, style: str) -> Path:
    """A torch install as build.ninja names it, whose cpp_extension.py locks one way."""
    (folder / "include").mkdir(parents=True)
    (folder / "utils").mkdir()
    line = ("with FileLock(os.path.join(build_directory, 'lock')):" if style == "filelock"
            else "baton = FileBaton(os.path.join(build_directory, 'lock'))")
    (folder / "utils" / "cpp_extension.py").write_text(f"# torch.utils.cpp_extension\n{line}\n")
    return folder


@pytest.mark.parametrize("style", ["baton", "filelock"])
@pytest.mark.slow
def test_a_killed_build_leaves_no_lock_that_blocks_loads(cache, tmp_path, style):
    """torch 2.13 and older (FileBaton): a build killed mid-way leaves `lock`, and every later
    load waits forever: list says 'stale lock' and unlock removes it. torch 2.15 (flock): the
    kernel drops the lock with its holder. Which one is read from the torch that made the
    build (build.ninja's include path), not the running one. kwb's flock lock: the file names
    the dead builder; unlock empties it."""
    from kwb_store import environment

    running_style = environment.torch_lock_style()
    ninja = cache / "tinl" / "build.ninja"
    if style != running_style:  # the build came from a torch that locks the other way
        fake = _fake_torch(tmp_path / "othertorch", style)
        real_inc = next(e for e in api.open_cache(cache).entries if e.name == "tinl").ninja["torch_include"]
        ninja.write_text(ninja.read_text().replace(real_inc, str(fake / "include")))
    (cache / "tinl" / "lock").unlink(missing_ok=True)
    holder = _holder(HOLD_TORCH_LOCK, cache / "tinl" / "lock", style)
    assert listing(cache)["tinl"]["state"] == "building"
    holder.send_signal(signal.SIGKILL)
    holder.wait()
    kwb_lock = tiny_entry(cache) / "lock"
    kwb_lock.write_text(json.dumps({"pid": 999_999_999, "host": os.uname().nodename, "what": "tiny (cpu)"}))
    entries = listing(cache)
    assert entries["tiny"]["state"] == "stale lock" and "999999999" in entries["tiny"]["reasons"][0]
    if style == "baton":
        assert entries["tinl"]["state"] == "stale lock" and "no process holds it open" in entries["tinl"]["reasons"][0]
    else:
        assert entries["tinl"]["state"] == "fresh", entries["tinl"]
    res = run("unlock", "tinl", "tiny", root=cache)
    assert res.exit_code == 0, res.output
    assert ("unlocked tinl" in res.output) == (style == "baton")
    assert not (cache / "tinl" / "lock").exists() or style == "filelock"
    assert kwb_lock.exists() and kwb_lock.read_text() == ""  # kwb's lock file stays, emptied
    entries = listing(cache)
    assert entries["tiny"]["state"] == "fresh" and entries["tinl"]["state"] != "stale lock"
    if style == running_style:  # the real torch loads the entry again, without waiting
        load = textwrap.dedent("""
            import torch.utils.cpp_extension as ce
            m = ce.load_inline(name="tinl", cpp_sources="int64_t add_one(int64_t x) { return x + 1; }", functions=["add_one"])
            print(m.add_one(41))
        """)
        res = subprocess.run([sys.executable, "-c", load], capture_output=True, text=True, timeout=300,
                             env=dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache)), check=False)
        assert res.returncode == 0 and res.stdout.strip() == "42", res.stderr[-2000:]


def test_a_filebaton_build_that_starts_after_the_scan_is_not_removed(cache):
    """Between `kwb cache clean`'s scan and its removal, a torch 2.13 build takes the lock
    (O_EXCL, kept open, no flock): clean looks for holders again before it moves anything."""
    (cache / "tinl" / "lock").unlink(missing_ok=True)
    c = api.open_cache(cache)
    holder = _holder(HOLD_TORCH_LOCK, cache / "tinl" / "lock", "baton")
    try:
        before = snapshot(cache / "tinl")
        outcome = api.clean(c, ["tinl"])
        assert not outcome.removed and f"pid {holder.pid}" in outcome.skipped[0][1]
        assert snapshot(cache / "tinl") == before
    finally:
        holder.kill()
        holder.wait()


def test_a_clean_that_fails_to_move_an_entry_leaves_no_lock_behind(cache, monkeypatch):
    """clean creates torch's lock file while it moves an entry; if the move fails, the file
    must go (to torch 2.13, a lock file left behind blocks every later load)."""
    (cache / "tplain" / "lock").unlink(missing_ok=True)

    def refuse(*a):
        raise PermissionError("read-only")

    monkeypatch.setattr(removal.os, "rename", refuse)
    with pytest.raises(PermissionError):
        api.clean(api.open_cache(cache), ["tplain"])
    monkeypatch.undo()
    assert not (cache / "tplain" / "lock").exists() and (cache / "tplain" / "tplain_v1.so").exists()


def test_a_trash_folder_that_is_a_link_is_never_used(cache, tmp_path):
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (cache / layout.TRASH_DIR).symlink_to(outside, target_is_directory=True)
    res = run("clean", "tinl", root=cache)
    assert res.exit_code == 1 and "not a folder of the cache" in res.output
    assert (cache / "tinl" / "tinl.so").exists() and list(outside.iterdir()) == []


@pytest.mark.slow
def test_a_warm_load_whose_build_a_clean_removed_meanwhile_builds_again(tmp_path):
    """A fresh process finds its build in the cache; `kwb cache clean` removes it before the
    process opens the library (the warm path takes no lock). The load builds again."""
    import workbench as wb

    folder = write_tiny_kernel(tmp_path / "cleaned", value="4.0")
    assert wb.load(folder, device="cpu").build.compiled
    code = textwrap.dedent(f"""
        import torch, workbench as wb
        from workbench.jit import builder
        from cache_tools import api
        find = builder.find_cached

        def found_then_cleaned(spec, config):
            build = find(spec, config)
            if build is not None:
                outcome = api.clean(api.open_cache(spec.root), [build.library.parent.name])
                assert outcome.removed, outcome
            return build

        builder.find_cached = found_then_cleaned
        k = wb.load({str(folder)!r}, device="cpu")
        print(k.build.compiled, k.add_value(torch.zeros(1)).item())
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=600, check=False)
    assert res.returncode == 0, res.stderr[-3000:]
    assert res.stdout.strip().splitlines()[-1] == "True 4.0"


def test_clean_by_name_dry_run_and_unknown_names(cache):
    before = snapshot(cache)
    res = run("clean", "--all", "--dry-run", root=cache)
    assert res.exit_code == 0 and "would free" in res.output and "nothing changed" in res.output
    assert snapshot(cache) == before
    res = run("prune", "--max-size", "0", "--keep-latest", "1", "--stale", "--dry-run", root=cache)
    assert res.exit_code == 0 and snapshot(cache) == before
    res = run("clean", "nope", root=cache)
    assert res.exit_code == 2 and "no entry named 'nope'" in res.output and "tiny" in res.output
    res = run("clean", root=cache)
    assert res.exit_code == 2 and "--all" in res.output
    size = listing(cache)["tinl"]["bytes"]
    res = run("clean", "tinl", root=cache)
    assert res.exit_code == 0
    assert re.search(r"^removed tinl ", res.output, re.MULTILINE) and "freed" in res.output
    assert not (cache / "tinl").exists() and set(listing(cache)) == {"tiny", "kwbinl", "tplain"}
    assert size > 0


def test_prune_by_versions_age_and_size(cache):
    res = run("prune", "--keep-latest", "1", root=cache)
    assert res.exit_code == 0, res.output
    assert "tplain [tplain]" in res.output
    assert not (cache / "tplain" / "tplain.so").exists() and (cache / "tplain" / "tplain_v1.so").exists()
    assert listing(cache)["tplain"]["state"] == "fresh"
    old = time.time() - 40 * 86400
    for p in [*(cache / "tinl").rglob("*"), cache / "tinl"]:  # torch 2.13's loads touch the folder
        os.utime(p, (old, old), follow_symlinks=False)
    res = run("prune", "--older-than", "30d", root=cache)
    assert res.exit_code == 0 and "last used 40" in res.output
    assert not (cache / "tinl").exists() and tiny_entry(cache).exists()
    res = run("prune", "--max-size", "0", root=cache)
    assert res.exit_code == 0, res.output
    # the builds today's sources load stay (clean removes them); inline builds are the cache's own
    left = listing(cache)
    assert set(left) == {"tiny", "tplain"}, res.output
    assert all(e["state"] == "fresh" and len(e["versions"]) == 1 for e in left.values()), left
    for bad, msg in ((["--older-than", "soon"], "--older-than"), (["--max-size", "lots"], "--max-size"),
                     (["--older-than", "nand"], "finite"), (["--older-than", "infd"], "finite"),
                     (["--max-size", "inf"], "finite"), (["--max-size", "nanG"], "finite"),
                     (["--keep-latest", "0"], "at least 1"), ([], "say what to prune")):
        res = run("prune", *bad, root=cache)
        assert res.exit_code == 2 and msg in res.output, res.output


def test_symlinks_are_removed_as_links_never_followed(cache, tmp_path):
    outside = tmp_path / "precious"
    outside.mkdir()
    (outside / "data.txt").write_text("keep me")
    (cache / "linked").symlink_to(outside, target_is_directory=True)          # an entry that is a link
    (tiny_entry(cache) / "escape").symlink_to(outside, target_is_directory=True)  # a link inside an entry
    entries = listing(cache)
    assert entries["linked"]["origin"] == "symlink" and str(outside) in entries["linked"]["reasons"][0]
    res = run("clean", "--all", root=cache)
    assert res.exit_code == 0, res.output
    assert (outside / "data.txt").read_text() == "keep me"
    assert not (cache / "linked").exists() and not (cache / "linked").is_symlink()
    assert listing(cache) == {}


def test_keep_latest_keeps_the_newest_loadable_build_not_a_newer_library_without_manifest(cache):
    entry = tiny_entry(cache)
    (so,) = entry.glob("*.so")
    orphan = entry / so.name.replace(so.name.split(".")[2], "0" * 12)  # a killed build's library
    shutil.copy2(so, orphan)
    later = so.stat().st_mtime + 3600
    os.utime(orphan, (later, later))
    res = run("prune", "--keep-latest", "1", root=cache)
    assert res.exit_code == 0, res.output
    assert so.exists() and not orphan.exists(), res.output
    assert "not loadable" in res.output and listing(cache)["tiny"]["state"] == "fresh"


def test_a_project_with_build_ninja_in_its_build_folder_is_not_a_cache(tmp_path):
    project = tmp_path / "proj"
    for rel in ("build/build.ninja", "build/foo.o", "setup.py"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("x")
    res = run("clean", "--all", root=project)
    assert res.exit_code == 2 and "does not look like an extensions cache" in res.output
    assert (project / "build" / "build.ninja").exists()


def test_roots_that_are_not_an_extensions_cache_are_refused(tmp_path, cache):
    project = tmp_path / "project"                  # a build/ with objects and a lib/ with a .so
    for rel in ("build/a.o", "lib/libfoo.so", "src/foo.cpp", "README.md"):
        (project / rel).parent.mkdir(parents=True, exist_ok=True)
        (project / rel).write_text("x")
    res = run("clean", "--all", "--dry-run", root=project)
    assert res.exit_code == 2 and "does not look like an extensions cache" in res.output
    res = run("list", "--force", "--json", root=project)
    assert json.loads(res.output)["entries"] == [], "build/ and lib/ are not build folders"
    res = run("list", root=Path("/"))
    assert res.exit_code == 2 and "refusing" in res.output
    home = tmp_path / "home"
    (home / "Documents").mkdir(parents=True)
    (home / "notes.txt").write_text("x")
    (home / "photo.jpg").write_text("x")
    res = run("clean", "--all", root=home)
    assert res.exit_code == 2 and "does not look like an extensions cache" in res.output
    assert (home / "notes.txt").exists()
    res = run("list", "--force", root=home)
    assert res.exit_code == 0 and "no builds" in res.output
    assert run("list", root=tmp_path / "missing").exit_code == 2
    starting = tmp_path / "starting"                # a first build probing the compiler: its lock only
    starting.mkdir()
    (starting / layout.TOOL_PROBE_LOCK).write_text("")
    res = run("list", root=starting)
    assert res.exit_code == 0 and "no builds" in res.output, res.output


def test_a_clean_that_dies_halfway_leaves_nothing_that_loads_and_the_next_one_finishes(cache, monkeypatch):
    def dies_halfway(path, *a, **k):
        next(Path(path).glob("*.so")).unlink()
        raise KeyboardInterrupt

    monkeypatch.setattr(removal.shutil, "rmtree", dies_halfway)
    with pytest.raises(KeyboardInterrupt):
        api.clean(api.open_cache(cache), ["tiny"])
    monkeypatch.undo()
    assert not list(cache.glob("kwb_tiny-*")), "the entry moved away before any file was deleted"
    trash = cache / layout.TRASH_DIR
    assert trash.is_dir() and any(trash.iterdir())
    c = api.open_cache(cache)
    assert "tiny" not in {e.name for e in c.entries} and c.trash_bytes > 0
    res = run("list", root=cache)
    assert "left by an interrupted clean" in res.output
    res = run("clean", "tinl", root=cache)
    assert res.exit_code == 0 and "left by an interrupted clean" in res.output
    assert not trash.exists()


def test_info_and_du_name_sources_key_flags_files_and_totals(cache, built):
    res = run("info", "tiny", "--json", root=cache)
    assert res.exit_code == 0
    (info,) = json.loads(res.output)
    (b,) = info["builds"]
    assert str(built["tiny"] / "tiny.cpp") in b["sources"] and str(built["tiny"] / "value.h") in b["headers"]
    assert len(b["key"]) == 64 and "-O3" in b["cflags"] and b["versions"]["torch"] and b["build_log"].endswith("build.log")
    assert any(f["path"].endswith(".so") and f["bytes"] > 0 for f in info["files"])
    res = run("info", "tplain", root=cache)
    assert res.exit_code == 0 and "plain.cpp" in res.output and "tplain_v1.so" in res.output
    res = run("du", "--json", root=cache)
    d = json.loads(res.output)
    assert sum(t["entries"] for t in d["tags"].values()) == 4
    assert d["bytes"] == sum(e["bytes"] for e in listing(cache).values())
    assert d["largest"][0]["bytes"] >= d["largest"][-1]["bytes"]


def test_a_clean_racing_a_real_build_leaves_that_build_usable(tmp_path, cache_root):
    """A kwb build in another process holds the entry's lock; clean --all during it skips the
    entry, and the build finishes and works."""
    folder = write_tiny_kernel(tmp_path / "racer", value="6.0")
    code = textwrap.dedent(f"""
        import torch, workbench as wb
        k = wb.load({str(folder)!r}, force=True, device="cpu")
        print(k.add_value(torch.zeros(1)).item())
    """)
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache_root))
    p = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env)
    deadline = time.time() + 120
    while time.time() < deadline:
        e = next((e for e in api.open_cache(cache_root).entries if e.kernel == "racer"), None)
        if e is not None and e.state == "building":
            break
        time.sleep(0.05)
    else:
        p.kill()
        pytest.fail("the build never took its lock")
    outcome = api.clean(api.open_cache(cache_root), ["racer"])
    assert [r.entry.kernel for r, _ in outcome.skipped] == ["racer"] and not outcome.removed
    out, err = p.communicate(timeout=600)
    assert p.returncode == 0, err
    assert out.strip().splitlines()[-1] == "6.0"
    racer = listing(cache_root)["racer"]
    assert racer["state"] == "fresh" and Path(racer["path"]).exists()


def test_a_builder_waiting_on_a_lock_that_clean_moved_away_takes_the_new_one(tmp_path):
    from kwb_store.locks import BuildLock

    entry = tmp_path / "root" / "kwb_x"
    entry.mkdir(parents=True)
    (entry / "lock").write_text("")
    e = api.Entry(tmp_path / "root", entry, "x", "kwb", "kwb kernel", "", [], 0)
    held = removal._hold(e)       # what clean holds while it moves the entry
    held.__enter__()
    got = {}

    def builder():
        with BuildLock(entry / "lock", "x (cpu)") as lock:
            got["inode"] = os.fstat(lock._fd).st_ino
            got["path_inode"] = os.stat(entry / "lock").st_ino

    t = threading.Thread(target=builder)
    t.start()
    time.sleep(0.3)                                     # the builder is polling the held lock
    os.rename(entry, tmp_path / "root" / "moved")       # clean's move
    held.__exit__(None, None, None)
    t.join(timeout=30)
    assert not t.is_alive()
    assert got["inode"] == got["path_inode"], "the builder must hold the lock at the entry's path, not the moved one"


def test_the_kwb_cache_command_runs_without_importing_torch(cache):
    code = textwrap.dedent(f"""
        import json, sys
        from workbench.cli import main
        try:
            main(["cache", "list", "--json", "--root", {str(cache)!r}])
        except SystemExit as e:
            assert e.code in (0, None), e.code
        assert "torch" not in sys.modules, "kwb cache imported torch"
    """)
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert {e["kernel"] for e in json.loads(res.stdout)["entries"]} == {"tiny", "kwbinl", "tinl", "tplain"}


def test_an_unknown_name_suggests_the_closest_entry_before_any_shipped_kernel(tmp_path):
    from types import SimpleNamespace

    entries = [SimpleNamespace(name=n, kernel=n, tag="py311_cu130", path=tmp_path / n) for n in ("tiny", "tplain")]
    cache = api.Cache(tmp_path, entries, 0)
    with pytest.raises(api.UnknownName, match=r"no entry named 'tinny' .*; did you mean tiny\?; entries: tiny, tplain"):
        api.find(cache, ["tinny"], ["relu_scale"])
    with pytest.raises(api.UnknownName, match=r"did you mean relu_scale\? \(a kernel kwb ships, with no build here\)"):
        api.find(cache, ["relu_scal"], ["relu_scale"])
    with pytest.raises(api.UnknownName) as e:
        api.find(cache, ["zzz"], ["relu_scale"])
    assert "did you mean" not in str(e.value)
    with pytest.raises(api.UnknownName, match="did you mean tiny"):
        api.clean(cache, ["tinny"], dry_run=True)


def _precompiled_header(root: Path, key: str, size: int, torch_version: str | None = None) -> Path:
    """A kwb_pch-<key>/ entry as workbench/jit/pch.py writes one (the .gch's bytes made up)."""
    import torch

    entry = root / f"{layout.ENTRY_PREFIX}{layout.PCH_IDENT_PREFIX}{key}"
    entry.mkdir(parents=True)
    (entry / layout.PCH_HEADER).write_text("#include <torch/extension.h>\n")
    (entry / f"{layout.PCH_HEADER}.gch").write_bytes(b"\0" * size)
    (entry / layout.PCH_RECORD).write_text(json.dumps({"cxx": "c++", "flags": [], "torch": torch_version or torch.__version__,
                                                       "seconds": 30.0, "bytes": size, "built_at": time.time()}))
    return entry


def test_du_shows_the_precompiled_headers_and_prune_pch_drops_them(tmp_path):
    root = tmp_path / "torch_extensions"
    fresh = _precompiled_header(root, "0123456789abcdef", 3 * 2**20)
    old_torch = _precompiled_header(root, "fedcba9876543210", 2**20, torch_version="1.0.0")
    (root / "kwb_other-0000").mkdir()
    (root / "kwb_other-0000" / "unrelated.txt").write_text("x" * 100)
    res = CliRunner().invoke(cache_cli, ["du", "--json", "--root", str(root), "--force"])
    assert res.exit_code == 0, res.output
    d = json.loads(res.output)
    assert d["pch"]["entries"] == 2 and d["pch"]["bytes"] >= 4 * 2**20, d["pch"]
    res = CliRunner().invoke(cache_cli, ["du", "--root", str(root), "--force"])
    assert res.exit_code == 0 and re.search(r"\(of which precompiled headers\)\s+2\s+2\s+4\.\d MiB", res.output), res.output

    res = CliRunner().invoke(cache_cli, ["prune", "--stale", "--root", str(root), "--force"])  # built for another torch
    assert res.exit_code == 0 and not old_torch.exists() and fresh.exists(), res.output
    res = CliRunner().invoke(cache_cli, ["prune", "--pch", "--dry-run", "--root", str(root), "--force"])
    assert res.exit_code == 0 and "would remove" in res.output and "precompiled header" in res.output and fresh.exists()
    res = CliRunner().invoke(cache_cli, ["prune", "--pch", "--root", str(root), "--force"])
    assert res.exit_code == 0 and re.search(r"freed 3\.\d MiB \(1 item\)", res.output), res.output
    assert not fresh.exists() and (root / "kwb_other-0000").exists()
    assert json.loads(CliRunner().invoke(cache_cli, ["du", "--json", "--root", str(root), "--force"]).output)["pch"] == \
        {"entries": 0, "bytes": 0}


def test_a_failed_precompiled_header_reads_failed_and_verify_passes(tmp_path):
    """The header's compile failed (pch.failed, no .gch, no record): its own state, not damage
    and not an interrupted compile; units read the header itself meanwhile."""
    root = tmp_path / "torch_extensions"
    entry = _precompiled_header(root, "00112233aabbccdd", 2**10)
    (entry / f"{layout.PCH_HEADER}.gch").unlink()
    (entry / layout.PCH_RECORD).unlink()
    (entry / layout.PCH_FAILED).write_text("exit status 1\n")
    (entry / layout.LOCK_NAME).touch()  # pch.py compiles under the entry's lock, whose file stays
    [found] = api.open_cache(root, force=True).entries
    assert found.state == "failed", (found.state, found.reasons)
    assert "prune --pch" in " ".join(found.reasons)
    res = CliRunner().invoke(cache_cli, ["verify", "--root", str(root), "--force"])
    assert res.exit_code == 0, res.output
    (entry / layout.PCH_FAILED).unlink()  # no marker: a compile that stopped
    [found] = api.open_cache(root, force=True).entries
    assert found.state == "interrupted"
