"""Where kwb's vector_add call spends its time over eager `a + b` on the 2-core CPU with cold
caches (a 64 MiB write before each call, the rows in a new random order each round): the same
entry and op reached through each layer in turn, side by side.

    python benchmarks/cpu_entry_paths.py [--calls 200] [--numel 1048576]

Rows: eager; kwb's op called from C++ through the dispatcher (its Autograd kernel and all), and
below autograd; a copy of kwb's public entry (py::args, the plain-call test, the op) built by
torch's load_inline, and a typed one; kwb's public function looked up on the kernel at each call
(`k.vector_add(a, b)`), bound once, and through k.module. At f30e828's parent, 4096 elements:
the entry copy 24.4 us, kwb's function bound 24.8, looked up at each call 47.5-51.0, eager
28.0-33.8: the lookup (Kernel.__getattr__) was the cost, which kwb now pays once.
"""
from __future__ import annotations

import argparse
import random
import time

import torch
from torch.utils.cpp_extension import load_inline

import workbench as wb
from workbench.jit import toolchain

SOURCE = r"""
#include <ATen/PythonTorchFunctionTLS.h>
#include <torch/csrc/autograd/python_variable.h>
#include <torch/extension.h>

namespace py = pybind11;
using AddOp = at::Tensor(const at::Tensor&, const at::Tensor&);

static c10::TypedOperatorHandle<AddOp> find(const std::string& qualname) {
  return c10::Dispatcher::singleton().findSchemaOrThrow(qualname.c_str(), "").typed<AddOp>();
}
static std::string& qualname() {
  static std::string name;
  return name;
}
void set_op(const std::string& name) { qualname() = name; }

// kwb's op through the dispatcher from C++, GIL released, optionally below autograd
at::Tensor op_call(const at::Tensor& a, const at::Tensor& b, bool below) {
  static const auto op = find(qualname());
  py::gil_scoped_release no_gil;
  if (below) {
    at::AutoDispatchBelowADInplaceOrView guard;
    return op.call(a, b);
  }
  return op.call(a, b);
}

// a copy of kwb's public entry (kernels/vector_add/vector_add_python.cpp)
py::object entry_copy(const py::args& args, const py::kwargs& kwargs) {
  if (!(args.size() == 2 && kwargs.empty() && THPVariable_CheckExact(args[0].ptr()) &&
        THPVariable_CheckExact(args[1].ptr()) && !at::impl::torch_function_mode_enabled()))
    throw std::runtime_error("entry_copy: two plain tensors only");
  static const auto op = find(qualname());
  const at::Tensor& a = THPVariable_Unpack(args[0].ptr());
  const at::Tensor& b = THPVariable_Unpack(args[1].ptr());
  at::Tensor out;
  {
    py::gil_scoped_release no_gil;
    out = op.call(a, b);
  }
  PyObject* wrapped = THPVariable_Wrap(std::move(out));
  if (wrapped == nullptr) throw py::error_already_set();
  return py::reinterpret_steal<py::object>(wrapped);
}

// the same, typed arguments
at::Tensor entry_typed(const at::Tensor& a, const at::Tensor& b) { return op_call(a, b, false); }
"""


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--calls", type=int, default=200)
    parser.add_argument("--numel", type=int, default=1 << 20)
    args = parser.parse_args()
    flags = toolchain.cpu_capability_flags(torch.backends.cpu.get_cpu_capability())
    m = load_inline("kwb_cpu_entry_paths", cpp_sources=SOURCE, functions=["set_op", "op_call", "entry_copy", "entry_typed"],
                    extra_cflags=["-O3", *flags])
    k = wb.load("vector_add", device="cpu", verbose=False)
    m.set_op(f"{k.namespace}::vector_add")
    bound = k.vector_add
    junk = torch.empty(16 << 20)
    print(f"numel {args.numel}, {torch.get_num_threads()} threads, torch {torch.__version__}; median us over {args.calls} "
          "calls, cold caches")
    for dtype in (torch.float32, torch.float64):
        a, b = torch.randn(args.numel, dtype=dtype), torch.randn(args.numel, dtype=dtype)
        rows = {"eager a + b": lambda a=a, b=b: a + b,
                "kwb op from C++": lambda a=a, b=b: m.op_call(a, b, False),
                "kwb op from C++, below autograd": lambda a=a, b=b: m.op_call(a, b, True),
                "entry copy (args, kwargs)": lambda a=a, b=b: m.entry_copy(a, b),
                "entry copy, typed": lambda a=a, b=b: m.entry_typed(a, b),
                "k.vector_add(a, b)": lambda a=a, b=b: k.vector_add(a, b),
                "k.vector_add bound once": lambda a=a, b=b: bound(a, b),
                "k.module.vector_add": lambda a=a, b=b: k.module.vector_add(a, b)}
        times: dict[str, list[float]] = {name: [] for name in rows}
        for _ in range(args.calls):
            for name in random.sample(list(rows), len(rows)):
                junk.fill_(1.0)
                start = time.perf_counter()
                rows[name]()
                times[name].append(time.perf_counter() - start)
        print(str(dtype).removeprefix("torch."))
        for name, samples in times.items():
            samples.sort()
            print(f"  {name:34s} {samples[len(samples) // 2] * 1e6:8.1f}")


if __name__ == "__main__":
    main()
