"""What a user reads when something is wrong: compile errors mapped to their file, and one
sentence when the machine cannot do what was asked."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch
from conftest import TINY_CPP, write_tiny_kernel

import workbench as wb
from workbench.jit import diagnostics, toolchain


def test_build_error_points_into_the_users_file_with_line_column_and_caret(tmp_path):
    folder = write_tiny_kernel(tmp_path / "typo", cpp=TINY_CPP.replace("return at::add(x,", "return at::add(x_typo,"))
    with pytest.raises(wb.BuildError) as info:
        wb.load(folder)
    err = info.value
    text = str(err)
    src = folder / "tiny.cpp"
    line = next(i for i, l in enumerate(src.read_text().splitlines(), 1) if "x_typo" in l)
    col = src.read_text().splitlines()[line - 1].index("x_typo") + 1
    assert f"{src}:{line}:{col}: error:" in text
    assert "x_typo" in text and "\n    " + " " * (col - 1) + "^" in text
    assert "full log: " in text and err.log_path and Path(err.log_path).read_text()
    assert "FAILED:" not in text and "ninja" not in text.split("full log:")[0]
    assert err.errors and err.errors[0].file == str(src) and err.errors[0].line == line


def test_nvcc_errors_carry_the_column_of_the_caret():
    out = (
        "/k/a.cu(4): error: identifier \"undefined_thing\" is undefined\n"
        "    y[i] = undefined_thing * 2;\n"
        "           ^\n\n"
        "1 error detected in the compilation of \"/k/a.cu\".\n"
    )
    [d] = diagnostics.parse(out)
    assert (d.file, d.line, d.severity) == ("/k/a.cu", 4, "error")
    assert d.message == 'identifier "undefined_thing" is undefined'


def test_gcc_linker_and_tool_errors_are_parsed():
    out = (
        "/k/b.cpp:3:10: error: 'x' was not declared in this scope\n"
        "    3 |   return x;\n"
        "/usr/bin/ld: b.o: in function `h()':\nb.cpp:(.text+0x5): undefined reference to `launch(int)'\n"
        "collect2: error: ld returned 1 exit status\n"
        "nvcc fatal   : Unsupported gpu architecture 'compute_99'\n"
    )
    ds = diagnostics.parse(out)
    assert [(d.file, d.line, d.column) for d in ds][:1] == [("/k/b.cpp", 3, 10)]
    assert any("undefined reference to `launch(int)'" in d.message for d in ds)
    assert any("Unsupported gpu architecture 'compute_99'" in d.message for d in ds)
    assert not any("collect2" in d.message for d in ds)


def test_asking_for_cuda_without_nvcc_says_why_in_one_sentence(monkeypatch):
    monkeypatch.setattr(toolchain, "nvcc_path", lambda: None)
    with pytest.raises(wb.ToolchainError) as info:
        wb.load("relu_scale", device="cuda")
    msg = str(info.value)
    assert msg.startswith("cannot build relu_scale for CUDA: nvcc was not found")
    assert msg.count(". ") == 0 and msg.endswith(".")


def test_asking_for_cuda_with_a_cpu_only_torch_says_why(monkeypatch):
    info = toolchain.torch_info()
    monkeypatch.setattr(toolchain, "torch_info", lambda: type(info)(info.version.split("+")[0] + "+cpu", None, info.git, info.cxx11_abi, info.include_dirs, info.library_dir))
    with pytest.raises(wb.ToolchainError, match=r"cannot build relu_scale for CUDA: this torch \(.*\+cpu\) was built without CUDA"):
        wb.load("relu_scale", device="cuda")


def test_without_nvcc_the_default_device_builds_the_cpu_implementation(monkeypatch):
    monkeypatch.setattr(toolchain, "nvcc_path", lambda: None)
    k = wb.load("relu_scale")
    assert k.device == "cpu"


def test_unknown_kernel_and_bad_device_are_named():
    with pytest.raises(wb.KernelNotFoundError, match=r"no kernel 'relu_scal'.*shipped kernels \(bias_gelu, layernorm, linear_gelu, lltm, polynomial_activation, relu_scale, rmsnorm, softmax, vector_add\); did you mean relu_scale\?"):
        wb.load("relu_scal")
    with pytest.raises(ValueError, match="device must be 'cpu' or 'cuda'"):
        wb.load("relu_scale", device="gpu")


def test_a_folder_without_a_binding_cpp_is_refused(tmp_path):
    (tmp_path / "k.cu").write_text("")
    with pytest.raises(wb.KernelNotFoundError, match=r"none of its sources \(k.cu\) declares ops or a module that kwb "
                                                     r"recognises; kwb loads a kwb kernel \(KWB_LIBRARY\)"):
        wb.load(tmp_path)
    (tmp_path / "k.cu").unlink()
    with pytest.raises(wb.KernelNotFoundError, match="holds no C\\+\\+ or CUDA source at its top or under a csrc/ folder"):
        wb.load(tmp_path)


def test_arch_comes_from_kwb_cuda_arch_then_torch_cuda_arch_list_then_default(monkeypatch, capsys):
    monkeypatch.setattr(toolchain, "gpu_available", lambda: False)
    monkeypatch.setenv("KWB_CUDA_ARCH", "sm_80")
    assert toolchain.cuda_archs() == ("8.0",)
    monkeypatch.delenv("KWB_CUDA_ARCH")
    monkeypatch.setenv("TORCH_CUDA_ARCH_LIST", "8.9;9.0+PTX")
    assert toolchain.cuda_archs() == ("8.9", "9.0+PTX")
    assert toolchain.gencode_flags(("9.0+PTX",)) == ["-gencode=arch=compute_90,code=sm_90", "-gencode=arch=compute_90,code=compute_90"]
    monkeypatch.delenv("TORCH_CUDA_ARCH_LIST")
    toolchain.notices._shown.discard("arch-default")
    assert toolchain.cuda_archs() == ("9.0",)
    assert "building CUDA code for sm_90" in capsys.readouterr().err
    monkeypatch.setenv("KWB_CUDA_ARCH", "nine")
    with pytest.raises(wb.ToolchainError, match="cannot read the CUDA arch 'nine'"):
        toolchain.cuda_archs()


def test_a_compiler_that_links_libstdcxx_statically_is_skipped_with_a_notice(tmp_path, monkeypatch, capsys):
    """Seen on the GPU machine: CXX pointed at a g++ that linked libstdc++ into the extension,
    whose private iostreams segfaulted on the first error message."""
    import shutil

    gxx = shutil.which("g++")
    if gxx is None:
        pytest.skip("needs g++ to build the static-libstdc++ stand-in")
    static = tmp_path / "static-g++"
    static.write_text(f"#!/bin/sh\nexec {gxx} -static-libstdc++ \"$@\"\n")
    static.chmod(0o755)
    if toolchain.links_libstdcxx_dynamically(str(static)) is not False:
        pytest.skip("this g++ has no static libstdc++ (libstdc++.a) to link")
    monkeypatch.delenv("KWB_CXX", raising=False)
    monkeypatch.setenv("CXX", str(static))
    toolchain.notices._shown.discard("cxx-static")
    chosen = toolchain.cxx_path()
    assert chosen and chosen != str(static)
    assert capsys.readouterr().err == "", "the choice is announced when a build runs, not on a cache hit"
    toolchain.announce_build_choices()
    assert f"{static} links libstdc++ statically" in capsys.readouterr().err
    from workbench.doctor import run_checks

    monkeypatch.setenv("KWB_CXX", str(static))
    [check] = [c for c in run_checks() if c.name == "c++ compiler"]
    assert check.status == "fail" and "KWB_CXX" in check.fix


def test_lld_undefined_symbols_are_parsed():
    out = "ld.lld: error: undefined symbol: relu_scale_cuda(ReluScaleParams const&)\n>>> referenced by relu_scale.cpp\n"
    [d] = diagnostics.parse(out)
    assert d.message.startswith("undefined reference to `relu_scale_cuda(ReluScaleParams const&)'")


def test_kwb_list_names_why_a_cuda_state_cannot_be_built(monkeypatch):
    from workbench import cli
    from workbench.jit import sources

    monkeypatch.setattr(toolchain, "nvcc_path", lambda: None)
    state = cli._state(sources.resolve("relu_scale"), "cuda")
    assert state.startswith("cannot build: cannot build relu_scale for CUDA: nvcc was not found")


def test_ops_py_register_returning_something_else_than_a_dict_is_refused(tmp_path):
    folder = write_tiny_kernel(tmp_path / "badops")
    (folder / "ops.py").write_text("def register(ops):\n    return [ops.add_value]\n")
    with pytest.raises(wb.errors.LoadError, match="register\\(ops\\) returned list; it must return None or a dict"):
        wb.load(folder, device="cpu")


def test_ops_py_public_functions_are_exposed_like_ops(tmp_path):
    folder = write_tiny_kernel(tmp_path / "withfn")
    (folder / "ops.py").write_text("def register(ops):\n    def twice(x):\n        return ops.add_value(ops.add_value(x))\n"
                                   "    return {'twice': twice}\n")
    k = wb.load(folder, device="cpu")
    assert k.ops == ["add_value", "twice"]
    assert k.twice(torch.zeros(3)).tolist() == [2.0, 2.0, 2.0]


def test_a_failing_ops_py_loaded_again_reports_its_own_error_and_an_edit_loads(tmp_path):
    # the second load used to fail on the dispatcher ("Only a single TORCH_LIBRARY can be used to
    # register the namespace ..."), hiding the ops.py error the user has to fix
    folder = write_tiny_kernel(tmp_path / "failing_ops")
    (folder / "ops.py").write_text("def register(ops):\n    raise ValueError('ops.py says no')\n")
    for _ in range(2):
        with pytest.raises(ValueError, match="ops.py says no"):
            wb.load(folder, device="cpu")
    (folder / "ops.py").write_text("def register(ops):\n    return {'twice': lambda x: ops.add_value(ops.add_value(x))}\n")
    assert wb.load(folder, device="cpu").twice(torch.zeros(2)).tolist() == [2.0, 2.0]
    (folder / "ops.py").write_text("def register(ops):\n    raise ValueError('ops.py says no')\n")
    with pytest.raises(ValueError, match="ops.py says no"):  # reverted to the failing one: still its own error
        wb.load(folder, device="cpu")
