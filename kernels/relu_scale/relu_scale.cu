// relu_scale CUDA kernels: y = max(x, 0) * alpha and its gradient, one read and one write
// per element (8 bytes per fp32 element; predicted time: kernels/relu_scale/NOTES.md). Both run
// through kwb::elementwise: 16-byte vectors, 64-bit indices. The training pair saves a bit
// per element (x > 0) instead of x: a step moves 4 elements and 2 bits per element, not 5
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
    return kwb::from_acc<T>(kwb::to_acc<A>(x) > A(0) ? kwb::to_acc<A>(grad) * alpha : A(0));
  }
};

// The training pair: a thread takes 8 elements (one byte of mask). Its loads are 16-byte
// vectors where x is aligned (2 for fp32, 1 for 16-bit types); the last group, and every
// group of an unaligned tensor, goes element by element.
constexpr int kMaskThreads = 256;

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kMaskThreads) relu_scale_train_kernel(ReluScaleTrainParams p,
                                                                        kwb::acc_t<T> alpha) {
  using A = kwb::acc_t<T>;
  constexpr int kVec = 16 / sizeof(T) < 8 ? 16 / sizeof(T) : 8;
  using V = kwb::Vec<T, kVec>;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = g * 8;
  if (first >= p.n) return;
  const T* x = static_cast<const T*>(p.x) + first;
  T* y = static_cast<T*>(p.y) + first;
  const ReluScale<T> f{alpha};
  unsigned bits = 0;
  if (kAligned && first + 8 <= p.n) {
#pragma unroll
    for (int l = 0; l < 8 / kVec; ++l) {
      const V in = reinterpret_cast<const V*>(x)[l];
      V out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        out.v[j] = f(in.v[j]);
        bits |= static_cast<unsigned>(kwb::to_acc<A>(in.v[j]) > A(0)) << (l * kVec + j);
      }
      reinterpret_cast<V*>(y)[l] = out;
    }
  } else {
    for (int j = 0; j < 8 && first + j < p.n; ++j) {
      y[j] = f(x[j]);
      bits |= static_cast<unsigned>(kwb::to_acc<A>(x[j]) > A(0)) << j;
    }
  }
  p.mask[g] = static_cast<uint8_t>(bits);
}

template <typename T, bool kAligned>
__global__ void __launch_bounds__(kMaskThreads) relu_scale_masked_backward_kernel(
    ReluScaleMaskedBackwardParams p, kwb::acc_t<T> alpha) {
  using A = kwb::acc_t<T>;
  constexpr int kVec = 16 / sizeof(T) < 8 ? 16 / sizeof(T) : 8;
  using V = kwb::Vec<T, kVec>;
  const int64_t g = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t first = g * 8;
  if (first >= p.n) return;
  const T* grad = static_cast<const T*>(p.grad) + first;
  T* gx = static_cast<T*>(p.grad_x) + first;
  const unsigned bits = p.mask[g];
  if (kAligned && first + 8 <= p.n) {
#pragma unroll
    for (int l = 0; l < 8 / kVec; ++l) {
      const V in = reinterpret_cast<const V*>(grad)[l];
      V out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const bool on = (bits >> (l * kVec + j)) & 1u;
        out.v[j] = kwb::from_acc<T>(on ? kwb::to_acc<A>(in.v[j]) * alpha : A(0));
      }
      reinterpret_cast<V*>(gx)[l] = out;
    }
  } else {
    for (int j = 0; j < 8 && first + j < p.n; ++j) {
      gx[j] = kwb::from_acc<T>(((bits >> j) & 1u) ? kwb::to_acc<A>(grad[j]) * alpha : A(0));
    }
  }
}

unsigned mask_blocks(int64_t n) {
  return static_cast<unsigned>((relu_scale_mask_bytes(n) + kMaskThreads - 1) / kMaskThreads);
}

}  // namespace

const char* relu_scale_train_cuda(const ReluScaleTrainParams& p, kwb::DType dtype, cudaStream_t stream) {
  if (p.n == 0) return nullptr;
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const auto alpha = static_cast<kwb::acc_t<T>>(p.alpha);
    if (kwb::is_aligned(p.x, 16) && kwb::is_aligned(p.y, 16)) {
      relu_scale_train_kernel<T, true><<<mask_blocks(p.n), kMaskThreads, 0, stream>>>(p, alpha);
    } else {
      relu_scale_train_kernel<T, false><<<mask_blocks(p.n), kMaskThreads, 0, stream>>>(p, alpha);
    }
    return kwb::last_launch_error();
  });
}

const char* relu_scale_masked_backward_cuda(const ReluScaleMaskedBackwardParams& p, kwb::DType dtype,
                                            cudaStream_t stream) {
  if (p.n == 0) return nullptr;
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const auto alpha = static_cast<kwb::acc_t<T>>(p.alpha);
    if (kwb::is_aligned(p.grad, 16) && kwb::is_aligned(p.grad_x, 16)) {
      relu_scale_masked_backward_kernel<T, true><<<mask_blocks(p.n), kMaskThreads, 0, stream>>>(p, alpha);
    } else {
      relu_scale_masked_backward_kernel<T, false><<<mask_blocks(p.n), kMaskThreads, 0, stream>>>(p, alpha);
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
