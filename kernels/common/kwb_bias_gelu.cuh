// bias + GELU's forward over rows x cols, as a flat map: y = GELU(x + bias[col]). bias_gelu's
// forward, and linear_gelu's pass after a product without an epilogue (at::mm), which at 32 x 768
// -> 3072 in 16-bit types ran 0.7-2.2% ahead of addmm's bias epilogue then a GELU pass (H100,
// kernels/linear_gelu/NOTES.md, "Round 16", measured with the pass at 16-byte vectors). No torch
// headers.
#pragma once
#include "kwb_gelu.cuh"
#include "kwb_rows.cuh"

namespace kwb {
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
  using A = acc_t<T>;
  using V = Vec<T, kVec>;
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
        out.v[j] = from_acc<T>(gelu<kTanh, kHalfType<T>>(to_acc<A>(in[u].v[j]) + to_acc<A>(b[u].v[j])));
      reinterpret_cast<V*>(y)[i] = out;
    }
  }
}

template <typename T, int kVec, bool kTanh, int kThreads, int kPer, typename Div>
void launch_forward(const T* x, const T* bias, T* y, int64_t n_vec, Div col_vecs, cudaStream_t stream) {
  const unsigned blocks = static_cast<unsigned>((n_vec + kThreads * kPer - 1) / (kThreads * kPer));
  forward_kernel<T, kVec, kTanh, kThreads, kPer><<<blocks, kThreads, 0, stream>>>(x, bias, y, n_vec, col_vecs);
}

// Two vectors a thread in blocks of 128 for fp32 from 2^22 vectors (64 MB) up: measured better at
// 2^24 (8192 x 8192). At 2^18 (256 x 4096) two vectors a thread in blocks of 256 lost (4.14
// against 3.89 us, H100); blocks of 128 were not timed there.
constexpr int64_t kPairedFrom = int64_t(1) << 22;

template <typename T, int kVec, bool kTanh, typename Div>
void launch_forward(const T* x, const T* bias, T* y, int64_t n_vec, Div col_vecs, cudaStream_t stream) {
  if constexpr (sizeof(T) == 4 && kVec > 1) {
    if (n_vec >= kPairedFrom) return launch_forward<T, kVec, kTanh, 128, 2>(x, bias, y, n_vec, col_vecs, stream);
  }
  launch_forward<T, kVec, kTanh, 256, 1>(x, bias, y, n_vec, col_vecs, stream);
}

template <typename T, int kVec, bool kTanh>
void forward_vec(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, cudaStream_t stream) {
  const int64_t n_vec = rows * cols / kVec, col_vecs = cols / kVec;
  if (n_vec < (int64_t(1) << 31)) launch_forward<T, kVec, kTanh>(x, bias, y, n_vec, Divider32(static_cast<uint32_t>(col_vecs)), stream);
  else launch_forward<T, kVec, kTanh>(x, bias, y, n_vec, Divider64(col_vecs), stream);
}

// 16-bit types below kHalfWideFrom 16-byte vectors go 8 bytes (4 elements) a thread: at 256 x 4096
// (2^17 vectors) on the H100, in turns, bf16 ran 2.78 us against 2.97 (tanh) and 3.15 against 3.39
// (erf) as CUDA-graph replays (torch.compile 3.52, 3.55), and erf 6.24 against 6.56 with events
// (compile 6.64); tanh with events, 6.24 against 6.18, within that row's 5% spread (compile 6.69).
// fp32 lost at 8 bytes there (erf 4.01 against 3.89 in graphs); fp16 was not timed. At 8192 x
// 8192 (2^23 vectors) 8 bytes lost in bf16: 99.8 against 93.4 us (tanh) and 117.6 against 102.0
// (erf) with events (compile 98.1, 109.9). Nothing between 2^17 and 2^23 vectors was timed, so the
// bound sits between them (benchmarks/bias_gelu_variants.py, forwards 5 and 6;
// kernels/bias_gelu/NOTES.md, "Round 24").
constexpr int64_t kHalfWideFrom = int64_t(1) << 22;

// y = GELU(x + bias) over rows x cols (bias: cols), x, bias and y distinct; aligned: all three
// 16-byte aligned (then rows of whole 16-byte vectors go 16 or 8 bytes at a time, as above). nullptr,
// or CUDA's error string.
template <typename T, bool kTanh>
const char* bias_gelu_forward(const T* x, const T* bias, T* y, int64_t rows, int64_t cols, bool aligned, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return nullptr;
  constexpr int kVec = 16 / sizeof(T);
  if (row_vec<T>(cols, aligned) == 1) forward_vec<T, 1, kTanh>(x, bias, y, rows, cols, stream);
  else if constexpr (sizeof(T) == 2) {
    if (rows * cols / kVec < kHalfWideFrom) forward_vec<T, kVec / 2, kTanh>(x, bias, y, rows, cols, stream);
    else forward_vec<T, kVec, kTanh>(x, bias, y, rows, cols, stream);
  } else {
    forward_vec<T, kVec, kTanh>(x, bias, y, rows, cols, stream);
  }
  return last_launch_error();
}

// The same over untyped pointers, T picked by dtype and the form by tanh: what bias_gelu's and
// linear_gelu's launchers call.
inline const char* bias_gelu_forward(const void* x, const void* bias, void* y, int64_t rows, int64_t cols, bool tanh,
                                     DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const auto* xt = static_cast<const T*>(x);
    const auto* bt = static_cast<const T*>(bias);
    auto* yt = static_cast<T*>(y);
    return tanh ? bias_gelu_forward<T, true>(xt, bt, yt, rows, cols, aligned, stream)
                : bias_gelu_forward<T, false>(xt, bt, yt, rows, cols, aligned, stream);
  });
}

}  // namespace
}  // namespace kwb
