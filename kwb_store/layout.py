"""Where kwb's builds live on disk and how their names and keys are made (the manifest's
fields are kwb_store.manifest's).

    <root>/                      TORCH_EXTENSIONS_DIR, else ~/.cache/torch_extensions/<py>_<cu>
      kwb_<name>/                one entry per kernel folder or load_inline name
        lock                     flock()ed while a build runs; holds the builder's pid and host
        build-cpu/, build-cuda/  ninja's incremental build folders (objects, depfiles, build.log)
          .kwb-compiling         stamped when a compile starts and when it ends
          .kwb-failed.json       written when the compiler failed; removed by the next finished build
        <stem>.so                finished libraries, immutable, named by their build key
        <stem>.json              the manifest, written last: its presence means the .so is whole
        <stem>.loaded            empty; its mtime is the last time a process loaded <stem>.so
        inline/<part>-<hash>/    load_inline sources, one folder per distinct text of a part (cpp, cu)

    <stem> = <name>.<device>.<base[:12]>.<key[:12]>

`base` hashes everything known before compiling (sources, flags, arch, versions); `key` adds
the headers the compiler reported. A warm load finds the manifests sharing its base by file
name and checks their recorded headers, so it never runs the compiler or ninja.
This module imports nothing heavy (no torch).
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import sys
from pathlib import Path

from .manifest import FORMAT

ENTRY_PREFIX = "kwb_"
LOCK_NAME = "lock"
MANIFEST_SUFFIX = ".json"
LIBRARY_SUFFIX = ".so"
LOADED_SUFFIX = ".loaded"
BUILD_LOG = "build.log"
TOOL_VERSIONS = ".kwb-tool-versions.json"  # the builder's compiler-version cache, at the root
TOOL_PROBE_LOCK = ".kwb-tool-versions.lock"  # flock()ed while one process probes a compiler
TRASH_DIR = ".kwb-trash"  # `kwb cache clean` moves an entry here (atomically) before deleting it
# kwb_pch-<key>/: torch/extension.h precompiled for torch-style extensions (workbench/jit/pch.py)
PCH_IDENT_PREFIX = "pch-"
COMPILE_MARKER = ".kwb-compiling"  # in build-<device>/: its mtime is the last compile's start or end
FAILURE_RECORD = ".kwb-failed.json"  # in build-<device>/: the last compile failed (when, which sources, the log)
PCH_HEADER = "torch_extension.h"  # includes torch/extension.h; its .gch lies beside it
PCH_RECORD = "pch.json"  # written last: the compiler, flags, seconds and size of the .gch
PCH_FAILED = "pch.failed"  # written where precompiling the header failed
# a torch.utils.cpp_extension per-tag folder's name (torch_tag's form): "py311_cu130"
TAG_RE = re.compile(r"^py\d+[a-z]*_(cpu|cu\d+|rocm[\d.]*|xpu)$")


def python_tag() -> str:
    """The running Python as manifests record it: "cpython311"."""
    return f"{sys.implementation.name}{sys.version_info.major}{sys.version_info.minor}"


def torch_tag(torch_cuda: str | None) -> str:
    """torch.utils.cpp_extension's folder tag, e.g. 'py311_cu130' or 'py311_cpu'."""
    cu = "cpu" if not torch_cuda else "cu" + torch_cuda.replace(".", "")
    return f"py{sys.version_info.major}{sys.version_info.minor}{getattr(sys, 'abiflags', '')}_{cu}"


def torch_tag_for(versions: dict) -> str:
    """The folder tag of the torch a manifest's build was made for ('' if it does not say)."""
    py = str(versions.get("python", ""))
    digits = "".join(ch for ch in py if ch.isdigit())
    if not digits:
        return ""
    cuda = versions.get("torch_cuda")
    cu = "cpu" if not cuda or cuda == "none" else "cu" + str(cuda).replace(".", "")
    return f"py{digits}_{cu}"


def default_root(torch_cuda: str | None) -> Path:
    """The root torch.utils.cpp_extension uses: TORCH_EXTENSIONS_DIR, else its per-tag default."""
    env = os.environ.get("TORCH_EXTENSIONS_DIR")
    if env:
        return Path(env).expanduser()
    cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(cache) / "torch_extensions" / torch_tag(torch_cuda)


def entry_dir(root: Path, ident: str) -> Path:
    return root / f"{ENTRY_PREFIX}{ident}"


def build_dir(entry: Path, device: str) -> Path:
    return entry / f"build-{device}"


def stem(name: str, device: str, base: str, key: str) -> str:
    return f"{name}.{device}.{base[:12]}.{key[:12]}"


def manifests_for(entry: Path, name: str, device: str, base: str) -> list[Path]:
    """Manifests of finished builds that share `base`, newest first."""
    found = list(entry.glob(f"{name}.{device}.{base[:12]}.*{MANIFEST_SUFFIX}"))
    return sorted(found, key=lambda p: p.stat().st_mtime, reverse=True)


def mark_loaded(manifest: Path) -> None:
    """Record that a build was loaded now (`kwb cache list` shows it; prune --older-than uses
    it). One utime (plus a create the first time); a read-only cache just goes unrecorded."""
    marker = manifest.with_suffix(LOADED_SUFFIX)
    try:
        os.utime(marker)
    except FileNotFoundError:
        try:
            marker.touch()
        except OSError:
            pass
    except OSError:
        pass


def build_base(config: dict, sources: dict[str, str]) -> str:
    """The build's base hash: what is known before compiling (config fingerprint, source
    hashes). The builder computes it; `kwb cache verify` recomputes it from a manifest."""
    blob = json.dumps({"format": FORMAT, "config": config, "sources": sources}, sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()


def build_key(base: str, headers: dict[str, str]) -> str:
    """The build key: the base plus the hashes of the headers the compiler reported."""
    return hashlib.sha256((base + json.dumps(headers, sort_keys=True)).encode()).hexdigest()
