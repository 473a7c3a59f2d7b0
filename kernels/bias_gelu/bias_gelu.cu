// bias_gelu CUDA kernels: y = GELU(x + bias) over the last dimension, and its backward
// (grad_x, and grad_bias = the column sums of grad_x), in the tanh or the exact erf form.
//
// Bytes: forward reads x and writes y (bias is cols elements, noise), where eager PyTorch makes
// two passes (the add, then the GELU); backward reads grad and x and writes grad_x, plus the
// partial column sums (kwb_gelu_backward.cuh, shared with linear_gelu). Predicted and measured:
// kernels/bias_gelu/NOTES.md.
//
// The GELU math (fp32, one exp per element, fast exp and division for half types) is
// kwb_gelu.cuh's, shared with linear_gelu.
#include "bias_gelu.h"
#include "kwb_gelu.cuh"
#include "kwb_gelu_backward.cuh"

namespace {


// The forward as a flat map, kPer kVec-element vectors a thread at flat vector indices i,
// i + kThreads, ... (all loads first), each one's bias vector at i mod (cols / kVec), as
// kwb_elementwise.cuh's map: blocks sweep memory in order. One vector a thread in blocks of 256
// (24-31 registers): fp32 on the H100 98.6% of the copy ceiling at 8192 x 8192 and 3.9 us at 256 x
// 4096, where a rows x columns tiling (16 rows a block, 44 registers) reached 93.4% and 4.7 us.
// On the H200 the same kernel ran the fp32 erf form at 8192 x 8192 in 133.0 us in turns against
// torch.compile's 130.3; two vectors a thread in blocks of 128, Inductor's block and share, ran
// 130.4, while two in blocks of 256 ran 134.1 and four 134.8 (benchmarks/bias_gelu_variants.py).
template <typename T, int kVec, bool kTanh, int kThreads, int kPer, typename Div>
__global__ void __launch_bounds__(kThreads) forward_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                                           T* __restrict__ y, int64_t n_vec, Div col_vecs) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  using Index = decltype(col_vecs.mod(0));
  const Index first = static_cast<Index>(blockIdx.x) * (kThreads * kPer) + threadIdx.x;
  V in[kPer], b[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const Index i = first + u * kThreads;
    if (i < n_vec) {
      in[u] = reinterpret_cast<const V*>(x)[i];
      b[u] = reinterpret_cast<const V*>(bias)[col_vecs.mod(i)];
    }
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const Index i = first + u * kThreads;
    if (i < n_vec) {
      V out;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        out.v[j] = kwb::from_acc<T>(kwb::gelu<kTanh, kwb::kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + kwb::to_acc<A>(b[u].v[j])));
      reinterpret_cast<V*>(y)[i] = out;
    }
  }
}

template <typename T, int kVec, bool kTanh, int kThreads, int kPer, typename Div>
void launch_forward(const BiasGeluParams& p, int64_t n_vec, Div col_vecs, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((n_vec + kThreads * kPer - 1) / (kThreads * kPer));
  forward_kernel<T, kVec, kTanh, kThreads, kPer><<<blocks, kThreads, 0, stream>>>(
      static_cast<const T*>(p.x), static_cast<const T*>(p.bias), static_cast<T*>(p.y), n_vec, col_vecs);
}

// Two vectors a thread in blocks of 128 for fp32 from 2^22 vectors (64 MB) up: measured better at
// 2^24 (8192 x 8192). At 2^18 (256 x 4096) two vectors a thread in blocks of 256 lost (4.14
// against 3.89 us, H100); blocks of 128 were not timed there.
constexpr int64_t kPairedFrom = int64_t(1) << 22;

template <typename T, int kVec, bool kTanh, typename Div>
void launch_forward(const BiasGeluParams& p, int64_t n_vec, Div col_vecs, cudaStream_t stream) {
  if constexpr (sizeof(T) == 4 && kVec > 1) {
    if (n_vec >= kPairedFrom) return launch_forward<T, kVec, kTanh, 128, 2>(p, n_vec, col_vecs, stream);
  }
  launch_forward<T, kVec, kTanh, 256, 1>(p, n_vec, col_vecs, stream);
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

}  // namespace

int64_t bias_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::gelu_backward_workspace_rows(rows, cols, dtype, aligned);
}

const char* bias_gelu_cuda(const BiasGeluParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    return p.tanh ? forward<T, true>(p, aligned, stream) : forward<T, false>(p, aligned, stream);
  });
}

const char* bias_gelu_backward_cuda(const BiasGeluBackwardParams& p, kwb::DType dtype, bool aligned,
                                    cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    using A = kwb::acc_t<T>;
    const auto* g = static_cast<const T*>(p.grad);
    const auto* x = static_cast<const T*>(p.x);
    const auto* b = static_cast<const T*>(p.bias);
    auto* gx = static_cast<T*>(p.grad_x);
    auto* gb = static_cast<T*>(p.grad_bias);
    auto* ws = static_cast<A*>(p.workspace);
    return p.tanh ? kwb::gelu_backward_rows<T, true>(g, x, b, gx, gb, ws, p.rows, p.cols, aligned, stream)
                  : kwb::gelu_backward_rows<T, false>(g, x, b, gx, gb, ws, p.rows, p.cols, aligned, stream);
  });
}
