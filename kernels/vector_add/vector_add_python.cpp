// vector_add's Python entry: ops.py's public function calls it, and it calls the op through the
// dispatcher (autograd, fake tensors and dispatch modes all apply) with none of the Python
// layers of a torch.ops call. 2-core CPU, 2^20 fp32, caches flushed before each call, calls in
// turns: eager 717 us, the entry 723, torch.ops 778 (benchmarks/cpu_call_overhead.py). A unit
// of its own: pybind11's headers take 13 s to compile on that machine.
#include <torch/csrc/utils/pybind.h>

#include "kwb_library.h"

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  using VectorAddOp = at::Tensor(const at::Tensor&, const at::Tensor&);
  m.def(
      "vector_add",
      [](const at::Tensor& a, const at::Tensor& b) {
        static const auto op = kwb::typed_op<VectorAddOp>("vector_add");
        return op.call(a, b);
      },
      "a + b through the dispatcher", pybind11::arg("a"), pybind11::arg("b"),
      pybind11::call_guard<pybind11::gil_scoped_release>());  // as torch's own bindings: other threads run
}
