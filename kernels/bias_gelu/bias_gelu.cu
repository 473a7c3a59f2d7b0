// bias_gelu CUDA kernels: y = GELU(x + bias) over the last dimension, and its backward
// (grad_x, and grad_bias = the column sums of grad_x), in the tanh or the exact erf form.
//
// Bytes: forward reads x and writes y (bias is cols elements, noise): 268 MB at bf16
// 8192 x 8192, 89 us at the H100's 3.0 TB/s copy ceiling; eager PyTorch takes 265 us (the
// add and the GELU are two passes, BASELINES.md). Backward reads grad and x and writes
// grad_x, plus the partial column sums (kwb_rows.cuh): 403 MB + 8.6 MB, 137 us at the ceiling.
//
// Math in fp32 (fp64 for double data), written so that no step cancels:
//   tanh form:  0.5 x (1 + tanh(u)) = x * sigmoid(2u) = x / (1 + exp(-2u)),
//               u = sqrt(2/pi) (x + 0.044715 x^3)
//               d/dx = s + x s (1 - s) 2 u',  s = sigmoid(2u), u' = sqrt(2/pi) (1 + 3 * 0.044715 x^2)
//   erf form:   0.5 x (1 + erf(x / sqrt 2));  d/dx = Phi(x) + x phi(x)
// One exp per element instead of tanh's; for x below about -9, exp(-2u) is inf and both
// the value and the gradient come out as (signed) zero, as they should.
#include "bias_gelu.h"
#include "kwb_rows.cuh"

namespace {

constexpr int kUnroll = 4;  // rows in flight per thread: 4 x 16-byte loads each of x (and grad)

// kFast (fp16 and bf16 data): the hardware's exp2 and reciprocal (__expf, __fdividef), a few
// ulps of fp32 where the output keeps 8 or 11 bits. Measured at bf16 8192 x 8192 on the H100:
// the tanh form took 100.0 us with expf and an IEEE division, at 89.5% of the copy ceiling
// (the erf form, no division, 97.9 us): the math, not memory, was the limit.
// fp32 and fp64 data keep the accurate library functions.
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

template <typename T> constexpr bool kHalfType = sizeof(T) == 2;

// This thread's first column (c < cols) and its run of rows [r0, r1) under tiling t.
struct Place {
  int64_t c, r0, r1, row_block;
};

__device__ __forceinline__ Place place(const kwb::RowTiling& t, int vec) {
  const int64_t col_block = blockIdx.x % t.col_blocks;
  const int64_t row_block = blockIdx.x / t.col_blocks;
  const int64_t r0 = row_block * t.rows_per_block;
  const int64_t r1 = r0 + t.rows_per_block < t.rows ? r0 + t.rows_per_block : t.rows;
  return {(col_block * blockDim.x + threadIdx.x) * vec, r0, r1, row_block};
}

template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(256) forward_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                                      T* __restrict__ y, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const Place p = place(t, kVec);
  if (p.c >= t.cols) return;
  const V bv = *reinterpret_cast<const V*>(bias + p.c);
  A b[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) b[j] = kwb::to_acc<A>(bv.v[j]);
  for (int64_t r = p.r0; r < p.r1; r += kUnroll) {
    V in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)  // every load of the group before any math: bytes in flight
      if (r + u < p.r1) in[u] = *reinterpret_cast<const V*>(x + (r + u) * t.cols + p.c);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < p.r1) {
        V out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) out.v[j] = kwb::from_acc<T>(gelu<kTanh, kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + b[j]));
        *reinterpret_cast<V*>(y + (r + u) * t.cols + p.c) = out;
      }
    }
  }
}

template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(256) backward_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                                       const T* __restrict__ bias, T* __restrict__ grad_x,
                                                       kwb::acc_t<T>* __restrict__ partial, T* __restrict__ grad_bias,
                                                       kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const Place p = place(t, kVec);
  if (p.c >= t.cols) return;
  const V bv = *reinterpret_cast<const V*>(bias + p.c);
  A b[kVec], sum[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    b[j] = kwb::to_acc<A>(bv.v[j]);
    sum[j] = A(0);
  }
  for (int64_t r = p.r0; r < p.r1; r += kUnroll) {
    V g[kUnroll], in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < p.r1) {
        g[u] = *reinterpret_cast<const V*>(grad + (r + u) * t.cols + p.c);
        in[u] = *reinterpret_cast<const V*>(x + (r + u) * t.cols + p.c);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < p.r1) {
        V out;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          // grad_bias sums the unrounded fp32 values: one rounding at the end, not one per row
          const A d = kwb::to_acc<A>(g[u].v[j]) * gelu_grad<kTanh, kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + b[j]);
          sum[j] += d;
          out.v[j] = kwb::from_acc<T>(d);
        }
        *reinterpret_cast<V*>(grad_x + (r + u) * t.cols + p.c) = out;
      }
    }
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    if (t.row_blocks == 1) grad_bias[p.c + j] = kwb::from_acc<T>(sum[j]);  // one run covers every row
    else partial[p.row_block * t.cols + p.c + j] = sum[j];
  }
}

// 16-byte vectors when the pointers are aligned and a row is a whole number of vectors.
template <typename T>
int vec_for(int64_t cols, bool aligned) {
  constexpr int kVec = 16 / sizeof(T);
  return aligned && cols % kVec == 0 ? kVec : 1;
}

constexpr double kForwardWaves = 4;   // short runs of rows, many blocks
constexpr double kBackwardWaves = 1;  // long runs: a small column-sum workspace

template <typename T, bool kTanh>
const char* forward(const BiasGeluParams& p, bool aligned, cudaStream_t stream) {
  const int vec = vec_for<T>(p.cols, aligned);
  const kwb::RowTiling t = kwb::row_tiling(p.rows, p.cols, vec, kForwardWaves);
  if (t.blocks() == 0) return nullptr;
  const auto* x = static_cast<const T*>(p.x);
  const auto* b = static_cast<const T*>(p.bias);
  auto* y = static_cast<T*>(p.y);
  const unsigned blocks = static_cast<unsigned>(t.blocks());
  if (vec > 1) forward_kernel<T, 16 / sizeof(T), kTanh><<<blocks, t.threads, 0, stream>>>(x, b, y, t);
  else forward_kernel<T, 1, kTanh><<<blocks, t.threads, 0, stream>>>(x, b, y, t);
  return kwb::last_launch_error();
}

template <typename T, bool kTanh>
const char* backward(const BiasGeluBackwardParams& p, bool aligned, cudaStream_t stream) {
  using A = kwb::acc_t<T>;
  const int vec = vec_for<T>(p.cols, aligned);
  const kwb::RowTiling t = kwb::row_tiling(p.rows, p.cols, vec, kBackwardWaves, kwb::kMaxSumBlocks);
  auto* partial = static_cast<A*>(p.workspace);
  if (t.blocks() > 0) {
    const auto* g = static_cast<const T*>(p.grad);
    const auto* x = static_cast<const T*>(p.x);
    const auto* b = static_cast<const T*>(p.bias);
    auto* gx = static_cast<T*>(p.grad_x);
    auto* gb = static_cast<T*>(p.grad_bias);
    const unsigned blocks = static_cast<unsigned>(t.blocks());
    if (vec > 1) backward_kernel<T, 16 / sizeof(T), kTanh><<<blocks, t.threads, 0, stream>>>(g, x, b, gx, partial, gb, t);
    else backward_kernel<T, 1, kTanh><<<blocks, t.threads, 0, stream>>>(g, x, b, gx, partial, gb, t);
  }
  if (t.row_blocks != 1) kwb::column_sums(partial, static_cast<T*>(p.grad_bias), t.row_blocks, p.cols, stream);  // 0 rows: zeros
  return kwb::last_launch_error();
}

}  // namespace

int64_t bias_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  int vec = 1;
  KWB_DTYPE_SWITCH(dtype, T, [&] {
    vec = vec_for<T>(cols, aligned);
    return nullptr;
  });
  return kwb::row_tiling(rows, cols, vec, kBackwardWaves, kwb::kMaxSumBlocks).row_blocks;
}

const char* bias_gelu_cuda(const BiasGeluParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    return p.tanh ? forward<T, true>(p, aligned, stream) : forward<T, false>(p, aligned, stream);
  });
}

const char* bias_gelu_backward_cuda(const BiasGeluBackwardParams& p, kwb::DType dtype, bool aligned,
                                    cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    return p.tanh ? backward<T, true>(p, aligned, stream) : backward<T, false>(p, aligned, stream);
  });
}
