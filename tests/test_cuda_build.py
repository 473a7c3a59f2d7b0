"""CUDA sources compile, link and load on a machine without a GPU (nvcc is enough)."""
from __future__ import annotations

import pytest
import torch

import workbench as wb

pytestmark = pytest.mark.nvcc


@pytest.mark.parametrize("name", ["relu_scale", "vector_add"])
def test_cuda_build_registers_cpu_and_cuda_implementations(name):
    k = wb.load(name, device="cuda")
    assert k.device == "cuda"
    for op in k.ops:
        for key in ("CPU", "CUDA"):
            assert torch._C._dispatch_has_kernel_for_dispatch_key(f"{k.namespace}::{op}", key), (op, key)
    flags = " ".join(k.info["config"]["cuda_cflags"])
    assert "-gencode=arch=compute_90,code=sm_90" in flags and "compute_50" not in flags
    assert k.info["config"]["versions"]["nvcc"].startswith("Cuda compilation tools")


@pytest.mark.slow
def test_the_cuda_translation_unit_includes_no_torch_header():
    k = wb.load("relu_scale", device="cuda")
    from workbench.jit.ninja import parse_depfile

    deps = parse_depfile(k.library_path.parent / "build-cuda" / "relu_scale.cuda.o.d")
    assert deps and not [d for d in deps if "/torch/" in d], "relu_scale.cu must stay free of torch headers"


def test_nvcc_errors_map_to_the_users_cu_file(tmp_path):
    src = tmp_path / "bad"
    src.mkdir()
    (src / "bad.cpp").write_text('#include "kwb_library.h"\nKWB_LIBRARY(m) {}\n')
    (src / "bad.cu").write_text("__global__ void k(float* y) {\n  y[0] = missing_name;\n}\n")
    with pytest.raises(wb.BuildError) as info:
        wb.load(src, device="cuda")
    assert f"{src / 'bad.cu'}:2:10: error: identifier \"missing_name\" is undefined" in str(info.value)


def test_cuda_edit_recompiles_only_the_cu(tmp_path):
    import shutil

    folder = tmp_path / "relu_scale"
    shutil.copytree(wb.kernels_dir() / "relu_scale", folder)
    k1 = wb.load(folder, device="cuda")
    cpp_obj = k1.library_path.parent / "build-cuda" / "relu_scale.o"
    before = cpp_obj.stat().st_mtime_ns
    cu = folder / "relu_scale.cu"
    cu.write_text(cu.read_text().replace("v * alpha", "v * alpha * kwb::acc_t<T>(2)"))
    k2 = wb.load(folder, device="cuda")
    assert k2.key != k1.key
    assert cpp_obj.stat().st_mtime_ns == before, "a .cu edit recompiled the binding .cpp"
