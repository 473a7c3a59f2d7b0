"""Chaos run: kwb's loader and cache under kill -9, concurrent loaders with edits, and damaged
cache files, every load checked against the value the kernel's sources held.

    python benchmarks/chaos.py [--seconds 600] [--loaders 16] [--out [DIR]]

--out alone writes chaos.md and chaos.json to benchmarks/results/<device>/<date>-<commit>/
(the harness's name for this machine's CPU, e.g. cpu-2core, and kwb's commit).

Each load runs in a fresh process, against a temporary cache root (never yours) and a small
kernel whose header holds the value its op adds, so a stale or damaged library shows up as a
wrong value rather than going unseen. Three parts share the time:

  damage   a good build, then one kind of damage (a library cut short or patched, a manifest
           without its key or with "headers": null, a manifest naming another library, the
           tool-versions file holding null, a folder where the lock goes, a file where the
           entry's folder goes, a root under a file, a full disk), then a load
  kill -9  an edit, a loader killed with SIGKILL at a random moment of its build (or of a warm
           load), then a load that must give the edited value
  edits    --loaders processes loading one kernel at once from a fresh root while its header
           is edited every --edit-every seconds; then a load that must give the last value

Each attempt ends as one of:
  recovered  the load gave the value the sources held (for an edit during the load: a value
             the header held at some moment of it)
  named      a one-sentence refusal naming the cause, where the damage cannot be built past (a
             file where the cache needs a folder, a full disk): what kwb promises there
  wrong      any other value, or an error where kwb should have rebuilt
  crashed    the process died with a traceback or a signal
  hung       no answer within --hang-seconds (then killed)
The exit status is 1 if an attempt was wrong, crashed or hung.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from datetime import date
from pathlib import Path

# The kernel under test: one op, add_value(x) = x + VALUE, VALUE from value.h.
KERNEL_CPP = """\
#include <ATen/ops/add.h>
#include "kwb_library.h"
#include "value.h"

namespace {
at::Tensor add_value(const at::Tensor& x) { return at::add(x, VALUE); }
}

KWB_LIBRARY(m) { m.def("add_value(Tensor x) -> Tensor"); }
KWB_LIBRARY_IMPL(m, CPU) { m.impl("add_value", &add_value); }
"""

# A fresh process: the header's value before and after the load, and what the load gave.
LOADER = """
import json, sys
folder = sys.argv[1]
def header():
    try:
        return float(open(folder + "/value.h").read().split()[-1])
    except (OSError, ValueError, IndexError):
        return None
out = {"start": header()}
import torch, workbench as wb
try:
    k = wb.load(folder, device="cpu")
    out.update(value=k.add_value(torch.zeros(1, dtype=torch.float64)).item(), library=str(k.library_path),
               manifest=str(k.build.manifest_path))
except (wb.KwbError, TimeoutError) as e:
    out.update(error=type(e).__name__, message=str(e))
out["end"] = header()
print("CHAOS " + json.dumps(out), flush=True)
"""

OUTCOMES = ("recovered", "named", "wrong", "crashed", "hung")


@dataclass
class Tally:
    counts: dict = field(default_factory=lambda: {o: 0 for o in OUTCOMES})
    failures: list = field(default_factory=list)

    def add(self, outcome: str, what: str, detail: str = "") -> None:
        self.counts[outcome] += 1
        if outcome in ("wrong", "crashed", "hung"):
            self.failures.append(f"{what}: {outcome}: {detail[-1500:]}")

    @property
    def tried(self) -> int:
        return sum(self.counts.values())


def write_header(folder: Path, value: float) -> None:
    """Atomically, as an editor that saves by renaming: a compiler never reads half a header."""
    tmp = folder / ".value.h.tmp"
    tmp.write_text(f"#pragma once\n#define VALUE {value}\n")
    os.replace(tmp, folder / "value.h")


def start_loader(folder: Path, env: dict, wrap: list[str] | None = None) -> subprocess.Popen:
    return subprocess.Popen([*(wrap or []), sys.executable, "-c", LOADER, str(folder)], env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, start_new_session=True)


def finish(p: subprocess.Popen, hang_seconds: float) -> dict:
    """What a loader printed: its CHAOS record, or {"hung": ...} / {"crashed": ...}."""
    try:
        out, err = p.communicate(timeout=hang_seconds)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        out, err = p.communicate()
        return {"hung": f"no answer in {hang_seconds:.0f} s; stderr: {err[-800:]}"}
    for line in out.splitlines():
        if line.startswith("CHAOS "):
            return {**json.loads(line[6:]), "stderr": err}
    return {"crashed": f"exit {p.returncode}; stderr: {err[-1500:]}"}


def judge(result: dict, allowed: tuple[float, float] | None, named_ok: bool = False) -> tuple[str, str]:
    """allowed: the lowest and highest right value (header values only grow); None: only a
    named refusal is right (the damage cannot be built past)."""
    if "hung" in result:
        return "hung", result["hung"]
    if "crashed" in result:
        return "crashed", result["crashed"]
    if "error" in result:
        detail = f"{result['error']}: {result['message']}"
        one_sentence = "\n" not in result["message"].strip() and "Traceback" not in result.get("stderr", "")
        return ("named" if named_ok and one_sentence else "wrong"), detail
    if allowed is not None and allowed[0] <= result["value"] <= allowed[1]:
        return "recovered", ""
    return "wrong", f"value {result['value']}, the header held {allowed}"


def load_once(folder: Path, env: dict, hang_seconds: float, wrap: list[str] | None = None) -> dict:
    return finish(start_loader(folder, env, wrap), hang_seconds)


# --- damage --------------------------------------------------------------------------------------

def _json_edit(path: Path, edit) -> None:
    data = json.loads(path.read_text())
    edit(data)
    path.write_text(json.dumps(data))


def damages(can_fill_disk: bool) -> dict:
    """name -> (damage(library, manifest, root) returning env changes, can be built past?)."""
    def cut(lib, man, root):
        lib.write_bytes(lib.read_bytes()[: lib.stat().st_size // 2])

    def patch(lib, man, root):
        data = bytearray(lib.read_bytes())
        i = data.find(b"\0" * 64, len(data) // 3) + 16
        data[i] ^= 1
        lib.write_bytes(bytes(data))

    def other_library(lib, man, root):
        (lib.parent / "other.so").write_bytes(lib.read_bytes()[:-1])
        _json_edit(man, lambda d: d.update(library="other.so"))

    def entry_is_file(lib, man, root):
        shutil.rmtree(lib.parent)
        lib.parent.write_text("not a folder")

    def lock_is_folder(lib, man, root):
        man.unlink()
        (lib.parent / "lock").unlink()
        (lib.parent / "lock").mkdir()

    def root_under_file(lib, man, root):
        (root.parent / "a-file").write_text("x")
        return {"TORCH_EXTENSIONS_DIR": str(root.parent / "a-file" / "cache")}

    table = {
        "library cut to half": (cut, True),
        "library bytes patched": (patch, True),
        "manifest without key": (lambda lib, man, root: _json_edit(man, lambda d: d.pop("key")), True),
        "manifest headers null": (lambda lib, man, root: _json_edit(man, lambda d: d.update(headers=None)), True),
        "manifest not JSON": (lambda lib, man, root: man.write_bytes(b"\0\xff{"), True),
        "manifest names another library": (other_library, True),
        "tool versions null": (lambda lib, man, root: (root / ".kwb-tool-versions.json").write_text("null"), True),
        "build folder removed": (lambda lib, man, root: shutil.rmtree(lib.parent / "build-cpu"), True),
        "a folder where the lock goes": (lock_is_folder, False),
        "a file where the entry's folder goes": (entry_is_file, False),
        "cache root under a file": (root_under_file, False),
    }
    if can_fill_disk:
        table["a full disk"] = (None, False)
    return table


def can_mount_small_disk(where: Path) -> bool:
    if shutil.which("unshare") is None:
        return False
    return subprocess.run(["unshare", "-m", "sh", "-c", f"mount -t tmpfs -o size=8k tmpfs {where}"],
                          capture_output=True, check=False).returncode == 0


def run_damage(work: Path, env: dict, args, tally: Tally) -> None:
    disk = work / "small-disk"
    disk.mkdir()
    for n, (name, (damage, rebuildable)) in enumerate(damages(can_mount_small_disk(disk)).items()):
        root = work / f"damage-{n}" / "cache"
        folder = work / f"damage-{n}" / "kernel"
        folder.mkdir(parents=True)
        (folder / "k.cpp").write_text(KERNEL_CPP)
        write_header(folder, 100.0 + n)
        case_env = dict(env, TORCH_EXTENSIONS_DIR=str(root))
        wrap = None
        if damage is None:  # a full disk: the cache on a 40 KiB file system of its own
            case_env["TORCH_EXTENSIONS_DIR"] = str(disk / "cache")
            wrap = ["unshare", "-m", "sh", "-c", f'mount -t tmpfs -o size=40k tmpfs {disk} && exec "$@"', "chaos"]
        else:
            good = load_once(folder, case_env, args.hang_seconds)
            if "value" not in good:
                tally.add("wrong", f"damage/{name}", f"the good build before the damage failed: {good}")
                continue
            extra = damage(Path(good["library"]), Path(good["manifest"]), root)
            case_env.update(extra if isinstance(extra, dict) else {})
        result = load_once(folder, case_env, args.hang_seconds, wrap)
        outcome, detail = judge(result, (100.0 + n, 100.0 + n), named_ok=not rebuildable)
        tally.add(outcome, f"damage/{name}", detail)
        print(f"  damage  {name:38s} {outcome:9s} {detail[:110]}", flush=True)


# --- kill -9 -------------------------------------------------------------------------------------

def run_kill9(work: Path, env: dict, args, tally: Tally, until: float, build_seconds: float) -> None:
    folder = work / "kill9" / "kernel"
    folder.mkdir(parents=True)
    (folder / "k.cpp").write_text(KERNEL_CPP)
    env = dict(env, TORCH_EXTENSIONS_DIR=str(work / "kill9" / "cache"))
    value, rounds = 1.0, 0
    write_header(folder, value)  # a first round that kills a "warm" load still has a kernel to load
    while rounds < args.min_rounds or time.monotonic() < until:
        rounds += 1
        edit = random.random() < 0.8  # the rest: kill a warm load (marking it loaded, checking the library)
        if edit:
            value += 1
            write_header(folder, value)
        victim = start_loader(folder, env)
        time.sleep(random.uniform(0.0, 1.3 * (build_seconds if edit else 2.0)))
        try:  # the loader alone (its compilers run on, orphaned), or with the ninja and compilers it started
            (os.kill if random.random() < 0.5 else os.killpg)(victim.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        victim.communicate()
        outcome, detail = judge(load_once(folder, env, args.hang_seconds), (value, value))
        tally.add(outcome, f"kill-9/round {rounds}", detail)
    print(f"  kill -9 {rounds} rounds: {tally.counts}", flush=True)


# --- concurrent loaders with edits ---------------------------------------------------------------

def run_edits(work: Path, env: dict, args, tally: Tally, until: float) -> None:
    rounds = 0
    while rounds < 1 or time.monotonic() < until:
        rounds += 1
        base = work / f"edits-{rounds}"
        folder = base / "kernel"
        folder.mkdir(parents=True)
        (folder / "k.cpp").write_text(KERNEL_CPP)
        value = 1000.0
        write_header(folder, value)
        round_env = dict(env, TORCH_EXTENSIONS_DIR=str(base / "cache"))  # a fresh root: every loader probes and waits
        loaders = [start_loader(folder, round_env) for _ in range(args.loaders)]
        edits_end = time.monotonic() + args.edit_window
        while time.monotonic() < edits_end:
            time.sleep(args.edit_every)
            value += 1
            write_header(folder, value)
        for p in loaders:
            result = finish(p, args.hang_seconds)
            lo, hi = result.get("start"), result.get("end")
            outcome, detail = judge(result, (lo, hi) if lo is not None and hi is not None else None)
            tally.add(outcome, f"edits/round {rounds}", detail)
        outcome, detail = judge(load_once(folder, round_env, args.hang_seconds), (value, value))
        tally.add(outcome, f"edits/round {rounds} after the edits", detail)
        shutil.rmtree(base, ignore_errors=True)
    print(f"  edits   {rounds} rounds of {args.loaders} loaders: {tally.counts}", flush=True)


RUN_FOLDER = object()  # --out given no folder


def run_folder() -> Path:
    """benchmarks/results/<device>/<date>-<commit>/, as gpu_run.sh names a run's folder: the
    harness's slug for this machine's CPU (the loads are CPU builds) and kwb_version()'s commit."""
    from workbench.harness import results

    env = results.environment("cpu")
    commit = env.kwb_version.partition("+")[2] or "unknown"
    return Path(__file__).resolve().parent / "results" / env.slug / f"{env.timestamp[:10]}-{commit}"


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=600, help="time for the kill -9 and edit parts together (default 600)")
    ap.add_argument("--loaders", type=int, default=16, help="processes loading at once in the edit part (default 16)")
    ap.add_argument("--edit-every", type=float, default=1.0, help="seconds between header edits (default 1)")
    ap.add_argument("--edit-window", type=float, default=15.0, help="seconds of edits a round (default 15)")
    ap.add_argument("--min-rounds", type=int, default=5, help="kill -9 rounds even if time is short (default 5)")
    ap.add_argument("--hang-seconds", type=float, default=300, help="a load with no answer by then is hung (default 300)")
    ap.add_argument("--only", choices=["damage", "kill9", "edits"], action="append", help="run only these parts")
    ap.add_argument("--seed", type=int, default=None, help="random seed for the kill times")
    ap.add_argument("--out", type=Path, nargs="?", const=RUN_FOLDER,
                    help="write chaos.md and chaos.json here (--out alone: benchmarks/results/<device>/<date>-<commit>)")
    args = ap.parse_args(argv)
    for name in ("seconds", "edit_every", "edit_window", "hang_seconds"):
        if not getattr(args, name) > 0:
            ap.error(f"--{name.replace('_', '-')} must be a positive number of seconds")
    if args.loaders < 1 or args.min_rounds < 0:
        ap.error("--loaders must be at least 1 and --min-rounds at least 0")
    parts = args.only or ["damage", "kill9", "edits"]
    random.seed(args.seed)
    env = {k: v for k, v in os.environ.items() if k not in ("KWB_LOCK_TIMEOUT", "TORCH_EXTENSIONS_DIR")}
    started = time.monotonic()
    tallies = {p: Tally() for p in parts}
    with tempfile.TemporaryDirectory(prefix="kwb-chaos-") as tmp:
        work = Path(tmp)
        if "damage" in parts:
            run_damage(work, env, args, tallies["damage"])
        timed = [p for p in parts if p != "damage"]
        build_seconds = 0.0
        if timed:  # how long a cold build takes here: kill -9 aims inside it
            probe = work / "probe" / "kernel"
            probe.mkdir(parents=True)
            (probe / "k.cpp").write_text(KERNEL_CPP)
            write_header(probe, 1.0)
            t0 = time.monotonic()
            load_once(probe, dict(env, TORCH_EXTENSIONS_DIR=str(work / "probe" / "cache")), args.hang_seconds)
            build_seconds = time.monotonic() - t0
        share = args.seconds / max(len(timed), 1)
        if "kill9" in parts:
            run_kill9(work, env, args, tallies["kill9"], time.monotonic() + share, build_seconds)
        if "edits" in parts:
            run_edits(work, env, args, tallies["edits"], time.monotonic() + share)
    elapsed = time.monotonic() - started
    report = render(tallies, args, elapsed)
    print(report)
    if args.out:
        if args.out is RUN_FOLDER:
            args.out = run_folder()
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "chaos.md").write_text(report)
        (args.out / "chaos.json").write_text(json.dumps(
            {p: {"tried": t.tried, **t.counts, "failures": t.failures} for p, t in tallies.items()}, indent=1))
    return 1 if any(t.failures for t in tallies.values()) else 0


def render(tallies: dict, args, elapsed: float) -> str:
    import torch

    from workbench.harness.results import kwb_version

    lines = [f"# kwb chaos run, {date.today()}", "",
             (f"{platform.node()} ({os.cpu_count()} cores), Python {platform.python_version()}, torch {torch.__version__}, "
              f"kwb {kwb_version()}; {elapsed:.0f} s; `python benchmarks/chaos.py --seconds {args.seconds:g} "
              f"--loaders {args.loaders}`"), "",
             "| part | tried | " + " | ".join(OUTCOMES) + " |", "|---|---:|" + "---:|" * len(OUTCOMES)]
    for part, t in tallies.items():
        lines.append(f"| {part} | {t.tried} | " + " | ".join(str(t.counts[o]) for o in OUTCOMES) + " |")
    failures = [f for t in tallies.values() for f in t.failures]
    lines += ["", "Failures:" if failures else "No attempt was wrong, crashed or hung."]
    lines += [f"- {f}" for f in failures]
    return "\n".join(lines) + "\n"


if __name__ == "__main__":
    sys.exit(main())
