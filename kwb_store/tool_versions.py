"""`tool --version` of the compilers a build used, cached by (path, size, mtime), and other
facts probed once per compiler binary (remember / remembered), in one file at the cache root.

The builder records versions in each manifest; `kwb cache` compares them with what is
installed now (a compiler upgraded since a build makes the build stale). No torch import here.
"""
from __future__ import annotations

import contextlib
import fcntl
import json
import os
import subprocess
import threading
from collections.abc import Callable
from pathlib import Path

from . import layout
from .fsutil import atomic_write_text

_VERSION_CACHE_FILE = layout.TOOL_VERSIONS
# Held while one process probes: 16 loaders in a fresh root each probed the compilers (about
# 8 of their 22 s on the 2-core machine) before any reached its build lock.
_PROBE_LOCK_FILE = layout.TOOL_PROBE_LOCK
_probing_here = threading.local()  # a probe that probes again (flock is per open file) must not wait on itself


def file_ident(path: str) -> str:
    """A binary's identity for the cache: its real path, size and mtime (an upgrade changes it)."""
    real = os.path.realpath(path)
    try:
        st = os.stat(real)
    except OSError:
        return real
    return f"{real}:{st.st_size}:{st.st_mtime_ns}"


def tool_version(path: str | None, cache_root: Path | None = None) -> str:
    """The line of `path --version` that names its version, cached by (path, size, mtime)."""
    if not path or not os.path.exists(path):
        return "none"
    return probe_once(file_ident(path), lambda: _version_line(path), cache_root) or "unknown"


def _version_line(path: str) -> str | None:
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30, check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    if "Cuda compilation tools" in out:
        return next(l for l in lines if l.startswith("Cuda compilation tools"))
    return lines[0] if lines else "unknown"


_memory_versions: dict[str, str] = {}


def _load_version_cache(cache_root: Path | None, again: bool = False) -> dict[str, str]:
    """What this process knows, read from the root's file the first time (or `again`: what other
    processes remembered since)."""
    if cache_root is not None and (again or not _memory_versions):
        try:
            stored = json.loads((cache_root / _VERSION_CACHE_FILE).read_text())
        except (OSError, ValueError):
            stored = {}
        if isinstance(stored, dict):  # a damaged file is ignored and rewritten, never trusted
            for k, v in stored.items():
                if isinstance(v, str):
                    _memory_versions.setdefault(k, v)
    return _memory_versions


def _save_version_cache(cache_root: Path | None) -> None:
    if cache_root is None:
        return
    try:
        _load_version_cache(cache_root, again=True)  # keep what others wrote since this process read it
        atomic_write_text(cache_root / _VERSION_CACHE_FILE, json.dumps(_memory_versions, indent=1))
    except OSError:
        pass


@contextlib.contextmanager
def _probing(cache_root: Path | None):
    """One prober at a time per cache root (flock, freed by the kernel if the prober dies); where
    the root cannot hold the lock file, no lock: probing twice is only slower."""
    fd = None
    if cache_root is not None and not getattr(_probing_here, "active", False):
        try:
            fd = os.open(cache_root / _PROBE_LOCK_FILE, os.O_RDWR | os.O_CREAT, 0o644)
            fcntl.flock(fd, fcntl.LOCK_EX)
        except OSError:
            if fd is not None:
                os.close(fd)
            fd = None
    _probing_here.active, outer = True, getattr(_probing_here, "active", False)
    try:
        yield
    finally:
        _probing_here.active = outer
        if fd is not None:
            os.close(fd)  # closing frees the flock


def probe_once(key: str, probe: Callable[[], str | None], cache_root: Path | None = None) -> str | None:
    """The remembered answer for key, else probe() run by one process of the root at a time (the
    others wait, then read its answer) and remembered; a probe that returns None (could not
    tell) is not remembered."""
    known = remembered(key, cache_root)
    if known is not None:
        return known
    with _probing(cache_root):
        known = _load_version_cache(cache_root, again=True).get(key)
        if known is None:
            known = probe()
            if known is not None:
                remember(key, known, cache_root)
    return known


def remembered(key: str, cache_root: Path | None = None) -> str | None:
    """A probe result stored with remember(), or None."""
    return _load_version_cache(cache_root).get(key)


def remember(key: str, value: str, cache_root: Path | None = None) -> None:
    """Store a probe result (key should include file_ident() of the binary probed)."""
    _load_version_cache(cache_root)[key] = value
    _save_version_cache(cache_root)
