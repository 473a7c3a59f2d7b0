"""Removing cache entries and old versions, safely.

- Only inside the root: every path is checked against the root's real path before anything
  is removed; a symlink is removed as a link (never followed, never its target).
- A root that is `/`, a home folder, or does not look like an extensions cache is refused
  unless forced (check_root).
- Never an entry whose build is running: kwb's entries are removed holding their flock, so a
  builder waits until the entry is gone and then builds afresh (kwb_store/locks.py retries
  when the lock file it waited on was moved); torch's only when no process holds their lock.
- No half-deleted entry that loads as valid: an entry is first renamed (atomically) into
  `.kwb-trash/` beside it, then deleted there; a crash leaves a trash folder, which the next
  clean or prune empties. One version of a kwb entry loses its manifest first (without it the
  library is never loaded), then its library.
- Dry-run computes the same plan and changes nothing.
"""
from __future__ import annotations

import fcntl
import math
import os
import shutil
import sys
import time
import uuid
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from kwb_store import layout
from kwb_store.fsutil import real_location, same_file
from kwb_store.layout import TAG_RE
from kwb_store.locks import OpenFiles

from .entries import PCH_ORIGIN, Entry, Version, is_entry_dir, trash_folders, tree_size


class RootRefused(Exception):
    pass


def inside(path: Path, root: Path) -> bool:
    real_root = os.path.realpath(root)
    real = real_location(path)
    return path.name not in ("", ".", "..") and real.startswith(real_root.rstrip(os.sep) + os.sep)


# Files that make a folder a project (whose build/ may hold a build.ninja), not a cache.
PROJECT_MARKERS = {".git", "setup.py", "pyproject.toml", "setup.cfg", "CMakeLists.txt", "Makefile", "meson.build",
                   "package.json", "Cargo.toml", ".hg", "requirements.txt"}


def looks_like_cache(root: Path) -> bool:
    """An extensions cache: named like one, holding kwb's files, or holding entries / tag
    folders and little else."""
    if root.name == "torch_extensions" or TAG_RE.match(root.name):
        return True
    try:
        names = os.listdir(root)
    except OSError:
        return False
    # the probe's lock comes first: a root whose first build is probing the compiler holds only it
    if not names or {layout.TOOL_VERSIONS, layout.TOOL_PROBE_LOCK, layout.TRASH_DIR} & set(names):
        return True
    if PROJECT_MARKERS & set(names):  # a project's own build/ holds build.ninja too: never a cache
        return False
    known = other = 0
    for n in names:
        p = root / n
        if p.is_dir() and not p.is_symlink() and (TAG_RE.match(n) or is_entry_dir(p)):
            known += 1
        elif not n.startswith("."):
            other += 1
    return known > 0 and other <= known


def check_root(root: Path, force: bool) -> Path:
    """The root to work on, or RootRefused saying why and how to override."""
    if not root.exists():
        raise RootRefused(f"--root {root}: no such folder")
    if not root.is_dir():
        raise RootRefused(f"--root {root}: not a folder")
    if force:
        return root
    real = os.path.realpath(root)
    danger = {"/", os.path.realpath(os.path.expanduser("~")), "/usr", "/etc", "/var", "/tmp", "/home", "/root", "/opt"}
    if real in danger:
        raise RootRefused(f"--root {root}: refusing to treat {real} as an extensions cache (pass --force if it really is one)")
    if not looks_like_cache(root):
        raise RootRefused(f"--root {root}: does not look like an extensions cache (no build folders, tag folders such as "
                          f"py311_cu130, or kwb files in it); pass --force to use it anyway")
    return root


@dataclass
class Removal:
    entry: Entry
    version: Version | None  # None: the whole entry
    bytes: int
    reason: str

    @property
    def label(self) -> str:
        where = f"{self.entry.tag}/" if self.entry.tag else ""
        return f"{where}{self.entry.name}" + (f" [{self.version.name}]" if self.version else "")


@dataclass
class Outcome:
    removed: list[Removal] = field(default_factory=list)
    skipped: list[tuple[Removal, str]] = field(default_factory=list)
    trash_bytes: int = 0  # left by earlier interrupted cleans, emptied now

    @property
    def freed(self) -> int:
        return sum(r.bytes for r in self.removed) + self.trash_bytes


class Busy(Exception):
    """The entry cannot be removed now; the message says why."""


@contextmanager
def _hold(e: Entry):
    """Hold the entry's build lock the way its builders take it, or raise Busy.

    kwb: the flock. torch: the flock (torch 2.15's filelock) and the file itself (FileBaton,
    torch 2.13, whose builders never flock but keep the file open: looked for in /proc now,
    not only at the scan). A lock file created here is removed again, unless the entry moved
    away with it."""
    path = e.path / layout.LOCK_NAME
    created = False
    try:
        if e.layout == "kwb":
            fd = os.open(path, os.O_RDWR)
        else:
            if e.lock is not None and e.lock.state in ("building", "unknown"):
                raise Busy(f"a build may be running ({e.lock.detail})")
            try:
                fd = os.open(path, os.O_CREAT | os.O_EXCL | os.O_RDWR, 0o644)
                created = True
            except FileExistsError:
                fd = os.open(path, os.O_RDWR)
    except FileNotFoundError:
        fd = None  # a kwb entry without a lock file: no build ever ran here
    except OSError as err:
        raise Busy(f"cannot open its lock: {err.strerror}") from None
    try:
        if fd is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise Busy("a build is running (it holds the lock)") from None
            if e.layout == "torch" and not created:
                others = [p for p in OpenFiles.scan(e.path).pids(path) if p != os.getpid()]
                if others:
                    raise Busy(f"a build is running (pid {', '.join(map(str, others))} holds its lock open)")
        yield
    finally:
        if fd is not None:
            if created and same_file(fd, path):
                path.unlink(missing_ok=True)  # to FileBaton, a file left behind is a lock
            fcntl.flock(fd, fcntl.LOCK_UN)
            os.close(fd)


def _ignore_missing(func, path, exc) -> None:
    err = exc if isinstance(exc, BaseException) else exc[1]
    if not isinstance(err, FileNotFoundError):  # another clean emptied it first
        raise err


def _rmtree(path: Path, root: Path) -> None:
    if not inside(path, root):
        raise RuntimeError(f"refusing to delete {path}: outside the cache root {root}")
    if path.is_symlink() or not path.is_dir():
        path.unlink(missing_ok=True)
        return
    # unlinks symlinks inside, never follows them (fd-based on Linux)
    if sys.version_info >= (3, 12):
        shutil.rmtree(path, onexc=_ignore_missing)
    else:
        shutil.rmtree(path, onerror=_ignore_missing)


def _trash_for(e: Entry) -> Path:
    """`.kwb-trash/` beside the entry (same filesystem, so the move is a rename), a real folder
    inside the root: a link there would carry the entry out of the cache."""
    trash = e.path.parent / layout.TRASH_DIR
    try:
        trash.mkdir()
    except FileExistsError:
        pass
    if trash.is_symlink() or not trash.is_dir() or not inside(trash, e.root):
        raise Busy(f"{trash} is not a folder of the cache (a link?): not moving anything there")
    return trash


def _remove_entry(r: Removal, root: Path) -> None:
    e = r.entry
    if not inside(e.path, root):
        raise Busy(f"outside the cache root {root}")
    if e.layout == "link":
        if not e.path.is_symlink():
            raise Busy("no longer a link; list again")
        e.path.unlink(missing_ok=True)
        return
    with _hold(e):
        for attempt in range(2):
            trash = _trash_for(e)
            moved = trash / f"{e.path.name}.{os.getpid()}.{uuid.uuid4().hex[:8]}"
            try:
                os.rename(e.path, moved)  # atomic: from here the entry no longer exists for loaders
                break
            except FileNotFoundError:
                if not e.path.exists() or attempt:
                    raise Busy("it went away while being removed") from None
                # another clean dropped the (empty) trash folder between our mkdir and rename
    _rmtree(moved, root)
    _drop_if_empty(trash)


def _remove_version(r: Removal, root: Path) -> None:
    e, v = r.entry, r.version
    assert v is not None
    if not all(inside(f, root) for f in v.files):
        raise Busy(f"outside the cache root {root}")
    with _hold(e):
        # the manifest first: a library without one is never loaded
        for f in sorted(v.files, key=lambda p: not p.name.endswith(layout.MANIFEST_SUFFIX)):
            f.unlink(missing_ok=True)


def _drop_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:
        pass


def empty_trash(root: Path, dry_run: bool) -> int:
    freed = 0
    for trash in trash_folders(root):
        freed += tree_size(trash)
        if not dry_run:
            _rmtree(trash, root)
    return freed


def execute(plan: list[Removal], root: Path, dry_run: bool) -> Outcome:
    out = Outcome(trash_bytes=empty_trash(root, dry_run))
    for r in plan:
        if dry_run:
            if r.entry.state == "building":
                out.skipped.append((r, "a build is running"))
            else:
                out.removed.append(r)
            continue
        try:
            _remove_version(r, root) if r.version else _remove_entry(r, root)
        except Busy as why:
            out.skipped.append((r, str(why)))
        else:
            out.removed.append(r)
    return out


# ---- what to remove ---------------------------------------------------------------------


def plan_clean(entries: list[Entry]) -> list[Removal]:
    return [Removal(e, None, e.size, "asked for") for e in entries]


# Whole builds (a load takes a fresh one; stale and orphaned ones are whole, only out of date);
# a broken, failed or interrupted version (no manifest, a damaged one, a library cut short) never loads.
LOADABLE = ("fresh", "stale", "orphaned")

# Their sources are the cache's own copy of the text a program passed: that the copy matches
# says nothing of whether anything still loads them, so age and size may take them.
INLINE_ORIGINS = ("kwb load_inline", "load_inline")


def parse_age(text: str) -> float:
    """'30d', '12h', '90m', '45s', '2w' -> seconds."""
    units = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 7 * 86400}
    t = text.strip().lower()
    if len(t) < 2 or t[-1] not in units:
        raise ValueError(f"--older-than: expected a number and a unit (s, m, h, d, w), e.g. 30d; got {text!r}")
    try:
        n = float(t[:-1])
    except ValueError:
        raise ValueError(f"--older-than: expected a number and a unit (s, m, h, d, w), e.g. 30d; got {text!r}") from None
    if not math.isfinite(n):  # float() takes 'nan' and 'inf': no age compares with NaN
        raise ValueError(f"--older-than must be a finite number and a unit, e.g. 30d; got {text!r}")
    if n < 0:
        raise ValueError(f"--older-than must not be negative, got {text!r}")
    return n * units[t[-1]]


def parse_size(text: str) -> int:
    """'2G', '500M', '1.5GiB', '100k', '123' -> bytes (powers of 1024)."""
    t = text.strip().upper().removesuffix("IB").removesuffix("B")
    units = {"K": 1 << 10, "M": 1 << 20, "G": 1 << 30, "T": 1 << 40}
    mult = 1
    if t and t[-1] in units:
        mult, t = units[t[-1]], t[:-1]
    try:
        n = float(t)
    except ValueError:
        raise ValueError(f"--max-size: expected a size such as 2G, 500M or 100K; got {text!r}") from None
    if not math.isfinite(n):  # int(inf) raised OverflowError
        raise ValueError(f"--max-size must be a finite size such as 2G, got {text!r}")
    if n < 0:
        raise ValueError(f"--max-size must not be negative, got {text!r}")
    return int(n * mult)


def _kept(e: Entry, v: Version, by_use: bool) -> bool:
    """Whether prune must keep v: the build today's sources load (states.assess marks it). by_use:
    the age and size modes, which may take an inline build."""
    return v.today and not (by_use and e.origin in INLINE_ORIGINS)


def _entry_or_rest(e: Entry, reason: str, by_use: bool) -> list[Removal]:
    """The whole entry, or, where it holds the build of today's sources, every other version."""
    kept = [v for v in e.versions if _kept(e, v, by_use)]
    if not kept:
        return [Removal(e, None, e.size, reason)]
    why = f"{reason}; keeps {', '.join(v.name for v in kept)}: the build of today's sources"
    return [Removal(e, v, v.size, why) for v in e.versions if not _kept(e, v, by_use)]


def plan_prune(entries: list[Entry], older_than: float | None = None, max_size: int | None = None,
               keep_latest: int | None = None, stale: bool = False, orphaned: bool = False,
               now: float | None = None, pch: bool = False) -> list[Removal]:
    """Whole entries selected by age or state (pch: every precompiled header), stale or orphaned
    versions of the entries that stay, old versions beyond keep_latest, then the least recently
    used entries until the rest fits in max_size. No mode takes the build today's sources load
    (Version.today): an entry holding one loses its other versions only."""
    now = time.time() if now is None else now
    chosen: dict[Path, list[Removal]] = {}

    def take(e: Entry, removals: list[Removal]) -> int:
        """Add removals for e (a whole entry replaces its parts); returns the bytes added."""
        have = chosen.get(e.path, [])
        before = sum(r.bytes for r in have)
        if any(r.version is None for r in have) or not removals:
            return 0
        if any(r.version is None for r in removals):
            chosen[e.path] = removals
        else:
            taken = {id(r.version) for r in have}
            chosen[e.path] = have + [r for r in removals if id(r.version) not in taken]
        return sum(r.bytes for r in chosen[e.path]) - before

    for e in entries:
        if e.state == "building":
            continue
        if pch and e.origin == PCH_ORIGIN:
            take(e, [Removal(e, None, e.size, "precompiled header (compiled again when a build needs it)")])
        elif stale and e.state == "stale":
            take(e, _entry_or_rest(e, "stale: " + "; ".join(e.reasons[:2]), False))
        elif orphaned and e.state == "orphaned":
            take(e, _entry_or_rest(e, "orphaned: " + "; ".join(e.reasons[:2]), False))
        elif older_than is not None and now - e.last_used > older_than:
            days = (now - e.last_used) / 86400
            take(e, _entry_or_rest(e, f"last used {days:.1f} days ago", True))
        wanted = {"stale"} if stale else set()
        wanted |= {"orphaned"} if orphaned else set()
        take(e, [Removal(e, v, v.size, f"{v.state}: " + "; ".join(v.reasons[:2]))
                 for v in e.versions if v.state in wanted and not _kept(e, v, False)])
    if keep_latest is not None:
        for e in entries:
            if e.state == "building" or any(r.version is None for r in chosen.get(e.path, [])):
                continue
            by_device: dict[str | None, list[Version]] = {}
            for v in e.versions:
                by_device.setdefault(v.device, []).append(v)
            for vs in by_device.values():
                # the build of today's sources first, then loadable versions: keeping the newest N
                # must never keep a library with no manifest (a killed build's) in place of the
                # only build a load can use
                vs.sort(key=lambda v: (v.today, v.state in LOADABLE, v.built or 0, v.number), reverse=True)
                take(e, [Removal(e, v, v.size, f"older than the newest {keep_latest}" if v.state in LOADABLE
                                 else f"not loadable ({v.state})")
                         for v in vs[keep_latest:] if not _kept(e, v, False)])
    if max_size is not None:
        left = sum(e.size for e in entries) - sum(r.bytes for rs in chosen.values() for r in rs)
        for e in sorted(entries, key=lambda e: e.last_used):
            if left <= max_size:
                break
            if e.state == "building":
                continue
            left -= take(e, _entry_or_rest(e, "least recently used, over --max-size", True))
    return [r for rs in chosen.values() for r in rs]
