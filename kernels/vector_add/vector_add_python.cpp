// vector_add's autograd and its Python entry, in C++: ops.py's public function calls the entry,
// which calls the op through the dispatcher (autograd, fake tensors and modes all apply) with
// none of the Python layers a torch.ops call goes through. On the 2-core CPU, 2^20 fp32
// elements, caches flushed before each call: eager 709-782 us, the entry 716-808, torch.ops with
// this autograd 777-860, torch.ops with register_autograd's Python kernel 877-932
// (benchmarks/cpu_call_overhead.py). Its own unit: custom_function.h and pybind11 double the
// compile of vector_add.cpp (10.7 -> 20.2 s), and this one compiles beside it.
#include <torch/csrc/autograd/custom_function.h>
#include <torch/csrc/utils/pybind.h>

#include "kwb_library.h"

namespace {

using VectorAddOp = at::Tensor(const at::Tensor&, const at::Tensor&);

const c10::TypedOperatorHandle<VectorAddOp>& vector_add_op() {
  static const auto op = kwb::typed_op<VectorAddOp>("vector_add");
  return op;
}

// d(a + b)/da = d(a + b)/db = 1
struct VectorAdd : torch::autograd::Function<VectorAdd> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& a, const at::Tensor& b) {
    at::AutoDispatchBelowADInplaceOrView below_autograd;
    return vector_add_op().call(a, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list grads) {
    return {grads[0], grads[0]};
  }
};

at::Tensor vector_add_autograd(const at::Tensor& a, const at::Tensor& b) { return VectorAdd::apply(a, b); }

}  // namespace

KWB_LIBRARY_IMPL(m, Autograd) {
  m.impl("vector_add", &vector_add_autograd);
}

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.def("vector_add", [](const at::Tensor& a, const at::Tensor& b) { return vector_add_op().call(a, b); },
        "a + b through the dispatcher", pybind11::arg("a"), pybind11::arg("b"),
        pybind11::call_guard<pybind11::gil_scoped_release>());  // as torch's own bindings: other threads run
}
