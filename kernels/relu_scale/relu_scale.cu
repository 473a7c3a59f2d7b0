// relu_scale CUDA kernels: y = max(x, 0) * alpha and its gradient, one read and one write
// per element (8 bytes per fp32 element; predicted time: kernels/relu_scale/NOTES.md). Both run
// through kwb::elementwise: 16-byte vectors, 64-bit indices.
#include "kwb_elementwise.cuh"
#include "relu_scale.h"

namespace {

template <typename T>
struct ReluScale {
  kwb::acc_t<T> alpha;
  __device__ T operator()(T x) const {
    const kwb::acc_t<T> v = kwb::to_acc<kwb::acc_t<T>>(x);
    // v < 0 (not v > 0) so a NaN x propagates, as torch.relu does; 0 * alpha (not 0) so a NaN
    // alpha gives NaN everywhere and a negative one -0, as eager's relu(x) * alpha
    return kwb::from_acc<T>(v < kwb::acc_t<T>(0) ? kwb::acc_t<T>(0) * alpha : v * alpha);
  }
};

template <typename T>
struct ReluScaleBackward {
  kwb::acc_t<T> alpha;
  __device__ T operator()(T grad, T x) const {
    using A = kwb::acc_t<T>;
    return kwb::from_acc<T>(kwb::to_acc<A>(x) > A(0) ? kwb::to_acc<A>(grad) * alpha : A(0));
  }
};

}  // namespace

const char* relu_scale_cuda(const ReluScaleParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    kwb::MapArgs<T, 1> args{{static_cast<const T*>(p.x)}, static_cast<T*>(p.y), p.n};
    return kwb::elementwise(args, ReluScale<T>{static_cast<kwb::acc_t<T>>(p.alpha)}, stream);
  });
}

const char* relu_scale_backward_cuda(const ReluScaleBackwardParams& p, kwb::DType dtype,
                                     cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    kwb::MapArgs<T, 2> args{{static_cast<const T*>(p.grad), static_cast<const T*>(p.x)},
                            static_cast<T*>(p.grad_x), p.n};
    return kwb::elementwise(args, ReluScaleBackward<T>{static_cast<kwb::acc_t<T>>(p.alpha)},
                            stream);
  });
}
