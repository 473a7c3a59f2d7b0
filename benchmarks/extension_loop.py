#!/usr/bin/env python
"""Extensions written the tutorial way: kwb's edit-reload loop beside torch.utils.cpp_extension's,
on the same unchanged sources, in one run.

    python benchmarks/extension_loop.py [--out DIR] [--repeat N] [--only lltm|inline|attn|lltm_cpu ...]

Workloads (each approach builds from its own temporary copy, into its own empty cache):

    lltm     examples/lltm_cuda: lltm_cuda.cpp (checks, pybind) + lltm_cuda_kernel.cu (kernels,
             AT_DISPATCH), both including torch/extension.h. kwb: wb.load(folder, device="cuda");
             torch: torch.utils.cpp_extension.load("lltm_cuda", sources=[...]).
    lltm_cpu examples/lltm_cpp: the tutorial's CPU LLTM, one lltm.cpp (torch/extension.h, ATen
             ops, pybind) and a header. kwb: wb.load(folder, device="cpu"); torch:
             torch.utils.cpp_extension.load("lltm_cpp", sources=[lltm.cpp]). Runs without a GPU:
             the only workload of a machine with none.
    inline   a torch-style load_inline cell whose CUDA part includes torch/extension.h (a kernel
             and its torch::Tensor wrapper), as KernelBench problems write them. kwb:
             wb.load_inline(...); torch: torch.utils.cpp_extension.load_inline(...), same arguments.
    attn     a minimal-attention extension laid out as public ones are: main.cpp (torch/extension.h,
             pybind) and one attn.cu holding the kernel and its torch::Tensor host wrapper, both
             including torch/extension.h. Both approaches make the same keyword call:
             load(name="minimal_attn", sources=[...], extra_cuda_cflags=["-O2"]).

Steps, each timed with time.perf_counter() in a child process:

    cold        fresh process, empty cache: the load call
    warm        fresh process, built cache: the load call, after `import torch` and CUDA's start
    cu_edit     one process: load, change a constant in the CUDA source, load again, run: the
                seconds from the edit to the new result on the GPU
    cpp_edit    the same for the binding .cpp (lltm, attn, lltm_cpu)
    *_fresh     the edit made, then a fresh process loads and runs (torch's best case: its
                in-process reload renames the module and recompiles every unit)

Every result is judged: "new" (the output moved as the edit says), "stale" or "wrong". This
file is also the children's code; its top level imports only the standard library.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

BENCH_DIR = Path(__file__).resolve().parent
REPO = BENCH_DIR.parent
LLTM = REPO / "examples" / "lltm_cuda"
LLTM_CPU = REPO / "examples" / "lltm_cpp"

# The edit: a constant the result is scaled by, in the .cu (the kernel's new_h) and in the .cpp
# (the forward's return). The benchmark's copy gets the constants; the example stays as it is.
CU_LINE = "new_h[n][c] = tanh(new_cell[n][c]) * output_gate[n][c];"
CU_EDITABLE = "new_h[n][c] = tanh(new_cell[n][c]) * output_gate[n][c] * CU_SCALE;"
CPP_LINE = "return lltm_cuda_forward(input, weights, bias, old_h, old_cell);"
CPP_EDITABLE = ("auto out = lltm_cuda_forward(input, weights, bias, old_h, old_cell);\n"
                "  out[0] = out[0] * CPP_SCALE;\n  return out;")

CPU_LINE = "auto new_h = torch::tanh(new_cell) * output_gate;"
CPU_EDITABLE = "auto new_h = torch::tanh(new_cell) * output_gate * CPP_SCALE;"

INLINE_CUDA = """
#include <torch/extension.h>
#define CU_SCALE 1.0f

__global__ void scaled_square_kernel(const float* __restrict__ x, float* __restrict__ y, int64_t n) {
  const int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i] * CU_SCALE;
}

torch::Tensor scaled_square(torch::Tensor x) {
  TORCH_CHECK(x.is_cuda() && x.scalar_type() == torch::kFloat, "x must be a float32 CUDA tensor");
  auto y = torch::empty_like(x);
  const int64_t n = x.numel();
  scaled_square_kernel<<<(n + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), n);
  return y;
}
"""
INLINE_CPP = "torch::Tensor scaled_square(torch::Tensor x);"

# One query row per block: scores in shared memory, softmax, then P @ V; naive and exact.
ATTN_CUDA = """
#include <torch/extension.h>
#define CU_SCALE 1.0f

__global__ void attn_forward_kernel(const float* __restrict__ q, const float* __restrict__ k,
                                    const float* __restrict__ v, float* __restrict__ o, int n, int d, float scale) {
  extern __shared__ float scores[];
  __shared__ float row_max, row_sum;
  const size_t head = blockIdx.y, row = blockIdx.x;
  const float* q_row = q + (head * n + row) * d;
  const float* k_head = k + head * n * d;
  const float* v_head = v + head * n * d;
  for (int j = threadIdx.x; j < n; j += blockDim.x) {
    float dot = 0.f;
    for (int c = 0; c < d; ++c) dot += q_row[c] * k_head[(size_t)j * d + c];
    scores[j] = dot * scale;
  }
  __syncthreads();
  if (threadIdx.x == 0) {
    float m = -INFINITY, l = 0.f;
    for (int j = 0; j < n; ++j) m = fmaxf(m, scores[j]);
    for (int j = 0; j < n; ++j) l += __expf(scores[j] - m);
    row_max = m;
    row_sum = l;
  }
  __syncthreads();
  for (int c = threadIdx.x; c < d; c += blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < n; ++j) acc += __expf(scores[j] - row_max) * v_head[(size_t)j * d + c];
    o[(head * n + row) * d + c] = acc / row_sum * CU_SCALE;
  }
}

torch::Tensor attn_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  TORCH_CHECK(q.is_cuda() && q.scalar_type() == torch::kFloat32, "q must be a float32 CUDA tensor");
  TORCH_CHECK(q.dim() == 4 && q.sizes() == k.sizes() && q.sizes() == v.sizes(), "q, k, v: one (B, H, N, D) shape");
  auto qc = q.contiguous(), kc = k.contiguous(), vc = v.contiguous();
  const int b = q.size(0), h = q.size(1), n = q.size(2), d = q.size(3);
  auto o = torch::zeros_like(qc);
  const dim3 grid(n, b * h);
  attn_forward_kernel<<<grid, 128, n * sizeof(float)>>>(qc.data_ptr<float>(), kc.data_ptr<float>(), vc.data_ptr<float>(),
                                                       o.data_ptr<float>(), n, d, 1.0f / sqrtf(static_cast<float>(d)));
  return o;
}
"""
ATTN_CPP = """
#include <torch/extension.h>
#define CPP_SCALE 1.0

torch::Tensor attn_forward(torch::Tensor q, torch::Tensor k, torch::Tensor v);

torch::Tensor forward(torch::Tensor q, torch::Tensor k, torch::Tensor v) {
  return attn_forward(q, k, v) * CPP_SCALE;
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("forward", &forward, "minimal attention forward (CUDA)");
}
"""


# ---- the children ---------------------------------------------------------------------------


def _set(path: Path, name: str, value: float) -> None:
    text = path.read_text()
    start = text.index(f"#define {name} ")
    end = text.index("\n", start)
    path.write_text(text[:start] + f"#define {name} {value!r}" + ("f" if text[start:end].endswith("f") else "") + text[end:])


def _load(job: dict):
    if job["workload"] == "lltm_cpu":
        folder = Path(job["folder"])
        if job["approach"] == "kwb":
            import workbench as wb

            return wb.load(folder, device="cpu")
        import torch.utils.cpp_extension as ce

        return ce.load("lltm_cpp", sources=[str(folder / "lltm.cpp")])
    if job["workload"] == "lltm":
        folder = Path(job["folder"])
        if job["approach"] == "kwb":
            import workbench as wb

            return wb.load(folder, device="cuda")
        import torch.utils.cpp_extension as ce

        return ce.load("lltm_cuda", sources=[str(folder / "lltm_cuda.cpp"), str(folder / "lltm_cuda_kernel.cu")])
    if job["workload"] == "attn":
        sources = [str(Path(job["folder"], "main.cpp")), str(Path(job["folder"], "attn.cu"))]
        if job["approach"] == "kwb":
            import workbench as wb

            return wb.load(name="minimal_attn", sources=sources, extra_cuda_cflags=["-O2"])
        import torch.utils.cpp_extension as ce

        return ce.load(name="minimal_attn", sources=sources, extra_cuda_cflags=["-O2"])
    cuda = Path(job["folder"], "inline.cu").read_text()
    if job["approach"] == "kwb":
        import workbench as wb

        return wb.load_inline("scaled_square", cpp_sources=INLINE_CPP, cuda_sources=cuda, functions=["scaled_square"])
    import torch.utils.cpp_extension as ce

    return ce.load_inline("scaled_square", cpp_sources=INLINE_CPP, cuda_sources=cuda, functions=["scaled_square"])


def _result(job: dict, ext) -> float:
    """The output's value, which the constants scale; synchronized."""
    import torch

    if job["workload"] in ("lltm", "lltm_cpu"):
        g = torch.Generator().manual_seed(0)
        args = [torch.randn(s, generator=g).to(job["device"]) for s in ((16, 32), (384, 160), (384,), (16, 128), (16, 128))]
        value = float(ext.forward(*args)[0].abs().sum())
    elif job["workload"] == "attn":
        g = torch.Generator().manual_seed(0)
        q, k, v = (torch.randn(2, 4, 64, 32, generator=g).cuda() for _ in range(3))
        value = float(ext.forward(q, k, v).abs().sum())
    else:
        value = float(ext.scaled_square(torch.full((1024,), 2.0, device="cuda")).sum())
    if job["device"] == "cuda":
        torch.cuda.synchronize()
    return value


def child(job: dict) -> dict:
    t0 = time.perf_counter()
    import torch

    if job["device"] == "cuda":
        torch.cuda.init()
        torch.zeros(1, device="cuda")
    out = {"import_torch_s": time.perf_counter() - t0}
    folder = Path(job["folder"])
    if job["step"] in ("cold", "warm", "fresh"):
        t = time.perf_counter()
        ext = _load(job)
        out["load_s"] = time.perf_counter() - t
        out["value"] = _result(job, ext)
        out["run_s"] = time.perf_counter() - t
        return out
    # an edit in this process
    ext = _load(job)
    out["before"] = _result(job, ext)
    target = folder / job["file"]
    t = time.perf_counter()
    _set(target, job["constant"], job["value"])
    ext = _load(job)
    out["after"] = _result(job, ext)
    out["edit_s"] = time.perf_counter() - t
    return out


# ---- the parent -----------------------------------------------------------------------------


def prepare(workload: str, root: Path) -> Path:
    folder = root / "src"
    if workload == "lltm_cpu":
        shutil.copytree(LLTM_CPU, folder)
        path = folder / "lltm.cpp"
        text = path.read_text().replace(CPU_LINE, CPU_EDITABLE)
        first = text.index("#include <torch/extension.h>\n") + len("#include <torch/extension.h>\n")
        path.write_text(text[:first] + "#define CPP_SCALE 1.0\n" + text[first:])
    elif workload == "lltm":
        shutil.copytree(LLTM, folder)
        cu, cpp = folder / "lltm_cuda_kernel.cu", folder / "lltm_cuda.cpp"
        # the constants after the first include: the unit still starts with torch/extension.h
        for path, define, old, new in ((cu, "CU_SCALE", CU_LINE, CU_EDITABLE), (cpp, "CPP_SCALE", CPP_LINE, CPP_EDITABLE)):
            text = path.read_text().replace(old, new)
            first = text.index("#include <torch/extension.h>\n") + len("#include <torch/extension.h>\n")
            path.write_text(text[:first] + f"#define {define} 1.0\n" + text[first:])
    elif workload == "attn":
        folder.mkdir(parents=True)
        (folder / "main.cpp").write_text(ATTN_CPP)
        (folder / "attn.cu").write_text(ATTN_CUDA)
    else:
        folder.mkdir(parents=True)
        (folder / "inline.cu").write_text(INLINE_CUDA)
    return folder


def run_child(job: dict, cache: Path) -> dict:
    env = dict(os.environ, TORCH_EXTENSIONS_DIR=str(cache), PYTHONUNBUFFERED="1")
    env.pop("PYTHONDONTWRITEBYTECODE", None)  # a user's Python keeps its bytecode: warm loads are timed so
    proc = subprocess.run([sys.executable, __file__, "--child", json.dumps(job)], capture_output=True, text=True,
                          env=env, timeout=1800, check=False)
    lines = [l for l in proc.stdout.splitlines() if l.startswith("{")]
    if proc.returncode != 0 or not lines:
        raise RuntimeError(f"child {job} failed:\n{proc.stderr[-4000:]}")
    return json.loads(lines[-1])


def verdict(before: float, after: float, scale: float) -> str:
    if abs(after - before * scale) <= 1e-3 * abs(before * scale):
        return "new"
    return "stale" if abs(after - before) <= 1e-3 * abs(before) else "wrong"


def bench(workload: str, approach: str, repeat: int) -> dict:
    root = Path(tempfile.mkdtemp(prefix=f"kwb-extloop-{workload}-{approach}-"))
    cache = root / "cache"
    folder = prepare(workload, root)
    base = {"workload": workload, "approach": approach, "folder": str(folder),
            "device": "cpu" if workload == "lltm_cpu" else "cuda"}
    rows: dict = {}
    cold = run_child({**base, "step": "cold"}, cache)
    rows["cold"] = {"s": cold["load_s"]}
    warm = [run_child({**base, "step": "warm"}, cache)["load_s"] for _ in range(4)][1:]  # the first writes bytecode
    rows["warm"] = {"s": statistics.median(warm)}
    edits = {"lltm": [("cu_edit", "lltm_cuda_kernel.cu", "CU_SCALE"), ("cpp_edit", "lltm_cuda.cpp", "CPP_SCALE")],
             "lltm_cpu": [("cpp_edit", "lltm.cpp", "CPP_SCALE")],
             "inline": [("cu_edit", "inline.cu", "CU_SCALE")],
             "attn": [("cu_edit", "attn.cu", "CU_SCALE"), ("cpp_edit", "main.cpp", "CPP_SCALE")]}[workload]
    for label, file, constant in edits:
        times, verdicts, value = [], [], 1.0
        for _ in range(repeat):  # in one process: load, edit, load, run
            new = value + 1.0
            res = run_child({**base, "step": "edit", "file": file, "constant": constant, "value": new}, cache)
            times.append(res["edit_s"])
            verdicts.append(verdict(res["before"], res["after"], new / value))
            value = new
        rows[label] = {"s": statistics.median(times), "verdict": ",".join(sorted(set(verdicts))), "samples": times}
        # the edit made, then a fresh process loads and runs
        new = value + 1.0
        before = run_child({**base, "step": "fresh"}, cache)["value"]
        _set(folder / file, constant, new)
        res = run_child({**base, "step": "fresh"}, cache)
        rows[f"{label}_fresh"] = {"s": res["load_s"], "verdict": verdict(before, res["value"], new / value)}
        value = new
    shutil.rmtree(root, ignore_errors=True)
    return rows


def environment() -> dict:
    import torch

    from workbench.harness import results

    nvcc = shutil.which("nvcc") or "/usr/local/cuda/bin/nvcc"
    try:
        nvcc_version = subprocess.run([nvcc, "--version"], capture_output=True, text=True, check=False).stdout.strip().splitlines()[-1]
    except OSError:
        nvcc_version = "none"
    if torch.cuda.is_available():
        device = torch.cuda.get_device_name()
    else:  # the CPU's model: a machine with no GPU times its compilers
        cpuinfo = Path("/proc/cpuinfo").read_text() if Path("/proc/cpuinfo").exists() else ""
        device = next((l.split(":", 1)[1].strip() for l in cpuinfo.splitlines() if l.startswith("model name")), "CPU")
    return {"device": device, "torch": torch.__version__, "cuda": torch.version.cuda,
            "nvcc": nvcc_version, "python": sys.version.split()[0], "cpus": os.cpu_count(),
            "date": datetime.now(timezone.utc).isoformat(timespec="seconds"),
            "kwb": results.kwb_version(), "gpu": torch.cuda.is_available(),
            "command": " ".join(["python", "benchmarks/extension_loop.py", *sys.argv[1:]])}


def markdown(report: dict) -> str:
    env = report["env"]
    lines = ["# Tutorial-way extensions: kwb beside torch.utils.cpp_extension", "",
             (f"{env['device']}, {env['cpus']} cores, torch {env['torch']}, CUDA {env['cuda']}, {env['nvcc']}, "
              f"Python {env['python']}, {env['date']}, kwb {env['kwb']}. `{env.get('command', 'python benchmarks/extension_loop.py')}`; "
              f"edits: median of {report['repeat']}."), ""]
    names = {"cold": "cold build (empty cache)", "warm": "warm load, fresh process (after import torch and CUDA start)",
             "cu_edit": ".cu edit -> new result, same process", "cu_edit_fresh": ".cu edit -> new result, fresh process",
             "cpp_edit": ".cpp edit -> new result, same process", "cpp_edit_fresh": ".cpp edit -> new result, fresh process"}
    for workload, title in (("lltm", "The tutorial LLTM (examples/lltm_cuda)"), ("inline", "A torch-style load_inline cell"),
                            ("attn", "A torch-style .cu with its host wrapper (main.cpp + attn.cu, keyword load)"),
                            ("lltm_cpu", "The tutorial's CPU LLTM (examples/lltm_cpp)")):
        if workload not in report["results"]:
            continue
        res = report["results"][workload]
        lines += [f"## {title}", "", "| step | kwb | torch | kwb / torch |", "|---|---|---|---|"]
        for step, label in names.items():
            k, t = res.get("kwb", {}).get(step), res.get("torch", {}).get(step)
            if k is None and t is None:
                continue

            def cell(x):
                if x is None:
                    return "-"
                return f"{x['s']:.2f} s" + (f" ({x['verdict']})" if x.get("verdict") else "")
            ratio = f"{k['s'] / t['s']:.0%}" if k and t and t["s"] > 0 else "-"
            lines.append(f"| {label} | {cell(k)} | {cell(t)} | {ratio} |")
        lines.append("")
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--child", help=argparse.SUPPRESS)
    parser.add_argument("--out", default=None, help="write extension_loop.json and .md into OUT/<device>/")
    parser.add_argument("--repeat", type=int, default=1, help="in-process edits per kind (median reported)")
    parser.add_argument("--only", choices=["lltm", "inline", "attn", "lltm_cpu"], action="append", default=None,
                        help="a workload to run (again for more); default: all four with a GPU, lltm_cpu without")
    parser.add_argument("--skip-torch", action="store_true")
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(json.loads(args.child))), flush=True)
        return 0
    report = {"env": environment(), "repeat": args.repeat, "results": {}}
    import torch

    workloads = args.only or (["lltm", "inline", "attn", "lltm_cpu"] if torch.cuda.is_available() else ["lltm_cpu"])
    for workload in workloads:
        for approach in (["kwb"] if args.skip_torch else ["kwb", "torch"]):
            print(f"{workload} / {approach} ...", file=sys.stderr, flush=True)
            report["results"].setdefault(workload, {})[approach] = bench(workload, approach, args.repeat)
            print(json.dumps(report["results"][workload][approach]), file=sys.stderr, flush=True)
    text = markdown(report)
    print(text)
    if args.out:
        from workbench.harness import results

        slug = results.environment("cuda" if report["env"]["gpu"] else "cpu").slug  # the harness's folder names
        folder = Path(args.out) / slug
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "extension_loop.json").write_text(json.dumps(report, indent=1))
        (folder / "extension_loop.md").write_text(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
