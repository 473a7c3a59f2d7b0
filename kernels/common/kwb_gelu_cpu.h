// GELU and its derivative on the CPU, in the tanh and the exact erf forms, for bias_gelu and
// linear_gelu's CPU implementations: the same formulas as kwb_gelu.cuh (tanh form written as
// x * sigmoid(2u), one exp, no cancellation), in the data's own precision.
#pragma once
#include <cmath>

namespace kwb {

template <typename A>
A gelu_cpu(A v, bool tanh_form) {
  if (tanh_form) {
    const A u = A(0.7978845608028654) * (v + A(0.044715) * v * v * v);
    return v / (A(1) + std::exp(A(-2) * u));
  }
  return A(0.5) * v * (A(1) + std::erf(v * A(0.7071067811865476)));
}

template <typename A>
A gelu_grad_cpu(A v, bool tanh_form) {
  if (tanh_form) {
    const A u = A(0.7978845608028654) * (v + A(0.044715) * v * v * v);
    const A du = A(0.7978845608028654) * (A(1) + A(3 * 0.044715) * v * v);
    const A s = A(1) / (A(1) + std::exp(A(-2) * u));
    return s + v * s * (A(1) - s) * A(2) * du;
  }
  return A(0.5) * (A(1) + std::erf(v * A(0.7071067811865476))) + v * std::exp(A(-0.5) * v * v) * A(0.3989422804014327);
}

}  // namespace kwb
