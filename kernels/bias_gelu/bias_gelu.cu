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

constexpr int kUnroll = 4;  // rows in flight per thread in the backward: 4 x 16-byte loads each of grad and x

template <typename T> constexpr bool kHalfType = sizeof(T) == 2;

// The forward as a flat map, one kVec-element vector a thread at flat vector index i, its bias
// vector at i mod (cols / kVec), as kwb_elementwise.cuh's map: blocks sweep memory in order, and
// at 32 registers or fewer every block of 256 x 4096 is resident at once. fp32 on the H100: 98.6%
// of the copy ceiling at 8192 x 8192 and 3.9 us at 256 x 4096, where a rows x columns tiling
// (16 rows a block, 44 registers) reached 93.4% and 4.7 us (benchmarks/bias_gelu_variants.py).
template <typename T, int kVec, bool kTanh, typename Div>
__global__ void __launch_bounds__(256) forward_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                                      T* __restrict__ y, int64_t n_vec, Div col_vecs) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  using Index = decltype(col_vecs.mod(0));
  const Index i = static_cast<Index>(blockIdx.x) * 256 + threadIdx.x;
  if (i >= n_vec) return;
  const V in = reinterpret_cast<const V*>(x)[i];
  const V b = reinterpret_cast<const V*>(bias)[col_vecs.mod(i)];
  V out;
#pragma unroll
  for (int j = 0; j < kVec; ++j)
    out.v[j] = kwb::from_acc<T>(kwb::gelu<kTanh, kHalfType<T>>(kwb::to_acc<A>(in.v[j]) + kwb::to_acc<A>(b.v[j])));
  reinterpret_cast<V*>(y)[i] = out;
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
  if (t.row_blocks == 1) {  // one run covers every row
#pragma unroll
    for (int j = 0; j < kVec; ++j) grad_bias[p.c + j] = kwb::from_acc<T>(sum[j]);
  } else {
    kwb::store_sums<kVec>(partial + p.row_block * t.cols + p.c, sum);
  }
}

template <typename T, int kVec, bool kTanh, typename Div>
void launch_forward(const BiasGeluParams& p, int64_t n_vec, Div col_vecs, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((n_vec + 255) / 256);
  forward_kernel<T, kVec, kTanh><<<blocks, 256, 0, stream>>>(static_cast<const T*>(p.x), static_cast<const T*>(p.bias),
                                                              static_cast<T*>(p.y), n_vec, col_vecs);
}

template <typename T, int kVec, bool kTanh>
const char* forward_vec(const BiasGeluParams& p, cudaStream_t stream) {
  const int64_t n_vec = p.rows * p.cols / kVec, col_vecs = p.cols / kVec;
  if (n_vec < (int64_t(1) << 31)) launch_forward<T, kVec, kTanh>(p, n_vec, kwb::Divider32(static_cast<uint32_t>(col_vecs)), stream);
  else launch_forward<T, kVec, kTanh>(p, n_vec, kwb::Divider64(col_vecs), stream);
  return kwb::last_launch_error();
}

template <typename T, bool kTanh>
const char* forward(const BiasGeluParams& p, bool aligned, cudaStream_t stream) {
  if (p.rows == 0 || p.cols == 0) return nullptr;
  if (kwb::row_vec<T>(p.cols, aligned) > 1) return forward_vec<T, 16 / sizeof(T), kTanh>(p, stream);
  return forward_vec<T, 1, kTanh>(p, stream);
}

// The backward's tiling: column_sum_tiling's, but no fewer than kBackwardMinRows rows a block,
// in narrower blocks (64 threads) where that leaves too few. At 256 x 4096 bf16 one row a block
// wrote 256 rows of fp32 partial sums (4 MB, more than grad, x and grad_x together): 9.0 us on
// the H100 (profile_step.py), 3.3 us at 4 rows a block with 16-byte partial stores (Inductor's
// pointwise backward: 3.4 us, then 3.4 us of sums).
constexpr int64_t kBackwardMinRows = 4;

kwb::RowTiling backward_tiling(int64_t rows, int64_t cols, int vec) {
  kwb::RowTiling t = kwb::column_sum_tiling(rows, cols, vec);
  if (t.rows_per_block >= kBackwardMinRows || rows <= 1) return t;
  t.threads = t.threads < 64 ? t.threads : 64;
  t.col_blocks = ((cols + vec - 1) / vec + t.threads - 1) / t.threads;
  t.rows_per_block = rows < kBackwardMinRows ? rows : kBackwardMinRows;
  t.row_blocks = (rows + t.rows_per_block - 1) / t.rows_per_block;
  return t;
}

template <typename T, bool kTanh>
const char* backward(const BiasGeluBackwardParams& p, bool aligned, cudaStream_t stream) {
  using A = kwb::acc_t<T>;
  const int vec = kwb::row_vec<T>(p.cols, aligned);
  const kwb::RowTiling t = backward_tiling(p.rows, p.cols, vec);
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
  int vec = 1;
  KWB_DTYPE_SWITCH(dtype, T, [&] {
    vec = kwb::row_vec<T>(cols, aligned);
    return nullptr;
  });
  return backward_tiling(rows, cols, vec).row_blocks;
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
