"""`kwb cache ...`: inspect, verify, unlock, prune and clean the extensions cache.

Exit codes: 0 done; 1 something needs attention (verify found damaged builds; clean or prune
left an entry because a build is running; unlock left a live build's lock); 2 bad usage (an
unknown name, a root that does not look like an extensions cache, bad option values).
"""
from __future__ import annotations

import json
import sys
import time
from collections.abc import Callable
from datetime import datetime, timezone

import click
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from kwb_store.resources import FunctionResources, functions_of

from . import api, removal
from .entries import Entry, Version
from .resource_rows import TABLE_COLUMNS, table_rows

out = Console(highlight=False, width=None if sys.stdout.isatty() else 200)
err = Console(stderr=True, highlight=False, width=None if sys.stderr.isatty() else 200)

# a color per state: rich markup in info and verify, click.style in list
STATE_STYLE = {"fresh": "green", "stale": "yellow", "orphaned": "magenta", "broken": "red", "building": "cyan",
               "stale lock": "red", "failed": "bright_red", "interrupted": "blue"}


def counted(n: int, noun: str, plural: str | None = None) -> str:
    """'1 entry', '2 entries'."""
    return f"{n} {noun if n == 1 else plural or noun + 's'}"


def human_bytes(n: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(n) < 1024 or unit == "TiB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1024
    return f"{n:.1f} TiB"


def ago(t: float | None, now: float) -> str:
    if not t:
        return "-"
    s = max(0.0, now - t)
    for size, unit in ((86400, "d"), (3600, "h"), (60, "min")):
        if s >= size:
            return f"{s / size:.0f} {unit} ago"
    return f"{s:.0f} s ago"


def iso(t: float | None) -> str | None:
    return datetime.fromtimestamp(t, timezone.utc).isoformat(timespec="seconds") if t else None


def version_json(v: Version) -> dict:
    return {"name": v.name, "device": v.device, "library": str(v.library) if v.library else None, "bytes": v.size,
            "built": iso(v.built), "loaded": iso(v.loaded), "state": v.state, "reasons": v.reasons,
            "files": [str(f) for f in v.files]}


def entry_json(e: Entry) -> dict:
    lock = e.lock
    return {"name": e.name, "kernel": e.kernel, "path": str(e.path), "tag": e.tag, "origin": e.origin, "layout": e.layout,
            "state": e.state, "reasons": e.reasons, "bytes": e.size, "last_built": iso(e.last_built),
            "last_loaded": iso(e.last_loaded), "versions": [version_json(v) for v in e.versions],
            "lock": {"state": lock.state, "pid": lock.pid, "detail": lock.detail} if lock else None,
            **({"link_target": e.link_target} if e.link_target else {})}


def _open(root, force: bool, deep: bool = False) -> api.Cache:
    try:
        return api.open_cache(root, force=force, deep=deep)
    except removal.RootRefused as e:
        raise click.UsageError(str(e)) from None


# The names of the kernels kwb ships, for a did-you-mean on an unknown name; kwb's command sets
# it (cache_tools does not import workbench).
shipped_names: Callable[[], list[str]] = list


def _find(cache: api.Cache, names) -> list[Entry]:
    try:
        return api.find(cache, list(names), shipped_names())
    except api.UnknownName as e:
        raise click.UsageError(str(e)) from None


def root_options(f):
    f = click.option("--force", is_flag=True, help="Use --root even if it does not look like an extensions cache.")(f)
    f = click.option("--root", type=click.Path(file_okay=False), default=None,
                     help="The cache folder (default: TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions).")(f)
    return f


@click.group("cache", context_settings={"help_option_names": ["-h", "--help"]})
def cache() -> None:
    """Inspect, verify, unlock, prune and clean the extensions cache: kwb's builds and any
    torch.utils.cpp_extension build (load, load_inline) found there.

    States, per build against today's sources: fresh (its sources and headers are today's);
    stale (sources changed, or built for another torch/CUDA/compiler); orphaned (sources
    gone); failed (the last compile failed; the next load compiles again); interrupted (a
    build stopped before finishing: Ctrl-C, killed); broken (damaged: a library missing, cut
    short or not what its manifest says); building (a live process holds the lock); stale lock
    (its owner is gone). An entry reads as what a load would do now: fresh when it holds the
    build of today's sources, even beside a newer build of an edited version.

    Exit codes: 0 done; 1 needs attention (broken builds found, an entry left because a build
    is running, a live lock kept); 2 bad usage."""


def _entry_lines(entries: list[Entry], now: float) -> list[str]:
    """The list as aligned text. Plain string formatting, not a rich Table: rich took 0.45 s
    to lay out 1,000 rows (benchmarks/cache_list.py), half of the command's second."""
    headers = ["entry", "from", "versions", "size", "built", "loaded", "state", "why"]
    rows = [[f"{e.tag}/{e.name}" if e.tag else e.name, e.origin, str(len(e.versions)), human_bytes(e.size),
             ago(e.last_built, now), ago(e.last_loaded, now), e.state, e.reasons[0] if e.reasons else ""] for e in entries]
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers) - 1)]
    right = {2, 3}

    def line(r: list[str], color: bool) -> str:
        cells = [c.rjust(w) if i in right else c.ljust(w) for i, (c, w) in enumerate(zip(r, widths))]
        if color:
            cells[6] = click.style(cells[6], fg=STATE_STYLE.get(r[6].strip()))
        return "  ".join([*cells, r[-1]]).rstrip()

    return [click.style(line(headers, False), bold=True), *(line(r, True) for r in rows)]


@cache.command("list")
@root_options
@click.option("--json", "as_json", is_flag=True, help="One JSON document: the root and a list of entries.")
def list_cmd(root, force, as_json) -> None:
    """A row per build folder: where it came from, tag, versions, size, last built and loaded,
    and its state (what a load would do now: see `kwb cache --help`)."""
    c = _open(root, force)
    if as_json:
        click.echo(json.dumps({"root": str(c.root), "bytes": c.size, "trash_bytes": c.trash_bytes,
                               "entries": [entry_json(e) for e in c.entries]}, indent=1))
        return
    if not c.entries:
        out.print(f"{escape(str(c.root))}: no builds")
        return
    click.echo("\n".join(_entry_lines(c.entries, time.time())))
    counts = {}
    for e in c.entries:
        counts[e.state] = counts.get(e.state, 0) + 1
    summary = ", ".join(f"{n} {s}" for s, n in sorted(counts.items(), key=lambda kv: kv[0]))
    trash = f"; {human_bytes(c.trash_bytes)} left by an interrupted clean" if c.trash_bytes else ""
    out.print(f"{counted(len(c.entries), 'entry', 'entries')}, {human_bytes(c.size)} in {escape(str(c.root))}: {summary}{trash}")


def _info_json(e: Entry) -> dict:
    data = entry_json(e)
    data["builds"] = []
    for v in e.current or e.newest_by_device():
        m = v.manifest
        if m is None:
            data["builds"].append({"version": v.name, "device": v.device, "sources": None, "headers": None, "base": None,
                                   "key": None, "cflags": None, "cuda_cflags": None, "ldflags": None, "archs": None,
                                   "versions": None, "compilers": None, "build_log": None, "build_seconds": None,
                                   "functions": None})
            continue
        functions = functions_of(m.resources)
        data["builds"].append({"version": v.name, "device": v.device, "sources": m.sources, "headers": m.headers,
                               "base": m.base, "key": m.key, "cflags": m.flags("cflags"), "cuda_cflags": m.flags("cuda_cflags"),
                               "ldflags": m.flags("ldflags"), "archs": m.archs, "versions": m.versions,
                               "compilers": m.compilers, "build_log": m.build_log, "build_seconds": m.build_seconds,
                               "functions": [dict(f.to_dict(), max_threads_per_block=f.max_threads_per_block())
                                             for f in functions]})
    if e.ninja:
        data["build_ninja"] = e.ninja
    data["files"] = _files(e)
    return data


def resource_table(functions: list[FunctionResources], indent: int = 0) -> Table:
    """Each GPU function's resource use, a row each; a spill in red."""
    t = Table(box=None, pad_edge=False, header_style="bold", padding=(0, 1, 0, 0))
    if indent:
        t.add_column("", width=indent - 1)
    rows = table_rows(functions)
    for col in TABLE_COLUMNS:  # a function's name is never cut: as wide as the longest, else folded
        if col == "function":
            t.add_column(col, no_wrap=True, overflow="fold", min_width=max([len(col), *(len(r[0]) for r in rows)]))
        else:
            t.add_column(col, justify="right", overflow="fold")
    for f, row in zip(functions, rows):
        cells = [escape(c) for c in row]
        if f.spills:
            cells[3] = f"[red]{cells[3]}[/]"
        t.add_row(*([""] if indent else []), *cells)
    return t


def _files(e: Entry) -> list[dict]:
    files = []
    if e.layout == "link" or not e.path.is_dir():
        return files
    for p in sorted(e.path.rglob("*")):
        if p.is_symlink() or p.is_file():
            files.append({"path": str(p.relative_to(e.path)), "bytes": p.lstat().st_size})
    return files


@cache.command("info")
@click.argument("names", nargs=-1, required=True)
@root_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
def info_cmd(names, root, force, as_json) -> None:
    """Everything about one entry: sources and headers, build key, flags, archs, versions of
    torch/CUDA/compilers, files with sizes, the build log."""
    c = _open(root, force)
    entries = _find(c, names)
    if as_json:
        click.echo(json.dumps([_info_json(e) for e in entries], indent=1))
        return
    now = time.time()
    for e in entries:
        d = _info_json(e)
        out.print(f"[bold]{escape(e.name)}[/] ({e.origin}, {e.tag or 'no tag'}): [{STATE_STYLE.get(e.state, '')}]{e.state}[/]")
        out.print(f"  folder   {escape(str(e.path))}" + (f" -> {escape(e.link_target)}" if e.link_target else ""))
        for r in e.reasons:
            out.print(f"  why      {escape(r)}")
        if e.lock and e.lock.state != "none":
            out.print(f"  lock     {e.lock.state}: {escape(e.lock.detail)}")
        for b in d["builds"]:
            if b["key"] is None:
                continue
            out.print(f"  build    {escape(b['version'])} ({b['device']})")
            out.print(f"    key      {b['key']}")
            for label, items in (("sources", b["sources"]), ("headers", b["headers"])):
                for path in (items or {}):
                    out.print(f"    {label:8s} {escape(path)}")
                    label = ""
            out.print(f"    archs    {', '.join(b['archs'] or []) or '-'}")
            for k, v in (b["versions"] or {}).items():
                out.print(f"    {k:8s} {escape(str(v))}")
            out.print(f"    cflags   {escape(' '.join(b['cflags'] or []))}")
            if b["cuda_cflags"]:
                compiler = "nvrtc" if "nvrtc" in (b["versions"] or {}) else "nvcc"
                out.print(f"    {compiler:8s} {escape(' '.join(b['cuda_cflags']))}")
            out.print(f"    ldflags  {escape(' '.join(b['ldflags'] or []))}")
            out.print(f"    log      {escape(str(b['build_log']))}")
            if b["functions"]:
                out.print("    GPU functions (registers a thread, spilled bytes, stack and static shared memory in bytes):")
                out.print(resource_table([FunctionResources.from_dict(f) for f in b["functions"]], indent=4))
        if e.ninja:
            for s in e.ninja.get("sources", []):
                out.print(f"  source   {escape(s)}")
            out.print(f"  torch    {escape(str(e.ninja.get('torch_include', '?')))}")
            out.print(f"  target   {escape(str(e.ninja.get('target', '?')))}")
            if e.ninja.get("nvcc"):
                out.print(f"  nvcc     {escape(e.ninja['nvcc'])}")
        t = Table(box=None, pad_edge=False, header_style="bold")
        for col in ("version", "device", "size", "built", "loaded", "state", "why"):  # no cell cut with '…'
            t.add_column(col, justify="right" if col == "size" else "left", overflow="fold", no_wrap=col == "version")
        for v in e.versions:
            t.add_row(escape(v.name), v.device or "-", human_bytes(v.size), ago(v.built, now), ago(v.loaded, now),
                      f"[{STATE_STYLE.get(v.state, '')}]{v.state}[/]", escape("; ".join(v.reasons[:2])))
        if e.versions:
            out.print(t)
        out.print(f"  files    {len(d['files'])}, {human_bytes(e.size)}")
        for f in d["files"]:
            out.print(f"    {human_bytes(f['bytes']):>10}  {escape(f['path'])}")


@cache.command("du")
@root_options
@click.option("--top", type=click.IntRange(min=0), default=10, show_default=True, help="How many of the largest entries to show.")
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
def du_cmd(root, force, top, as_json) -> None:
    """Totals per root and tag, and the largest entries."""
    c = _open(root, force)
    d = api.du(c, top)
    if as_json:
        click.echo(json.dumps({**d, "largest": [{"name": e.name, "tag": e.tag, "path": str(e.path), "bytes": e.size}
                                               for e in d["largest"]]}, indent=1))
        return
    t = Table(box=None, pad_edge=False, header_style="bold")
    for col in ("tag", "entries", "versions", "size"):
        t.add_column(col, justify="left" if col == "tag" else "right", overflow="fold", no_wrap=col == "tag")
    for tag, v in sorted(d["tags"].items()):
        t.add_row(tag, str(v["entries"]), str(v["versions"]), human_bytes(v["bytes"]))
    if d["pch"]["entries"]:
        t.add_row("(of which precompiled headers)", str(d["pch"]["entries"]), str(d["pch"]["entries"]),
                  human_bytes(d["pch"]["bytes"]))
    if d["trash_bytes"]:
        t.add_row("(interrupted cleans)", "", "", human_bytes(d["trash_bytes"]))
    t.add_row("[bold]total[/]", str(len(c.entries)), str(sum(len(e.versions) for e in c.entries)), f"[bold]{human_bytes(d['bytes'])}[/]")
    out.print(f"{escape(str(c.root))}")
    out.print(t)
    if d["largest"]:
        out.print("largest:")
        for e in d["largest"]:
            out.print(f"  {human_bytes(e.size):>10}  {escape((e.tag + '/' if e.tag else '') + e.name)}")


def _report(outcome: removal.Outcome, dry_run: bool) -> None:
    verb = "would remove" if dry_run else "removed"
    for r in outcome.removed:
        out.print(f"{verb} {escape(r.label)}  {human_bytes(r.bytes)}  ({escape(r.reason)})")
    for r, why in outcome.skipped:
        err.print(f"kept {escape(r.label)}: {escape(why)}")
    if outcome.trash_bytes:
        out.print(f"{verb} {human_bytes(outcome.trash_bytes)} left by an interrupted clean")
    n = len(outcome.removed)
    out.print(f"{'would free' if dry_run else 'freed'} {human_bytes(outcome.freed)} ({counted(n, 'item')})"
              + (", nothing changed (dry run)" if dry_run else ""))


@cache.command("clean")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every entry under the root.")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
@root_options
def clean_cmd(names, all_, dry_run, root, force) -> None:
    """Remove whole entries (every version, the build folders), by name or --all. An entry
    whose build is running is left as it is."""
    if not names and not all_:
        raise click.UsageError("name the entries to clean (see `kwb cache list`), or pass --all")
    if names and all_:
        raise click.UsageError("give names or --all, not both")
    c = _open(root, force)
    try:
        outcome = api.clean(c, list(names), all_, dry_run, shipped_names())
    except api.UnknownName as e:
        raise click.UsageError(str(e)) from None
    _report(outcome, dry_run)
    if outcome.skipped:
        sys.exit(1)


@cache.command("prune")
@click.option("--older-than", default=None, help="Entries not built or loaded for this long: 30d, 12h, 2w.")
@click.option("--max-size", default=None, help="Remove least recently used entries until the cache fits: 2G, 500M.")
@click.option("--keep-latest", type=int, default=None, help="Keep the N newest versions of each entry (per device).")
@click.option("--stale", is_flag=True, help="Builds whose sources changed or that were built for another toolchain.")
@click.option("--orphaned", is_flag=True, help="Builds whose sources are gone.")
@click.option("--pch", is_flag=True, help="Every precompiled header (kwb_pch-*; compiled again when a build needs one).")
@click.option("--dry-run", is_flag=True, help="Say what would be removed; change nothing.")
@root_options
def prune_cmd(older_than, max_size, keep_latest, stale, orphaned, pch, dry_run, root, force) -> None:
    """Remove what is old, stale, orphaned or over a size budget. Says what it removes and how
    much it frees; entries being built are left alone. No mode removes the build that today's
    sources load (fresh): an entry holding one loses its other builds only (a load_inline's
    sources are kept in the cache itself, so --older-than and --max-size may take its builds)."""
    c = _open(root, force)
    try:
        outcome = api.prune(c, older_than, max_size, keep_latest, stale, orphaned, dry_run, pch=pch)
    except ValueError as e:
        raise click.UsageError(str(e)) from None
    _report(outcome, dry_run)
    if outcome.skipped:
        sys.exit(1)


@cache.command("unlock")
@click.argument("names", nargs=-1)
@click.option("--all", "all_", is_flag=True, help="Every entry's lock.")
@root_options
def unlock_cmd(names, all_, root, force) -> None:
    """Remove build locks whose owner is gone (a killed build makes every later torch load of
    that extension wait forever). A live build's lock stays, with the process named."""
    if not names and not all_:
        raise click.UsageError("name the entries to unlock (see `kwb cache list`), or pass --all")
    c = _open(root, force)
    try:
        results = api.unlock(c, list(names), all_)
    except api.UnknownName as e:
        raise click.UsageError(str(e)) from None
    kept = False
    for r in results:
        label = f"{r.entry.tag}/{r.entry.name}" if r.entry.tag else r.entry.name
        if r.action in ("removed", "emptied"):
            out.print(f"unlocked {escape(label)}: {r.action} {escape(str(r.entry.lock.path))} ({escape(r.detail)})")
        elif r.action == "kept":
            kept = True
            err.print(f"kept the lock of {escape(label)}: {escape(r.detail)}")
        else:
            out.print(f"{escape(label)}: no lock")
    if not results:
        out.print("no locks to remove")
    if kept:
        sys.exit(1)


@cache.command("verify")
@root_options
@click.option("--json", "as_json", is_flag=True, help="JSON instead of text.")
def verify_cmd(root, force, as_json) -> None:
    """Check every build without importing it: library present and whole (size, ELF headers,
    sha256 against the manifest), the recorded key consistent and matching the sources. Exit
    1 if any is broken; failed and interrupted builds are named, not damage (exit 0)."""
    c = _open(root, force, deep=True)
    broken = api.verify(c)
    unfinished = [e for e in c.entries if e.state in ("failed", "interrupted")]
    if as_json:
        click.echo(json.dumps({"root": str(c.root), "checked": len(c.entries), "broken": [entry_json(e) for e in broken],
                               "failed": [entry_json(e) for e in unfinished if e.state == "failed"],
                               "interrupted": [entry_json(e) for e in unfinished if e.state == "interrupted"]}, indent=1))
    else:
        for e in broken:
            label = f"{e.tag}/{e.name}" if e.tag else e.name
            reasons = e.reasons if e.state == "broken" else [f"{v.name}: {r}" for v in e.versions if v.state == "broken" for r in v.reasons]
            err.print(f"[red]broken[/] {escape(label)}: {escape('; '.join(reasons))}")
        for e in c.entries:
            if e.state == "stale":  # the recorded key no longer matches the sources or toolchain
                label = f"{e.tag}/{e.name}" if e.tag else e.name
                out.print(f"[yellow]stale[/] {escape(label)}: {escape('; '.join(e.reasons[:3]))}")
        for e in unfinished:  # not damage: the next load compiles again
            label = f"{e.tag}/{e.name}" if e.tag else e.name
            out.print(f"[{STATE_STYLE[e.state]}]{e.state}[/] {escape(label)}: {escape('; '.join(e.reasons[:2]))}")
        stale = sum(e.state == "stale" for e in c.entries)
        failed = sum(e.state == "failed" for e in c.entries)
        interrupted = sum(e.state == "interrupted" for e in c.entries)
        out.print(f"checked {counted(len(c.entries), 'entry', 'entries')}: {len(broken)} broken, {stale} stale"
                  + (f", {failed} failed" if failed else "") + (f", {interrupted} interrupted" if interrupted else "")
                  + (" (`kwb cache prune --stale` removes those)" if stale else ""))
    if broken:
        sys.exit(1)
