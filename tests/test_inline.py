"""wb.load_inline: source strings get the same cache, reload and errors as kernel folders."""
from __future__ import annotations

import pytest
import torch

import workbench as wb

CPP = """
at::Tensor scaled(const at::Tensor& x, double s) { return x * s; }
"""


@pytest.mark.slow
def test_functions_become_ops_with_inferred_schemas_and_a_second_load_is_cached():
    k = wb.load_inline("inline_scaled", cpp=CPP, functions=["scaled"])
    torch.testing.assert_close(k.scaled(torch.arange(4.0), 2.5), torch.arange(4.0) * 2.5)
    assert wb.load_inline("inline_scaled", cpp=CPP, functions=["scaled"]) is k


@pytest.mark.slow
def test_an_edited_string_reloads():
    k1 = wb.load_inline("inline_edit", cpp=CPP, functions=["scaled"])
    k2 = wb.load_inline("inline_edit", cpp=CPP.replace("x * s", "x * s + 1"), functions=["scaled"])
    assert k2 is not k1
    assert k2.scaled(torch.zeros(1), 3.0).item() == 1.0 and k1.scaled(torch.zeros(1), 3.0).item() == 0.0


@pytest.mark.slow
def test_errors_point_at_the_line_of_the_string():
    with pytest.raises(wb.BuildError) as info:
        wb.load_inline("inline_broken", cpp="\n\nat::Tensor f(const at::Tensor& x) { return y; }\n", functions=["f"])
    assert "<load_inline 'inline_broken' cpp>:3:" in str(info.value)
    assert "return y;" in str(info.value)


@pytest.mark.parametrize(
    "kwargs,message",
    [
        ({}, "give cpp= source"),
        ({"cpp": CPP}, "name the functions to expose"),
        ({"cuda": "__global__ void k() {}", "functions": ["k"]}, "must be defined or declared in cpp="),
        ({"cpp": CPP, "functions": ["not valid"]}, "functions must be C\\+\\+ identifiers"),
        ({"cuda": "__global__ void k() {}", "cpp": CPP, "functions": ["scaled"], "device": "cpu"}, "cuda= source was given but device='cpu'"),
    ],
)
def test_bad_arguments_are_named(kwargs, message):
    with pytest.raises(ValueError, match=message):
        wb.load_inline("inline_bad", **kwargs)


@pytest.mark.nvcc
@pytest.mark.slow
def test_cuda_part_compiles_without_torch_headers():
    k = wb.load_inline("inline_cuda", cuda="__global__ void noop_kernel() {}\nvoid noop() { noop_kernel<<<1, 1>>>(); }\n",
                       cpp="void noop();\nat::Tensor ident(const at::Tensor& x) { return x; }\n", functions=["ident"])
    from workbench.jit.ninja import parse_depfile

    deps = parse_depfile(k.library_path.parent / "build-cuda" / "inline_cuda_kernels.cuda.o.d")
    assert deps and not [d for d in deps if "/torch/" in d]


@pytest.mark.nvcc
@pytest.mark.slow
def test_a_cuda_function_handed_a_cpu_tensor_is_refused_by_name():
    """A load_inline op over cuda= code, called on a CPU tensor: kwb's error names the op, the
    argument, its device and the fix, before any host pointer reaches a CUDA launch."""
    k = wb.load_inline("inline_cuda_only", cuda="__global__ void twice_kernel(float* x) {}\n"
                       "void twice_launch(float* x, long n) { if (n) twice_kernel<<<1, 1>>>(x); }\n",
                       cpp="void twice_launch(float* x, long n);\n"
                           "at::Tensor twice(const at::Tensor& x, double scale) {\n"
                           "  at::Tensor y = x * 2; twice_launch(y.mutable_data_ptr<float>(), 0); return y; }\n",
                       functions=["twice"], device="cuda")
    with pytest.raises(RuntimeError, match=r"twice: argument 0 is a tensor on cpu, but this op runs CUDA code .*x\.cuda\(\)"):
        k.twice(torch.ones(3), 1.0)


def test_a_flags_string_splits_into_flags_as_the_shell_splits_it_under_torch():
    """torch writes extra_*flags into build.ninja unquoted, so one string of several flags (as
    lecture notebooks pass it) reaches the compiler as several; quotes group as in the shell."""
    from workbench.jit.loader import compiler_flags

    assert compiler_flags("-O3 --use_fast_math -lineinfo", "extra_cuda_cflags") == ["-O3", "--use_fast_math", "-lineinfo"]
    assert compiler_flags(['-DMSG="a b"', "-O2"], "extra_cflags") == ["-DMSG=a b", "-O2"]
    assert compiler_flags(None, "extra_ldflags") == []
    with pytest.raises(ValueError, match=r"extra_cflags: .* does not split into flags"):
        compiler_flags('-D"x', "extra_cflags")


@pytest.mark.nvcc
@pytest.mark.slow
def test_torchs_load_inline_takes_one_string_of_cuda_flags():
    """nvcc gets '-O3 --use_fast_math' as two flags (a single argument failed: nvcc fatal: '3
    --use_fast_math': expected a number)."""
    cuda = "__global__ void k(float* x) { x[0] = __expf(x[0]); }\nvoid launch(float* x) { k<<<1, 1>>>(x); }\n"
    m = wb.load_inline(name="inline_flag_string", cpp_sources="void launch(float* x);\nvoid touch() {}\n", cuda_sources=cuda,
                       functions=["touch"], extra_cuda_cflags="-O3 --use_fast_math", with_cuda=True)
    assert callable(m.touch)
