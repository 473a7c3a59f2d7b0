"""Write build.ninja for one kernel and run ninja over it.

ninja gives the incremental part: with the compilers' depfiles it recompiles only the
translation units whose source or included headers changed (an edit of the .cu recompiles
the .cu alone: ~2 s instead of the .cpp's ~5-10 s).
"""
from __future__ import annotations

import ctypes
import os
import select
import signal
import subprocess
import threading
from dataclasses import dataclass
from pathlib import Path

from kwb_store.fsutil import atomic_write_text

from .feedback import BuildFeedback


@dataclass
class CompileStep:
    source: Path
    obj: str  # object file name inside the build folder
    cuda: bool
    flags: tuple[str, ...] = ()  # this translation unit's own flags, after the common ones
    cuda_cflags: tuple[str, ...] | None = None  # a CUDA unit's nvcc flags in place of the common ones (arch_units.py)


@dataclass
class NinjaPlan:
    cxx: str
    nvcc: str | None
    cflags: list[str]
    cuda_cflags: list[str]
    ldflags: list[str]
    steps: list[CompileStep]
    library: str  # output file name inside the build folder


def _esc(path: str) -> str:
    """A path in a build statement's inputs or outputs ($, space and colon are ninja's)."""
    return path.replace("$", "$$").replace(" ", "$ ").replace(":", "$:")


def _join(flags: list[str]) -> str:
    """Arguments as a variable's value: quoted for the shell that runs the command, then each
    $ doubled for ninja (a kernel folder such as /tmp/a$b would otherwise be ninja's variable)."""
    import shlex

    return " ".join(shlex.quote(f) for f in flags).replace("$", "$$")


def render(plan: NinjaPlan) -> str:
    out = [
        "# Written by kwb (workbench/jit/ninja.py); rewritten on every build.",
        "ninja_required_version = 1.3",
        f"cxx = {plan.cxx}",
        f"cflags = {_join(plan.cflags)}",
        f"ldflags = {_join(plan.ldflags)}",
        "",
        "rule cxx",
        "  command = $cxx -MMD -MF $out.d $cflags $extra -c $src -o $out",
        "  depfile = $out.d",
        "  description = CXX $desc",
        "",
        "rule link",
        "  command = $cxx $in $ldflags -o $out",
        "  description = LINK $out",
        "",
    ]
    if plan.nvcc:
        out[5:5] = [f"nvcc = {plan.nvcc}", f"cuda_cflags = {_join(plan.cuda_cflags)}"]
        out += [
            "rule nvcc",
            "  command = $nvcc --generate-dependencies-with-compile --dependency-output $out.d $cuda_cflags $extra -c $src -o $out",
            "  depfile = $out.d",
            "  description = NVCC $desc",
            "",
        ]
    for step in plan.steps:
        out.append(f"build {_esc(step.obj)}: {'nvcc' if step.cuda else 'cxx'} {_esc(str(step.source))}")
        out.append(f"  src = {_join([str(step.source)])}")  # quoted: $in is not, and the shell reads it
        out.append(f"  desc = {step.source.name.replace('$', '$$')}")
        if step.flags:
            out.append(f"  extra = {_join(list(step.flags))}")
        if step.cuda and step.cuda_cflags is not None:
            out.append(f"  cuda_cflags = {_join(list(step.cuda_cflags))}")
    objs = " ".join(_esc(s.obj) for s in plan.steps)
    out += ["", f"build {_esc(plan.library)}: link {objs}", f"default {_esc(plan.library)}", ""]
    return "\n".join(out)


def parse_depfile(path: Path) -> list[str]:
    """The prerequisites listed in a Makefile-style depfile: escaped spaces, `$$` and `\\#`
    (how GCC writes a path holding $ or #) read back as the path."""
    try:
        text = path.read_text()
    except OSError:
        return []
    text = text.replace("\\\n", " ").replace("\\\r\n", " ")
    _, _, deps = text.partition(": ")
    if not deps:
        _, _, deps = text.partition(":")
    items, cur, i = [], "", 0
    while i < len(deps):
        ch = deps[i]
        if ch == "\\" and i + 1 < len(deps) and deps[i + 1] in " #":
            cur += deps[i + 1]
            i += 2
            continue
        if ch == "$" and i + 1 < len(deps) and deps[i + 1] == "$":
            cur += "$"
            i += 2
            continue
        if ch.isspace():
            if cur:
                items.append(cur)
            cur = ""
        else:
            cur += ch
        i += 1
    if cur:
        items.append(cur)
    return items


try:  # looked up here, not in the forked child: a dlopen there can hang on a loader lock
    _PRCTL = ctypes.CDLL(None).prctl  # that another thread (a library being loaded) held at fork
except (OSError, AttributeError):
    _PRCTL = None

# Set by parallel.load_all on Ctrl-C: every ninja running in this process's threads is ended.
stop_all = threading.Event()


def die_with_parent() -> None:
    """In a compiler's or ninja's process: get SIGTERM when the loading process dies (kill -9
    included), so an orphan never keeps writing into a folder that the next builder now owns.
    ninja forwards the signal to its compilers and deletes their partial outputs."""
    if _PRCTL is not None:
        _PRCTL(1, signal.SIGTERM)  # PR_SET_PDEATHSIG


def max_jobs() -> int | None:
    """MAX_JOBS, the compilers to run at once (torch.utils.cpp_extension reads it too); None where unset."""
    given = os.environ.get("MAX_JOBS", "").strip()
    if not given:
        return None
    if not given.isdigit() or int(given) < 1:
        raise ValueError(f"MAX_JOBS must be a whole number of at least 1, got {given!r}")
    return int(given)


# Per thread: called once ninja is running (parallel.load_all waits for every build's compilers
# to start before it imports torch in its own thread).
launch_hooks = threading.local()


def run(ninja: str, build_dir: Path, plan: NinjaPlan, feedback: BuildFeedback, jobs: int | None = None) -> tuple[bool, str]:
    """Build; returns (ok, everything ninja and the compilers printed)."""
    atomic_write_text(build_dir / "build.ninja", render(plan))
    cmd = [ninja, "-k", "0"]  # keep going: report the errors of every translation unit at once
    if feedback.verbose:
        cmd.append("-v")
    if jobs is None:
        jobs = max_jobs()  # torch.utils.cpp_extension's knob, honoured alike
    if jobs:
        cmd += ["-j", str(jobs)]
    env = dict(os.environ, NINJA_STATUS="[%f/%t] ")
    dry = subprocess.run([ninja, "-n"], cwd=build_dir, capture_output=True, text=True, env=env, check=False)  # ~10 ms
    if dry.returncode == 0:
        feedback.expect([line.split("] ", 1)[1] for line in dry.stdout.splitlines() if line.startswith("[") and "] " in line])
    proc = subprocess.Popen(cmd, cwd=build_dir, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, env=env,
                            preexec_fn=die_with_parent)  # noqa: PLW1509 - one prctl call in the child, no locks taken
    launched = getattr(launch_hooks, "callback", None)
    if launched is not None:
        launched()
    try:
        return _pump(proc, feedback)
    except BaseException:  # Ctrl-C or an error while reading: ninja must not outlive the lock
        proc.terminate()
        proc.wait()
        raise


def _pump(proc: subprocess.Popen, feedback: BuildFeedback) -> tuple[bool, str]:
    assert proc.stdout is not None
    fd = proc.stdout.fileno()
    buf = b""
    chunks: list[bytes] = []
    while True:
        if stop_all.is_set():
            raise KeyboardInterrupt("builds stopped")  # run() ends ninja
        ready, _, _ = select.select([fd], [], [], 0.1)
        if ready:
            data = os.read(fd, 65536)
            if not data:
                break
            chunks.append(data)
            buf += data
            *lines, buf = buf.split(b"\n")
            for line in lines:
                feedback.line(line.decode(errors="replace"))
        else:
            feedback.tick()
    if buf:
        feedback.line(buf.decode(errors="replace"))
    rc = proc.wait()
    return rc == 0, b"".join(chunks).decode(errors="replace")
