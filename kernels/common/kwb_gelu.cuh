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

// kFast (fp16 and bf16 data): the hardware's exp2 and reciprocal (__expf, __fdividef), a few
// ulps of fp32 where the output keeps 8 or 11 bits; with expf and an IEEE division the bf16 tanh
// form was compute-bound (kernels/bias_gelu/NOTES.md). fp32 and fp64 keep the library functions.
template <bool kFast> __device__ __forceinline__ float exp_(float v) { return kFast ? __expf(v) : expf(v); }
template <bool kFast> __device__ __forceinline__ double exp_(double v) { return exp(v); }
template <bool kFast> __device__ __forceinline__ float div_(float a, float b) { return kFast ? __fdividef(a, b) : a / b; }
template <bool kFast> __device__ __forceinline__ double div_(double a, double b) { return a / b; }
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
