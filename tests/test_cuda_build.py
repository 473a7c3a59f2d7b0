"""CUDA sources compile, link and load on a machine without a GPU (nvcc is enough)."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.jit.sources import kernels_dir

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


def test_the_multiply_shift_divider_matches_the_modulo(tmp_path):
    """kwb::Divider32 (bias_gelu's flat index mod the row's vectors) against `%`, by its host
    build of the same arithmetic: divisors 1, powers of two and their neighbours, 2^31 - 1, and
    random ones; numerators 0, each side of the divisor's multiples, 2^31 - 1 and random ones."""
    import random
    import subprocess

    from workbench.jit import toolchain

    common = Path(wb.__file__).resolve().parent.parent / "kernels" / "common"
    (tmp_path / "div.cu").write_text(r"""
#include <cstdio>
#include <cstdlib>
#include "kwb_cuda.cuh"
int main(int argc, char** argv) {
  long bad = 0, checked = 0;
  for (int i = 1; i + 1 < argc; i += 2) {
    const uint32_t d = strtoul(argv[i], nullptr, 10), n = strtoul(argv[i + 1], nullptr, 10);
    const kwb::Divider32 div(d);
    for (uint32_t k = 0; k < 3; ++k) {
      const uint32_t x = n >= k ? n - k : n;
      ++checked;
      if (div.mod(x) != x % d) { ++bad; printf("d=%u n=%u: %u, not %u\n", d, x, div.mod(x), x % d); }
    }
  }
  printf("checked %ld, wrong %ld\n", checked, bad);
  return bad != 0;
}
""")
    exe = tmp_path / "div"
    subprocess.run([toolchain.nvcc_path(), "-std=c++17", f"-I{common}", str(tmp_path / "div.cu"), "-o", str(exe)],
                   check=True, capture_output=True)
    rng = random.Random(0)
    top = (1 << 31) - 1
    divisors = [1, 2, 3, 5, 7, 95, 141, 190, 384, top - 1, top] + [1 << k for k in range(1, 31)] + \
               [(1 << k) + e for k in range(2, 31) for e in (-1, 1)] + [rng.randrange(1, top) for _ in range(300)]
    pairs = []
    for d in divisors:
        for n in [0, 1, d - 1, d, d + 1, 2 * d, top - 1, top] + [rng.randrange(0, top) for _ in range(20)]:
            if 0 <= n <= top:
                pairs += [str(d), str(n)]
    out = subprocess.run([str(exe), *pairs], check=False, capture_output=True, text=True)
    assert out.returncode == 0, out.stdout[-2000:]
    assert ", wrong 0" in out.stdout


@pytest.mark.slow
@pytest.mark.parametrize("cu", sorted(p.name for p in kernels_dir().glob("*/*.cu")))
def test_every_shipped_cu_compiles_for_a_pre_ampere_gpu(cu, tmp_path):
    """sm_75 (a T4): kernels that use sm_80+ PTX (cp.async, L2 cache hints) must keep a fallback,
    or a user who builds for an older GPU cannot build the kernel at all."""
    import subprocess

    from workbench.jit import toolchain

    source = next(kernels_dir().glob(f"*/{cu}"))
    include = Path(wb.__file__).resolve().parent / "jit" / "include"
    cmd = [str(toolchain.nvcc_path()), "-arch=sm_75", "-O1", "-std=c++17", f"-I{kernels_dir() / 'common'}", f"-I{include}",
           "-c", str(source), "-o", str(tmp_path / "unit.o")]
    done = subprocess.run(cmd, capture_output=True, text=True, timeout=600, check=False)
    assert done.returncode == 0, done.stderr[-2000:]
