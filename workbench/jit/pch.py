"""torch/extension.h, precompiled once, for the C++ translation units of torch-style extensions.

Parsing torch/extension.h is most of a tutorial binding .cpp's compile (19.9 s of it on the
H100 host, 8.4 s with a precompiled header: benchmarks/reference/h100_compile_times.md). kwb
compiles the header once per compiler, torch and flag set into a cache entry of its own
(kwb_pch-<key>/ under the cache root), never into torch's install folder (torch's use_pch does,
and use_pch=False deletes it there for every user of that torch), and includes it first into
each translation unit whose first include is torch/extension.h. GCC checks a precompiled
header against the unit's flags and macros and reads the header itself when they differ
(-Winvalid-pch says so in the build log), so a unit compiles to the same code either way.

No build waits for the header: compiled in front of the units it made a cold build of the
tutorial LLTM 35.5 s against torch's 20.4 s (2-core machine). A build that finds no .gch starts
a detached, lower-priority process that compiles it (beside the units where cores are to spare,
else once they are done: builder._cores_to_spare), and its units read the header's text
meanwhile; a later build finds the .gch. Every unit's command is the same
either way (-include of the entry's header, whose .gch GCC takes where it is there and valid),
so the .gch appearing never makes ninja recompile anything.
"""
from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

from kwb_store import layout
from kwb_store.fsutil import atomic_write_text, sha256_file
from kwb_store.tool_versions import tool_version

from . import compile_cache, detached, notices, toolchain
from .ninja import die_with_parent

HEADER = layout.PCH_HEADER
FAILED = layout.PCH_FAILED  # the compile failed: units read the header itself; `kwb cache prune --pch` retries
_HEADER_TEXT = "#include <torch/extension.h>\n"
_NICE = 10  # below the units' compilers, which the user waits for
_FIRST_INCLUDE = re.compile(r'^\s*#\s*include\s*[<"]([^>"]+)[>"]', re.MULTILINE)
_BEFORE_INCLUDES = re.compile(r"^\s*#\s*(define|undef|if|pragma(?!\s+once))", re.MULTILINE)
_started: dict[Path, subprocess.Popen] = {}  # per entry: this process's background compile


def wants_pch(path: Path) -> bool:
    """A unit whose first include is torch/extension.h, with no #define or #if before it that
    could change what the header means."""
    try:
        text = re.sub(r"//[^\n]*|/\*.*?\*/", "", path.read_text(errors="replace"), flags=re.DOTALL)
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


def ready(entry: Path) -> bool:
    """The .gch is whole: renamed into place, then its record written."""
    return (entry / f"{HEADER}.gch").exists() and (entry / layout.PCH_RECORD).exists()


@contextlib.contextmanager
def _try_lock(entry: Path, what: str):
    """Held: the entry's lock, if nobody held it; else None (a compile of it is running)."""
    lock = compile_cache.build_lock(entry / layout.LOCK_NAME, f"the precompiled {what}", timeout=0)
    try:
        lock.__enter__()
    except TimeoutError:
        yield None
        return
    try:
        yield lock
    finally:
        lock.__exit__(None, None, None)


def header_for(root: Path, cxx: str, flags: list[str], what: str = "torch/extension.h",
               inputs: list[Path] = ()) -> tuple[Path, Path] | None:
    """(the include file a unit takes with -include, its entry); None when this compiler
    cannot precompile (not GCC). Never compiles: start() does, beside the build."""
    if not is_gcc(cxx, root):
        return None
    entry = entry_for(root, cxx, flags, list(inputs))
    header = entry / HEADER
    try:
        same = header.read_text() == _HEADER_TEXT
    except OSError:
        same = False
    if not same:  # written once: a new mtime would make ninja recompile the units that read it
        atomic_write_text(header, _HEADER_TEXT)
    gch = entry / f"{HEADER}.gch"
    if gch.exists() and not (entry / layout.PCH_RECORD).exists():
        with _try_lock(entry, what) as lock:
            if lock is not None and not (entry / layout.PCH_RECORD).exists():
                gch.unlink(missing_ok=True)  # a .gch without its record and nobody compiling it: never trusted
    return header, entry


def start(entry: Path, cxx: str, flags: list[str], what: str) -> subprocess.Popen | None:
    """Compile the entry's .gch in a detached process of lower priority, unless it is there, this
    process's compile of it still runs, or an earlier compile failed (another process's
    compile makes this one's end at once: the lock). Detached: a script that loads, runs and
    exits still leaves a .gch for its next run."""
    running = _started.get(entry)
    if ready(entry) or (running is not None and running.poll() is None):
        return None
    if (entry / FAILED).exists():
        notices.once(f"pch-failed:{entry}", f"kwb: precompiling {what} failed before (see {entry / layout.BUILD_LOG}); "
                                            "compiling without it")
        return None
    notices.once(f"pch-start:{entry}", f"kwb: precompiling {what} in the background, for the next compiles "
                                       "(once per compiler, torch and flags)")
    proc = detached.start("workbench.jit.pch", {"entry": str(entry), "cxx": cxx, "flags": flags, "what": what})
    _started[entry] = proc
    return proc


def wait(timeout: float | None = None) -> None:
    """Wait for the compiles this process started (tests, benchmarks)."""
    for proc in list(_started.values()):
        proc.wait(timeout)


def compile_now(entry: Path, cxx: str, flags: list[str], what: str) -> bool:
    """Compile the .gch under the entry's lock, unless another process is compiling it (then
    False at once). The .gch is written under a temp name and renamed, then its record written:
    a unit finds a whole .gch or none."""
    with _try_lock(entry, what) as lock:
        if lock is None:
            return False
        if ready(entry):
            return True
        header, gch, record = entry / HEADER, entry / f"{HEADER}.gch", entry / layout.PCH_RECORD
        if not header.exists():
            atomic_write_text(header, _HEADER_TEXT)
        for orphan in entry.glob(f".{HEADER}.gch.*.tmp"):  # a killed compile's (hundreds of MB); the lock says none runs
            orphan.unlink(missing_ok=True)
        tmp = entry / f".{HEADER}.gch.{os.getpid()}.tmp"
        started = time.monotonic()
        cmd = [cxx, "-x", "c++-header", str(header), "-o", str(tmp), *flags]
        result = subprocess.run(cmd, capture_output=True, text=True, preexec_fn=die_with_parent, check=False)
        atomic_write_text(entry / layout.BUILD_LOG, " ".join(cmd) + "\n" + result.stdout + result.stderr)
        if result.returncode != 0:
            tmp.unlink(missing_ok=True)
            atomic_write_text(entry / FAILED, f"exit status {result.returncode}\n")
            return False
        tmp.replace(gch)  # the .gch appears whole or not at all
        seconds = time.monotonic() - started
        atomic_write_text(record, json.dumps({"cxx": cxx, "flags": flags, "torch": toolchain.torch_info().version,
                                              "seconds": round(seconds, 1), "bytes": gch.stat().st_size,
                                              "built_at": time.time()}, indent=1))
        return True


def is_pch_path(path: str) -> bool:
    """A file of a kwb_pch entry: never hashed into a build's key (the .gch is hundreds of MB,
    and GCC validates it against each unit anyway)."""
    return f"/{layout.ENTRY_PREFIX}{layout.PCH_IDENT_PREFIX}" in path


def _main(job: str) -> int:
    os.nice(_NICE)
    spec = json.loads(job)
    compile_now(Path(spec["entry"]), spec["cxx"], spec["flags"], spec["what"])
    return 0


if __name__ == "__main__":
    sys.exit(_main(sys.argv[1]))
