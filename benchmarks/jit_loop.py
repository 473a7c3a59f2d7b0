#!/usr/bin/env python
"""The edit-reload loop, kwb beside "the tutorial way", for one kernel (relu_scale).

    python benchmarks/jit_loop.py [--repeat N] [--approaches kwb,tutorial,raw,raw_op,cupy,torch_nvrtc]
                                  [--skip-tutorial] [--skip-fresh] [--out DIR]

Both approaches build the same math, y = max(x, 0) * (alpha * EDIT_SCALE + OFFSET), from a
temporary copy of their sources with their own empty TORCH_EXTENSIONS_DIR:

    kwb       kernels/relu_scale/ through wb.load(folder, device="cuda"); the copy's .cu gets
              an EDIT_SCALE literal and includes a local edit_me.cuh holding the OFFSET define
    tutorial  benchmarks/tutorial_relu_scale/: one .cu with <torch/extension.h>, the kernel,
              a wrapper and PYBIND11_MODULE, through torch.utils.cpp_extension.load(), which
              includes relu_scale_tutorial.h holding the OFFSET define
    raw       benchmarks/raw_relu_scale/: an extern "C" kernel through wb.cuda_kernel (NVRTC),
              launched on the tensors by a three-line Python function; its header holds OFFSET
    raw_op    the same kernel behind wb.raw_op (a torch custom op with a fake): what the
              dispatcher, autograd and torch.compile integration add to the loop
    cupy      the same text through cupy.RawKernel (its own NVRTC cache, keyed by the text
              only: a header edit is expected to come back stale), where cupy imports
    torch_nvrtc  the same text through torch.cuda._compile_kernel (NVRTC, no cache: every
              load compiles), where torch has it and a GPU is visible

Steps, each timed with time.perf_counter() in a child process (`python -c`, one JSON line back):

    cold build     fresh process, empty cache: the load call (import torch reported apart)
    warm load      fresh process, built cache: from after `import torch` to the loaded module
    .cu edit       one process: load, edit the EDIT_SCALE literal, load again, run
    header edit    one process: the same, editing the OFFSET define
    fresh edits    (unless --skip-fresh) the edit is made, then a fresh process loads and runs

An edit's time runs from the file write to the new result on the GPU (to the loaded module
when there is no GPU: the `ran_on_gpu` column). Each edit is judged: "new" (the output has
the predicted value), "stale" (the output from before the edit came back) or "wrong"; without
a GPU, "new lib" (a library built after the edit, not loaded before in that process) or
"stale lib". torch's in-process load() does not see header edits, so "stale" is the expected
finding for the tutorial's same-process header edit.

Without a GPU the CUDA code is still compiled, linked and loaded (for sm_90), so the build
and load times hold; nvcc and a CUDA build of torch are required either way.

This file is also the children's code: they import it, so its top level imports only the
standard library (the import of torch is what they time first).
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import re
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from datetime import datetime, timezone
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
KWB_KERNEL = REPO / "kernels" / "relu_scale"
TUTORIAL_SOURCES = BENCH_DIR / "tutorial_relu_scale"
TUTORIAL_NAME = "relu_scale_tutorial"
RAW_SOURCES = BENCH_DIR / "raw_relu_scale"
RAW_NAME = "relu_scale_raw"
APPROACHES = ("kwb", "tutorial", "raw", "raw_op", "cupy", "torch_nvrtc")

ALPHA = 1.5
NUM_ELEMENTS = 1 << 16
NO_GPU_ARCH = "9.0"  # the H100's: what kwb itself defaults to without a GPU
CHILD_TIMEOUT_S = 1200
RESULT_MARKER = "JIT_LOOP_RESULT "
# Filesystem timestamps come from a coarse kernel clock that can trail time.time() by a tick;
# every build takes far longer than this, and a library from an earlier step is seconds older.
MTIME_SLACK_S = 0.05

# The edit points. Both approaches spell them the same way, so one pair of regexes edits both.
SCALE_RE = re.compile(r"(-?\d+(?:\.\d+)?)f /\*EDIT_SCALE\*/")
OFFSET_RE = re.compile(r"^(#define \w+_OFFSET )(-?\d+(?:\.\d+)?)f$", re.MULTILINE)

STEPS = [
    # key, row label, what the number is
    ("cold", "cold build (fresh process, empty cache)", "load call; import torch not included"),
    ("warm", "warm load (fresh process)", "after import torch, to the loaded module"),
    ("cu_same", ".cu edit -> new result (same process)", "file write to {result}"),
    ("header_same", "header edit -> new result (same process)", "file write to {result}"),
    ("cu_fresh", ".cu edit -> new result (fresh process)", "after import torch, to {result}"),
    ("header_fresh", "header edit -> new result (fresh process)", "after import torch, to {result}"),
]
EDIT_STEPS = {"cu_same": "cu", "header_same": "header", "cu_fresh": "cu", "header_fresh": "header"}


# --- sources and edits (used by the parent and the children) ------------------------------

@dataclass
class Workspace:
    """One approach's editable copy of its sources and its own build cache."""

    approach: str  # "kwb" or "tutorial"
    folder: str  # what the loader is given (kwb) / holds the sources (tutorial)
    cu: str  # holds the EDIT_SCALE literal
    header: str  # holds the OFFSET define
    cache: str  # TORCH_EXTENSIONS_DIR


def read_state(ws: Workspace) -> tuple[float, float]:
    """(EDIT_SCALE, OFFSET) as the files say now."""
    scale = SCALE_RE.search(Path(ws.cu).read_text())
    offset = OFFSET_RE.search(Path(ws.header).read_text())
    if scale is None or offset is None:
        raise RuntimeError(f"lost the edit points in {ws.cu} / {ws.header}")
    return float(scale.group(1)), float(offset.group(2))


def multiplier(state: tuple[float, float]) -> float:
    """What the kernel multiplies positive inputs by in this state."""
    scale, offset = state
    return ALPHA * scale + offset


def apply_edit(ws: Workspace, kind: str, value: float) -> None:
    """Save one edit the way an editor does: the file rewritten in place."""
    if kind == "cu":
        path, regex, repl = Path(ws.cu), SCALE_RE, f"{value!r}f /*EDIT_SCALE*/"
    else:
        path, regex, repl = Path(ws.header), OFFSET_RE, rf"\g<1>{value!r}f"
    text, n = regex.subn(repl, path.read_text(), count=1)
    if n != 1:
        raise RuntimeError(f"no edit point in {path}")
    path.write_text(text)


def edit_values(ws: Workspace, kind: str, count: int) -> list[float]:
    """Values this workspace never held (each edit moves one way), so no edit can be served
    by a build left over from an earlier one."""
    scale, offset = read_state(ws)
    return [scale + i if kind == "cu" else offset + 0.25 * i for i in range(1, count + 1)]


# --- the child side ----------------------------------------------------------------------

@dataclass
class Loaded:
    fn: object  # relu_scale(x, alpha)
    library: str  # the shared library the code came from
    compiled: bool | None  # whether this load ran the compiler (kwb says; torch does not)
    build_seconds: float | None


def load_module(ws: Workspace) -> Loaded:
    """Each approach's whole load path, its imports included (they are part of the cost)."""
    if ws.approach == "kwb":
        import workbench as wb

        k = wb.load(ws.folder, device="cuda")
        compiled = bool(k.build.compiled)
        return Loaded(k.relu_scale, str(k.library_path), compiled,
                      k.build.manifest.build_seconds if compiled else None)
    if ws.approach in ("raw", "raw_op"):
        return _load_raw(ws)
    if ws.approach == "cupy":
        return _load_cupy(ws)
    if ws.approach == "torch_nvrtc":
        return _load_torch_nvrtc(ws)
    from torch.utils.cpp_extension import load

    module = load(name=TUTORIAL_NAME, sources=[ws.cu], extra_cuda_cflags=["-O3"])
    return Loaded(module.relu_scale, module.__file__, None, None)


def _launcher(launch):
    """relu_scale(x, alpha) over a raw launch(grid, block, args): the output allocated here."""
    import torch

    def relu_scale(x, alpha):
        y = torch.empty_like(x)
        launch(((x.numel() + 255) // 256, 1, 1), (256, 1, 1), (x, y, float(alpha), x.numel()))
        return y

    return relu_scale


def _load_raw(ws: Workspace) -> Loaded:
    import torch

    import workbench as wb

    k = wb.cuda_kernel(Path(ws.cu), RAW_NAME)
    fn = launched = _launcher(k)
    if ws.approach == "raw_op":
        def relu_scale_raw(x, alpha):  # calls `launched`: `fn` becomes the op, which calls this
            return launched(x, alpha)

        # this module's annotations are strings (from __future__): custom_op needs the types
        relu_scale_raw.__annotations__ = {"x": torch.Tensor, "alpha": float, "return": torch.Tensor}
        fn = wb.raw_op(relu_scale_raw, name="kwb_jit_loop::relu_scale_raw", fake=lambda x, alpha: torch.empty_like(x))
    return Loaded(fn, str(k.cubin_path), k.compiled, k.compile_seconds if k.compiled else None)


def _load_cupy(ws: Workspace) -> Loaded:
    import cupy

    kernel = cupy.RawKernel(Path(ws.cu).read_text(), RAW_NAME, options=(f"-I{ws.folder}",))
    kernel.compile()  # CuPy compiles lazily; the load is when the cubin exists

    def launch(grid, block, args):
        import torch

        x, y, alpha, n = args
        stream = cupy.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
        with stream:
            kernel(grid, block, (cupy.from_dlpack(x), cupy.from_dlpack(y), cupy.float64(alpha), cupy.int32(n)))

    return Loaded(_launcher(launch), ws.cu, None, None)


def _load_torch_nvrtc(ws: Workspace) -> Loaded:
    import torch

    kernel = torch.cuda._compile_kernel(Path(ws.cu).read_text(), RAW_NAME, cuda_include_dirs=[ws.folder])

    def launch(grid, block, args):
        x, y, alpha, n = args  # a Python float goes as a double and an int as an int: the kernel's types
        kernel(grid=grid, block=block, args=[x, y, float(alpha), int(n)])

    return Loaded(_launcher(launch), ws.cu, None, None)


class Probe:
    """Runs a loaded relu_scale on a fixed input and says whether its output is the new one."""

    def __init__(self, torch):
        self.torch = torch
        self.gpu = torch.cuda.is_available()
        if self.gpu:  # CUDA's context is set up here, outside every timed region
            self.x = torch.linspace(-2.0, 2.0, NUM_ELEMENTS, device="cuda")
            self.relu_x = torch.relu(self.x)
            torch.cuda.synchronize()

    def run(self, loaded: Loaded):
        """The output, synchronized (None without a GPU): the end of a timed region."""
        if not self.gpu:
            return None
        y = loaded.fn(self.x, ALPHA)
        self.torch.cuda.synchronize()
        return y

    def _matches(self, y, state) -> bool:
        return bool(self.torch.allclose(y, self.relu_x * multiplier(state), rtol=1e-5, atol=1e-6))

    def judge(self, y, loaded: Loaded, state, before, edit_wall: float | None, seen: set[str]) -> str:
        if y is not None:
            if self._matches(y, state):
                return "new" if before is not None else "ok"
            return "stale" if before is not None and self._matches(y, before) else "wrong"
        if edit_wall is None:
            return "-"
        # No output to look at. A process that already loaded a library path gets that same
        # code back from dlopen, so new code needs a path new to this process, written after
        # the edit.
        fresh_file = os.stat(loaded.library).st_mtime > edit_wall - MTIME_SLACK_S
        return "new lib" if fresh_file and loaded.library not in seen else "stale lib"


def child_load(job: dict, probe: Probe) -> dict:
    """Cold build, warm load, or the load after an edit made by the parent."""
    ws = Workspace(**job["workspace"])
    before = tuple(job["before"]) if job.get("before") else None
    t0 = time.perf_counter()
    loaded = load_module(ws)
    t1 = time.perf_counter()
    y = probe.run(loaded)
    t2 = time.perf_counter()
    verdict = probe.judge(y, loaded, read_state(ws), before, job.get("edit_wall"), set())
    return {"load_s": t1 - t0, "to_result_s": t2 - t0, "verdict": verdict, "library": loaded.library,
            "compiled": loaded.compiled, "build_seconds": loaded.build_seconds}


def child_edit_loop(job: dict, probe: Probe) -> dict:
    """The notebook loop: edit, load again in the same process, run; once per edit."""
    ws = Workspace(**job["workspace"])
    loaded = load_module(ws)  # the state before the first edit; not timed
    baseline = probe.judge(probe.run(loaded), loaded, read_state(ws), None, None, set())
    seen = {loaded.library}
    samples = []
    for kind, value in job["edits"]:
        before = read_state(ws)
        edit_wall = time.time()
        t0 = time.perf_counter()
        apply_edit(ws, kind, value)
        loaded = load_module(ws)
        t1 = time.perf_counter()
        y = probe.run(loaded)
        t2 = time.perf_counter()
        verdict = probe.judge(y, loaded, read_state(ws), before, edit_wall, seen)
        seen.add(loaded.library)
        samples.append({"load_s": t1 - t0, "to_result_s": t2 - t0, "verdict": verdict, "library": loaded.library,
                        "compiled": loaded.compiled, "build_seconds": loaded.build_seconds, "value": value})
    return {"baseline": baseline, "samples": samples}


def child_main(arg: str) -> None:
    job = json.loads(arg)
    t0 = time.perf_counter()
    import torch

    import_torch_s = time.perf_counter() - t0
    probe = Probe(torch)
    result = child_load(job, probe) if job["mode"] == "load" else child_edit_loop(job, probe)
    result.update(import_torch_s=import_torch_s, ran_on_gpu=probe.gpu)
    print(RESULT_MARKER + json.dumps(result), flush=True)


# --- the parent side ---------------------------------------------------------------------

class ChildFailed(RuntimeError):
    pass


def child_env(ws: Workspace, arch: str, cuda_home: str) -> dict:
    env = dict(os.environ)
    env["TORCH_EXTENSIONS_DIR"] = ws.cache
    # One arch and one toolkit for both: kwb reads KWB_CUDA_ARCH, torch TORCH_CUDA_ARCH_LIST;
    # torch guesses CUDA_HOME from the nvcc on PATH, which can be a wrapper outside the toolkit.
    env["KWB_CUDA_ARCH"] = arch
    env["TORCH_CUDA_ARCH_LIST"] = arch
    env["CUDA_HOME"] = cuda_home
    return env


def run_child(job: dict, env: dict) -> dict:
    """Run one child; its JSON result, with the wall time of the whole process added."""
    boot = f"import sys; sys.path.insert(0, {str(BENCH_DIR)!r}); import jit_loop; jit_loop.child_main(sys.argv[1])"
    t0 = time.perf_counter()
    proc = subprocess.run([sys.executable, "-c", boot, json.dumps(job)], env=env, cwd=str(BENCH_DIR),
                          capture_output=True, text=True, timeout=CHILD_TIMEOUT_S, check=False)
    wall = time.perf_counter() - t0
    lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT_MARKER)]
    if proc.returncode != 0 or not lines:
        raise ChildFailed(f"{job['workspace']['approach']} {job['mode']} child failed (exit {proc.returncode})\n"
                          f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-8000:]}")
    result = json.loads(lines[-1][len(RESULT_MARKER):])
    result["process_wall_s"] = wall
    return result


def prepare_kwb(root: Path) -> Workspace:
    """kernels/relu_scale copied, its .cu given the two edit points (the repo copy is untouched)."""
    folder = root / "src" / "relu_scale"  # the folder name is the kernel's name
    shutil.copytree(KWB_KERNEL, folder)
    cu = folder / "relu_scale.cu"
    text = cu.read_text()
    # The forward functor's product; the backward one reads "to_acc<A>(grad) * alpha".
    target = "v * alpha"
    if text.count(target) != 1:
        raise SystemExit(f"jit_loop: expected one '{target}' in {KWB_KERNEL / 'relu_scale.cu'} to patch; "
                         "the kernel changed, update prepare_kwb()")
    patched = "v * (alpha * kwb::acc_t<T>(1.0f /*EDIT_SCALE*/) + kwb::acc_t<T>(KWB_BENCH_OFFSET))"
    cu.write_text('#include "edit_me.cuh"  // added by benchmarks/jit_loop.py\n' + text.replace(target, patched))
    header = folder / "edit_me.cuh"  # included by the .cu only, as the tutorial's header is
    header.write_text("#pragma once\n#define KWB_BENCH_OFFSET 0.0f\n")
    return Workspace("kwb", str(folder), str(cu), str(header), str(root / "cache"))


def prepare_raw(root: Path, approach: str) -> Workspace:
    folder = root / "src" / RAW_SOURCES.name
    shutil.copytree(RAW_SOURCES, folder)
    return Workspace(approach, str(folder), str(folder / f"{RAW_NAME}.cu"), str(folder / f"{RAW_NAME}.h"),
                     str(root / "cache"))


def unavailable(approach: str, gpu: bool) -> str | None:
    """Why an approach cannot be measured here, or None."""
    if approach == "cupy":
        try:
            import cupy  # noqa: F401
        except Exception as e:  # noqa: BLE001 - not installed, or installed for another CUDA
            return f"cupy does not import here ({type(e).__name__}: {e})"
        if not gpu:
            return "cupy needs a GPU to compile and launch"
    if approach == "torch_nvrtc":
        import torch

        if not hasattr(torch.cuda, "_compile_kernel"):
            return f"torch {torch.__version__} has no torch.cuda._compile_kernel"
        if not gpu:
            return "torch.cuda._compile_kernel loads what it compiles, which needs a GPU"
    return None


def prepare_tutorial(root: Path) -> Workspace:
    folder = root / "src" / TUTORIAL_SOURCES.name
    shutil.copytree(TUTORIAL_SOURCES, folder)
    return Workspace("tutorial", str(folder), str(folder / f"{TUTORIAL_NAME}.cu"),
                     str(folder / f"{TUTORIAL_NAME}.h"), str(root / "cache"))


def summarize(samples: list[dict], key: str) -> dict:
    """Median of the samples' `key` time, and every verdict seen."""
    verdicts = sorted({s["verdict"] for s in samples})
    return {"median_s": statistics.median(s[key] for s in samples), "metric": key,
            "verdict": "/".join(verdicts), "samples": samples}


def log(approach: str, label: str, seconds: float, verdict: str) -> None:
    print(f"  {approach:<9}{label:<44}{seconds:8.2f} s  {verdict}", file=sys.stderr, flush=True)


def bench_approach(ws: Workspace, env: dict, repeat: int, fresh: bool, gpu: bool) -> dict:
    """Every step for one approach, in order (each step starts from the state the last left)."""
    labels = {key: label for key, label, _ in STEPS}
    result_key = "to_result_s" if gpu else "load_s"
    steps: dict[str, dict] = {}
    job = {"mode": "load", "workspace": asdict(ws)}

    cold = run_child(job, env)
    steps["cold"] = {"median_s": cold["load_s"], "metric": "load_s", "verdict": cold["verdict"], "samples": [cold]}
    log(ws.approach, labels["cold"], cold["load_s"], cold["verdict"])
    warm = run_child(job, env)
    steps["warm"] = {"median_s": warm["load_s"], "metric": "load_s", "verdict": warm["verdict"], "samples": [warm]}
    log(ws.approach, labels["warm"], warm["load_s"], warm["verdict"])
    steps["import_torch"] = {"median_s": cold["import_torch_s"], "metric": "import_torch_s", "verdict": "-",
                             "samples": [cold["import_torch_s"], warm["import_torch_s"]]}

    for key in ("cu_same", "header_same"):
        kind = EDIT_STEPS[key]
        # The values are picked here; the child makes the edits, inside its timed regions.
        edits = [[kind, v] for v in edit_values(ws, kind, repeat)]
        out = run_child({"mode": "edit_loop", "workspace": asdict(ws), "edits": edits}, env)
        steps[key] = summarize(out["samples"], result_key)
        log(ws.approach, labels[key], steps[key]["median_s"], steps[key]["verdict"])

    if fresh:
        for key in ("cu_fresh", "header_fresh"):
            samples = []
            for _ in range(repeat):
                before = read_state(ws)
                edit_wall = time.time()
                value = edit_values(ws, EDIT_STEPS[key], 1)[0]
                apply_edit(ws, EDIT_STEPS[key], value)
                sample = run_child({"mode": "load", "workspace": asdict(ws), "before": list(before),
                                    "edit_wall": edit_wall}, env)
                samples.append({**sample, "value": value})
            steps[key] = summarize(samples, result_key)
            log(ws.approach, labels[key], steps[key]["median_s"], steps[key]["verdict"])
    return steps


# --- what was measured, where, and the report ---------------------------------------------

def commit() -> str:
    """The tree's commit as kwb_version() names it (KWB_GIT_DESCRIBE first: a copy of the tree
    on the GPU machine carries no history of its own), 'unknown' without one."""
    from workbench.harness import results

    return results.kwb_version().partition("+")[2] or "unknown"


def default_out(gpu: bool) -> Path:
    """benchmarks/results/<device>/<date>-<commit>/, as gpu_run.sh names a run's folder (the
    harness's device slug: 'nvidia-h100-80gb-hbm3', 'cpu-2core')."""
    from workbench.harness import results

    env = results.environment("cuda" if gpu else "cpu")
    return BENCH_DIR / "results" / env.slug / f"{env.timestamp[:10]}-{commit()}"


def command_line(cmd: list[str], pick=None) -> str:
    """The first line of a command's output (or the first `pick` accepts); '' on failure."""
    try:
        out = subprocess.run(cmd, capture_output=True, text=True, timeout=60, cwd=str(REPO), check=False).stdout
    except (OSError, subprocess.SubprocessError):
        return ""
    lines = [l.strip() for l in out.splitlines() if l.strip()]
    return next((l for l in lines if pick is None or pick(l)), "")


def environment(torch, nvcc: str, cuda_home: str, arch: str) -> dict:
    gpu = torch.cuda.is_available()
    return {
        "device": torch.cuda.get_device_name(0) if gpu else "none (no GPU visible)",
        "gpu": gpu,
        "cpu_count": os.cpu_count(),
        "torch": torch.__version__,
        "torch_cuda": torch.version.cuda,
        "nvcc": command_line([nvcc, "--version"], lambda l: l.startswith("Cuda compilation tools")),
        "cuda_home": cuda_home,
        "cuda_arch": arch,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
        "git": commit(),
    }


def cell(step: dict | None) -> str:
    if step is None:
        return "skipped"
    verdict = step["verdict"].upper() if "stale" in step["verdict"] or "wrong" in step["verdict"] else step["verdict"]
    return f"{step['median_s']:.2f} s" + ("" if verdict == "-" else f" ({verdict})")


COLUMN_TITLES = {"kwb": "kwb (nvcc)", "tutorial": "tutorial torch.utils.cpp_extension", "raw": "kwb raw (NVRTC)",
                 "raw_op": "kwb raw_op (NVRTC + custom op)", "cupy": "cupy.RawKernel", "torch_nvrtc": "torch.cuda._compile_kernel"}


def markdown(report: dict) -> str:
    env, results = report["environment"], report["results"]
    measured = [a for a in APPROACHES if a in results]
    ran = "yes" if env["gpu"] else "no"
    rows = [("import_torch", "import torch (fresh process)", "-", "not counted in the rows below")]
    result = "new result" if env["gpu"] else "loaded module (no GPU to run on)"
    rows += [(key, label, "-" if key in ("cold", "warm") else ran, what.format(result=result))
             for key, label, what in STEPS]
    out = [
        "# jit_loop: the edit-reload loop, kwb beside torch.utils.cpp_extension.load and NVRTC's users",
        "",
        f"- device: {env['device']}; {env['cpu_count']} CPUs; arch {env['cuda_arch']}",
        f"- torch {env['torch']} (CUDA {env['torch_cuda']}); {env['nvcc']}; Python {env['python']}",
        f"- {env['date']}; kwb {env['git']}; repeat {report['config']['repeat']} (medians)",
        "",
        "| step | " + " | ".join(COLUMN_TITLES[a] for a in measured) + " | ran_on_gpu | notes |",
        "|---|" + "---|" * len(measured) + "---|---|",
    ]
    for key, label, ran_col, what in rows:
        if not any(key in results[a] for a in measured):
            continue
        out.append(f"| {label} | " + " | ".join(cell(results[a].get(key)) for a in measured) + f" | {ran_col} | {what} |")
    out += [""] + [f"- {COLUMN_TITLES[a]}: not measured: {why}" for a, why in report.get("skipped", {}).items()]
    out += [
        "",
        ("Verdicts: new = the output had the value the edit predicts; STALE = the output from before "
         "the edit; WRONG = neither; ok = cold/warm output correct. Without a GPU nothing runs: "
         "new lib = a library (or cubin) written after the edit and not loaded before in that process; "
         "STALE LIB = the process got back one it had already loaded (dlopen returns the old code)."),
    ]
    return "\n".join(out) + "\n"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--repeat", type=int, default=1, help="edits per edit step; the median is reported")
    parser.add_argument("--out", type=Path, help="output folder (default benchmarks/results/<device>/<date>-<commit>)")
    parser.add_argument("--approaches", default=",".join(APPROACHES),
                        help=f"comma-separated, of {', '.join(APPROACHES)} (default: all that run here)")
    parser.add_argument("--skip-tutorial", action="store_true", help="leave the tutorial out")
    parser.add_argument("--skip-fresh", action="store_true", help="skip the edit-then-fresh-process steps")
    args = parser.parse_args()
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    import torch

    from workbench.jit import toolchain

    reason = toolchain.cuda_unavailable_reason()
    if reason is not None:
        print(f"jit_loop: needs nvcc and a CUDA build of torch: {reason}", file=sys.stderr)
        return 2
    gpu = torch.cuda.is_available()
    arch = "{}.{}".format(*torch.cuda.get_device_capability()) if gpu else NO_GPU_ARCH
    cuda_home = str(toolchain.cuda_home())
    env_info = environment(torch, toolchain.nvcc_path(), cuda_home, arch)
    out_dir = args.out or default_out(gpu)
    print(f"jit_loop: {env_info['device']}, arch {arch}, {env_info['nvcc']}"
          + ("" if gpu else " (no GPU: edit times end at the loaded module)"), file=sys.stderr)

    wanted = [a.strip() for a in args.approaches.split(",") if a.strip()]
    unknown = [a for a in wanted if a not in APPROACHES]
    if unknown:
        parser.error(f"--approaches: unknown {', '.join(unknown)}; choose from {', '.join(APPROACHES)}")
    if args.skip_tutorial:
        wanted = [a for a in wanted if a != "tutorial"]
    prepares = {"kwb": prepare_kwb, "tutorial": prepare_tutorial}
    results, skipped = {}, {}
    try:
        for name in wanted:
            why = unavailable(name, gpu)
            if why is not None:
                skipped[name] = why
                print(f"jit_loop: {name} skipped: {why}", file=sys.stderr)
                continue
            with tempfile.TemporaryDirectory(prefix=f"kwb-jit-loop-{name}-") as tmp:
                ws = prepares[name](Path(tmp)) if name in prepares else prepare_raw(Path(tmp), name)
                results[name] = bench_approach(ws, child_env(ws, arch, cuda_home), args.repeat,
                                               not args.skip_fresh, gpu)
    except (ChildFailed, subprocess.TimeoutExpired) as e:
        print(f"jit_loop: {e}", file=sys.stderr)
        return 1

    report = {"benchmark": "jit_loop", "environment": env_info,
              "config": {"repeat": args.repeat, "alpha": ALPHA, "num_elements": NUM_ELEMENTS,
                         "fresh_steps": not args.skip_fresh, "approaches": wanted},
              "results": results, "skipped": skipped}
    text = markdown(report)
    out_dir.mkdir(parents=True, exist_ok=True)
    (out_dir / "jit_loop.json").write_text(json.dumps(report, indent=1) + "\n")
    (out_dir / "jit_loop.md").write_text(text)
    print(text)
    print(f"jit_loop: wrote {out_dir / 'jit_loop.json'} and {out_dir / 'jit_loop.md'}", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main())
