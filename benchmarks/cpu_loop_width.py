"""The vector width of a loop the compiler vectorizes itself, on an AVX-512 CPU: vector_add's loop
(`c[i] = a[i] + b[i]`, __restrict__ pointers, as kernels/vector_add/vector_add.cpp) built with
ATen's AVX-512 flags at 512-bit and at 256-bit preference, beside ATen's own add_out, each writing
into one preallocated output, out of cache (2^22 fp32: 48 MB a call against a 32 MB L3). Each
round calls every row once in a new random order; median of N and the p20-p80 spread.

    python benchmarks/cpu_loop_width.py [--numel 4194304] [--threads 1] [--calls 150]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from torch.utils.cpp_extension import load_inline

from workbench.jit import toolchain

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>

static void span(const float* __restrict__ a, const float* __restrict__ b, float* __restrict__ c, int64_t s,
                 int64_t e) {
  for (int64_t i = s; i < e; ++i) c[i] = a[i] + b[i];
}

at::Tensor loop_into(const at::Tensor& a, const at::Tensor& b, at::Tensor c) {
  const float* pa = a.const_data_ptr<float>();
  const float* pb = b.const_data_ptr<float>();
  float* pc = c.mutable_data_ptr<float>();
  at::parallel_for(0, a.numel(), 32768, [=](int64_t s, int64_t e) { span(pa, pb, pc, s, e); });
  return c;
}
"""


def build(width: int):
    flags = [f for f in toolchain.cpu_capability_flags("AVX512") if not f.startswith("-mprefer-vector-width")]
    return load_inline(f"kwb_loop_width_{width}", cpp_sources=SOURCE, functions=["loop_into"],
                       extra_cflags=["-O3", "-fopenmp", *flags, f"-mprefer-vector-width={width}"],
                       extra_ldflags=["-fopenmp"])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--numel", type=int, default=1 << 22)
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--calls", type=int, default=150)
    args = parser.parse_args()
    if torch.backends.cpu.get_cpu_capability() != "AVX512":
        raise SystemExit(f"cpu_loop_width: needs an AVX-512 CPU (torch picked {torch.backends.cpu.get_cpu_capability()})")
    torch.set_num_threads(args.threads)
    loops = {width: build(width) for width in (512, 256)}
    a, b, c = torch.randn(args.numel), torch.randn(args.numel), torch.empty(args.numel)
    rows = {"ATen add_out": lambda: torch.add(a, b, out=c),
            "loop, 512-bit": lambda: loops[512].loop_into(a, b, c),
            "loop, 256-bit": lambda: loops[256].loop_into(a, b, c)}
    for fn in rows.values():
        fn()
        assert torch.equal(c, a + b)
    times = {name: [] for name in rows}
    for _ in range(args.calls):
        order = list(rows)
        random.shuffle(order)
        for name in order:
            start = time.perf_counter()
            rows[name]()
            times[name].append(time.perf_counter() - start)
    print(f"{'':24s} median       p20-p80   (numel {args.numel}, {args.threads} thread(s), torch {torch.__version__})")
    for name, t in times.items():
        t = sorted(t)
        print(f"{name:24s} {statistics.median(t) * 1e6:7.0f}  {t[len(t) // 5] * 1e6:6.0f}-{t[4 * len(t) // 5] * 1e6:.0f}  us")


if __name__ == "__main__":
    main()
