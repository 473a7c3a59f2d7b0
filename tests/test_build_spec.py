"""The front doors (load, load_inline's two forms, the CLI) construct one BuildSpec and hand it
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
