// polynomial_activation CUDA kernels: y = x^2 + x + 1 and dL/dx = dL/dy * (2x + 1).
//
// Eager PyTorch runs x*x, + x, + 1 as three kernels that each read and write the whole tensor
// (6 passes over memory); fused, it is one read and one write (predicted and measured:
// kernels/polynomial_activation/NOTES.md). The arithmetic (two FMAs an element) is free next to
// the memory traffic, so the kernel is kwb::elementwise.
#include "kwb_elementwise.cuh"
#include "polynomial_activation.h"

namespace {

template <typename T>
struct Polynomial {
  __device__ T operator()(T x) const {
    using A = kwb::acc_t<T>;
    const A v = kwb::to_acc<A>(x);
    return kwb::from_acc<T>(v * v + v + A(1));  // the eager order: (x*x + x) + 1
  }
};

template <typename T>
struct PolynomialBackward {
  __device__ T operator()(T grad, T x) const {
    using A = kwb::acc_t<T>;
    return kwb::from_acc<T>(kwb::to_acc<A>(grad) * (A(2) * kwb::to_acc<A>(x) + A(1)));
  }
};

}  // namespace

const char* polynomial_activation_cuda(const PolynomialParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    kwb::MapArgs<T, 1> args{{static_cast<const T*>(p.x)}, static_cast<T*>(p.y), p.n};
    return kwb::elementwise(args, Polynomial<T>{}, stream);
  });
}

const char* polynomial_activation_backward_cuda(const PolynomialBackwardParams& p, kwb::DType dtype,
                                                cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    kwb::MapArgs<T, 2> args{{static_cast<const T*>(p.grad), static_cast<const T*>(p.x)},
                            static_cast<T*>(p.grad_x), p.n};
    return kwb::elementwise(args, PolynomialBackward<T>{}, stream);
  });
}
