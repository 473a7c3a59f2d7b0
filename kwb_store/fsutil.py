"""Atomic file writes: a reader sees the old file or the new one, never half of either.

As cupy and triton do for their caches: write to a temporary name in the same folder, flush,
then os.replace() onto the final name (a rename within one filesystem is atomic).
"""
from __future__ import annotations

import errno
import hashlib
import os
import shutil
import tempfile
from pathlib import Path


def _named(e: OSError, path: Path) -> OSError:
    """e with the file it concerns: a write that fails on a full disk names none (errno 28 alone)."""
    if e.filename is None and e.errno is not None:
        return OSError(e.errno, e.strerror, str(path))
    return e


def _temp_beside(path: Path) -> tuple[int, str]:
    """A new temporary file in path's folder (so os.replace onto path is atomic): (fd, its path)."""
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        return tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    except OSError as e:
        raise _named(e, path) from None


def atomic_write_bytes(path: Path, data: bytes) -> None:
    fd, tmp = _temp_beside(path)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, 0o644)  # mkstemp's 0600 would hide reports and manifests from other users
        os.replace(tmp, path)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError):
            raise _named(e, path) from None
        raise


def atomic_write_text(path: Path, text: str) -> None:
    atomic_write_bytes(path, text.encode())


def atomic_copy(src: Path, dst: Path) -> None:
    fd, tmp = _temp_beside(dst)
    os.close(fd)
    try:
        shutil.copyfile(src, tmp)
        os.chmod(tmp, 0o755)
        os.replace(tmp, dst)
    except BaseException as e:
        Path(tmp).unlink(missing_ok=True)
        if isinstance(e, OSError) and e.errno in (errno.ENOSPC, errno.EDQUOT):  # copyfile names the source
            raise OSError(e.errno, e.strerror, str(dst)) from None
        if isinstance(e, OSError):
            raise _named(e, dst) from None
        raise


def sha256_file(path: Path) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def unchanged(digests: dict[str, str]) -> bool:
    """Whether every file still has the sha256 recorded for it (a file gone is a change)."""
    for path, digest in digests.items():
        try:
            if sha256_file(Path(path)) != digest:
                return False
        except OSError:
            return False
    return True


def real_location(path: Path) -> str:
    """The real path of path's folder joined with its own name: path itself is not resolved,
    so a symlink names the link, never its target."""
    return os.path.join(os.path.realpath(path.parent), path.name)


def same_file(fd: int, path: Path) -> bool:
    """Whether path still names the file open as fd (not moved, not replaced)."""
    try:
        st = os.stat(path)
    except OSError:
        return False
    own = os.fstat(fd)
    return (st.st_dev, st.st_ino) == (own.st_dev, own.st_ino)
