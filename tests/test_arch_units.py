"""Units named *_sm90a.cu (workbench/jit/arch_units.py): compiled for sm_90a with -DKWB_SM90A and
CUTLASS's headers where the build targets 9.0 and CUTLASS is there, else with the build's own
flags; a side-by-side build gives their kernel a compiler for every unit."""
from __future__ import annotations

from pathlib import Path

import pytest

import workbench as wb
from workbench.jit import arch_units, ninja, parallel


@pytest.fixture
def fake_cutlass(tmp_path, monkeypatch):
    """A CUTLASS_PATH holding the two headers the units below include, version 9.8.7."""
    root = tmp_path / "cutlass"
    (root / "include" / "cutlass").mkdir(parents=True)
    (root / "tools" / "util" / "include").mkdir(parents=True)
    (root / "include" / "cutlass" / "cutlass.h").write_text("#pragma once\n#define FAKE_CUTLASS 1\n")
    (root / "include" / "cutlass" / "version.h").write_text(
        "#define CUTLASS_MAJOR 9\n#define CUTLASS_MINOR 8\n#define CUTLASS_PATCH 7\n")
    monkeypatch.setenv("CUTLASS_PATH", str(root))
    return root


def test_an_sm90a_unit_swaps_the_builds_gencode_for_sm_90a(fake_cutlass):
    common = ["-O1", "-gencode=arch=compute_90,code=sm_90", "-gencode", "arch=compute_80,code=sm_80", "-Ifoo", "-lineinfo"]
    flags = arch_units.unit_cuda_cflags(common, ("8.0", "9.0"))
    assert flags is not None
    assert [f for f in flags if "compute_" in f] == ["-gencode=arch=compute_90a,code=sm_90a"]
    assert flags[:3] == ["-O1", "-Ifoo", "-lineinfo"]  # the build's other flags, in order
    assert "-DKWB_SM90A" in flags and "-DNDEBUG" in flags
    assert str(fake_cutlass / "include") in flags and str(fake_cutlass / "tools" / "util" / "include") in flags
    assert arch_units.cutlass_version() == "9.8.7"


def test_an_sm90a_unit_drops_every_other_target_form(fake_cutlass):
    common = ["-arch=sm_90", "-arch", "sm_80", "--gpu-architecture=compute_90", "-code", "sm_90", "--gpu-code=sm_80",
              "--generate-code=arch=compute_90,code=sm_90", "-O1"]
    flags = arch_units.unit_cuda_cflags(common, ("9.0",))
    assert flags[0] == "-O1" and [f for f in flags if "sm_" in f or "compute_" in f] == ["-gencode=arch=compute_90a,code=sm_90a"]


def test_an_sm90a_unit_keeps_the_builds_flags_without_a_9_0_target_or_cutlass(fake_cutlass, monkeypatch, tmp_path):
    assert arch_units.unit_cuda_cflags(["-gencode=arch=compute_80,code=sm_80"], ("8.0",)) is None
    assert arch_units.unit_cuda_cflags([], ("9.0+PTX",)) is not None and arch_units.targets_sm90(("9.0a",))
    # a CUTLASS_PATH without CUTLASS falls back to the wheel, and here there is none either
    import importlib.util

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec", lambda name, *a: None if name == "cutlass_library" else real(name, *a))
    arch_units._include_dirs.cache_clear()
    (tmp_path / "empty").mkdir()
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "empty"))
    try:
        assert arch_units.cutlass_include_dirs() == ()
        assert arch_units.unit_cuda_cflags([], ("9.0",)) is None
        assert arch_units.cutlass_version() == "none"
    finally:
        arch_units._include_dirs.cache_clear()


def test_ninja_gives_the_unit_its_own_flags():
    plan = ninja.NinjaPlan("g++", "nvcc", ["-O3"], ["-O1", "-gencode=arch=compute_90,code=sm_90"], [],
                           [ninja.CompileStep(Path("/k/a.cu"), "a.o", True),
                            ninja.CompileStep(Path("/k/b_sm90a.cu"), "b.o", True, (), ("-O1", "-gencode=arch=compute_90a,code=sm_90a"))],
                           "k.so")
    text = ninja.render(plan)
    a, b = text.split("build a.o")[1].split("build b.o")
    assert "cuda_cflags" not in a  # the common flags
    assert "  cuda_cflags = -O1 -gencode=arch=compute_90a,code=sm_90a" in b


def _kernel_with_an_sm90a_unit(folder: Path) -> Path:
    folder.mkdir()
    (folder / "probe.h").write_text("#pragma once\nint probe_sm90a();\n")
    (folder / "probe.cpp").write_text(
        '#include <ATen/ops/full.h>\n#include "kwb_library.h"\n#include "probe.h"\n'
        "at::Tensor probe(const at::Tensor& x) {\n"
        "#ifdef KWB_WITH_CUDA\n  return at::full({1}, probe_sm90a(), x.options());\n#else\n  return at::full({1}, -1, x.options());\n#endif\n}\n"
        'KWB_LIBRARY(m) { m.def("probe(Tensor x) -> Tensor"); }\n'
        'KWB_LIBRARY_IMPL(m, CPU) { m.impl("probe", &probe); }\n')
    (folder / "probe_sm90a.cu").write_text(
        '#include "probe.h"\n#ifdef KWB_SM90A\n#include <cutlass/cutlass.h>\n'
        "int probe_sm90a() { return FAKE_CUTLASS; }\n#else\nint probe_sm90a() { return 0; }\n#endif\n")
    return folder


@pytest.mark.nvcc
@pytest.mark.parametrize("arch, built", [("9.0", 1), ("8.0", 0)])
def test_a_cuda_build_compiles_the_sm90a_unit_for_sm_90a_where_it_targets_9_0(fake_cutlass, monkeypatch, tmp_path, arch, built):
    import torch

    monkeypatch.setenv("KWB_CUDA_ARCH", arch)
    k = wb.load(_kernel_with_an_sm90a_unit(tmp_path / f"probe{arch[0]}"), device="cuda", build_directory=str(tmp_path / "cache"))
    assert k.probe(torch.zeros(1)).item() == built  # the host pass saw KWB_SM90A and the fake CUTLASS header
    text = (k.library_path.parent / "build-cuda" / "build.ninja").read_text()
    assert ("compute_90a,code=sm_90a" in text) == bool(built)
    assert k.info["config"]["versions"].get("cutlass") == ("9.8.7" if built else None)  # in the key where it is used


@pytest.mark.nvcc
def test_the_build_key_covers_the_units_own_flags(fake_cutlass, monkeypatch, tmp_path):
    """Two CUTLASS checkouts of one version are two keys: the unit's include folders are in it."""
    import shutil

    from workbench.jit import build_spec, builder
    from workbench.jit.sources import resolve

    monkeypatch.setenv("KWB_CUDA_ARCH", "9.0")
    source = resolve(_kernel_with_an_sm90a_unit(tmp_path / "probe"))
    first = builder.make_config(build_spec.build_spec(source, "cuda", tmp_path / "cache")).fingerprint()
    shutil.copytree(fake_cutlass, tmp_path / "other")
    monkeypatch.setenv("CUTLASS_PATH", str(tmp_path / "other"))
    second = builder.make_config(build_spec.build_spec(source, "cuda", tmp_path / "cache")).fingerprint()
    assert first["versions"]["cutlass"] == second["versions"]["cutlass"] == "9.8.7"
    assert first != second and first["unit_cuda_cflags"] != second["unit_cuda_cflags"]


@pytest.mark.nvcc
def test_a_side_by_side_build_gives_a_cutlass_kernel_a_compiler_a_unit(fake_cutlass, monkeypatch):
    monkeypatch.delenv("MAX_JOBS", raising=False)
    monkeypatch.setenv("KWB_CUDA_ARCH", "9.0")
    units = len([p for p in (wb.kernels_dir() / "linear_gelu").iterdir() if p.suffix in (".cpp", ".cu")])
    assert parallel._jobs("linear_gelu", "cuda", 2, 16) == units
    assert parallel._jobs("linear_gelu", "cuda", 2, 4) == 4  # never more than the machine's slots
    assert parallel._jobs("softmax", "cuda", 2, 16) == 2
    assert parallel._jobs("linear_gelu", "cpu", 2, 16) == 2
    monkeypatch.setenv("MAX_JOBS", "2")  # the user's word stands
    assert parallel._jobs("linear_gelu", "cuda", 2, 16) == 2
    monkeypatch.delenv("MAX_JOBS")
    monkeypatch.setenv("KWB_CUDA_ARCH", "8.0")
    assert parallel._jobs("linear_gelu", "cuda", 2, 16) == 2
