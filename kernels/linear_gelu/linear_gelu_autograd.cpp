// linear_gelu's autograd kernels, in C++: a training step runs no Python between the forward and
// the backward (register_autograd's kernel is a Python autograd.Function). On the 2-core CPU,
// fp32 erf, 32 x 768 -> 3072, cold caches, the step still costs ~550 us more than its two ops
// called directly: autograd's own, which a step of 16 floats costs too (NOTES.md, "The CPU
// step's call path (round 14)"). Its own unit, as vector_add's: custom_function.h takes 13 s to
// compile on the 2-core machine.
#include <torch/csrc/autograd/custom_function.h>

#include "kwb_library.h"

namespace {

using torch::autograd::AutogradContext;
using torch::autograd::variable_list;

using YOp = at::Tensor(const at::Tensor&, const at::Tensor&, const at::Tensor&, c10::string_view);
using ForwardOp = std::tuple<at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                     c10::string_view);
using BackwardOp = std::tuple<at::Tensor, at::Tensor, at::Tensor>(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                                                  const at::Tensor&, c10::string_view);

const c10::TypedOperatorHandle<YOp>& y_op() {
  static const auto op = kwb::typed_op<YOp>("linear_gelu");
  return op;
}
const c10::TypedOperatorHandle<ForwardOp>& forward_op() {
  static const auto op = kwb::typed_op<ForwardOp>("linear_gelu_forward");
  return op;
}
const c10::TypedOperatorHandle<BackwardOp>& backward_op() {
  static const auto op = kwb::typed_op<BackwardOp>("linear_gelu_backward");
  return op;
}

// The backward from pre = x W^T + b: grad_x, grad_weight, grad_bias, and none for approximate.
variable_list backward_from(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& pre,
                            const std::string& approximate) {
  auto [grad_x, grad_weight, grad_bias] = backward_op().call(grad, x, weight, pre, approximate);
  return {grad_x, grad_weight, grad_bias, at::Tensor()};
}

// (y, pre): pre is kept for the backward and has no gradient of its own.
struct LinearGeluForward : torch::autograd::Function<LinearGeluForward> {
  static variable_list forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                               c10::string_view approximate) {
    at::Tensor y, pre;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      std::tie(y, pre) = forward_op().call(x, weight, bias, approximate);
    }
    ctx->mark_non_differentiable({pre});
    ctx->set_materialize_grads(false);
    ctx->save_for_backward({x, weight, pre});
    ctx->saved_data["approximate"] = std::string(approximate);
    return {y, pre};
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    if (!grads[0].defined()) return {at::Tensor(), at::Tensor(), at::Tensor(), at::Tensor()};
    const variable_list saved = ctx->get_saved_variables();
    return backward_from(grads[0], saved[0], saved[1], saved[2], ctx->saved_data["approximate"].toStringRef());
  }
};

// y alone (the op called directly with tensors that need gradients): its backward recomputes
// pre, one extra matrix product, rather than keep it in the forward.
struct LinearGeluY : torch::autograd::Function<LinearGeluY> {
  static at::Tensor forward(AutogradContext* ctx, const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                            c10::string_view approximate) {
    at::Tensor y;
    {
      at::AutoDispatchBelowADInplaceOrView guard;
      y = y_op().call(x, weight, bias, approximate);
    }
    ctx->save_for_backward({x, weight, bias});
    ctx->saved_data["approximate"] = std::string(approximate);
    return y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grads) {
    const variable_list saved = ctx->get_saved_variables();
    const std::string approximate = ctx->saved_data["approximate"].toStringRef();
    at::Tensor pre;
    {  // pre is a constant of the backward, even under create_graph
      at::AutoDispatchBelowADInplaceOrView guard;
      pre = std::get<1>(forward_op().call(saved[0], saved[1], saved[2], approximate));
    }
    return backward_from(grads[0], saved[0], saved[1], pre, approximate);
  }
};

// Function::apply only where a gradient can flow: backward's (grad mode on, an input that
// requires it), or forward mode's tangents, which no_grad leaves on and Function::apply refuses
// by name (neither Function has a jvp); elsewhere straight below autograd.
bool has_tangent(const at::Tensor& t) { return t._fw_grad(/*level=*/0).defined(); }

bool through_autograd(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (at::GradMode::is_enabled() && (x.requires_grad() || weight.requires_grad() || bias.requires_grad())) return true;
  return has_tangent(x) || has_tangent(weight) || has_tangent(bias);
}

std::tuple<at::Tensor, at::Tensor> linear_gelu_forward_autograd(const at::Tensor& x, const at::Tensor& weight,
                                                                const at::Tensor& bias, c10::string_view approximate) {
  if (through_autograd(x, weight, bias)) {
    const variable_list out = LinearGeluForward::apply(x, weight, bias, approximate);
    return {out[0], out[1]};
  }
  at::AutoDispatchBelowADInplaceOrView guard;
  return forward_op().call(x, weight, bias, approximate);
}

at::Tensor linear_gelu_autograd(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                c10::string_view approximate) {
  if (through_autograd(x, weight, bias)) return LinearGeluY::apply(x, weight, bias, approximate);
  at::AutoDispatchBelowADInplaceOrView guard;
  return y_op().call(x, weight, bias, approximate);
}

}  // namespace

KWB_LIBRARY_IMPL(m, Autograd) {
  m.impl("linear_gelu", &linear_gelu_autograd);
  m.impl("linear_gelu_forward", &linear_gelu_forward_autograd);
}
