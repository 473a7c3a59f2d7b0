"""The cache commands as Python functions (for notebooks and scripts); `kwb cache ...` is a
thin layer over these.

    from cache_tools import api
    cache = api.open_cache()                 # TORCH_EXTENSIONS_DIR or ~/.cache/torch_extensions
    for e in cache.entries: print(e.name, e.state, e.size)
    api.prune(cache, older_than="30d", dry_run=True).freed
"""
from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path

from kwb_store import environment, locks

from . import removal, states
from .entries import PCH_ORIGIN, Entry, scan, trash_folders, tree_size


@dataclass
class Cache:
    root: Path
    entries: list[Entry]
    trash_bytes: int  # left by cleans that stopped halfway

    @property
    def size(self) -> int:
        return sum(e.size for e in self.entries) + self.trash_bytes


class UnknownName(ValueError):
    pass


def open_cache(root: str | Path | None = None, force: bool = False, deep: bool = False) -> Cache:
    """Scan and assess a cache. root: default TORCH_EXTENSIONS_DIR, else
    ~/.cache/torch_extensions (every tag). Raises removal.RootRefused for a folder that does not
    look like an extensions cache (force=True to use it anyway). deep: also hash each library
    against its manifest (what verify does)."""
    base = Path(root).expanduser() if root is not None else environment.default_root()
    if root is None and not base.exists():
        return Cache(base, [], 0)
    removal.check_root(base, force)
    entries = states.assess_all(scan(base), base, deep)
    return Cache(base, entries, sum(tree_size(t) for t in trash_folders(base)))


def find(cache: Cache, names: list[str], shipped: list[str] = ()) -> list[Entry]:
    """Entries by name: a kernel or extension name ("relu_scale", "tiny"), an entry's ident
    ("tiny-1a2b3c4d"), a folder name ("kwb_relu_scale"), or tag/name ("py311_cu130/relu_scale");
    every match (several folders or tags may hold one kernel). Every name is checked before
    any is returned; an unknown one raises UnknownName with the closest entry name (or, failing
    that, the closest of `shipped`, the kernels kwb ships)."""
    out: list[Entry] = []
    for name in names:
        tag, _, bare = name.rpartition("/")
        hits = [e for e in cache.entries if bare in (e.name, e.path.name, e.kernel) and (not tag or e.tag == tag)]
        if not hits:
            known = sorted({e.name for e in cache.entries})
            raise UnknownName(f"no entry named {name!r} in {cache.root}{_did_you_mean(bare, cache.entries, shipped)}; "
                              f"entries: {', '.join(known) or 'none'}")
        out += [e for e in hits if e not in out]
    return out


def _did_you_mean(name: str, entries: list[Entry], shipped) -> str:
    import difflib

    present = sorted({n for e in entries for n in (e.name, e.kernel) if n})
    close = difflib.get_close_matches(name, present, n=1)
    if close:
        return f"; did you mean {close[0]}?"
    close = difflib.get_close_matches(name, list(shipped), n=1)
    return f"; did you mean {close[0]}? (a kernel kwb ships, with no build here)" if close else ""


def clean(cache: Cache, names: list[str] | None = None, all_: bool = False, dry_run: bool = False,
          shipped: list[str] = ()) -> removal.Outcome:
    if not names and not all_:
        raise ValueError("name the entries to clean, or pass --all")
    targets = cache.entries if all_ else find(cache, names or [], shipped)
    return removal.execute(removal.plan_clean(targets), cache.root, dry_run)


def prune(cache: Cache, older_than: str | float | None = None, max_size: str | int | None = None,
          keep_latest: int | None = None, stale: bool = False, orphaned: bool = False,
          dry_run: bool = False, now: float | None = None, pch: bool = False) -> removal.Outcome:
    """pch: every precompiled header (kwb_pch-*/; a build that needs one compiles it again)."""
    if older_than is None and max_size is None and keep_latest is None and not stale and not orphaned and not pch:
        raise ValueError("say what to prune: --older-than, --max-size, --keep-latest, --stale, --orphaned or --pch")
    if keep_latest is not None and keep_latest < 1:
        raise ValueError(f"--keep-latest must be at least 1 (clean removes whole entries), got {keep_latest}")
    age = removal.parse_age(older_than) if isinstance(older_than, str) else older_than
    size = removal.parse_size(max_size) if isinstance(max_size, str) else max_size
    plan = removal.plan_prune(cache.entries, age, size, keep_latest, stale, orphaned, now=now or time.time(), pch=pch)
    return removal.execute(plan, cache.root, dry_run)


@dataclass
class UnlockResult:
    entry: Entry
    action: str  # "removed", "emptied", "kept" or "none"
    detail: str


def unlock(cache: Cache, names: list[str] | None = None, all_: bool = False) -> list[UnlockResult]:
    if not names and not all_:
        raise ValueError("name the entries to unlock, or pass --all")
    targets = cache.entries if all_ else find(cache, names or [])
    results = []
    for e in targets:
        lock = e.lock
        if lock is None or lock.state == "none":
            if not all_:
                results.append(UnlockResult(e, "none", "no lock"))
            continue
        if lock.state == "stale":
            if not removal.inside(lock.path, cache.root):
                results.append(UnlockResult(e, "kept", f"{lock.path} is outside the cache root"))
                continue
            try:
                results.append(UnlockResult(e, locks.unlock(lock), lock.detail))
            except ValueError as err:
                results.append(UnlockResult(e, "kept", str(err)))
        else:
            who = f"held by pid {lock.pid}" if lock.pid else lock.detail
            results.append(UnlockResult(e, "kept", f"{who}: a live build; it releases the lock when done"))
    return results


def verify(cache: Cache) -> list[Entry]:
    """The broken entries (or entries with a broken older version): damage, not a failed or
    interrupted build, which the next load compiles again. Open the cache with
    deep=True first: each library is then checked against its manifest (size, ELF
    completeness, sha256) and each manifest's key recomputed from what it records."""
    return [e for e in cache.entries if e.state == "broken" or any(v.state == "broken" for v in e.versions)]


def du(cache: Cache, top: int = 10) -> dict:
    per_tag: dict[str, dict] = {}
    for e in cache.entries:
        t = per_tag.setdefault(e.tag or "-", {"entries": 0, "bytes": 0, "versions": 0})
        t["entries"] += 1
        t["bytes"] += e.size
        t["versions"] += len(e.versions)
    largest = sorted(cache.entries, key=lambda e: e.size, reverse=True)[:top]
    headers = [e for e in cache.entries if e.origin == PCH_ORIGIN]  # counted in their tag's totals too
    return {"root": str(cache.root), "bytes": cache.size, "trash_bytes": cache.trash_bytes, "tags": per_tag, "largest": largest,
            "pch": {"entries": len(headers), "bytes": sum(e.size for e in headers)}}
