// GELU and its derivative on the device, in the tanh and the exact erf forms, for
// bias_gelu and linear_gelu. Math in fp32 (fp64 for double data), written so that no step
// cancels:
//   tanh form:  0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
//               u = sqrt(2/pi) (x + 0.044715 x^3)
//               d/dx = s + x s (1 - s) 2 u',  s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//   erf form:   0.5 x (1 + erf(x / sqrt 2));  d/dx = Phi(x) + x phi(x)
// One exp per element instead of tanh's; for x below about -9, exp(-2u) is inf and both
// the value and the gradient come out as (signed) zero, as they should.
#pragma once
#include "kwb_cuda.cuh"

namespace kwb {
namespace {

__device__ __forceinline__ float erf_(float v) { return erff(v); }
__device__ __forceinline__ double erf_(double v) { return erf(v); }

template <bool kTanh, bool kFast, typename A>
__device__ __forceinline__ A gelu(A v) {
  if constexpr (kTanh) {
    const A u = A(0.7978845608028654) * (v + A(0.044715) * v * v * v);
    return div_<kFast>(v, A(1) + exp_<kFast>(A(-2) * u));
  } else {
    return A(0.5) * v * (A(1) + erf_(v * A(0.7071067811865476)));
  }
}

template <bool kTanh, bool kFast, typename A>
__device__ __forceinline__ A gelu_grad(A v) {
  if constexpr (kTanh) {
    const A u = A(0.7978845608028654) * (v + A(0.044715) * v * v * v);
    const A du = A(0.7978845608028654) * (A(1) + A(3 * 0.044715) * v * v);
    const A s = div_<kFast>(A(1), A(1) + exp_<kFast>(A(-2) * u));
    return s + v * s * (A(1) - s) * A(2) * du;
  } else {
    return A(0.5) * (A(1) + erf_(v * A(0.7071067811865476))) +
           v * exp_<kFast>(A(-0.5) * v * v) * A(0.3989422804014327);
  }
}

}  // namespace
}  // namespace kwb
