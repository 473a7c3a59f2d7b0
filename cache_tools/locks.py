"""Who holds a cache entry's build lock, if anyone, and removing locks whose owner is gone.

Two kinds of lock live in an extensions cache:

- kwb's (`workbench/locking.py`): flock(2) on `<entry>/lock`, released by the kernel when its
  holder dies. The file stays; it names its holder (JSON: pid, host, started) while a build
  runs and is emptied when the build ends. A non-empty file that nobody holds is the trace of
  an interrupted build ("stale lock"); it blocks nothing, and unlock empties it.
- torch's, two kinds by version. FileBaton (torch 2.13 and older): the file's existence is the lock
  (created with O_EXCL, removed at the end); its holder keeps the file open for the whole
  build, so the holder is found among the open files of this machine's processes
  (/proc/<pid>/fd), and a lock file no live process holds open makes every later load of that
  extension wait forever: unlock removes it. In torch 2.15 (pytorch#189245), filelock's
  flock: the file stays, and only a live holder's flock means a build is running.
"""
from __future__ import annotations

import errno
import fcntl
import json
import os
import socket
import time
from dataclasses import dataclass
from pathlib import Path

from kwb_store import environment
from kwb_store.fsutil import real_location


def pid_alive(pid: int) -> bool:
    if pid <= 0:
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


@dataclass(frozen=True)
class LockOwner:
    """Who holds (or last held, if interrupted) a kwb build lock: the lock file's content while
    a build runs. workbench's BuildLock writes it; the cache commands read it."""

    pid: int
    host: str
    started: float
    what: str = ""  # "relu_scale (cuda)"

    @classmethod
    def current(cls, what: str) -> LockOwner:
        return cls(os.getpid(), socket.gethostname(), time.time(), what)

    def to_json(self) -> str:
        return json.dumps({"pid": self.pid, "host": self.host, "started": self.started, "what": self.what})

    @property
    def on_this_host(self) -> bool:
        return self.host == socket.gethostname()

    def describe(self) -> str:
        """'pid 1234 (relu_scale (cuda))', with ' on <host>' when it is another machine."""
        where = "" if self.on_this_host else f" on {self.host}"
        what = f" ({self.what})" if self.what else ""
        return f"pid {self.pid}{where}{what}"


def read_owner(path: Path) -> LockOwner | None:
    """The holder kwb's lock file names, or None (empty: no build running, or not a record)."""
    try:
        text = path.read_text()
    except OSError:
        return None
    try:
        data = json.loads(text) if text.strip() else None
    except ValueError:
        return None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or isinstance(data.get("pid"), bool):
        return None
    started = data.get("started")
    return LockOwner(data["pid"], str(data.get("host", "")), float(started) if isinstance(started, (int, float)) else 0.0,
                     str(data.get("what", "")))


@dataclass
class OpenFiles:
    """Which processes hold which files open, from /proc: one scan per command."""

    holders: dict[str, list[int]]
    complete: bool  # False when some processes' files could not be read (another user's)

    @classmethod
    def scan(cls, under: Path) -> OpenFiles:
        prefix = os.path.realpath(under) + os.sep
        holders: dict[str, list[int]] = {}
        complete = True
        try:
            pids = [int(p) for p in os.listdir("/proc") if p.isdigit()]
        except OSError:
            return cls({}, False)
        for pid in pids:
            fd_dir = f"/proc/{pid}/fd"
            try:
                fds = os.listdir(fd_dir)
            except PermissionError:
                complete = False
                continue
            except OSError:  # the process ended while we looked
                continue
            for fd in fds:
                try:
                    target = os.readlink(f"{fd_dir}/{fd}")
                except OSError:
                    continue
                if target.startswith(prefix):
                    holders.setdefault(target, []).append(pid)
        return cls(holders, complete)

    def pids(self, path: Path) -> list[int]:
        return sorted(set(self.holders.get(real_location(path), [])))


@dataclass
class LockState:
    """state: 'none' (no lock, or kwb's empty lock file), 'building' (a live holder), 'stale'
    (a lock nobody holds: an interrupted build) or 'unknown' (a torch lock whose holder could
    not be looked for: another user's processes)."""

    kind: str            # "kwb" or "torch"
    path: Path
    state: str
    pid: int | None = None
    detail: str = ""


def _kwb_lock(path: Path) -> LockState:
    held = _flock_held(path)
    if held is None:
        if not path.exists():
            return LockState("kwb", path, "none")
        return LockState("kwb", path, "unknown", detail="cannot open the lock file")
    owner = read_owner(path)
    if held:
        return LockState("kwb", path, "building", owner.pid if owner else None, owner.describe() if owner else "another process")
    if owner is None:
        return LockState("kwb", path, "none")
    return LockState("kwb", path, "stale", owner.pid, f"left by {owner.describe()}, which was interrupted")


def _flock_held(path: Path) -> bool | None:
    """True if a process holds an flock on path now, None if it cannot be opened."""
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except OSError as e:
        if e.errno in (errno.EWOULDBLOCK, errno.EAGAIN):
            return True
        raise
    finally:
        os.close(fd)  # closing drops our shared lock too
    return False


def _torch_lock(path: Path, open_files: OpenFiles, style: str) -> LockState:
    if not path.exists():
        return LockState("torch", path, "none")
    pids = open_files.pids(path)
    if _flock_held(path):  # torch >= 2.15 (filelock): held while a build runs
        return LockState("torch", path, "building", pids[0] if pids else None,
                         f"flock held by pid {', '.join(map(str, pids))}" if pids else "flock held by another process")
    if pids:  # FileBaton: its builder keeps the file open
        return LockState("torch", path, "building", pids[0], f"held open by pid {', '.join(map(str, pids))}")
    if style == "filelock":
        return LockState("torch", path, "none", detail="a released lock file (its torch locks with flock)")
    if not open_files.complete:
        return LockState("torch", path, "unknown", detail="no holder among the processes this user can see")
    return LockState("torch", path, "stale", detail="no process holds it open: its build was killed")


def inspect(entry: Path, kind: str, open_files: OpenFiles, torch_dir: str | None = None) -> LockState:
    """The lock of a build folder. torch_dir: the torch a torch-layout build was made with
    (its lock style decides what a lock file nobody holds means); the running one if None."""
    path = entry / "lock"
    if kind == "kwb":
        return _kwb_lock(path)
    style = environment.lock_style_of(torch_dir) if torch_dir else environment.torch_lock_style()
    return _torch_lock(path, open_files, style)


def unlock(lock: LockState) -> str:
    """Remove a stale lock; never one with a live or unknown holder. Returns what was done."""
    if lock.state != "stale":
        raise ValueError(f"{lock.path}: not a stale lock ({lock.state})")
    if lock.kind == "torch":
        lock.path.unlink()  # FileBaton waiters poll for the file to go
        return "removed"
    # kwb: empty the file under its flock (not unlink: a builder that opened it keeps its inode)
    fd = os.open(lock.path, os.O_RDWR)
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            raise ValueError(f"{lock.path}: a build took the lock just now") from None
        os.ftruncate(fd, 0)
        fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
    return "emptied"
