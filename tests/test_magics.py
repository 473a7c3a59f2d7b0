"""The %%cpp and %%cuda cell magics in a real IPython shell: functions bound into the
namespace, unchanged cells from the cache, edited cells rebuilt, compiler errors shown with
the cell's line numbers and no traceback, bad magic lines explained."""
from __future__ import annotations

import pytest
import torch

IPython = pytest.importorskip("IPython", reason="the magics need IPython (pip install -e '.[notebooks]')")
from IPython.core.interactiveshell import InteractiveShell  # noqa: E402

from workbench.magics import split_cell  # noqa: E402

TWICE = "at::Tensor twice(const at::Tensor& x) {\n  return x * 2;\n}\n"


@pytest.fixture(scope="module")
def ip():
    shell = InteractiveShell.instance()
    shell.run_line_magic("load_ext", "workbench")
    return shell


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


def test_a_compile_error_shows_the_cells_line_and_no_traceback(ip, capsys):
    ip.run_cell_magic("cpp", "mbad --functions bad", "at::Tensor bad(const at::Tensor& x) {\n  return x * 2\n}\n")
    err = capsys.readouterr().err
    assert "<%%cpp mbad>:2:" in err and "error" in err and "Traceback" not in err
    assert "bad" not in ip.user_ns


@pytest.mark.parametrize("line, message", [
    ("", "the following arguments are required: name"),
    ("x --nope", "unrecognized arguments: --nope"),
    ("x --functions 2bad", "functions must be C++ identifiers"),
])
def test_bad_magic_lines_are_explained(ip, capsys, line, message):
    ip.run_cell_magic("cpp", line, TWICE)
    err = capsys.readouterr().err
    assert message in err and "Traceback" not in err


def test_the_cpp_part_of_a_cuda_cell_keeps_its_line_numbers():
    cell = "__global__ void k() {}\nvoid launch() {}\n// --- cpp ---\nat::Tensor f(const at::Tensor& x) {\n  return x;\n}\n"
    cuda, cpp = split_cell(cell)
    assert cuda == "__global__ void k() {}\nvoid launch() {}\n"
    assert cpp.split("\n")[3] == "at::Tensor f(const at::Tensor& x) {"   # cell line 4 is line 4
    assert split_cell("only cuda\n") == ("only cuda\n", None)


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
def test_a_cuda_cell_builds_and_its_errors_point_at_the_cell(ip, capsys):
    ip.run_cell_magic("cuda", "msquare --functions square", SQUARE)
    out = capsys.readouterr()
    assert "msquare (cuda): built" in out.out, out.err
    assert callable(ip.user_ns["square"])
    if torch.cuda.is_available():
        x = torch.randn(1000, device="cuda")
        torch.testing.assert_close(ip.user_ns["square"](x), x * x)
    ip.run_cell_magic("cuda", "msquare2 --functions square", SQUARE.replace("y[i] = x[i] * x[i];", "y[i] = x[i] * z;"))
    err = capsys.readouterr().err
    assert "<%%cuda msquare2>:3:" in err and "Traceback" not in err
    ip.run_cell_magic("cuda", "msquare3 --functions square", SQUARE.replace("return y;", "return y"))
    err = capsys.readouterr().err
    assert "<%%cuda msquare3>:13:" in err, err          # the C++ part: the cell's line 13


def test_cuda_cell_with_cpp_from_a_variable_and_bad_variables(ip, capsys):
    ip.user_ns["not_text"] = 3
    ip.run_cell_magic("cuda", "mv --functions f --cpp not_text", "__global__ void k() {}\n")
    assert "no string variable named 'not_text'" in capsys.readouterr().err


def test_a_kernel_shows_its_build_in_a_notebook(ip):
    ip.run_cell_magic("cpp", "mtwice --functions twice", TWICE)
    text = ip.user_ns["mtwice"]._repr_markdown_()
    for label in ("| ops | `twice` |", "| key |", "| library |", "| toolchain | torch ", "| build log |"):
        assert label in text, text
