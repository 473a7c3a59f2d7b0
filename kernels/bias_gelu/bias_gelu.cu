// bias_gelu CUDA kernels: y = GELU(x + bias) over the last dimension, and its backward
// (grad_x, and grad_bias = the column sums of grad_x), in the tanh or the exact erf form.
//
// Bytes: forward reads x and writes y (bias is cols elements, noise), where eager PyTorch makes
// two passes (the add, then the GELU); backward reads grad and x and writes grad_x, plus the
// partial column sums (kwb_rows.cuh). Predicted and measured: kernels/bias_gelu/NOTES.md.
//
// The GELU math (fp32, one exp per element, fast exp and division for half types) is
// kwb_gelu.cuh's, shared with linear_gelu.
#include "bias_gelu.h"
#include "kwb_gelu.cuh"
#include "kwb_rows.cuh"

namespace {

constexpr int kUnroll = 4;  // rows in flight per thread: 4 x 16-byte loads each of x (and grad)

template <typename T> constexpr bool kHalfType = sizeof(T) == 2;

template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(256) forward_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                                      T* __restrict__ y, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const kwb::TilePlace p = kwb::tile_place(t, kVec);
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
        for (int j = 0; j < kVec; ++j) out.v[j] = kwb::from_acc<T>(kwb::gelu<kTanh, kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + b[j]));
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
  const kwb::TilePlace p = kwb::tile_place(t, kVec);
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
          const A d = kwb::to_acc<A>(g[u].v[j]) * kwb::gelu_grad<kTanh, kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + b[j]);
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

constexpr double kForwardWaves = 4;  // short runs of rows, many blocks

template <typename T, bool kTanh>
const char* forward(const BiasGeluParams& p, bool aligned, cudaStream_t stream) {
  const int vec = kwb::row_vec<T>(p.cols, aligned);
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
  const int vec = kwb::row_vec<T>(p.cols, aligned);
  const kwb::RowTiling t = kwb::column_sum_tiling(p.rows, p.cols, vec);
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
  kwb::sum_row_blocks(t, partial, static_cast<T*>(p.grad_bias), p.cols, stream);
  return kwb::last_launch_error();
}

}  // namespace

int64_t bias_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::column_sum_workspace_rows(rows, cols, dtype, aligned);
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
