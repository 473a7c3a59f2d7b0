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

from cache_tools.fsutil import same_file
from cache_tools.locks import LockOwner, pid_alive, read_owner

from . import notices

POLL_SECONDS = 0.1
REPORT_EVERY_SECONDS = 30.0


class BuildLock:
    """`with BuildLock(entry / "lock", "relu_scale (cuda)"):` -- one builder at a time."""

    def __init__(self, path: Path, what: str, timeout: float | None = None):
        self.path = path
        self.what = what
        self.timeout = timeout
        self._fd: int | None = None

    def __enter__(self) -> "BuildLock":
        self.path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
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
                self.path.parent.mkdir(parents=True, exist_ok=True)
                fd = os.open(self.path, os.O_RDWR | os.O_CREAT, 0o644)
                continue
            except BlockingIOError:
                waited = time.monotonic() - start
                if waited >= reported + (1.0 if reported == 0.0 else REPORT_EVERY_SECONDS):
                    reported = waited
                    owner = read_owner(self.path)
                    who = f"pid {owner.pid} on {owner.host}" if owner else "another process"
                    notices.say(f"kwb: waiting for {who} to finish building {self.what} ({waited:.0f} s)")
                if self.timeout is not None and waited > self.timeout:
                    os.close(fd)
                    raise TimeoutError(f"kwb: gave up waiting {self.timeout:.0f} s for the build lock {self.path}")
                time.sleep(POLL_SECONDS)
        previous = read_owner(self.path)
        if previous and previous.pid != os.getpid():
            state = "gone" if not previous.on_this_host or not pid_alive(previous.pid) else "still alive but no longer building"
            notices.say(f"kwb: the build of {self.what} by pid {previous.pid} was interrupted (that process is {state}); rebuilding")
        os.ftruncate(fd, 0)
        os.pwrite(fd, LockOwner.current(self.what).to_json().encode(), 0)
        self._fd = fd
        return self

    def __exit__(self, *exc) -> None:
        if self._fd is None:
            return
        try:
            os.ftruncate(self._fd, 0)  # an empty lock file means the last build ended cleanly
        finally:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None
