"""What a C++ autograd kernel would save on kwb's CPU call path: vector_add's loop registered as a
custom op with its Autograd kernel in C++ (torch::autograd::Function), timed cold beside eager
`a + b` and kwb's vector_add (ops.py, then register_autograd's Python kernel), forward and
training step, a 64 MiB write before each call, interleaved; median of 37.

    python benchmarks/cpu_cpp_autograd.py [NUMEL]      # default 1024

2-core AMD EPYC, torch 2.14.1, 2026-11-27, NUMEL 1024, two runs beside a CI run on the same
cores (so every number is inflated; the order held in both), us: eager 115 / 125, kwb 262 /
275, the C++ autograd op 167 / 179; training step eager 636 / 669, kwb 882 / 903, C++ autograd
644 / 709.
"""
import statistics
import sys
import time

import torch
import torch.utils.cpp_extension as ce

import workbench as wb
from workbench.harness.benchmark import _training_step

SRC = r'''
#include <ATen/Parallel.h>
#include <torch/library.h>
#include <torch/csrc/autograd/custom_function.h>
namespace {
at::Tensor add_impl(const at::Tensor& a, const at::Tensor& b) {
  at::Tensor c = at::empty(a.sizes(), a.options());
  const float* pa = a.const_data_ptr<float>(); const float* pb = b.const_data_ptr<float>(); float* pc = c.mutable_data_ptr<float>();
  at::parallel_for(0, a.numel(), 32768, [=](int64_t s, int64_t e) { for (int64_t i = s; i < e; ++i) pc[i] = pa[i] + pb[i]; });
  return c;
}
class AddFn : public torch::autograd::Function<AddFn> {
 public:
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& a, const at::Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView guard;
    static auto op = c10::Dispatcher::singleton().findSchemaOrThrow("proto::vadd", "").typed<at::Tensor(const at::Tensor&, const at::Tensor&)>();
    return op.call(a, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list g) { return {g[0], g[0]}; }
};
at::Tensor add_autograd(const at::Tensor& a, const at::Tensor& b) { return AddFn::apply(a, b); }
}
TORCH_LIBRARY(proto, m) { m.def("vadd(Tensor a, Tensor b) -> Tensor"); }
TORCH_LIBRARY_IMPL(proto, CPU, m) { m.impl("vadd", add_impl); }
TORCH_LIBRARY_IMPL(proto, Autograd, m) { m.impl("vadd", add_autograd); }
'''


def main() -> None:
    t = time.perf_counter()
    ce.load_inline("proto_vadd", cpp_sources=SRC, is_python_module=False, extra_cflags=["-O3", "-mavx2"], verbose=False)
    print(f"built in {time.perf_counter() - t:.1f} s", flush=True)
    kv = wb.load("vector_add", device="cpu")
    op = torch.ops.proto.vadd.default
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1024
    a = torch.randn(n); b = torch.randn(n); g = torch.randn(n)
    torch.testing.assert_close(op(a, b), a + b)
    flush = torch.empty(64 << 20, dtype=torch.uint8)
    fns = {"eager": lambda: torch.add(a, b), "kwb public": lambda: kv.vector_add(a, b), "C++ autograd op": lambda: op(a, b)}
    steps = {"eager step": _training_step(torch.add, (0, 1), [g]), "kwb step": _training_step(kv.vector_add, (0, 1), [g]),
             "C++ autograd step": _training_step(op, (0, 1), [g])}
    res = {k: [] for k in list(fns) + list(steps)}
    for _ in range(40):
        for k, f in fns.items():
            flush.fill_(1); t = time.perf_counter(); f(); res[k].append((time.perf_counter() - t) * 1e6)
        for k, s in steps.items():
            flush.fill_(1); t = time.perf_counter(); s(a, b); res[k].append((time.perf_counter() - t) * 1e6)
    print(n, {k: round(statistics.median(v[3:])) for k, v in res.items()})


if __name__ == "__main__":
    main()
