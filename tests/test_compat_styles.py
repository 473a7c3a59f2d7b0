"""Extensions written the ways public projects write them, loaded through torch's
torch.utils.cpp_extension and through kwb by the same lines of code, with only the import
changed: the PyTorch C++ extension tutorial's load(name=..., sources=[...]) of a pybind
module, pytorch/extension-cpp's TORCH_LIBRARY ops loaded with is_python_module=False and given
a fake kernel from Python, lecture-notebook and KernelBench style load_inline cells (cpp_sources
as a string or a list, functions as a list or a dict), and the flash-attention-minimal style of
a .cu holding kernels and their torch::Tensor host function.

Each style's code runs once per API in a fresh interpreter (torch's and kwb's side by side),
prints what it saw as JSON, and the tests compare the two. Every torch build gets its own
build_directory; kwb's builds share one cache root per module (build_directory is kwb's cache
root), so its precompiled header is compiled once."""
from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

# Each fixture builds one extension twice, with torch and with kwb, from empty caches (40-140 s on 2 cores).
pytestmark = pytest.mark.slow

FIXTURES = Path(__file__).resolve().parent / "fixtures" / "compat"
IMPORTS = {"torch": "from torch.utils import cpp_extension as ext", "kwb": "import workbench as ext"}

PRELUDE = """
import json, sys, traceback
from pathlib import Path
import torch
FIX = Path({fixtures!r})
BUILD = {builds!r}
RESULT = {{}}
def raised(fn):
    try:
        fn()
    except Exception as e:  # the class, the classes it derives from, and the first line of the message
        return {{"class": type(e).__name__, "mro": [c.__name__ for c in type(e).__mro__], "message": str(e)}}
    return None
def tensor(t):
    return [round(v, 5) for v in t.flatten().tolist()]
"""


def run_styles(code: str, builds: dict[str, dict[str, str]], timeout: float = 900) -> dict[str, dict]:
    """`code`, once with `ext` as torch.utils.cpp_extension and once as workbench, in two
    interpreters running side by side; BUILD is that API's {name: build_directory}. Returns each
    API's RESULT dict (and its captured output under "_out")."""
    procs = {}
    for api, imp in IMPORTS.items():
        for folder in builds[api].values():
            Path(folder).mkdir(parents=True, exist_ok=True)
        program = "\n".join([imp, PRELUDE.format(fixtures=str(FIXTURES), builds=builds[api]), textwrap.dedent(code),
                             "print('RESULT ' + json.dumps(RESULT))"])
        env = dict(os.environ, MAX_JOBS="1")  # two interpreters, each one compiler at a time
        procs[api] = subprocess.Popen([sys.executable, "-c", program], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                      text=True, env=env)
    results = {}
    for api, p in procs.items():
        out, err = p.communicate(timeout=timeout)
        assert p.returncode == 0, f"{api}'s run failed:\n{out[-3000:]}\n{err[-6000:]}"
        line = next(x for x in reversed(out.splitlines()) if x.startswith("RESULT "))
        results[api] = {**json.loads(line[len("RESULT "):]), "_out": out + err}
    return results


@pytest.fixture(scope="module")
def kwb_root(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("kwb_root")


def builds(tmp_path_factory, kwb_root: Path, *names: str) -> dict[str, dict[str, str]]:
    """torch: a fresh folder per extension; kwb: the module's cache root for every one."""
    torch_base = tmp_path_factory.mktemp("torch_builds")
    return {"torch": {n: str(torch_base / n) for n in names}, "kwb": {n: str(kwb_root) for n in names}}


def same(results: dict[str, dict], key: str):
    assert key in results["torch"] and key in results["kwb"], (key, results)
    assert results["kwb"][key] == results["torch"][key], f"{key}: torch {results['torch'][key]!r}, kwb {results['kwb'][key]!r}"
    return results["torch"][key]


# ---- the tutorial's way: load() of a pybind module ---------------------------------------------

PYBIND_CODE = """
src, inc = FIX / "pybind_ext" / "compat_ops.cpp", FIX / "pybind_ext" / "include"
flags = ["-DCOMPAT_SHIFT=10", "-O2"]
# keywords, as the tutorial calls it: sources a list, extra_cflags a list, an include path, verbose
m = ext.load(name="compat_pybind", sources=[str(src)], extra_cflags=flags, extra_include_paths=[str(inc)],
             build_directory=BUILD["compat_pybind"], verbose=True)
# the same build, every argument by position: sources a string, with_cuda=False
m2 = ext.load("compat_pybind", str(src), flags, None, None, None, [str(inc)], BUILD["compat_pybind"], False, False)
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
RESULT["scale_default"] = tensor(m.scale(x))
RESULT["scale_keyword"] = tensor(m.scale(x, factor=-1.0))
RESULT["scale_positional"] = tensor(m.scale(x, 0.5))
RESULT["scale_doc"] = m.scale.__doc__
RESULT["combine_tensor"] = tensor(m.combine(x, torch.ones(2, 3)))
RESULT["combine_double"] = tensor(m.combine(x, 1.5))
RESULT["combine_keyword"] = tensor(m.combine(a=x, s=-1.0))
RESULT["halves"] = [tensor(t) for t in m.halves(x, dim=1)] + [tensor(t) for t in m.halves(x)]
RESULT["reversed_rows"] = tensor(m.reversed_rows(x))
RESULT["bad_shape"] = raised(lambda: m.reversed_rows(torch.ones(3)))
RESULT["no_overload"] = (raised(lambda: m.combine(x, "a string")) or {}).get("class")
RESULT["missing_argument"] = (raised(lambda: m.scale()) or {}).get("class")
RESULT["positional_call"] = tensor(m2.scale(x)) == RESULT["scale_default"] and tensor(m2.combine(x, 1.5)) == RESULT["combine_double"]
RESULT["module_name"] = getattr(m, "module", m).__name__
"""


@pytest.fixture(scope="module")
def pybind_results(tmp_path_factory, kwb_root):
    return run_styles(PYBIND_CODE, builds(tmp_path_factory, kwb_root, "compat_pybind"))


def test_the_tutorials_keyword_call_gives_torchs_results(pybind_results):
    assert same(pybind_results, "scale_default") == [0.25, 2.25, 4.25, 6.25, 8.25, 10.25]  # include path's offset
    same(pybind_results, "scale_keyword")
    same(pybind_results, "scale_positional")
    doc = same(pybind_results, "scale_doc")  # pybind's: the signature with its default, then the docstring
    assert re.search(r"factor: [^=]+ = 2\.0\)", doc) and "x * factor + COMPAT_OFFSET" in doc, doc
    assert same(pybind_results, "module_name") == "compat_pybind"
    same(pybind_results, "halves")
    same(pybind_results, "reversed_rows")


def test_the_positional_call_with_sources_as_a_string_gives_the_same_module(pybind_results):
    assert same(pybind_results, "positional_call") is True


def test_overloads_and_py_arg_defaults_resolve_as_in_torch(pybind_results):
    assert same(pybind_results, "combine_tensor") == [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]
    assert same(pybind_results, "combine_double")[0] == 11.5  # extra_cflags' COMPAT_SHIFT
    same(pybind_results, "combine_keyword")
    assert same(pybind_results, "no_overload") == "TypeError"
    assert same(pybind_results, "missing_argument") == "TypeError"


def test_a_torch_check_raises_what_torch_raises(pybind_results):
    theirs, ours = pybind_results["torch"]["bad_shape"], pybind_results["kwb"]["bad_shape"]
    assert theirs["class"] == ours["class"] == "RuntimeError"
    assert "reversed_rows: x must be 2-D, got 1 dimensions" in theirs["message"]
    assert "reversed_rows: x must be 2-D, got 1 dimensions" in ours["message"]


def test_verbose_prints_the_build(pybind_results):
    # torch prints ninja's lines; kwb prints the compile and link commands, or that the build is cached
    assert "compat_ops.cpp" in pybind_results["torch"]["_out"]
    assert "compat_ops.cpp" in pybind_results["kwb"]["_out"] or "is cached" in pybind_results["kwb"]["_out"]


# ---- lecture notebooks and KernelBench: load_inline ----------------------------------------------

INLINE_CODE = '''
CELL = """
torch::Tensor gained(torch::Tensor x, double gain) { return x * gain + 1; }
torch::Tensor row_sums(const torch::Tensor& x) {
  TORCH_CHECK(x.dim() == 2, "row_sums: x must be 2-D");
  return x.sum(1);
}
"""
# the notebook way: keywords, cpp_sources a string, functions a list, with_cuda=False, verbose
a = ext.load_inline(name="compat_inline_a", cpp_sources=CELL, functions=["gained", "row_sums"], with_cuda=False,
                    verbose=True, build_directory=BUILD["compat_inline_a"])
# every argument by position: cpp_sources a list, functions a dict of docstrings, extra_cflags a list
DECL = "torch::Tensor biased(torch::Tensor x);"
DEFN = "torch::Tensor biased(torch::Tensor x) { return x + INLINE_BIAS; }"
b = ext.load_inline("compat_inline_b", [DECL, DEFN], None, None, {"biased": "x + INLINE_BIAS"}, ["-DINLINE_BIAS=7"],
                    None, None, None, None, BUILD["compat_inline_b"])
x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
RESULT["gained"] = tensor(a.gained(x, 3.0))
RESULT["row_sums"] = tensor(a.row_sums(x))
RESULT["row_sums_error"] = raised(lambda: a.row_sums(torch.ones(4)))
RESULT["biased"] = tensor(b.biased(x))
RESULT["biased_doc"] = b.biased.__doc__.splitlines()[-1].strip() if b.biased.__doc__ else None
# a cell that does not compile: no torch headers, so the compiler fails at once
RESULT["broken"] = raised(lambda: ext.load_inline("compat_inline_broken", "int broken( {", functions=["broken"],
                                                  no_implicit_headers=True, build_directory=BUILD["compat_inline_broken"]))
'''


@pytest.fixture(scope="module")
def inline_results(tmp_path_factory, kwb_root):
    return run_styles(INLINE_CODE, builds(tmp_path_factory, kwb_root, "compat_inline_a", "compat_inline_b",
                                          "compat_inline_broken"))


def test_a_notebook_cell_with_functions_as_a_list_gives_torchs_results(inline_results):
    assert same(inline_results, "gained") == [1.0, 4.0, 7.0, 10.0, 13.0, 16.0]
    assert same(inline_results, "row_sums") == [3.0, 12.0]
    theirs, ours = inline_results["torch"]["row_sums_error"], inline_results["kwb"]["row_sums_error"]
    assert theirs["class"] == ours["class"] == "RuntimeError" and "row_sums: x must be 2-D" in ours["message"]


def test_a_positional_call_with_a_list_of_sources_and_functions_as_a_dict(inline_results):
    assert same(inline_results, "biased") == [7.0, 8.0, 9.0, 10.0, 11.0, 12.0]
    assert same(inline_results, "biased_doc") == "x + INLINE_BIAS"


def test_a_cell_that_does_not_compile_raises_torchs_class_or_a_subclass(inline_results):
    """torch raises RuntimeError("Error building extension ..."); kwb raises wb.BuildError,
    a subclass of RuntimeError (and of wb.KwbError) with the compiler's diagnostics, so an
    `except RuntimeError` written for torch catches it."""
    theirs, ours = inline_results["torch"]["broken"], inline_results["kwb"]["broken"]
    assert theirs["class"] == "RuntimeError" and "Error building extension" in theirs["message"]
    assert ours["class"] == "BuildError" and "RuntimeError" in ours["mro"] and "KwbError" in ours["mro"]
    assert "error:" in ours["message"]


# ---- pytorch/extension-cpp's way: TORCH_LIBRARY, is_python_module=False, register_fake ------------

LIBRARY_CODE = """
from torch._subclasses.fake_tensor import FakeTensorMode
src = FIX / "torch_library_ext" / "compat_lib.cpp"
lib = ext.load(name="compat_lib", sources=[str(src)], is_python_module=False, build_directory=BUILD["compat_lib"])
RESULT["returned"] = type(lib).__name__
RESULT["library_path"] = str(getattr(lib, "library_path", lib))

@torch.library.register_fake("compat_lib::muladd")
def _(a, b, c):
    torch._check(a.shape == b.shape)
    return torch.empty_like(a)

a, b = torch.arange(4, dtype=torch.float32), torch.full((4,), 2.0)
RESULT["muladd"] = tensor(torch.ops.compat_lib.muladd(a, b, 0.5))
RESULT["muladd_error"] = raised(lambda: torch.ops.compat_lib.muladd(a, torch.ones(3), 0.5))
with FakeTensorMode():
    fake = torch.ops.compat_lib.muladd(torch.empty(5, 7), torch.empty(5, 7), 1.0)
RESULT["fake_shape"] = list(fake.shape)
torch.library.opcheck(torch.ops.compat_lib.muladd.default, (torch.randn(3, 4), torch.randn(3, 4), 2.0),
                      test_utils=("test_schema", "test_faketensor"))
RESULT["opcheck"] = True
"""


@pytest.fixture(scope="module")
def library_results(tmp_path_factory, kwb_root):
    return run_styles(LIBRARY_CODE, builds(tmp_path_factory, kwb_root, "compat_lib"))


def test_torch_library_ops_without_a_python_module_run_as_in_torch(library_results):
    assert same(library_results, "muladd") == [0.5, 2.5, 4.5, 6.5]
    theirs, ours = library_results["torch"]["muladd_error"], library_results["kwb"]["muladd_error"]
    assert theirs["class"] == ours["class"] == "RuntimeError" and "a and b must have one shape" in ours["message"]


def test_a_python_fake_kernel_registers_on_the_ops_as_in_torch(library_results):
    assert same(library_results, "fake_shape") == [5, 7]
    assert same(library_results, "opcheck") is True


def test_is_python_module_false_returns_the_library(library_results):
    """torch returns the library's path; kwb a Kernel whose library_path is its library (the
    ops are reached the same way, through torch.ops)."""
    assert library_results["torch"]["returned"] == "str" and library_results["kwb"]["returned"] == "Kernel"
    for api in ("torch", "kwb"):
        assert library_results[api]["library_path"].endswith(".so") and Path(library_results[api]["library_path"]).is_file()


# ---- CUDA: run only where a GPU is ----------------------------------------------------------------

CUDA_LOAD_CODE = """
d = FIX / "cuda_ext"
# extra_cuda_cflags as one string holding several flags, as lecture notebooks pass it
m = ext.load(name="compat_cuda", sources=[str(d / "compat_cuda.cpp"), str(d / "compat_cuda.cu")],
             extra_cuda_cflags=["-O3 --use_fast_math -lineinfo"], extra_cflags=["-O2"],
             build_directory=BUILD["compat_cuda"], verbose=False)
x, y = torch.arange(1000, dtype=torch.float32, device="cuda"), torch.ones(1000, device="cuda")
s = torch.cuda.Stream()
with torch.cuda.stream(s):  # the host function launches on the current stream
    out = m.saxpy(x, y, alpha=2.0)
s.synchronize()
RESULT["saxpy"] = tensor(out.cpu())[:5] + [out.sum().item()]
RESULT["saxpy_default"] = tensor(m.saxpy(x, y).cpu())[:3]
RESULT["saxpy_cpu_error"] = raised(lambda: m.saxpy(x.cpu(), y.cpu()))
"""


@pytest.mark.cuda
def test_a_cu_with_kernels_and_its_host_function_runs_as_in_torch(tmp_path_factory, kwb_root):
    results = run_styles(CUDA_LOAD_CODE, builds(tmp_path_factory, kwb_root, "compat_cuda"))
    assert same(results, "saxpy")[:5] == [1.0, 3.0, 5.0, 7.0, 9.0]
    assert same(results, "saxpy_default") == [1.0, 2.0, 3.0]
    assert results["torch"]["saxpy_cpu_error"]["class"] == results["kwb"]["saxpy_cpu_error"]["class"] == "RuntimeError"


CUDA_INLINE_CODE = '''
CUDA = """
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>
__global__ void square_plus_kernel(const float* x, float* y, float c, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i] + c;
}
torch::Tensor square_plus(torch::Tensor x, double c) {
  TORCH_CHECK(x.is_cuda() && x.is_contiguous() && x.scalar_type() == torch::kFloat32, "square_plus: contiguous float32 CUDA");
  const c10::cuda::CUDAGuard guard(x.device());
  auto y = torch::empty_like(x);
  int n = x.numel();
  square_plus_kernel<<<(n + 127) / 128, 128, 0, at::cuda::getCurrentCUDAStream()>>>(x.data_ptr<float>(), y.data_ptr<float>(), (float)c, n);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
  return y;
}
"""
CPP = "torch::Tensor square_plus(torch::Tensor x, double c);"
m = ext.load_inline(name="compat_cuda_inline", cpp_sources=CPP, cuda_sources=CUDA, functions=["square_plus"],
                    extra_cuda_cflags=["-O3 -Xptxas -O3 --use_fast_math"], with_cuda=True,
                    build_directory=BUILD["compat_cuda_inline"])
x = torch.arange(8, dtype=torch.float32, device="cuda")
RESULT["square_plus"] = tensor(m.square_plus(x, 0.5).cpu())
RESULT["error"] = (raised(lambda: m.square_plus(x.double(), 0.5)) or {}).get("class")
'''


@pytest.mark.cuda
def test_a_load_inline_cuda_cell_with_one_flags_string_runs_as_in_torch(tmp_path_factory, kwb_root):
    results = run_styles(CUDA_INLINE_CODE, builds(tmp_path_factory, kwb_root, "compat_cuda_inline"))
    assert same(results, "square_plus") == [v * v + 0.5 for v in range(8)]
    assert same(results, "error") == "RuntimeError"


CUDA_LIBRARY_CODE = """
lib = ext.load(name="compat_square_lib", sources=[str(FIX / "cuda_ext" / "compat_square_lib.cu")],
               is_python_module=False, build_directory=BUILD["compat_square_lib"])

def backward(ctx, grad):
    (x,) = ctx.saved_tensors
    return grad * 2 * x

def setup_context(ctx, inputs, output):
    ctx.save_for_backward(inputs[0])

torch.library.register_autograd("compat_square_lib::square", backward, setup_context=setup_context)
torch.library.register_fake("compat_square_lib::square")(lambda x: torch.empty_like(x))
for device in ("cpu", "cuda"):
    x = torch.arange(5, dtype=torch.float32, device=device, requires_grad=True)
    y = torch.ops.compat_square_lib.square(x)
    y.sum().backward()
    RESULT[device] = [tensor(y.detach().cpu()), tensor(x.grad.cpu())]
torch.library.opcheck(torch.ops.compat_square_lib.square.default, (torch.randn(9, device="cuda", requires_grad=True),))
RESULT["opcheck"] = True
"""


@pytest.mark.cuda
def test_a_torch_library_cu_with_python_autograd_runs_as_in_torch(tmp_path_factory, kwb_root):
    results = run_styles(CUDA_LIBRARY_CODE, builds(tmp_path_factory, kwb_root, "compat_square_lib"))
    assert same(results, "cuda") == same(results, "cpu") == [[0.0, 1.0, 4.0, 9.0, 16.0], [0.0, 2.0, 4.0, 6.0, 8.0]]
    assert same(results, "opcheck") is True
