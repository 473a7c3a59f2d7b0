"""torch/extension.h, precompiled once, for the C++ translation units of torch-style extensions.

Parsing torch/extension.h is most of a tutorial binding .cpp's compile (19.9 s of it on the
H100 host, 8.4 s with a precompiled header: benchmarks/reference/h100_compile_times.md). kwb
compiles the header once per compiler, torch and flag set into a cache entry of its own
(kwb_pch-<key>/ under the cache root), never into torch's install folder (torch's use_pch does,
and use_pch=False deletes it there for every user of that torch), and includes it first into
each translation unit whose first include is torch/extension.h. GCC checks a precompiled
header against the unit's flags and macros and reads the header itself when they differ
(-Winvalid-pch says so in the build log), so a unit compiles to the same code either way.
"""
from __future__ import annotations

import hashlib
import json
import os
import re
import subprocess
import time
from pathlib import Path

from cache_tools import layout
from cache_tools.fsutil import atomic_write_text, sha256_file
from cache_tools.tool_versions import tool_version

from . import notices, toolchain
from .locking import BuildLock
from .ninja import die_with_parent

HEADER = layout.PCH_HEADER
_FIRST_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.M)
_BEFORE_INCLUDES = re.compile(r"^\s*#\s*(define|undef|if|pragma(?!\s+once))", re.M)


def wants_pch(path: Path) -> bool:
    """A unit whose first include is torch/extension.h, with no #define or #if before it that
    could change what the header means."""
    try:
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(errors="replace"), flags=re.S)
    except OSError:
        return False
    first = _FIRST_INCLUDE.search(text)
    if first is None or first.group(1) != "torch/extension.h":
        return False
    return _BEFORE_INCLUDES.search(text[: first.start()]) is None


def pch_flags(cflags: list[str], module_name: str) -> list[str]:
    """The flags the header is compiled with: the unit's, less what differs between
    extensions and the header never reads (their own include folders, TORCH_EXTENSION_NAME)."""
    return [f for f in cflags if not f.startswith("-I") and not f.startswith(f"-DTORCH_EXTENSION_NAME={module_name}")]


def is_gcc(cxx: str, root: Path | None) -> bool:
    """Precompiled headers are GCC's here (clang's take other flags)."""
    return toolchain.compiler_family(cxx, root) == "gcc"


def entry_for(root: Path, cxx: str, flags: list[str], inputs: list[Path] = ()) -> Path:
    """The entry of this compiler, torch and flag set, and the content of `inputs` (kwb's own
    headers it precompiles: an edited or upgraded one makes a new entry, never a stale one)."""
    info = toolchain.torch_info()
    key = hashlib.sha256(json.dumps([cxx, tool_version(cxx, root), info.version, info.git, flags,
                                     [sha256_file(p) for p in inputs]]).encode()).hexdigest()[:16]
    return layout.entry_dir(root, f"{layout.PCH_IDENT_PREFIX}{key}")


def ensure(root: Path, cxx: str, flags: list[str], what: str = "torch/extension.h", inputs: list[Path] = ()) -> Path | None:
    """The precompiled header's include file (its .gch beside it), compiled first if it is not
    there; None when this compiler cannot (not GCC) or the compile failed (units then read the
    header itself, and the reason is in the entry's build.log)."""
    if not is_gcc(cxx, root):
        return None
    entry = entry_for(root, cxx, flags, list(inputs))
    header, gch, record = entry / HEADER, entry / f"{HEADER}.gch", entry / layout.PCH_RECORD
    if gch.exists() and record.exists():
        return header
    with BuildLock(entry / layout.LOCK_NAME, f"the precompiled {what}"):
        if gch.exists() and record.exists():
            return header
        atomic_write_text(header, "#include <torch/extension.h>\n")
        tmp = entry / f".{HEADER}.gch.{os.getpid()}.tmp"  # a killed builder's orphan never shares it
        notices.say(f"kwb: precompiling {what} for torch-style extensions (once per compiler, torch and flags) ...")
        started = time.monotonic()
        cmd = [cxx, "-x", "c++-header", str(header), "-o", str(tmp), *flags]
        result = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=die_with_parent)
        atomic_write_text(entry / layout.BUILD_LOG, " ".join(cmd) + "\n" + result.stdout + result.stderr)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            notices.say(f"kwb: precompiling {what} failed (see {entry / layout.BUILD_LOG}); compiling without it")
            return None
        tmp.replace(gch)  # the .gch appears whole or not at all
        seconds = time.monotonic() - started
        atomic_write_text(record, json.dumps({"cxx": cxx, "flags": flags, "torch": toolchain.torch_info().version,
                                              "seconds": round(seconds, 1), "bytes": gch.stat().st_size,
                                              "built_at": time.time()}, indent=1))
        notices.say(f"kwb: precompiled {what} in {seconds:.0f} s ({gch.stat().st_size / 2**20:.0f} MiB)")
        return header


def is_pch_path(path: str) -> bool:
    """A file of a kwb_pch entry: never hashed into a build's key (the .gch is hundreds of MB,
    and GCC validates it against each unit anyway)."""
    return f"/{layout.ENTRY_PREFIX}{layout.PCH_IDENT_PREFIX}" in path
