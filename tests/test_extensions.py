"""Extensions written the usual ways, loaded unchanged (examples/): the tutorial's pybind
extension, a TORCH_LIBRARY project laid out for setup.py, torch's load(name, sources=...) and
load_inline calls. Each builds, loads, reloads after a source edit and after a header edit in
one process, and reports a compile error in the user's own file; a build killed mid-way is
recovered; the signatures are torch's; arguments kwb does not take are refused by name."""
from __future__ import annotations

import inspect
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

import pytest
import torch
from conftest import run_python

import workbench as wb
from workbench.jit import light_headers, pch

EXAMPLES = Path(__file__).resolve().parents[1] / "examples"


def copy_example(name: str, tmp_path: Path) -> Path:
    return Path(shutil.copytree(EXAMPLES / name, tmp_path / name))


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new))


# ---- the tutorial way: torch/extension.h and PYBIND11_MODULE ---------------------------------


@pytest.mark.slow
def test_a_pybind_folder_loads_as_torchs_module_and_reloads_after_edits(tmp_path):
    folder = copy_example("add_extension", tmp_path)
    a, b = torch.randn(5), torch.randn(5)
    k = wb.load(folder)
    assert k.binding == "pybind" and k.ops == ["add_bwd", "add_fwd"]
    torch.testing.assert_close(k.add_fwd(a, b), a + b)
    assert "(a + b) * ADD_SCALE" in k.add_fwd.__doc__ and k.module.add_fwd is k.add_fwd
    assert [g.tolist() for g in k.add_bwd(torch.ones(2))] == [[1.0, 1.0], [1.0, 1.0]]

    edit(folder / "add_scale.h", "#define ADD_SCALE 1.0", "#define ADD_SCALE 3.0")  # a header the .cpp includes
    k2 = wb.load(folder)
    torch.testing.assert_close(k2.add_fwd(a, b), 3 * (a + b))
    torch.testing.assert_close(k.add_fwd(a, b), a + b)  # the object held before keeps its code

    edit(folder / "add.cpp", "return (a + b) * ADD_SCALE;", "return (a - b) * ADD_SCALE;")  # the source itself
    k3 = wb.load(folder)
    torch.testing.assert_close(k3.add_fwd(a, b), 3 * (a - b))
    assert wb.load(folder) is k3  # nothing changed: the same object, no build


@pytest.mark.slow
def test_torchs_load_call_with_sources_works_unchanged(tmp_path):
    folder = copy_example("add_extension", tmp_path)
    # the call as written for torch.utils.cpp_extension.load, with only the module changed
    m = wb.load("my_add", [str(folder / "add.cpp")], extra_cflags=["-DUNUSED_FLAG=1"], extra_include_paths=[str(folder)],
                verbose=False)
    assert m.module.__name__ == "my_add"
    torch.testing.assert_close(m.add_fwd(torch.ones(3), torch.ones(3)), torch.full((3,), 2.0))
    assert "-DUNUSED_FLAG=1" in m.info["config"]["cflags"]


@pytest.mark.slow
def test_a_compile_error_points_into_the_users_file(tmp_path):
    folder = copy_example("add_extension", tmp_path)
    edit(folder / "add.cpp", "return (a + b) * ADD_SCALE;", "return (a + b) * ADD_SCALE + undeclared_thing;")
    with pytest.raises(wb.BuildError) as info:
        wb.load(folder)
    line = next(i for i, text in enumerate((folder / "add.cpp").read_text().splitlines(), 1) if "undeclared_thing" in text)
    message = str(info.value)
    assert re.search(rf"{re.escape(str(folder / 'add.cpp'))}:{line}:\d+: error: .*undeclared_thing", message), message
    assert "^" in message and "full log:" in message
    edit(folder / "add.cpp", " + undeclared_thing", "")
    assert wb.load(folder).add_fwd(torch.ones(1), torch.ones(1)).item() == 2.0  # fixed: it builds


# ---- TORCH_LIBRARY, laid out for setup.py (pytorch/extension-cpp) -----------------------------


@pytest.mark.slow
def test_a_torch_library_project_loads_from_its_csrc_and_its_own_ops_py_passes_opcheck(tmp_path):
    folder = copy_example("extension_cpp", tmp_path)
    res = run_python(f"""
        import importlib.util, torch, workbench as wb
        k = wb.load({str(folder)!r})
        assert k.binding == "torch_library" and k.namespace == "extension_cpp", (k.binding, k.namespace)
        assert k.ops == ["mymul", "mymuladd"], k.ops
        assert sorted(p.name for p in map(__import__("pathlib").Path, k.info["sources"])) == ["muladd.cpp"] + (
            ["muladd.cu"] if k.device == "cuda" else [])
        spec = importlib.util.spec_from_file_location("extension_cpp_ops", {str(folder / 'extension_cpp' / 'ops.py')!r})
        ops = importlib.util.module_from_spec(spec); spec.loader.exec_module(ops)   # the project's Python, unchanged
        a, b = torch.randn(8, requires_grad=True), torch.randn(8, requires_grad=True)
        torch.testing.assert_close(ops.mymuladd(a, b, 2.0), a * b + 2.0)
        ops.mymuladd(a, b, 1.0).sum().backward()
        torch.testing.assert_close(a.grad, b.detach())
        torch.library.opcheck(torch.ops.extension_cpp.mymuladd.default, (a, b, 1.5))
        f = torch.compile(lambda x, y: ops.mymuladd(x, y, 3.0) * 2, fullgraph=True)
        torch.testing.assert_close(f(a.detach(), b.detach()), (a * b + 3.0).detach() * 2)
        print("ok")
    """)
    assert res.returncode == 0, res.stderr
    assert "ok" in res.stdout


TORCH_LIBRARY_CPP = """\
#include <torch/library.h>
#include <ATen/ATen.h>
#include "offset.h"

at::Tensor shift(const at::Tensor& x) { return x + OFFSET; }

TORCH_LIBRARY(shifty, m) { m.def("shift(Tensor x) -> Tensor"); }
TORCH_LIBRARY_IMPL(shifty, CPU, m) { m.impl("shift", &shift); }
"""


def test_a_torch_library_namespace_named_by_a_macro_is_the_one_torchs_macros_give(tmp_path):
    """TORCH_LIBRARY(TORCH_EXTENSION_NAME, m), with -DTORCH_EXTENSION_NAME=... as the builder
    passes it: kwb's shim registers under the namespace the macro expands to, as torch does."""
    from torch.utils.cpp_extension import include_paths

    from workbench.jit import sources, toolchain

    unit = tmp_path / "ops.cpp"
    unit.write_text("#include <torch/library.h>\n"
                    "TORCH_LIBRARY(TORCH_EXTENSION_NAME, m) {}\n"
                    "TORCH_LIBRARY_FRAGMENT(TORCH_EXTENSION_NAME, m) {}\n"
                    "TORCH_LIBRARY_IMPL(TORCH_EXTENSION_NAME, CPU, m) {}\n")

    def preprocessed(*shim: str) -> str:
        res = subprocess.run([toolchain.cxx_path(), "-std=c++20", "-E", "-P", "-DTORCH_EXTENSION_NAME=myext",
                              *[f"-I{d}" for d in include_paths()], *shim, str(unit)],
                             capture_output=True, text=True, timeout=120, check=False)
        assert res.returncode == 0, res.stderr[-2000:]
        return res.stdout

    torchs = preprocessed()
    kwbs = preprocessed("-include", str(sources.core_include_dir() / "kwb_torch_library.h"))
    assert "kwb::deferred::Registrar" in kwbs  # the shim's blocks, not torch's static initializers
    assert torchs.count('"myext"') == kwbs.count('"myext"') == 3
    assert '"TORCH_EXTENSION_NAME"' not in kwbs


@pytest.mark.slow
def test_a_torch_library_reload_registers_under_a_new_namespace_and_says_so(tmp_path):
    folder = tmp_path / "shifty"
    folder.mkdir()
    (folder / "shifty.cpp").write_text(TORCH_LIBRARY_CPP)
    (folder / "offset.h").write_text("#pragma once\n#define OFFSET 1.0\n")
    res = run_python(f"""
        import torch, workbench as wb
        from pathlib import Path
        x = torch.zeros(3)
        k = wb.load({str(folder)!r})
        print("first", k.namespace, torch.ops.shifty.shift(x).tolist())
        Path({str(folder / 'offset.h')!r}).write_text("#pragma once\\n#define OFFSET 5.0\\n")   # a header edit
        k2 = wb.load({str(folder)!r})
        print("second", k2.namespace, k2.shift(x).tolist(), k2.qualname("shift"), k.shift(x).tolist())
        src = Path({str(folder / 'shifty.cpp')!r}); src.write_text(src.read_text().replace("x + OFFSET", "x - OFFSET"))
        k3 = wb.load({str(folder)!r})
        print("third", k3.namespace, k3.shift(x).tolist(), torch.ops.shifty.shift(x).tolist())
    """)
    assert res.returncode == 0, res.stderr
    assert "first shifty [1.0, 1.0, 1.0]" in res.stdout
    assert "second shifty_kwb2 [5.0, 5.0, 5.0] shifty_kwb2::shift [1.0, 1.0, 1.0]" in res.stdout
    assert "third shifty_kwb3 [-5.0, -5.0, -5.0] [1.0, 1.0, 1.0]" in res.stdout
    assert "registers its ops as torch.ops.shifty_kwb2" in res.stderr and "restart Python" in res.stderr


# ---- torch's load_inline ---------------------------------------------------------------------

SCALED_ADD = "torch::Tensor scaled_add(torch::Tensor a, torch::Tensor b, double s) { return a + s * b; }\n"


@pytest.mark.slow
def test_torchs_load_inline_call_works_unchanged_and_reloads_an_edit():
    m = wb.load_inline(name="scaled_add_inline", cpp_sources=[SCALED_ADD], functions={"scaled_add": "a + s * b"},
                       extra_cflags=["-DSOMETHING=1"], verbose=False, with_cuda=False)
    torch.testing.assert_close(m.scaled_add(torch.ones(2), torch.ones(2), 3.0), torch.full((2,), 4.0))
    assert "a + s * b" in m.scaled_add.__doc__
    with pytest.raises(RuntimeError, match="must match the size"):  # torch's error handling around the function
        m.scaled_add(torch.ones(2), torch.ones(3), 1.0)
    m2 = wb.load_inline("scaled_add_inline", SCALED_ADD.replace("a + s * b", "a - s * b"), functions=["scaled_add"],
                        extra_cflags=["-DSOMETHING=1"])
    torch.testing.assert_close(m2.scaled_add(torch.ones(2), torch.ones(2), 3.0), torch.full((2,), -2.0))


@pytest.mark.slow
def test_load_inline_compile_errors_point_at_the_line_of_the_string():
    bad = "torch::Tensor f(torch::Tensor a) {\n  return a + zz;\n}\n"
    with pytest.raises(wb.BuildError) as info:
        wb.load_inline("bad_inline_torch_form", cpp_sources=bad, functions=["f"])
    assert re.search(r"<load_inline 'bad_inline_torch_form' cpp_sources>:2:\d+: error: .*zz", str(info.value)), str(info.value)


# ---- the signatures, and what kwb refuses ---------------------------------------------------------


# Parameters a later torch adds, as it adds them (name, kind, default): kwb takes them on an
# older torch too, after the older torch's own and before kwb's keyword-only ones.
_LATER_TORCHS = {"load": [], "load_inline": [("gil_not_used", inspect.Parameter.POSITIONAL_OR_KEYWORD, False)]}


@pytest.mark.parametrize("fn", ["load", "load_inline"])
def test_the_signatures_are_torchs_in_torchs_order(fn):
    """Every parameter of torch's, under torch's name, of torch's kind, with torch's default, in
    torch's order; a parameter torch requires may have a default in kwb (load's sources: None
    loads a kwb kernel or a folder; load_inline's cpp_sources: kwb's cpp=/cuda= form). After
    them only the later torch's listed above, then keyword-only parameters of kwb's."""
    import torch.utils.cpp_extension as ce

    theirs = list(inspect.signature(getattr(ce, fn)).parameters.values())
    ours = list(inspect.signature(getattr(wb, fn)).parameters.values())
    assert len(ours) >= len(theirs), f"{fn}: kwb lacks {[p.name for p in theirs[len(ours):]]}"
    for t, o in zip(theirs, ours):
        assert (o.name, o.kind) == (t.name, t.kind), f"{fn}: torch's {t} where kwb has {o}"
        if t.default is not inspect.Parameter.empty:
            assert o.default == t.default and type(o.default) is type(t.default), f"{fn}: torch's {t}, kwb's {o}"
    rest = ours[len(theirs):]
    later = [spec for spec in _LATER_TORCHS[fn] if spec[0] not in {t.name for t in theirs}]
    assert [(p.name, p.kind, p.default) for p in rest[:len(later)]] == later, f"{fn}: {rest}"
    extra = [p for p in rest[len(later):] if p.kind is not inspect.Parameter.KEYWORD_ONLY]
    assert not extra, f"{fn}: kwb's own parameters must be keyword-only, got {extra}"


def test_torchs_keyword_call_of_the_tutorial_names_its_first_parameter_name(tmp_path):
    folder = copy_example("add_extension", tmp_path)
    m = wb.load(name="add_by_keyword", sources=str(folder / "add.cpp"), extra_include_paths=[str(folder)],
                build_directory=str(tmp_path / "build"))
    assert m.module.__name__ == "add_by_keyword"
    torch.testing.assert_close(m.add_fwd(torch.ones(2), torch.ones(2)), torch.full((2,), 2.0))
    assert wb.load(name="relu_scale").ops  # a kwb kernel, named by keyword


@pytest.mark.slow
def test_one_kernel_built_into_two_build_directories_loads_from_both_in_one_process(tmp_path):
    # torch takes an op namespace once a process: two cache roots hold two libraries of one build
    from conftest import write_tiny_kernel

    folder = write_tiny_kernel(tmp_path / "tiny", value="3.0")
    first = wb.load(str(folder), device="cpu", build_directory=str(tmp_path / "a"))
    second = wb.load(str(folder), device="cpu", build_directory=str(tmp_path / "b"))
    assert first.build.library != second.build.library
    for kernel in (first, second):
        torch.testing.assert_close(kernel.add_value(torch.zeros(3)), torch.full((3,), 3.0))


@pytest.mark.parametrize("call,message", [
    (lambda: wb.load("x", sources=["nowhere.cpp"]), "sources: .*nowhere.cpp is not a file"),
    (lambda: wb.load("relu_scale", is_standalone=True), "is_standalone=True is not supported: kwb builds extensions to load"),
    (lambda: wb.load("relu_scale", with_sycl=True), "with_sycl=True is not supported"),
    (lambda: wb.load("relu_scale", with_cuda=True, device="cpu"), "with_cuda=True and device='cpu' disagree"),
    (lambda: wb.load("relu_scale", extra_cflags=[1]), "extra_cflags must be a string or a list of strings"),
    (lambda: wb.load_inline("x", cpp_sources="int f();", sycl_sources="x"), "sycl_sources='x' is not supported"),
    (lambda: wb.load_inline("x", cpp_sources="int f();", functions=3), "functions must be a list of names or a dict"),
    (lambda: wb.load_inline("x", cpp_sources="int f();"), "name the functions to bind with functions="),
    (lambda: wb.load_inline("x", cpp="int f();", cpp_sources="int f();"), "not both"),
    (lambda: wb.load_inline("x", cpp="at::Tensor f(const at::Tensor& x);", functions=["f"], no_implicit_headers=True),
     "no_implicit_headers=True belongs to torch's form"),
    (lambda: wb.load_inline("x", cpp="at::Tensor f(const at::Tensor& x);", functions=["f"], use_pch=True),
     "use_pch=True belongs to torch's form"),
])
def test_arguments_kwb_does_not_take_are_refused_by_name(call, message):
    with pytest.raises((ValueError, TypeError, wb.KernelNotFoundError), match=message):
        call()


def test_a_folder_with_no_binding_says_what_kwb_loads(tmp_path):
    (tmp_path / "plain").mkdir()
    (tmp_path / "plain" / "plain.cpp").write_text("int f() { return 1; }\n")
    with pytest.raises(wb.KernelNotFoundError, match=r"kwb loads a kwb kernel \(KWB_LIBRARY\), a pybind extension"):
        wb.load(tmp_path / "plain")


def test_kwb_list_names_each_folders_kind(tmp_path):
    from click.testing import CliRunner

    from workbench.cli import main

    res = CliRunner().invoke(main, ["list", str(EXAMPLES / "add_extension"), str(EXAMPLES / "extension_cpp"), "relu_scale"])
    assert res.exit_code == 0, res.output
    rows = {cells[0]: cells[1:] for line in res.output.splitlines()
            if len(cells := [c.strip() for c in line.strip("│ ").split("│")]) == 4}
    assert rows[str(EXAMPLES / "add_extension")][:2] == ["pybind", "add_fwd, add_bwd"], rows
    assert rows[str(EXAMPLES / "extension_cpp")][:2] == ["torch_library", "mymuladd, mymul"], rows
    assert rows["relu_scale"][0] == "kwb", rows


# ---- the LLTM tutorial extension ---------------------------------------------------------------


def _lltm_module(ext):
    import importlib.util

    spec = importlib.util.spec_from_file_location("lltm_tutorial", EXAMPLES / "lltm_cpp" / "lltm.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.make_function(ext)


@pytest.mark.slow
def test_the_tutorial_lltm_is_checked_and_timed_by_the_harness():
    ext = wb.load(EXAMPLES / "lltm_cpp")
    spec = wb.load("lltm", device="cpu").spec   # kwb's own LLTM: the reference and its inputs
    fn = _lltm_module(ext).apply
    report = wb.check(fn, spec.reference, inputs=lambda shape, dtype, device, gen: spec.make_inputs(shape, dtype, device, gen),
                      shapes=[(3, 5, 7), (16, 32, 128)], dtypes=["float64", "float32"], grad_inputs=(0, 1, 2, 3, 4),
                      tolerance={torch.float64: wb.Tolerance(1e-10, 1e-10), torch.float32: wb.Tolerance(1e-4, 1e-4)},
                      device="cpu", name="lltm_tutorial", seed=0)
    assert report.passed, str(report)
    args = spec.make_inputs((16, 32, 128), torch.float32, "cpu", torch.Generator().manual_seed(0))
    timing = wb.bench(fn, spec.reference, inputs=[tuple(args)], baselines="eager", graphs=False)
    assert {r["provider"] for r in timing.rows} == {"kwb", "eager"} and timing.ok, str(timing)


@pytest.mark.slow
def test_a_cpu_only_build_of_a_cuda_extension_says_what_is_missing():
    with pytest.raises(wb.LoadError, match=r"calls lltm_cuda_forward\(.*\), which its CUDA sources define"):
        wb.load(EXAMPLES / "lltm_cuda", device="cpu")


@pytest.mark.nvcc
@pytest.mark.slow
def test_the_tutorial_cuda_extension_builds_with_nvcc_and_loads():
    ext = wb.load(EXAMPLES / "lltm_cuda", device="cuda")
    assert ext.device == "cuda" and ext.ops == ["backward", "forward"]
    assert any(p.endswith("lltm_cuda_kernel.cu") for p in ext.info["sources"])


@pytest.mark.cuda
def test_the_tutorial_cuda_extension_matches_the_reference_on_the_gpu():
    ext = wb.load(EXAMPLES / "lltm_cuda", device="cuda")
    spec = wb.load("lltm", device="cpu").spec
    fn = _lltm_module(ext).apply
    report = wb.check(fn, spec.reference, inputs=lambda shape, dtype, device, gen: spec.make_inputs(shape, dtype, device, gen),
                      shapes=[(3, 5, 7), (16, 32, 128), (64, 256, 1100)], dtypes=["float32", "float64"],
                      grad_inputs=(0, 1, 2, 3, 4),
                      tolerance={torch.float64: wb.Tolerance(1e-10, 1e-10), torch.float32: wb.Tolerance(1e-4, 1e-4)},
                      device="cuda", name="lltm_cuda_tutorial", seed=0)
    assert report.passed, str(report)


@pytest.mark.cuda
def test_the_torch_library_project_runs_its_cuda_kernels():
    folder = EXAMPLES / "extension_cpp"
    res = run_python(textwrap.dedent(f"""
        import torch, workbench as wb
        k = wb.load({str(folder)!r}, device="cuda")
        a, b = torch.randn(1000, device="cuda"), torch.randn(1000, device="cuda")
        torch.testing.assert_close(k.mymuladd(a, b, 0.5), a * b + 0.5)
        print("ok", k.device)
    """))
    assert res.returncode == 0, res.stderr
    assert "ok cuda" in res.stdout


@pytest.mark.nvcc
@pytest.mark.slow
def test_a_cuda_unit_compiles_against_the_lighter_header_and_falls_back_when_it_needs_more(tmp_path, capfd):
    folder = tmp_path / "needs_nn"
    folder.mkdir()
    (folder / "bind.cpp").write_text(
        "#include <torch/extension.h>\n"
        "double gain();\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"gain\", &gain); }\n")
    (folder / "gain.cu").write_text(  # torch::nn is the C++ frontend's: not in torch/types.h
        "#include <torch/extension.h>\n"
        "double gain() { return torch::nn::init::calculate_gain(torch::kReLU); }\n")
    k = wb.load(folder, device="cuda")
    assert "needs the whole torch/extension.h" in capfd.readouterr().err
    build_dir = k.build.manifest_path.parent / "build-cuda"
    gain_step = (build_dir / "build.ninja").read_text().split("gain.cu", 1)[1].split("build ", 1)[0]
    assert "kwb_light_torch" not in gain_step  # remembered: torch's own header now
    lltm = wb.load(EXAMPLES / "lltm_cuda", device="cuda")  # a tutorial kernel: ATen's core and its ops are enough
    ninja = (lltm.build.manifest_path.parent / "build-cuda" / "build.ninja").read_text()
    assert f"{light_headers.OPS_FOLDER}/lltm_cuda_kernel-" in ninja.split("lltm_cuda_kernel.cu", 1)[1].split("build ", 1)[0]


def test_a_unit_that_includes_torchs_header_through_a_quoted_file_gets_the_lighter_one(tmp_path):
    # load_inline's CUDA wrapper includes the cell's text, which includes torch/extension.h
    (tmp_path / "cell.cu").write_text("#include <torch/extension.h>\n__global__ void k() {}\n")
    (tmp_path / "plain.cu").write_text("#include <cuda_runtime.h>\n__global__ void k() {}\n")
    (tmp_path / "cuda.cu").write_text('#include <torch/types.h>\n#include "cell.cu"\n')
    (tmp_path / "other.cu").write_text('#include <torch/types.h>\n#include "plain.cu"\n#include "missing.h"\n')
    assert light_headers.wants_light(tmp_path / "cuda.cu")
    assert not light_headers.wants_light(tmp_path / "other.cu")
    build = tmp_path / "build"
    build.mkdir()
    levels = light_headers.Levels(build)
    (flag,) = levels.flags(tmp_path / "cuda.cu")
    assert light_headers.is_light_flag(flag) and (Path(flag[2:]) / "torch" / "types.h").is_file()  # the prelude's too
    assert levels.flags(tmp_path / "other.cu") == []


def test_a_cuda_units_ops_header_names_the_aten_ops_it_calls_and_nothing_else(tmp_path):
    unit = tmp_path / "k.cu"
    unit.write_text("#include <torch/extension.h>\n"
                    "torch::Tensor f(torch::Tensor x) { auto y = torch::zeros_like(x); return at::addmm(y, x, x); }\n"
                    "int g() { return not_an_op(1) + torch::Tensor().dim(); }\n")
    text = light_headers.ops_header(unit)
    assert "#include <ATen/ops/zeros_like.h>" in text and "#include <ATen/ops/addmm.h>" in text
    assert "not_an_op" not in text and "<ATen/ATen.h>" not in text and "<torch/types.h>" not in text
    assert "namespace torch {\nusing namespace at;" in text
    assert "constexpr auto kFloat32 = at::kFloat;" in text  # torch/types.h's own aliases, used in host wrappers
    unit.write_text("#include <torch/extension.h>\nusing namespace torch;\nTensor f(Tensor x) { return sigmoid(x); }\n")
    assert "#include <ATen/ops/sigmoid.h>" in light_headers.ops_header(unit)  # calls without torch::


def test_the_ops_header_included_as_both_names_declares_torch_s_aliases_once(tmp_path):
    """load_inline's prelude includes torch/types.h and the cell torch/extension.h: the ops level
    writes one text under both names. GCC's #pragma once takes two files for one only where their
    mtimes fall in the same second; a second apart (a slow disk), torch::kFloat32 was defined twice
    and the unit fell to the heavier level."""
    from torch.utils.cpp_extension import include_paths

    from workbench.jit import toolchain

    unit = tmp_path / "cuda.cu"
    unit.write_text("#include <torch/types.h>\n#include <torch/extension.h>\n"
                    "torch::Tensor f(torch::Tensor x) { return torch::empty_like(x); }\n")
    (flag,) = light_headers.Levels(tmp_path).flags(unit)
    headers = Path(flag[2:]) / "torch"
    stamp = (headers / "extension.h").stat().st_mtime
    os.utime(headers / "types.h", (stamp + 2, stamp + 2))
    res = subprocess.run([toolchain.cxx_path(), "-std=c++20", "-E", "-P", "-x", "c++", flag,
                          *[f"-I{d}" for d in include_paths()], str(unit)],
                         capture_output=True, text=True, timeout=120, check=False)
    assert res.returncode == 0, res.stderr[-2000:]
    assert res.stdout.count("constexpr auto kFloat32 = at::kFloat;") == 1


def test_a_unit_that_fails_at_its_level_moves_down_one_and_the_folder_remembers(tmp_path):
    unit = tmp_path / "k.cu"
    unit.write_text("#include <torch/extension.h>\n")
    levels = light_headers.Levels(tmp_path)
    assert levels.level(unit) == "ops" and levels.level(tmp_path / "b.cpp") == "types"
    assert levels.demote({str(unit)}) == set()
    assert levels.flags(unit) == [f"-I{light_headers.folder(cuda=True)}"]
    assert levels.demote({str(unit)}) == {str(unit)}
    levels.save()
    assert light_headers.Levels(tmp_path).flags(unit) == []  # torch's own, in the next build too
    (tmp_path / light_headers.RECORD).write_text(json.dumps([str(unit)]))  # the older record: a list
    assert light_headers.Levels(tmp_path).level(unit) == "full"


@pytest.mark.nvcc
@pytest.mark.slow
def test_a_torch_style_load_inline_cuda_cell_compiles_against_the_lighter_header(tmp_path):
    cuda = ("#include <torch/extension.h>\n"
            "__global__ void twice_kernel(const float* x, float* y, int64_t n) {\n"
            "  int64_t i = blockIdx.x * (int64_t)blockDim.x + threadIdx.x; if (i < n) y[i] = 2 * x[i]; }\n"
            "torch::Tensor twice(torch::Tensor x) {\n"
            "  auto y = torch::empty_like(x);\n"
            "  twice_kernel<<<(x.numel() + 255) / 256, 256>>>(x.data_ptr<float>(), y.data_ptr<float>(), x.numel());\n"
            "  return y; }\n")
    k = wb.load_inline("light_cell", cpp_sources="torch::Tensor twice(torch::Tensor x);", cuda_sources=cuda,
                       functions=["twice"], build_directory=str(tmp_path))
    ninja = (k.build.manifest_path.parent / "build-cuda" / "build.ninja").read_text()
    cuda_step = ninja.split("cuda.cu", 1)[1].split("build ", 1)[0]
    assert f"{light_headers.OPS_FOLDER}/cuda-" in cuda_step


# ---- every kind under kwb's promises: concurrent loaders, kill -9, compile errors ----------------
# Each kind's load as a line of Python and the value its function must give: one process's code
# runs in several, so the tests below exercise the lock and the recovery with real processes.


def _kind(kind: str, tmp_path: Path) -> tuple[str, str, Path]:
    """(the load call, an expression giving a list, the user's source file) for a fresh copy of `kind`."""
    if kind == "pybind":
        folder = copy_example("add_extension", tmp_path)
        return f"k = wb.load({str(folder)!r})", "k.add_fwd(torch.ones(2), torch.ones(2)).tolist()", folder / "add.cpp"
    if kind == "torch_library":
        folder = tmp_path / "shifty"
        folder.mkdir()
        (folder / "shifty.cpp").write_text(TORCH_LIBRARY_CPP)
        (folder / "offset.h").write_text("#pragma once\n#define OFFSET 1.0\n")
        return f"k = wb.load({str(folder)!r})", "k.shift(torch.ones(2)).tolist()", folder / "shifty.cpp"
    assert kind == "load_inline"
    source = tmp_path / "cell.cpp"  # the cell's text, kept in a file so the test can break it
    source.write_text(f"// {tmp_path.name}\n" + SCALED_ADD)
    call = (f"k = wb.load_inline('cell_{abs(hash(tmp_path.name))}', cpp_sources=open({str(source)!r}).read(), "
            "functions=['scaled_add'])")
    return call, "k.scaled_add(torch.ones(2), torch.ones(2), 1.0).tolist()", source


KINDS = ["pybind", "torch_library", "load_inline"]


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_several_processes_loading_one_extension_build_it_once(kind, tmp_path):
    load, value, _ = _kind(kind, tmp_path)
    code = f"import json, torch, workbench as wb\n{load}\nprint(json.dumps([k.build.compiled, {value}]))"
    procs = [subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
             for _ in range(3)]
    results = []
    for p in procs:
        out, err = p.communicate(timeout=600)
        assert p.returncode == 0, err
        results.append(json.loads(out.strip().splitlines()[-1]))
    assert all(r[1] == [2.0, 2.0] for r in results), results
    assert sum(r[0] for r in results) == 1, results


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.slow
def test_a_build_killed_midway_is_recovered(kind, tmp_path):
    load, value, _ = _kind(kind, tmp_path)
    code = f"import torch, workbench as wb\n{load}\nprint({value})"
    root = Path(os.environ["TORCH_EXTENSIONS_DIR"])
    victim = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    held = None
    deadline = time.monotonic() + 120
    while held is None and time.monotonic() < deadline and victim.poll() is None:  # wait until it builds
        for lock in root.glob("*/lock"):
            try:
                if json.loads(lock.read_text() or "{}").get("pid") == victim.pid:
                    held = lock
            except (OSError, ValueError):
                pass
        time.sleep(0.05)
    time.sleep(1.0)  # into the compiler
    victim.send_signal(signal.SIGKILL)
    victim.wait()
    assert held is not None, "the build never took its lock"
    res = run_python(code)
    assert res.returncode == 0, res.stderr
    assert "[2.0, 2.0]" in res.stdout
    assert f"pid {victim.pid} was interrupted" in res.stderr


@pytest.mark.parametrize("kind", ["torch_library", "load_inline"])  # pybind: test_a_compile_error_points_into_the_users_file
@pytest.mark.slow
def test_each_kind_reports_a_compile_error_in_the_users_source(kind, tmp_path):
    load, _, source = _kind(kind, tmp_path)
    text = source.read_text()
    anchor = "x + OFFSET" if kind == "torch_library" else "a + s * b"
    source.write_text(text.replace(anchor, anchor + " + not_declared_here"))
    res = run_python(f"import torch, workbench as wb\n{load}")
    assert res.returncode != 0
    line = next(i for i, t in enumerate(source.read_text().splitlines(), 1) if "not_declared_here" in t)
    where = str(source) if kind == "torch_library" else r"<load_inline 'cell_\d+' cpp_sources>"
    assert re.search(rf"{where}:{line}:\d+: error: .*not_declared_here", res.stderr), res.stderr
    assert "^" in res.stderr and "Traceback" in res.stderr  # raised as a BuildError


@pytest.mark.slow
def test_a_load_inline_cell_reloads_after_an_edit_of_a_header_it_includes(tmp_path):
    (tmp_path / "gain.h").write_text("#pragma once\n#define GAIN 2.0\n")
    cell = '#include "gain.h"\ntorch::Tensor gained(torch::Tensor a) { return a * GAIN; }\n'
    name = f"gain_{abs(hash(tmp_path.name))}"
    m = wb.load_inline(name, cell, functions=["gained"], extra_include_paths=[str(tmp_path)])
    assert m.gained(torch.ones(1)).item() == 2.0
    (tmp_path / "gain.h").write_text("#pragma once\n#define GAIN 7.0\n")
    m2 = wb.load_inline(name, cell, functions=["gained"], extra_include_paths=[str(tmp_path)])
    assert m2.gained(torch.ones(1)).item() == 7.0 and m2.build.compiled


@pytest.mark.slow
def test_a_binding_unit_compiles_against_the_lighter_precompiled_header_and_falls_back(tmp_path, capfd):
    lltm = wb.load(EXAMPLES / "lltm_cpp")  # the tutorial's C++: ATen ops and pybind, no torch::nn
    ninja = (lltm.build.manifest_path.parent / "build-cpu" / "build.ninja").read_text()
    step = ninja.split("lltm.cpp", 1)[1].split("build ", 1)[0]
    assert "kwb_light_torch_py" in step and "-include" in step and "-Winvalid-pch" in step
    pch_header = Path(step.split("-include ", 1)[1].split()[0])
    deadline = time.monotonic() + 600  # precompiled in the background, by this or an earlier test's process
    while not pch.ready(pch_header.parent) and time.monotonic() < deadline:
        time.sleep(0.5)
    assert (pch_header.parent / (pch_header.name + ".gch")).exists()
    assert "kwb_light_torch_py" in (pch_header.parent / "pch.json").read_text()  # the lighter header, precompiled
    folder = tmp_path / "needs_nn_cpp"
    folder.mkdir()
    (folder / "gain.cpp").write_text(  # torch::nn is the C++ frontend's: not in the lighter header
        "#include <torch/extension.h>\n"
        "double gain() { return torch::nn::init::calculate_gain(torch::kReLU); }\n"
        "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"gain\", &gain); }\n")
    k = wb.load(folder)
    assert k.gain() == pytest.approx(2 ** 0.5)
    assert "gain.cpp needs the whole torch/extension.h" in capfd.readouterr().err
    step = (k.build.manifest_path.parent / "build-cpu" / "build.ninja").read_text().split("gain.cpp", 1)[1].split("build ", 1)[0]
    assert "kwb_light_torch" not in step and "-include" in step  # torch's own header, precompiled too
