"""The front doors (load, load_inline's two forms, cuda_kernel, the CLI) construct one BuildSpec and hand it
down whole: what the caller asked for arrives in its fields, and nothing downstream can change it."""
from __future__ import annotations

import dataclasses

import pytest

import workbench as wb
from workbench.jit import inline, loader
from workbench.jit.build_spec import BuildSpec, build_spec
from workbench.jit.sources import from_files


@pytest.fixture
def captured(monkeypatch):
    """The specs load_source received, instead of building them (inline is imported above, before
    the patch: imported under it, it would bind the fake for good)."""
    specs: list[BuildSpec] = []

    def fake_load_source(spec, verbose=False, force=False, jobs=None):
        assert isinstance(spec, BuildSpec)
        specs.append(spec)
        return spec

    monkeypatch.setattr(loader, "load_source", fake_load_source)
    monkeypatch.setattr(inline, "load_source", fake_load_source)
    return specs


def _cpp(tmp_path, name="ext.cpp"):
    path = tmp_path / name
    path.write_text("#include <torch/extension.h>\n"
                    "torch::Tensor twice(torch::Tensor x) { return x * 2; }\n"
                    "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) { m.def(\"twice\", &twice); }\n")
    return path


def test_load_in_the_tutorials_keyword_style_fills_the_spec(tmp_path, captured):
    wb.load(name="ext", sources=[str(_cpp(tmp_path))], extra_cflags=["-O2 -DSCALE=2"], extra_ldflags="-lm",
            build_directory=str(tmp_path / "cache"))
    [spec] = captured
    assert spec.name == "ext" and spec.source.module_name == "ext"
    assert spec.extra_cflags == ("-O2", "-DSCALE=2")  # one string, split as torch's ninja file splits it
    assert spec.extra_ldflags == ("-lm",) and spec.extra_cuda_cflags == ()
    assert spec.root == tmp_path / "cache"
    assert spec.device == "cpu" and spec.archs == ()  # C++ sources only: a CPU build wherever it runs
    assert spec.what == "ext (cpu)" and spec.entry.parent == tmp_path / "cache"


def test_load_inline_both_forms_fill_the_spec(tmp_path, captured):
    wb.load_inline(name="cell", cpp_sources="torch::Tensor twice(torch::Tensor x) { return x * 2; }",
                   functions=["twice"], extra_cflags="-DA=1", build_directory=str(tmp_path))
    wb.load_inline("kwbcell", cpp="at::Tensor twice(const at::Tensor& x) { return x * 2; }", functions=["twice"],
                   device="cpu", build_directory=str(tmp_path))
    torch_form, kwb_form = captured
    assert torch_form.name == "cell" and torch_form.extra_cflags == ("-DA=1",)
    assert torch_form.root == tmp_path and torch_form.device == "cpu"
    assert kwb_form.name == "kwbcell" and kwb_form.root == tmp_path and kwb_form.cuda_includes_torch is False


def test_a_spec_cannot_be_changed_downstream(tmp_path):
    spec = build_spec(from_files("ext", [_cpp(tmp_path)]), "cpu", tmp_path)
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.device = "cuda"
    assert isinstance(spec.extra_cflags, tuple)


def test_a_bad_device_is_refused_when_the_spec_is_made(tmp_path):
    with pytest.raises(ValueError, match="device"):
        build_spec(from_files("ext", [_cpp(tmp_path)]), "tpu", tmp_path)


def test_cuda_kernel_fills_a_spec_for_nvrtc(tmp_path, monkeypatch):
    """wb.cuda_kernel constructs the same BuildSpec and hands it to the one compile path: the
    options split into include folders, pre-included files and the rest, the arch read once."""
    from workbench.jit import compile_cache, raw_kernel

    specs: list[BuildSpec] = []
    monkeypatch.setattr(compile_cache, "compile_cached", lambda spec, compiler, force=False: specs.append(spec) or spec)
    (tmp_path / "inc").mkdir()
    (tmp_path / "pre.h").write_text("#define TWICE 2\n")
    raw_kernel.cuda_kernel('extern "C" __global__ void k(float* y) { y[0] = TWICE; }', "k", arch="sm_90a",
                           options=["-I", str(tmp_path / "inc"), f"--pre-include={tmp_path / 'pre.h'}", "-DX=1"],
                           root=tmp_path / "cache")
    [spec] = specs
    assert spec.nvrtc and spec.device == "cuda" and spec.archs == ("9.0a",)
    assert spec.extra_cuda_cflags == ("-DX=1",)
    assert spec.source.include_dirs[:2] == (tmp_path.cwd(), tmp_path / "inc")  # text: the working folder first
    assert spec.source.pre_includes == (tmp_path / "pre.h",)
    assert spec.what == "k (cuda, NVRTC)" and spec.entry.name == "kwb_nvrtc-k" and spec.root == tmp_path / "cache"
    with pytest.raises(dataclasses.FrozenInstanceError):
        spec.extra_cuda_cflags = ()
