"""The build lock of one cache entry, safe against builders that die.

torch's FileBaton is a plain file whose existence means "locked": a process killed mid-build
leaves it behind and every later load waits forever. Here the lock is flock(2) on the file,
which the kernel releases when its holder dies, however it dies. The file's content names the
holder (pid, host, start time) so a waiter can say whom it waits for, and a new holder that
finds a previous holder's name still there knows that build was interrupted and says so.
"""
from __future__ import annotations

import fcntl
import os
import time
from pathlib import Path
from typing import TYPE_CHECKING

from cache_tools.locks import LockOwner, pid_alive, read_owner
from kwb_store.fsutil import same_file

from . import notices
from .errors import cache_error

if TYPE_CHECKING:
    from typing_extensions import Self  # typing.Self needs Python 3.11

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


class BuildLock:
    """`with BuildLock(entry / "lock", "relu_scale (cuda)"):` -- one builder at a time."""

    def __init__(self, path: Path, what: str, timeout: float | None = None):
        self.path = path
        self.what = what
        self.timeout = timeout if timeout is not None else timeout_from_env()
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
                    notices.say(f"kwb: waiting for {who} to finish building {self.what} ({waited:.0f} s{why}; {limit})")
                if self.timeout is not None and waited >= self.timeout:
                    os.close(fd)
                    raise TimeoutError(f"kwb: gave up after waiting {waited:.0f} s ({TIMEOUT_ENV}) for the build lock "
                                       f"{self.path}, held by {self._holder()}")
                time.sleep(POLL_SECONDS)
        previous = read_owner(self.path)
        if previous and previous.pid != os.getpid():
            state = "gone" if not previous.on_this_host or not pid_alive(previous.pid) else "still alive but no longer building"
            notices.say(f"kwb: the build of {self.what} by pid {previous.pid} was interrupted (that process is {state}); rebuilding")
        os.ftruncate(fd, 0)
        os.pwrite(fd, LockOwner.current(self.what).to_json().encode(), 0)
        self._fd = fd
        return self

    def _open(self) -> int:
        """The lock file's descriptor, its folder made first; CacheError naming the path when
        something on disk is in the way (a file where the entry's folder goes, a folder where
        the lock goes, a full disk)."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as e:
            raise cache_error(e, self.path.parent, "kwb's cache folder for this build") from None
        try:
            return os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as e:
            raise cache_error(e, self.path, "the build lock") from None

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
