"""The state of each build and each cache entry, from their files alone (no library is
imported), judged against today's sources and the running toolchain:

    building     a live process holds the entry's build lock
    stale lock   a lock whose owner is gone (torch's: every later load waits forever; kwb's
                 blocks nothing, and the next load that finds a build empties it)
    broken       damaged: a manifest whose library is missing, cut short, or not the bytes
                 the build wrote, or a manifest that is not whole
    failed       the last compile failed (the builder's build-<device>/.kwb-failed.json): the
                 next load compiles again and reports the errors
    interrupted  a build stopped before finishing (Ctrl-C, SIGTERM, a kill): objects or a
                 library without a manifest, and no failure record; the next load builds again
    orphaned     its sources are gone
    stale        its sources changed, or it was built for another torch, CUDA, Python or
                 compiler than the one running
    fresh        none of the above: its recorded sources and headers are today's

An entry's state is what a load would do now, per device (the worst over its devices), as the
loader finds builds by content: the build whose recorded sources match today's when there is
one (fresh, even when a newer build of an edited version exists); else the last compile's
outcome when it came after the newest finished build (failed, interrupted); else the newest
build's state. Each build (version) keeps its own state.
"""
from __future__ import annotations

import os
import struct
from pathlib import Path

from kwb_store import environment, layout, locks
from kwb_store.fsutil import sha256_file
from kwb_store.manifest import Manifest

from .entries import PCH_ORIGIN, BuildFolder, Entry, Version

ORDER = ["building", "stale lock", "broken", "failed", "interrupted", "orphaned", "stale", "fresh"]


def elf_problem(path: Path) -> str | None:
    """Why a shared library is not whole, or None: its ELF header must be there and every
    section and program header it announces must lie inside the file (a copy cut short fails
    this). Reads 64 bytes."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(64)
    except OSError as e:
        return f"cannot read {path.name}: {e.strerror}"
    if len(head) < 52 or head[:4] != b"\x7fELF":
        return f"{path.name} is not a shared library ({size} bytes, no ELF header)"
    is64, little = head[4] == 2, head[5] == 1
    end = "<" if little else ">"
    if is64:
        if len(head) < 64:
            return f"{path.name} is truncated ({size} bytes)"
        phoff, shoff = struct.unpack(end + "QQ", head[32:48])
        phentsize, phnum, shentsize, shnum = struct.unpack(end + "HHHH", head[54:62])
    else:
        phoff, shoff = struct.unpack(end + "II", head[28:36])
        phentsize, phnum, shentsize, shnum = struct.unpack(end + "HHHH", head[42:50])
    need = max(phoff + phentsize * phnum, shoff + shentsize * shnum)
    if need > size:
        return f"{path.name} is truncated ({size} of at least {need} bytes)"
    return None


class Hasher:
    """sha256 of a file, once per (path, size, mtime) per command: 1,000 entries built from the
    same few sources hash each source once."""

    def __init__(self) -> None:
        self._memo: dict[tuple, str | None] = {}

    def __call__(self, path: str) -> str | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        key = (path, st.st_size, st.st_mtime_ns)
        if key not in self._memo:
            try:
                self._memo[key] = sha256_file(Path(path))
            except OSError:
                self._memo[key] = None
        return self._memo[key]


def recorded_key_consistent(m: Manifest) -> bool:
    """The manifest's base and key recomputed from its own records, as the builder computes
    them (layout.build_base, layout.build_key)."""
    base = layout.build_base(m.config, m.sources)
    return base == m.base and layout.build_key(base, m.headers) == m.key


def _kwb_version_state(v: Version, run: environment.Running, hasher: Hasher, deep: bool) -> tuple[str, list[str]]:
    m = v.manifest
    if m is None:
        if v.library is not None and not any(f.name.endswith(layout.MANIFEST_SUFFIX) for f in v.files):
            return "interrupted", [f"{v.library.name} has no manifest: its build stopped before finishing (never loaded)"]
        return "broken", ["unreadable manifest (another kwb format, or damaged)"]
    if v.library is None:
        return "broken", [f"no library: {m.library} is missing"]
    if v.library.name != m.library:
        return "broken", [f"the manifest names {m.library}, not {v.library.name}, as its library (damaged)"]
    size = v.library.stat().st_size if v.library.exists() else -1
    if size != m.library_size:
        return "broken", [f"{v.library.name} is {size} bytes, the build wrote {m.library_size}"]
    problem = elf_problem(v.library)
    if problem:
        return "broken", [problem]
    if deep:
        if hasher(str(v.library)) != m.library_sha256:
            return "broken", [f"{v.library.name}'s content differs from what the build wrote (sha256)"]
        if not recorded_key_consistent(m):
            return "broken", ["the manifest's key does not follow from its recorded sources, headers and flags (damaged)"]
    gone = [p for p in m.sources if not os.path.exists(p)]
    if gone:
        return "orphaned", [f"source gone: {p}" for p in gone]
    reasons = []
    for path, digest in {**m.sources, **m.headers}.items():
        now = hasher(path)
        if now is None:
            reasons.append(f"header gone: {path}")
        elif now != digest:
            reasons.append(f"changed since the build: {path}")
    versions = m.versions
    for field, now in (("python", run.python), ("torch", run.torch), ("torch_git", run.torch_git),
                       ("torch_cuda", run.torch_cuda or "none")):
        if now is not None and versions.get(field) not in (None, now):
            reasons.append(f"built for {field} {versions.get(field)}, running {now}")
    for field, path in (("cxx", m.compilers.get("cxx")), ("nvcc", m.compilers.get("nvcc"))):
        if path and field in versions:
            now = environment.compiler_version(path)
            if now != versions[field]:
                reasons.append(f"{field} is now {now!r}, built with {versions[field]!r}")
    return ("stale", reasons) if reasons else ("fresh", [])


def _pch_state(v: Version, run: environment.Running) -> tuple[str, list[str]]:
    """A precompiled header: whole once its record is written; stale once torch changed (GCC
    would refuse it then, and kwb compiles another)."""
    if v.record is None:
        if any(f.name == layout.PCH_FAILED for f in v.files):
            return "failed", [(f"precompiling the header failed (see {v.files[0].parent / layout.BUILD_LOG}); "
                               "units read the header itself; `kwb cache prune --pch` lets the next build try again")]
        return "interrupted", ["no finished precompiled header (stopped while compiling)"]
    if v.library is None:
        return "broken", [f"no precompiled header: {v.name} is missing"]
    size = v.library.stat().st_size if v.library.exists() else -1
    if size != v.record.get("bytes"):
        return "broken", [f"{v.library.name} is {size} bytes, the build wrote {v.record.get('bytes')}"]
    if run.torch and v.record.get("torch") not in (None, run.torch):
        return "stale", [f"built for torch {v.record.get('torch')}, running {run.torch}"]
    return "fresh", []


def _torch_version_state(entry: Entry, v: Version, run: environment.Running) -> tuple[str, list[str]]:
    assert v.library is not None
    problem = elf_problem(v.library)
    if problem:
        return "broken", [problem]
    ninja = entry.ninja
    sources = ninja.get("sources", [])
    gone = [s for s in sources if not os.path.exists(s)]
    if gone:
        return "orphaned", [f"source gone: {s}" for s in gone]
    reasons = []
    if entry.tag and entry.tag != run.tag:
        reasons.append(f"built for {entry.tag}, running {run.tag}")
    inc = ninja.get("torch_include")
    if inc and run.torch_include and os.path.realpath(inc) != os.path.realpath(run.torch_include):
        reasons.append(f"built against the torch at {os.path.dirname(inc)}, running {run.torch_dir}")
    built = v.built or 0
    for s in sources:
        try:
            if os.stat(s).st_mtime > built + 1e-3:
                reasons.append(f"changed since the build: {s}")
        except OSError:
            pass
    return ("stale", reasons) if reasons else ("fresh", [])


def _unfinished(device: str | None, state: str, reasons: list[str]) -> Version:
    """What a load would meet where no finished build serves: a compile that failed or stopped."""
    return Version(name="", device=device, library=None, files=[], size=0, built=None, loaded=None, state=state,
                   reasons=reasons)


def _failure_reasons(folder: BuildFolder, hasher: Hasher) -> list[str]:
    f = folder.failure or {}
    if f.get("damaged"):
        return [f"the last compile failed (its record {layout.FAILURE_RECORD} is not whole; see {folder.path / layout.BUILD_LOG})"]
    error = f": {f['error']}" if f.get("error") else ""
    reasons = [f"the last compile failed{error} (see {f.get('log') or folder.path / layout.BUILD_LOG})"]
    sources = f.get("sources")
    if isinstance(sources, dict) and any(hasher(p) != d for p, d in sources.items()):
        reasons.append("its sources changed since: the next load compiles again")
    return reasons


def _last_compile(folder: BuildFolder | None, finished: float, hasher: Hasher) -> Version | None:
    """The last compile of a build folder, when it came after the newest finished build of its
    device and left none: failed (the builder recorded the compiler's failure) or interrupted
    (it started, and neither finished nor failed). A finished build stamps the compile marker
    before its manifest's time, so a whole build never reads as unfinished."""
    if folder is None:
        return None
    failed_at = folder.failure["failed_at"] if folder.failure else None
    started = folder.compiling
    last = max((t for t in (failed_at, started) if t is not None), default=None)
    if last is None or last <= finished:
        return None
    if failed_at is not None and (started is None or failed_at >= started):
        return _unfinished(folder.device, "failed", _failure_reasons(folder, hasher))
    return _unfinished(folder.device, "interrupted", [
        (f"a build stopped before finishing (Ctrl-C, killed; {folder.objects} object files left in {folder.path.name}/); "
         "the next load builds again")])


def _kwb_current(entry: Entry, hasher: Hasher) -> list[Version]:
    """Per device, what a load does now: the build of today's sources, else the last compile
    if it failed or stopped after the newest build, else the newest build."""
    folders = {f.device: f for f in entry.build_folders}
    devices = list(dict.fromkeys([*(v.device for v in entry.versions), *folders]))
    current = []
    for device in devices:
        versions = [v for v in entry.versions if v.device == device]
        fresh = [v for v in versions if v.state == "fresh"]
        for v in fresh:
            v.today = True
        if fresh:
            current.append(max(fresh, key=lambda v: v.built or 0))
            continue
        finished = max((v.built or 0 for v in versions if v.manifest is not None), default=0.0)
        unfinished = _last_compile(folders.get(device), finished, hasher) if device is not None else None
        if unfinished is not None:
            current.append(unfinished)
        elif versions:
            current.append(max(versions, key=lambda v: (v.built or 0, v.number)))
        else:
            folder = folders[device]
            current.append(_unfinished(device, "interrupted", [
                f"no finished build: one stopped before finishing ({folder.objects} object files in {folder.path.name}/)"]))
    if not current:
        current = [_unfinished(None, "interrupted", ["no finished build: one stopped before compiling anything"])]
    return current


def assess(entry: Entry, run: environment.Running, open_files: locks.OpenFiles, hasher: Hasher, deep: bool = False) -> Entry:
    """Fill entry.lock, entry.state/reasons/current and each version's state/reasons/today."""
    if entry.layout == "link":
        entry.state = "broken"
        entry.reasons = [f"a symlink to {entry.link_target} (not followed; clean removes the link only)"]
        return entry
    inc = entry.ninja.get("torch_include")
    entry.lock = locks.inspect(entry.path, entry.layout, open_files, os.path.dirname(inc) if inc else None)
    for v in entry.versions:
        if entry.origin == PCH_ORIGIN:
            v.state, v.reasons = _pch_state(v, run)
        elif entry.layout == "kwb":
            v.state, v.reasons = _kwb_version_state(v, run, hasher, deep)
        else:
            v.state, v.reasons = _torch_version_state(entry, v, run)
    if entry.layout == "kwb" and entry.origin != PCH_ORIGIN:
        current = _kwb_current(entry, hasher)
    else:
        current = entry.newest_by_device()
    if entry.layout == "torch":
        target = entry.ninja.get("target")
        if target:
            named = [v for v in entry.versions if v.library and v.library.name == target]
            if not named:
                current = [Version(name=target.removesuffix(".so"), device=None, library=None, files=[],
                                   size=0, built=None, loaded=None, state="broken",
                                   reasons=[f"no library: {target} was never linked (a failed or killed build)"])]
            else:
                current = named
        for v in current:
            v.today = v.state == "fresh"
    entry.current = current
    worst = min(current, key=lambda v: ORDER.index(v.state))
    entry.state, entry.reasons = worst.state, [r for v in current if v.state == worst.state for r in v.reasons]
    lock = entry.lock
    if lock.state == "building" or lock.state == "unknown":
        entry.state = "building"
        entry.reasons = [lock.detail or "a build holds the lock"] + entry.reasons
    elif lock.state == "stale":
        entry.state = "stale lock"
        entry.reasons = [f"{lock.path.name}: {lock.detail}"] + entry.reasons
    return entry


def assess_all(entries: list[Entry], root: Path, deep: bool = False) -> list[Entry]:
    run = environment.running()
    open_files = locks.OpenFiles.scan(root)
    hasher = Hasher()
    return [assess(e, run, open_files, hasher, deep) for e in entries]
