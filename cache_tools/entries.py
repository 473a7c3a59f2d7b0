"""What an extensions cache holds: one Entry per build folder, found by reading the folders
(never by importing a library), in either layout:

- kwb's (kwb_store/layout.py): `kwb_<ident>/` with a JSON manifest per finished build;
- torch.utils.cpp_extension's: `<name>/` with `build.ninja`, objects, `<name>.so`,
  `<name>_v1.so`, ... (one per in-process rebuild) and a `lock` file while building.

The root may hold entries directly (TORCH_EXTENSIONS_DIR) or per-tag folders (`py311_cu130/`,
torch's default ~/.cache/torch_extensions). Nothing here follows a symlink.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import stat
from dataclasses import dataclass, field
from pathlib import Path

from kwb_store import layout
from kwb_store.layout import TAG_RE
from kwb_store.locks import LockState
from kwb_store.manifest import Manifest

TORCH_VERSION_RE = re.compile(r"^(?P<base>.+?)(?:_v(?P<n>\d+))?\.so$")


@dataclass
class Version:
    """One finished (or half-finished) library of an entry."""

    name: str                # kwb: the build's stem; torch: "ext" or "ext_v2"
    device: str | None       # kwb: "cpu"/"cuda"; torch: None (not recorded)
    library: Path | None     # None: a manifest whose library is gone
    files: list[Path]
    size: int
    built: float | None      # seconds since the epoch
    loaded: float | None     # kwb records loads; torch does not
    manifest: Manifest | None = None  # None: no manifest, or not a whole one
    record: dict | None = None  # a precompiled header's pch.json (kwb_pch-<key>/ entries)
    number: int = 0          # torch's _vN (0 for the first build)
    state: str = ""          # filled by states.assess
    reasons: list[str] = field(default_factory=list)
    today: bool = False      # states.assess: the build today's sources load (prune keeps it)


@dataclass
class BuildFolder:
    """What a kwb build folder (build-<device>/) says about the last compile there."""

    device: str
    path: Path
    compiling: float | None  # the compile marker's mtime: the last compile's start, or its end
    failure: dict | None     # the failure record, when the last compile failed
    objects: int             # object files left by compiles (whole or not)


@dataclass
class Entry:
    root: Path               # the cache root scanned
    path: Path               # the entry's folder (or symlink)
    name: str                # kwb: the entry's ident ("tiny-1a2b3c4d" for a folder of your own); torch: the folder's name
    layout: str              # "kwb", "torch" or "link"
    origin: str              # "kwb kernel", "kwb load_inline", "load_inline", "torch extension", "symlink"
    tag: str                 # "py311_cu130", or "" when nothing says
    versions: list[Version]
    size: int
    lock: LockState | None = None
    ninja: dict = field(default_factory=dict)  # torch: what build.ninja says
    link_target: str = ""
    kernel: str = ""         # kwb: the kernel's (or load_inline's) name; torch: the folder's
    build_folders: list[BuildFolder] = field(default_factory=list)  # kwb: one per device compiled for
    state: str = ""
    reasons: list[str] = field(default_factory=list)
    current: list[Version] = field(default_factory=list)  # states.assess: what a load would do now, per device

    @property
    def last_built(self) -> float | None:
        return max((v.built for v in self.versions if v.built), default=None)

    @property
    def last_loaded(self) -> float | None:
        return max((v.loaded for v in self.versions if v.loaded), default=None)

    @property
    def last_used(self) -> float:
        """The last build or load. torch records no loads, but up to 2.13 every load creates
        and removes `lock` in the folder, which moves the folder's mtime: that counts too."""
        times = [t for t in (self.last_built, self.last_loaded) if t]
        if self.layout != "kwb" or not times:
            try:
                times.append(self.path.lstat().st_mtime)
            except OSError:
                pass
        return max(times, default=0.0)

    def newest_by_device(self) -> list[Version]:
        """The version each device loads now: the newest build per device."""
        out: dict[str | None, Version] = {}
        for v in sorted(self.versions, key=lambda v: (v.built or 0, v.number)):
            out[v.device] = v
        return list(out.values())


def tree_size(path: Path) -> int:
    """Bytes under path, by lstat: symlinks count as links, never followed."""
    total = 0
    stack = [str(path)]
    while stack:
        try:
            it = os.scandir(stack.pop())
        except OSError:
            continue
        with it:
            for e in it:
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if stat.S_ISDIR(st.st_mode):
                    stack.append(e.path)
                else:
                    total += st.st_size
    return total


def _file_size(path: Path) -> int:
    try:
        return path.lstat().st_size
    except OSError:
        return 0


def _mtime(path: Path) -> float | None:
    try:
        return path.lstat().st_mtime
    except OSError:
        return None


TORCH_INLINE_NAMES = {"main.cpp", "cuda.cu", "sycl.sycl"}  # what torch's load_inline writes


def is_entry_dir(path: Path, names: list[str] | None = None) -> bool:
    """A build folder of either layout (not a tag folder, not a project's build/ or lib/):
    kwb's `kwb_<ident>/` with a manifest, a lock or a build folder; torch's with build.ninja,
    a library named after the folder (<name>.so, <name>_vN.so), or only a lock and
    load_inline's sources (a build killed before it wrote build.ninja)."""
    if names is None:
        try:
            names = os.listdir(path)
        except OSError:
            return False
    if path.name.startswith(layout.ENTRY_PREFIX):
        return any(n.endswith(layout.MANIFEST_SUFFIX) or n == layout.LOCK_NAME or n.startswith("build-") for n in names)
    if "build.ninja" in names:
        return True
    for n in names:
        m = TORCH_VERSION_RE.match(n)
        if m and m.group("base") == path.name:
            return True
    return layout.LOCK_NAME in names and set(names) <= {layout.LOCK_NAME, *TORCH_INLINE_NAMES}


def _kwb_origin(m: Manifest) -> str:
    """What made a kwb build: "kwb kernel", "kwb load_inline", or the kind of extension kwb built."""
    if m.kind == "inline":
        return "kwb load_inline"
    if m.kind == "nvrtc":
        return "kwb NVRTC kernel"
    return {"pybind": "kwb pybind ext", "torch_library": "kwb TORCH_LIBRARY ext"}.get(m.binding, "kwb kernel")


def _stem_device(stem: str) -> str | None:
    parts = stem.split(".")  # <name>.<device>.<base>.<key>
    return parts[1] if len(parts) >= 4 else None


PCH_ORIGIN = "kwb precompiled header"


def _pch_entry(root: Path, path: Path, names: list[str], tag: str) -> Entry:
    """kwb_pch-<key>/: torch/extension.h precompiled once for torch-style extensions."""
    ident = path.name[len(layout.ENTRY_PREFIX):]
    gch = path / f"{layout.PCH_HEADER}.gch"
    try:
        record = json.loads((path / layout.PCH_RECORD).read_text())
    except (OSError, ValueError):
        record = None
    files = [path / n for n in sorted(names) if n != layout.LOCK_NAME]
    version = Version(name=f"{layout.PCH_HEADER}.gch", device=None, library=gch if gch.name in names else None, files=files,
                      size=sum(_file_size(p) for p in files),
                      built=record.get("built_at") if isinstance(record, dict) else _mtime(gch), loaded=None,
                      record=record if isinstance(record, dict) else None)
    return Entry(root, path, ident, "kwb", PCH_ORIGIN, tag, [version], tree_size(path), kernel="torch/extension.h")


def _kwb_entry(root: Path, path: Path, names: list[str], tag: str) -> Entry:
    ident = path.name[len(layout.ENTRY_PREFIX):]
    if ident.startswith(layout.PCH_IDENT_PREFIX):
        return _pch_entry(root, path, names, tag)
    versions: list[Version] = []
    stems_with_manifest: set[str] = set()
    origin = "kwb load_inline" if ident.endswith("-inline") else "kwb kernel"
    for n in sorted(names):
        if not n.endswith(layout.MANIFEST_SUFFIX) or n.startswith("."):
            continue
        stem = n[: -len(layout.MANIFEST_SUFFIX)]
        data = Manifest.read(path / n)
        stems_with_manifest.add(stem)
        library = path / (Path(data.library).name if data else f"{stem}{layout.LIBRARY_SUFFIX}")  # a raw kernel's: .cubin
        loaded_marker = path / f"{stem}{layout.LOADED_SUFFIX}"
        files = [p for p in (path / n, library, loaded_marker) if p.name in names]
        if data:
            origin = _kwb_origin(data)
            tag = tag or layout.torch_tag_for(data.versions)
        versions.append(Version(
            name=stem, device=data.device if data else _stem_device(stem),
            library=library if library.name in names else None, files=files,
            size=sum(_file_size(p) for p in files),
            built=data.built_at if data else _mtime(path / n),
            loaded=_mtime(loaded_marker) if loaded_marker.name in names else None,
            manifest=data,
        ))
    for n in sorted(names):  # libraries without a manifest: a build stopped between the two
        if n.endswith(layout.LIBRARY_SUFFIX) and not n.startswith(".") and n[: -len(layout.LIBRARY_SUFFIX)] not in stems_with_manifest:
            p = path / n
            versions.append(Version(name=n[: -len(layout.LIBRARY_SUFFIX)], device=_stem_device(n),
                                    library=p, files=[p], size=_file_size(p), built=_mtime(p), loaded=None))
    kernel = next((v.manifest.name for v in versions if v.manifest and v.manifest.name), ident.split("-")[0])
    folders = [_build_folder(path / n) for n in sorted(names) if n.startswith("build-")]
    return Entry(root, path, ident, "kwb", origin, tag, versions, tree_size(path), kernel=kernel,
                 build_folders=[f for f in folders if f is not None])


def _build_folder(path: Path) -> BuildFolder | None:
    try:
        names = os.listdir(path)
    except OSError:
        return None  # not a folder (or unreadable): nothing a compile left
    failure = None
    if layout.FAILURE_RECORD in names:
        try:
            failure = json.loads((path / layout.FAILURE_RECORD).read_text())
        except (OSError, ValueError):
            failure = None
        if not isinstance(failure, dict) or not isinstance(failure.get("failed_at"), (int, float)):
            failure = {"failed_at": _mtime(path / layout.FAILURE_RECORD) or 0.0, "damaged": True}
    kind = path.name[len("build-"):]
    # an NVRTC kernel's folder (build-nvrtc/) holds its compile logs; its builds are CUDA's
    return BuildFolder("cuda" if kind == "nvrtc" else kind, path,
                       _mtime(path / layout.COMPILE_MARKER) if layout.COMPILE_MARKER in names else None,
                       failure, sum(n.endswith(".o") for n in names))


def parse_build_ninja(path: Path) -> dict:
    """The parts of torch's build.ninja kwb cache needs: the extension name last built, the
    sources, the torch include folder, and whether CUDA was used."""
    try:
        text = path.read_text(errors="replace")
    except OSError:
        return {}
    info: dict = {"sources": [], "cuda": False}
    for line in text.splitlines():
        if line.startswith("cflags ="):
            m = re.search(r"-DTORCH_EXTENSION_NAME=(\S+)", line)
            if m:
                info["name"] = m.group(1)
            try:
                words = shlex.split(line[len("cflags ="):])
            except ValueError:
                words = line.split()
            for i, w in enumerate(words):
                for flag in ("-isystem", "-I"):
                    if w.startswith(flag):
                        inc = w[len(flag):] or (words[i + 1] if i + 1 < len(words) else "")
                        if os.path.normpath(inc).endswith(os.path.join("torch", "include")):
                            info.setdefault("torch_include", os.path.normpath(inc))
                        break
        elif line.startswith("nvcc ="):
            info["nvcc"] = line.split("=", 1)[1].strip()
        elif line.startswith("build ") and ":" in line:
            _outs, rest = line[len("build "):].split(":", 1)
            words = rest.split()
            if words and words[0] in ("compile", "cuda_compile", "sycl_compile"):
                info["sources"] += [w.replace("$ ", " ") for w in words[1:]]
                info["cuda"] = info["cuda"] or words[0] == "cuda_compile"
        elif line.startswith("default "):
            info["target"] = line.split(None, 1)[1].strip()
    return info


def _torch_entry(root: Path, path: Path, names: list[str], tag: str) -> Entry:
    ninja = parse_build_ninja(path / "build.ninja") if "build.ninja" in names else {}
    versions = []
    for n in sorted(names):
        m = TORCH_VERSION_RE.match(n)
        if not m or m.group("base") != path.name:
            continue
        p = path / n
        versions.append(Version(name=n[:-3], device=None, library=p, files=[p], size=_file_size(p),
                                built=_mtime(p), loaded=None, number=int(m.group("n") or 0)))
    # load_inline writes its sources into the build folder itself, as main.cpp (cuda.cu,
    # sycl.sycl); a copied cache keeps the names but not the folder in build.ninja
    sources = ninja.get("sources", [])
    own = [os.path.basename(s) for s in sources] or [n for n in names if n in TORCH_INLINE_NAMES]
    inline = bool(own) and all(n in TORCH_INLINE_NAMES and n in names for n in own)
    origin = "load_inline" if inline else "torch extension"
    return Entry(root, path, path.name, "torch", origin, tag, versions, tree_size(path), ninja=ninja, kernel=path.name)


def _link_entry(root: Path, path: Path, tag: str) -> Entry:
    try:
        target = os.readlink(path)
    except OSError:
        target = "?"
    return Entry(root, path, path.name, "link", "symlink", tag, [], _file_size(path), link_target=target, kernel=path.name)


def _entry(root: Path, path: Path, tag: str) -> Entry | None:
    if path.is_symlink():
        return _link_entry(root, path, tag)
    try:
        names = os.listdir(path)
    except OSError:
        return None
    if not is_entry_dir(path, names):
        return None
    if path.name.startswith(layout.ENTRY_PREFIX):
        return _kwb_entry(root, path, names, tag)
    return _torch_entry(root, path, names, tag)


def scan(root: Path) -> list[Entry]:
    """Every entry under root (and under its tag folders), sorted by tag and name."""
    found: list[Entry] = []
    root_tag = root.name if TAG_RE.match(root.name) else ""
    try:
        children = sorted(os.scandir(root), key=lambda e: e.name)
    except OSError:
        return []
    for child in children:
        if child.name.startswith(".") and child.name != "." and not child.is_symlink():
            continue  # kwb's own files (.kwb-trash, .kwb-tool-versions.json)
        path = Path(child.path)
        if child.is_dir(follow_symlinks=False) and TAG_RE.match(child.name) and not is_entry_dir(path):
            try:
                inner = sorted(os.scandir(path), key=lambda e: e.name)
            except OSError:
                continue
            for e in inner:
                if e.name.startswith(".") and not e.is_symlink():
                    continue
                if e.is_dir(follow_symlinks=False) or e.is_symlink():
                    entry = _entry(root, Path(e.path), child.name)
                    if entry:
                        found.append(entry)
        elif child.is_dir(follow_symlinks=False) or child.is_symlink():
            entry = _entry(root, path, root_tag)
            if entry:
                found.append(entry)
    return found


def trash_folders(root: Path) -> list[Path]:
    """Leftovers of cleans that stopped halfway (their entries already moved out of the way)."""
    out = []
    for base in [root, *[p for p in _tag_dirs(root)]]:
        trash = base / layout.TRASH_DIR
        if trash.is_dir() and not trash.is_symlink():
            out.append(trash)
    return out


def _tag_dirs(root: Path) -> list[Path]:
    try:
        return [Path(e.path) for e in os.scandir(root) if e.is_dir(follow_symlinks=False) and TAG_RE.match(e.name)]
    except OSError:
        return []
