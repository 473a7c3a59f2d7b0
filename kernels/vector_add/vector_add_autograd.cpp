// vector_add's autograd kernel, in C++: a training step runs no Python between the forward and
// the backward (2-core CPU, 2^20 fp32, cold caches: 0.99-1.04x eager's step, where
// register_autograd's Python kernel ran 0.86x). Its own unit, as is the Python entry
// (vector_add_python.cpp): custom_function.h takes 13 s to compile on the 2-core machine, and
// beside pybind11's headers in one unit it was the longest of `kwb build --all` on the H100
// (25.2 s, against 13.0 s for the next).
#include <torch/csrc/autograd/custom_function.h>

#include "kwb_library.h"

namespace {

using VectorAddOp = at::Tensor(const at::Tensor&, const at::Tensor&);

at::Tensor below_autograd(const at::Tensor& a, const at::Tensor& b) {
  static const auto op = kwb::typed_op<VectorAddOp>("vector_add");
  at::AutoDispatchBelowADInplaceOrView guard;
  return op.call(a, b);
}

// d(a + b)/da = d(a + b)/db = 1
struct VectorAdd : torch::autograd::Function<VectorAdd> {
  static at::Tensor forward(torch::autograd::AutogradContext*, const at::Tensor& a, const at::Tensor& b) {
    return below_autograd(a, b);
  }
  static torch::autograd::variable_list backward(torch::autograd::AutogradContext*, torch::autograd::variable_list grads) {
    return {grads[0], grads[0]};
  }
};

// Function::apply only where a gradient can flow: backward's (grad mode on, an input that
// requires it), or forward mode's tangents, which no_grad leaves on and Function::apply refuses
// by name (VectorAdd has no jvp); elsewhere straight below autograd.
bool has_tangent(const at::Tensor& t) { return t._fw_grad(/*level=*/0).defined(); }

at::Tensor vector_add_autograd(const at::Tensor& a, const at::Tensor& b) {
  const bool backward = at::GradMode::is_enabled() && (a.requires_grad() || b.requires_grad());
  if (backward || has_tangent(a) || has_tangent(b)) return VectorAdd::apply(a, b);
  return below_autograd(a, b);
}

}  // namespace

KWB_LIBRARY_IMPL(m, Autograd) {
  m.impl("vector_add", &vector_add_autograd);
}
