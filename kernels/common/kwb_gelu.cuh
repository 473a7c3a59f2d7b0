// GELU and its derivative on the device, in the tanh and the exact erf forms, for
// bias_gelu and linear_gelu. Math in fp32 (fp64 for double data), written so that no step
// cancels:
//   tanh form:  0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
//               u = sqrt(2/pi) (x + 0.044715 x^3)
//               d/dx = s + x s (1 - s) 2 u',  s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//               with 1 - s taken as e s, e = exp(-2u): 1 - s cancels for x above ~2, and x 2 u'
//               (~10 at x = 3) scaled its rounding to 2e-6 an element in fp32 (float64
//               reference, numpy), which 8192 rows summed into a bias gradient 1e-4 off
//               (bias_gelu's fp32 step on the H100, seed 1999399800); as e s: 2e-7
//   erf form:   0.5 x (1 + erf(x / sqrt 2));  d/dx = Phi(x) + x phi(x)
// One exp per element instead of tanh's; for x below about -10 (fp32), exp(-2u) is inf and both
// the value and the gradient come out as (signed) zero, as they should (e s is then inf * 0,
// which the derivative takes as 1 - s = 1).
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
    const A e = exp_<kFast>(A(-2) * u);
    const A s = div_<kFast>(A(1), A(1) + e);
    const A es = e * s;                          // 1 - s, without the subtraction
    const A one_minus_s = es < A(1) ? es : A(1);  // e = inf: NaN, where 1 - s = 1
    return s + v * s * one_minus_s * A(2) * du;
  } else {
    return A(0.5) * (A(1) + erf_(v * A(0.7071067811865476))) +
           v * exp_<kFast>(A(-0.5) * v * v) * A(0.3989422804014327);
  }
}

}  // namespace
}  // namespace kwb
