"""`tool --version` of the compilers a build used, cached by (path, size, mtime), and other
facts probed once per compiler binary (remember / remembered), in one file at the cache root.

The builder records versions in each manifest; `kwb cache` compares them with what is
installed now (a compiler upgraded since a build makes the build stale). No torch import here.
"""
from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from . import layout
from .fsutil import atomic_write_text

_VERSION_CACHE_FILE = layout.TOOL_VERSIONS


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
    ident = file_ident(path)
    cache = _load_version_cache(cache_root)
    if ident in cache:
        return cache[ident]
    try:
        out = subprocess.run([path, "--version"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return "unknown"
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    if "Cuda compilation tools" in out:
        version = next(l for l in lines if l.startswith("Cuda compilation tools"))
    else:
        version = lines[0] if lines else "unknown"
    cache[ident] = version
    _save_version_cache(cache_root)
    return version


_memory_versions: dict[str, str] = {}


def _load_version_cache(cache_root: Path | None) -> dict[str, str]:
    if cache_root is not None and not _memory_versions:
        try:
            stored = json.loads((cache_root / _VERSION_CACHE_FILE).read_text())
        except (OSError, ValueError):
            stored = {}
        if isinstance(stored, dict):  # a damaged file is ignored and rewritten, never trusted
            _memory_versions.update({k: v for k, v in stored.items() if isinstance(v, str)})
    return _memory_versions


def _save_version_cache(cache_root: Path | None) -> None:
    if cache_root is None:
        return
    try:
        atomic_write_text(cache_root / _VERSION_CACHE_FILE, json.dumps(_memory_versions, indent=1))
    except OSError:
        pass


def remembered(key: str, cache_root: Path | None = None) -> str | None:
    """A probe result stored with remember(), or None."""
    return _load_version_cache(cache_root).get(key)


def remember(key: str, value: str, cache_root: Path | None = None) -> None:
    """Store a probe result (key should include file_ident() of the binary probed)."""
    _load_version_cache(cache_root)[key] = value
    _save_version_cache(cache_root)
