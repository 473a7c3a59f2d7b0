"""The %%cpp and %%cuda cell magics in a real IPython shell: functions bound into the
namespace, unchanged cells from the cache, edited cells rebuilt, compiler errors shown with
the cell's line numbers and no traceback (and the cell failed, so "Run All" stops there), bad
magic lines explained."""
from __future__ import annotations

import pytest
import torch

IPython = pytest.importorskip("IPython", reason="the magics need IPython (pip install -e '.[notebooks]')")
from IPython.core.interactiveshell import InteractiveShell

from workbench.magics import CellBuildError, split_cell

TWICE = "at::Tensor twice(const at::Tensor& x) {\n  return x * 2;\n}\n"


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "workbench")
    return shell


def run(ip, capsys, magic: str, line: str, cell: str):
    """Run a magic cell as a notebook does: (the error it raised or None, what it printed)."""
    result = ip.run_cell(f"%%{magic} {line}\n{cell}")
    out = capsys.readouterr()
    return result.error_in_exec, out.out + out.err


@pytest.mark.slow
def test_a_cpp_cell_binds_its_functions_and_an_unchanged_cell_is_a_cache_hit(ip, capsys):
    ip.run_cell_magic("cpp", "mtwice --functions twice", TWICE)
    out = capsys.readouterr().out
    assert "mtwice (cpu): built" in out
    x = torch.arange(4.0)
    assert torch.equal(ip.user_ns["twice"](x), x * 2)
    assert ip.user_ns["mtwice"].twice is not None
    ip.run_cell_magic("cpp", "mtwice --functions twice", TWICE)
    assert "mtwice (cpu): cached" in capsys.readouterr().out
    ip.run_cell_magic("cpp", "mtwice --functions twice", TWICE.replace("x * 2", "x * 3"))
    assert "mtwice (cpu): built" in capsys.readouterr().out
    assert torch.equal(ip.user_ns["twice"](x), x * 3)


def test_a_compile_error_fails_the_cell_with_the_cells_line_and_no_traceback(ip, capsys):
    error, shown = run(ip, capsys, "cpp", "mbad --functions bad", "at::Tensor bad(const at::Tensor& x) {\n  return x * 2\n}\n")
    assert isinstance(error, CellBuildError)
    # line 3 of the cell as Jupyter numbers it: line 1 is the %%cpp line
    assert "<%%cpp mbad>:3:" in shown and "error" in shown and "Traceback" not in shown, shown
    assert "bad" not in ip.user_ns


@pytest.mark.parametrize("line, message", [
    ("", "the following arguments are required: name"),
    ("x --nope", "unrecognized arguments: --nope"),
    ("x --functions 2bad", "functions must be C++ identifiers"),
])
def test_bad_magic_lines_are_explained(ip, capsys, line, message):
    error, shown = run(ip, capsys, "cpp", line, TWICE)
    assert type(error).__name__ == "UsageError"
    assert message in str(error) and "Traceback" not in shown, shown


def test_the_kernels_name_cannot_be_one_of_its_functions(ip, capsys):
    error, _shown = run(ip, capsys, "cpp", "twice --functions twice", TWICE)
    assert type(error).__name__ == "UsageError" and "must differ from the functions' names" in str(error)


@pytest.mark.slow
def test_a_reverted_cell_is_cached_not_built(ip, capsys):
    for body, expect in ((TWICE, None), (TWICE.replace("x * 2", "x * 4"), "built"), (TWICE, "cached")):
        error, shown = run(ip, capsys, "cpp", "mrevert --functions twice", body)
        assert error is None, shown
        if expect:
            assert f"mrevert (cpu): {expect}" in shown, shown
    assert torch.equal(ip.user_ns["twice"](torch.ones(2)), torch.full((2,), 2.0))


def test_flags_that_start_with_a_dash_reach_the_compiler(ip, capsys):
    # -DFACTOR=5 changes what the cell computes, so the flag demonstrably reached the compiler
    cell = "at::Tensor fives(const at::Tensor& x) {\n  return x * FACTOR;\n}\n"
    error, shown = run(ip, capsys, "cpp", "mflags --functions fives --flags '-DFACTOR=5 -O3'", cell)
    assert error is None, shown
    assert torch.equal(ip.user_ns["fives"](torch.ones(3)), torch.full((3,), 5.0))


def test_the_cpp_part_of_a_cuda_cell_keeps_its_line_numbers():
    cell = "__global__ void k() {}\nvoid launch() {}\n// --- cpp ---\nat::Tensor f(const at::Tensor& x) {\n  return x;\n}\n"
    cuda, cpp, first = split_cell(cell)
    assert cuda == "__global__ void k() {}\nvoid launch() {}\n"
    assert cpp.startswith("at::Tensor f(const at::Tensor& x) {") and first == 4   # the cell's line 4
    assert split_cell("only cuda\n") == ("only cuda\n", None, 0)


SQUARE = """\
__global__ void square_kernel(const float* x, float* y, int64_t n) {
  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x;
  if (i < n) y[i] = x[i] * x[i];
}
void square_launch(const float* x, float* y, int64_t n, cudaStream_t s) {
  square_kernel<<<(n + 255) / 256, 256, 0, s>>>(x, y, n);
}
// --- cpp ---
void square_launch(const float* x, float* y, int64_t n, cudaStream_t s);
at::Tensor square(const at::Tensor& x) {
  at::Tensor y = at::empty_like(x);
  square_launch(x.const_data_ptr<float>(), y.mutable_data_ptr<float>(), x.numel(), kwb::current_stream(x));
  return y;
}
"""


@pytest.mark.nvcc
@pytest.mark.slow
def test_a_cuda_cell_builds_and_its_errors_point_at_the_cell(ip, capsys):
    ip.run_cell_magic("cuda", "msquare --functions square", SQUARE)
    out = capsys.readouterr()
    assert "msquare (cuda): built" in out.out, out.err
    assert callable(ip.user_ns["square"])
    if torch.cuda.is_available():
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(ip.user_ns["square"](x), x * x)
    error, shown = run(ip, capsys, "cuda", "msquare2 --functions square", SQUARE.replace("y[i] = x[i] * x[i];", "y[i] = x[i] * z;"))
    assert isinstance(error, CellBuildError)
    assert "<%%cuda msquare2>:4:" in shown and "Traceback" not in shown, shown
    error, shown = run(ip, capsys, "cuda", "msquare3 --functions square", SQUARE.replace("return y;", "return y"))
    assert "<%%cuda msquare3>:14:" in shown, shown          # the C++ part: the cell's line 14


def test_cuda_cell_with_bad_cpp_variables(ip, capsys):
    ip.user_ns["not_text"] = 3
    error, _shown = run(ip, capsys, "cuda", "mv --functions f --cpp not_text", "__global__ void k() {}\n")
    assert type(error).__name__ == "UsageError" and "no string variable named 'not_text'" in str(error)
    ip.user_ns["text"] = "at::Tensor f(const at::Tensor& x) { return x; }\n"
    error, _shown = run(ip, capsys, "cuda", "mv --functions f --cpp text", SQUARE)
    assert type(error).__name__ == "UsageError" and "not both" in str(error)


@pytest.mark.nvcc
@pytest.mark.slow
def test_cuda_cell_with_its_cpp_from_a_variable(ip, capsys):
    cuda, cpp, _ = split_cell(SQUARE)
    ip.user_ns["square_cpp"] = cpp.replace("return y;", "return y")          # line 5 of the variable
    error, shown = run(ip, capsys, "cuda", "mvar --functions square --cpp square_cpp", cuda)
    assert "<%%cuda mvar: the C++ in square_cpp>:5:" in shown, shown
    ip.user_ns["square_cpp"] = cpp
    error, shown = run(ip, capsys, "cuda", "mvar --functions square --cpp square_cpp --flags '-DUNUSED=1'", cuda)
    assert error is None and "mvar (cuda): built" in shown, shown
    assert "-DUNUSED=1" in ip.user_ns["mvar"].info["config"]["cflags"]        # --flags reach the C++ part too


def test_a_kernel_shows_its_build_in_a_notebook(ip):
    ip.run_cell_magic("cpp", "mtwice --functions twice", TWICE)
    text = ip.user_ns["mtwice"]._repr_markdown_()
    for label in ("| ops | `twice` |", "| key |", "| library |", "| toolchain | torch ", "| build log |"):
        assert label in text, text


def test_a_cuda_cell_is_skipped_where_cuda_can_neither_build_nor_run(ip, capsys, monkeypatch):
    from workbench.jit import toolchain

    monkeypatch.setattr(toolchain, "gpu_available", lambda: False)
    monkeypatch.setattr(toolchain, "cuda_unavailable_reason", lambda: "nvcc was not found")
    ip.user_ns.pop("square", None)
    error, shown = run(ip, capsys, "cuda", "--functions square mskip", SQUARE)
    assert error is None, shown
    assert "%%cuda mskip: skipped on this machine" in shown and "nvcc was not found" in shown
    assert "square" not in ip.user_ns


@pytest.mark.nvcc
@pytest.mark.slow
def test_editing_the_cuda_part_of_a_cell_recompiles_only_the_cu(ip, capsys):
    from kwb_store import layout

    error, shown = run(ip, capsys, "cuda", "medit --functions square", SQUARE)
    assert error is None, shown
    # an added line moves the C++ part down the cell: its text, and so its object, stay the same
    edited = SQUARE.replace("x[i] * x[i];", "x[i] * x[i] * 2.f;\n  // doubled")
    error, shown = run(ip, capsys, "cuda", "medit --functions square", edited)
    assert error is None and "medit (cuda): built" in shown, shown
    kernel = ip.user_ns["medit"]
    log = (layout.build_dir(kernel.library_path.parent, "cuda") / "build.log").read_text()
    assert "NVCC medit_kernels.cu" in log and "CXX" not in log, log     # the binding .cpp was left alone
    if torch.cuda.is_available():
        x = torch.randn(100, device="cuda")
        torch.testing.assert_close(ip.user_ns["square"](x), x * x * 2)


RAW = 'extern "C" __global__ void mraw(float* y, float a, int n) {\n  int i = threadIdx.x;\n  if (i < n) y[i] *= a;\n}\n'


@pytest.mark.nvrtc
def test_a_cuda_kernel_cell_binds_the_raw_kernel_and_an_unchanged_cell_is_cached(ip, capsys):
    error, shown = run(ip, capsys, "cuda_kernel", "mraw --arch 9.0 --options '-DUNUSED=1'", RAW)
    assert error is None, shown
    assert "mraw(float* y, float a, int n) (sm_90): compiled with NVRTC in" in shown and "registers" in shown, shown
    k = ip.user_ns["mraw"]
    assert [s.size for s in k.slots] == [8, 4, 4]
    error, shown = run(ip, capsys, "cuda_kernel", "mraw --arch 9.0 --options '-DUNUSED=1'", RAW)
    assert error is None and "(sm_90): cached" in shown, shown


@pytest.mark.nvrtc
def test_a_cuda_kernel_cell_that_does_not_compile_shows_the_cells_line(ip, capsys):
    error, shown = run(ip, capsys, "cuda_kernel", "mraw_bad --arch 9.0", RAW.replace("mraw", "mraw_bad").replace("*= a", "*= b"))
    assert isinstance(error, CellBuildError)
    # line 4 of the cell as Jupyter numbers it: line 1 is the %%cuda_kernel line
    assert '<%%cuda_kernel mraw_bad>:4:' not in shown and '%%cuda_kernel mraw_bad:4:' in shown, shown
    assert 'identifier "b" is undefined' in shown and "Traceback" not in shown, shown
    assert "mraw_bad" not in ip.user_ns
