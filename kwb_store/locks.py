"""A cache entry's build lock: taking it (BuildLock), its owner record (LockOwner), who holds
it, if anyone (inspect), and removing locks whose owner is gone (unlock).

torch's FileBaton is a plain file whose existence means "locked": a process killed mid-build
leaves it behind and every later load waits forever. kwb's lock is flock(2) on the file,
which the kernel releases when its holder dies, however it dies. The file's content names the
holder (pid, host, start time) so a waiter can say whom it waits for, and a new holder that
finds a previous holder's name still there knows that build was interrupted and says so.

Two kinds of lock live in an extensions cache:

- kwb's (BuildLock, below): flock(2) on `<entry>/lock`, released by the kernel when its
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
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from . import environment
from .fsutil import real_location, same_file

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs Python 3.11


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
    a build runs. BuildLock writes it; the cache commands read it."""

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


POLL_SECONDS = 0.1
REPORT_EVERY_SECONDS = 30.0
TIMEOUT_ENV = "KWB_LOCK_TIMEOUT"  # seconds a load waits for another process's build; unset: for ever


def timeout_from_env() -> float | None:
    """KWB_LOCK_TIMEOUT as seconds (None when unset); a value that is not a number >= 0 is a
    ValueError naming the variable."""
    text = os.environ.get(TIMEOUT_ENV, "").strip()
    if not text:
        return None
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (value >= 0 and value != float("inf")):
        raise ValueError(f"{TIMEOUT_ENV} must be a number of seconds >= 0, got {text!r}")
    return value


def _stopped(pid: int) -> bool:
    """Whether a process on this host is stopped (SIGSTOP, Ctrl-Z): it keeps its lock until it
    is continued or dies."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0] in ("T", "t")
    except (OSError, IndexError):
        return False


def _say(message: str) -> None:
    print(message, file=sys.stderr, flush=True)


def _as_is(e: OSError, path: Path, what: str) -> Exception:
    return e


class BuildLock:
    """`with BuildLock(entry / "lock", "relu_scale (cuda)"):` -- one builder at a time.

    say: where its one-line notices go (stderr unless given: workbench passes its notices.say);
    refused(error, path, what): the exception to raise when the lock file or its folder cannot
    be made (the OSError itself unless given: workbench passes its one-sentence cache_error)."""

    def __init__(self, path: Path, what: str, timeout: float | None = None, *,
                 say: Callable[[str], None] = _say, refused: Callable[[OSError, Path, str], Exception] = _as_is):
        self.path = path
        self.what = what
        self.timeout = timeout if timeout is not None else timeout_from_env()
        self._say = say
        self._refused = refused
        self._fd: int | None = None

    def __enter__(self) -> Self:
        fd = self._open()
        start = time.monotonic()
        reported = 0.0
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                if same_file(fd, self.path):
                    break
                # `kwb cache clean` moved the entry away while we waited: this inode is not the
                # lock any more; take the one at the path (it may be new).
                fcntl.flock(fd, fcntl.LOCK_UN)
                os.close(fd)
                fd = self._open()
                continue
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited >= reported + (1.0 if reported == 0.0 else REPORT_EVERY_SECONDS):
                    reported = waited
                    owner = read_owner(self.path)
                    who = f"pid {owner.pid} on {owner.host}" if owner else "another process"
                    stopped = owner is not None and owner.on_this_host and _stopped(owner.pid)
                    why = (f"; pid {owner.pid} is stopped and keeps the lock until continued (kill -CONT {owner.pid}) "
                           "or ended" if stopped else "")
                    limit = (f"gives up after {self.timeout:.0f} s" if self.timeout is not None
                             else f"set {TIMEOUT_ENV}=<seconds> to give up")
                    self._say(f"kwb: waiting for {who} to finish building {self.what} ({waited:.0f} s{why}; {limit})")
                if self.timeout is not None and waited >= self.timeout:
                    os.close(fd)
                    raise TimeoutError(f"kwb: gave up after waiting {waited:.0f} s ({TIMEOUT_ENV}) for the build lock "
                                       f"{self.path}, held by {self._holder()}")
                time.sleep(POLL_SECONDS)
        previous = read_owner(self.path)
        if previous and previous.pid != os.getpid():
            state = "gone" if not previous.on_this_host or not pid_alive(previous.pid) else "still alive but no longer building"
            self._say(f"kwb: the build of {self.what} by pid {previous.pid} was interrupted (that process is {state}); rebuilding")
        os.ftruncate(fd, 0)
        os.pwrite(fd, LockOwner.current(self.what).to_json().encode(), 0)
        self._fd = fd
        return self

    def _open(self) -> int:
        """The lock file's descriptor, its folder made first; refused(...) naming the path when
        something on disk is in the way (a file where the entry's folder goes, a folder where
        the lock goes, a full disk)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise self._refused(e, self.path.parent, "kwb's cache folder for this build") from None
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise self._refused(e, self.path, "the build lock") from None

    def _holder(self) -> str:
        owner = read_owner(self.path)
        return owner.describe() if owner else "another process"

    def __exit__(self, *exc) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # an empty lock file means the last build ended cleanly
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def clear_dead_owner(path: Path) -> None:
    """Empty a lock file that still names a builder that was interrupted (killed before it could
    empty it), once this process found a finished build to load: otherwise `kwb cache list`
    keeps calling the entry a stale lock after every good load. One stat when the file is
    empty; never touches a lock that a live build holds, nor this process's own record."""
    try:
        if os.stat(path).st_size == 0:
            return
    except OSError:
        return
    owner = read_owner(path)
    if owner is None or (owner.pid == os.getpid() and owner.on_this_host):
        return
    try:
        fd = os.open(path, os.O_RDWR)
    except OSError:
        return  # a read-only cache: the record stays, the load goes on
    try:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            return  # a build holds it: its record is alive
        try:
            if same_file(fd, path) and read_owner(path) == owner:
                os.ftruncate(fd, 0)
        finally:
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
