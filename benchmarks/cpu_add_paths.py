"""Where vector_add's CPU rows at 2^20 lose to eager `a + b` (2-core machine, cold caches): the
same add loop reached four ways, side by side: eager; the loop alone in a load_inline module,
built with kwb's flags at 256-bit (as vector_add.cpp) and 512-bit vector preference and as
at::vec::map2 (ATen's own vectors); kwb's public function (its C++ entry, the dispatcher, its
Autograd kernel, the checks, the same loop); and kwb's op below autograd. Each round calls every
row once in a new random order, a 64 MiB write before each call; median of N.

    python benchmarks/cpu_add_paths.py [--numel 1048576] [--calls 300]
"""
from __future__ import annotations

import argparse
import random
import statistics
import time

import torch
from torch.utils.cpp_extension import load_inline

import workbench as wb
from workbench.jit import toolchain

SOURCE = r"""
#include <torch/extension.h>
#include <ATen/Parallel.h>
#include <ATen/cpu/vec/functional.h>
#include <ATen/cpu/vec/vec.h>

template <typename T>
static void span(const T* __restrict__ a, const T* __restrict__ b, T* __restrict__ c, int64_t s, int64_t e) {
  for (int64_t i = s; i < e; ++i) c[i] = a[i] + b[i];
}

at::Tensor loop(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor c = at::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "loop", [&] {
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* pc = c.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, a.numel(), 32768, [=](int64_t s, int64_t e) { span(pa, pb, pc, s, e); });
  });
  return c;
}

at::Tensor vec(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor c = at::empty_like(a);
  AT_DISPATCH_FLOATING_TYPES(a.scalar_type(), "vec", [&] {
    using Vec = at::vec::Vectorized<scalar_t>;
    const scalar_t* pa = a.const_data_ptr<scalar_t>();
    const scalar_t* pb = b.const_data_ptr<scalar_t>();
    scalar_t* pc = c.mutable_data_ptr<scalar_t>();
    at::parallel_for(0, a.numel(), 32768, [=](int64_t s, int64_t e) {
      at::vec::map2([](Vec x, Vec y) { return x + y; }, pc + s, pa + s, pb + s, e - s);
    });
  });
  return c;
}
"""


def build(width: int):
    capability = torch.backends.cpu.get_cpu_capability()
    flags = [f for f in toolchain.cpu_capability_flags(capability) if not f.startswith("-mprefer-vector-width")]
    return load_inline(f"kwb_add_paths_{width}", cpp_sources=SOURCE, functions=["loop", "vec"],
                       extra_cflags=["-O3", "-fopenmp", *flags, f"-mprefer-vector-width={width}"],
                       extra_ldflags=["-fopenmp"])


def rows_for(a: torch.Tensor, b: torch.Tensor, m256, m512, k) -> dict:
    op = k.op("vector_add").default

    def below_autograd():
        with torch._C._AutoDispatchBelowAutograd():
            return op(a, b)

    return {"eager a + b": lambda: a + b, "loop, 256-bit (load_inline)": lambda: m256.loop(a, b),
            "loop, 512-bit (load_inline)": lambda: m512.loop(a, b), "at::vec::map2 (load_inline)": lambda: m256.vec(a, b),
            "kwb public function": lambda: k.vector_add(a, b), "kwb op below autograd": below_autograd}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--numel", type=int, default=1 << 20)
    parser.add_argument("--calls", type=int, default=300)
    args = parser.parse_args()
    m256, m512 = build(256), build(512)
    k = wb.load("vector_add", device="cpu")
    flush = torch.empty(64 << 20, dtype=torch.uint8)
    print(f"numel {args.numel}, {torch.get_num_threads()} threads, torch {torch.__version__}, "
          f"{torch.backends.cpu.get_cpu_capability()}; median us over {args.calls} calls, cold caches")
    for dtype in (torch.float32, torch.float64):
        a, b = torch.randn(args.numel, dtype=dtype), torch.randn(args.numel, dtype=dtype)
        rows = rows_for(a, b, m256, m512, k)
        for fn in rows.values():
            torch.testing.assert_close(fn(), a + b)
        times = {label: [] for label in rows}
        order = list(rows)
        for _ in range(args.calls):
            random.shuffle(order)
            for label in order:
                flush.fill_(1)
                start = time.perf_counter()
                rows[label]()
                times[label].append((time.perf_counter() - start) * 1e6)
        print(str(dtype).removeprefix("torch."))
        for label, t in times.items():
            print(f"  {label:30s} {statistics.median(t):8.1f}")


if __name__ == "__main__":
    main()
