// relu_scale CUDA kernels: y = max(x, 0) * alpha and its gradient, one read and one write
// per element (8 bytes per fp32 element; predicted time: kernels/relu_scale/NOTES.md). Both run
// through kwb::elementwise: one vector a thread, 16 bytes for the forward's one input, 8 for the
// backward's two. The training pair saves a bit
// per element (!(x <= 0), set for NaN) instead of x: a step moves 4 elements and 2 bits per element, not 5
// elements; torch.compile's step saves a byte per element, 10% more bytes in fp32, 21% more in
// 16-bit types.
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
    // The product for every element, then a select: written as a branch, nvcc predicated the
    // conversion, the multiply and a reload of alpha an element (103 SASS instructions a bf16
    // thread against 64). x <= 0 (not x > 0) gives 0, so a NaN x passes the gradient, as
    // relu's backward (its test is output <= 0)
    const A g = kwb::to_acc<A>(grad) * alpha;
    return kwb::from_acc<T>(kwb::to_acc<A>(x) <= A(0) ? A(0) : g);
  }
};

// The training pair: a thread takes one 16-byte vector (kVec elements; 8
// elements a thread, two fp32 vectors, ran the fp32 step of 2^26 in 495 us on the H100, where
// its bytes predict 370), and the 8 / kVec threads that share a mask byte put their bits
// together with shuffles. Unaligned tensors take kVec = 1.
constexpr int kMaskThreads = 256;

template <typename T, int kVec>
__global__ void __launch_bounds__(kMaskThreads) relu_scale_train_kernel(ReluScaleTrainParams p,
                                                                        kwb::acc_t<T> alpha) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  constexpr int kLanes = 8 / kVec;  // threads a mask byte
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = t * kVec;
  const T* x = static_cast<const T*>(p.x);
  T* y = static_cast<T*>(p.y);
  const ReluScale<T> f{alpha};
  unsigned bits = 0;
  if (first + kVec <= p.n) {
    const V in = reinterpret_cast<const V*>(x)[t];
    V out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      out.v[j] = f(in.v[j]);
      bits |= static_cast<unsigned>(!(kwb::to_acc<A>(in.v[j]) <= A(0))) << j;
    }
    reinterpret_cast<V*>(y)[t] = out;
  } else {
    for (int j = 0; j < kVec && first + j < p.n; ++j) {
      y[first + j] = f(x[first + j]);
      bits |= static_cast<unsigned>(!(kwb::to_acc<A>(x[first + j]) <= A(0))) << j;
    }
  }
  bits <<= (t % kLanes) * kVec;
#pragma unroll
  for (int o = 1; o < kLanes; o <<= 1) bits |= __shfl_xor_sync(0xffffffffu, bits, o);
  if (t % kLanes == 0 && first < p.n) p.mask[t / kLanes] = static_cast<uint8_t>(bits);
}

template <typename T, int kVec>
__global__ void __launch_bounds__(kMaskThreads) relu_scale_masked_backward_kernel(
    ReluScaleMaskedBackwardParams p, kwb::acc_t<T> alpha) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  constexpr int kLanes = 8 / kVec;
  const int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = t * kVec;
  if (first >= p.n) return;
  const T* grad = static_cast<const T*>(p.grad);
  T* gx = static_cast<T*>(p.grad_x);
  const unsigned bits = static_cast<unsigned>(p.mask[t / kLanes]) >> ((t % kLanes) * kVec);
  if (first + kVec <= p.n) {
    const V in = reinterpret_cast<const V*>(grad)[t];
    V out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) out.v[j] = kwb::from_acc<T>(((bits >> j) & 1u) ? kwb::to_acc<A>(in.v[j]) * alpha : A(0));
    reinterpret_cast<V*>(gx)[t] = out;
  } else {
    for (int j = 0; j < kVec && first + j < p.n; ++j)
      gx[first + j] = kwb::from_acc<T>(((bits >> j) & 1u) ? kwb::to_acc<A>(grad[first + j]) * alpha : A(0));
  }
}

// 16-byte vectors, 8 elements at most (a mask byte's worth): 4 fp32, 8 fp16/bf16, 2 fp64
template <typename T>
constexpr int mask_vec() { return 16 / sizeof(T) < 8 ? 16 / sizeof(T) : 8; }

unsigned mask_blocks(int64_t n, int vec) {
  return static_cast<unsigned>(((n + vec - 1) / vec + kMaskThreads - 1) / kMaskThreads);
}

}  // namespace

const char* relu_scale_train_cuda(const ReluScaleTrainParams& p, kwb::DType dtype, cudaStream_t stream) {
  if (p.n == 0) return nullptr;
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const auto alpha = static_cast<kwb::acc_t<T>>(p.alpha);
    constexpr int kVec = mask_vec<T>();
    if (kwb::is_aligned(p.x, 16) && kwb::is_aligned(p.y, 16)) {
      relu_scale_train_kernel<T, kVec><<<mask_blocks(p.n, kVec), kMaskThreads, 0, stream>>>(p, alpha);
    } else {
      relu_scale_train_kernel<T, 1><<<mask_blocks(p.n, 1), kMaskThreads, 0, stream>>>(p, alpha);
    }
    return kwb::last_launch_error();
  });
}

const char* relu_scale_masked_backward_cuda(const ReluScaleMaskedBackwardParams& p, kwb::DType dtype,
                                            cudaStream_t stream) {
  if (p.n == 0) return nullptr;
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const auto alpha = static_cast<kwb::acc_t<T>>(p.alpha);
    constexpr int kVec = mask_vec<T>();
    if (kwb::is_aligned(p.grad, 16) && kwb::is_aligned(p.grad_x, 16)) {
      relu_scale_masked_backward_kernel<T, kVec><<<mask_blocks(p.n, kVec), kMaskThreads, 0, stream>>>(p, alpha);
    } else {
      relu_scale_masked_backward_kernel<T, 1><<<mask_blocks(p.n, 1), kMaskThreads, 0, stream>>>(p, alpha);
    }
    return kwb::last_launch_error();
  });
}

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
