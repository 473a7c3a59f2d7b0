// softmax CUDA kernels over the last dimension: y = exp(x - max) / sum(exp(x - max)), and its
// backward grad_x = y * (grad - sum(grad * y)). fp32 math for fp32, fp16 and bf16 data.
//
// Bytes: forward reads x and writes y; backward reads grad and y and writes grad_x. Predicted
// and measured: kernels/softmax/NOTES.md (eager and torch.compile: benchmarks/reference/h100_baselines.md).
//
// Rows up to 8192 fp32 / 16384 bf16 elements live in registers (kwb_rowwise.cuh): one read,
// two reductions (max, then the sum of exp), one write. Longer rows take two passes: an online
// max-and-sum (the running sum is rescaled when the max grows), then the write.
//
// Rows of all -inf give NaN, as PyTorch's softmax does (exp(-inf - -inf) is NaN); a NaN or a
// +inf anywhere in a row makes the whole row NaN, as PyTorch's does.
#include <limits>

#include "kwb_rowwise.cuh"
#include "softmax.h"

namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// Vectors per thread the forward aims for: 4 x 16 bytes in flight per thread, 128 threads for
// a 4096-element bf16 row (quack's rows use 128 threads at this size too). The backward holds
// two tensors (grad and y): 2.
constexpr int kForwardVecs = 4, kBackwardVecs = 2;

// fp16 and bf16 data: the hardware exp (ex2.approx, a few fp32 ulps where the output keeps 8
// or 11 bits). fp32 keeps expf.
template <typename T> __device__ __forceinline__ float exp_(float v) { return sizeof(T) == 2 ? __expf(v) : expf(v); }

// kTpr > 0: rows of exactly kTpr x kVecs vectors (kwb::exact_rows), with tpr, the block and
// cols compile-time constants; 0: any row the register path holds, tpr given at launch.
template <typename T, int kVec, int kVecs, int kTpr = 0>
__global__ void __launch_bounds__(kwb::row_max_threads(kVecs), kwb::row_min_blocks(kVecs)) forward_regs(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                     int64_t cols_arg, int tpr_arg) {
  constexpr bool kExact = kTpr > 0;
  const int tpr = kExact ? kTpr : tpr_arg;
  const int64_t cols = kExact ? static_cast<int64_t>(kTpr) * kVecs * kVec : cols_arg;
  __shared__ float scratch[2][32];
  kwb::RowReducer<1> reduce(scratch);
  const int rpb = (kExact ? (kTpr > kwb::kRowBlockMin ? kTpr : kwb::kRowBlockMin) : blockDim.x) / tpr;
  const int lane = threadIdx.x % tpr;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rpb; base < rows; base += static_cast<int64_t>(gridDim.x) * rpb) {
    const int64_t r = base + threadIdx.x / tpr;
    const int64_t n = r < rows ? cols : 0;  // a group past the last row holds no columns
    kwb::RowRegs<T, kVec, kVecs> in;
    if constexpr (kExact) {
      in.load_all_if(x + r * cols, lane, tpr, n != 0);
    } else {
      in.load(x + r * cols, n, lane, tpr);
    }
    // vector i of this thread is in its row. Exact rows: every vector, and a group past the last
    // row computes on zeros and stores nothing, so nothing but the stores is predicated (the
    // predicated form ran 11.4 us at bf16 4096 x 1024 where variant 1's ran 10.3).
    auto has = [&](int i) { return kExact || in.in_row(i, lane, tpr, n); };
    float m = kNegInf;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      if (has(i))
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = fmaxf(m, in.at(i, j));
    m = reduce.max(m, tpr);
    // exp(x - max) is kept for the write: fp32 in x's own registers (a second array spilled 112
    // bytes at 8 vectors a lane), exact half rows in floats beside them (one ex2 an element, not
    // two: 32 floats a thread still fit 64 registers there). Other half rows compute it again
    // (ex2.approx is cheap): 32 floats a thread at 4096 bf16 cost rows in flight
    // (kernels/softmax/NOTES.md, v1).
    constexpr bool kKeepInPlace = sizeof(T) == 4, kKeepApart = !kKeepInPlace && kExact;
    float kept[kKeepApart ? kVecs : 1][kKeepApart ? kVec : 1];
    float s = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float v = has(i) ? exp_<T>(in.at(i, j) - m) : 0.f;
        if constexpr (kKeepInPlace) in.v[i].v[j] = v;
        if constexpr (kKeepApart) kept[i][j] = v;
        s += v;
      }
    // __fdividef: 1 / s (s in [1, cols]) without IEEE division's slow-path call, whose saved
    // registers cost rows in flight (benchmarks/rowwise_forward_variants.py, variant 1)
    const float inv = __fdividef(1.f, reduce.sum(s, tpr));
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (!has(i) || n == 0) continue;
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        if constexpr (kKeepInPlace) out[j] = in.at(i, j) * inv;
        else if constexpr (kKeepApart) out[j] = kept[i][j] * inv;
        else out[j] = exp_<T>(in.at(i, j) - m) * inv;
      }
      kwb::store_vec<T, kVec>(y + r * cols + in.col(i, lane, tpr), out);
    }
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(1024) forward_loop(const T* __restrict__ x, T* __restrict__ y, int64_t rows,
                                                     int64_t cols) {
  __shared__ float scratch[2][32];
  kwb::RowReducer<1> reduce(scratch);
  const int64_t nv = cols / kVec;  // whole vectors (kVec = 1 unless cols is a multiple)
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * cols;
    float m = kNegInf, s = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float v[kVec];
      kwb::load_vec<T, kVec>(xr + i * kVec, v);
      float vm = v[0];
#pragma unroll
      for (int j = 1; j < kVec; ++j) vm = fmaxf(vm, v[j]);
      const float mn = fmaxf(m, vm);
      if (mn == kNegInf) {  // all -inf so far: nothing to add, but a NaN must still poison the sum
#pragma unroll
        for (int j = 0; j < kVec; ++j) s += v[j] != v[j] ? v[j] : 0.f;
        continue;
      }
      float add = 0.f;
#pragma unroll
      for (int j = 0; j < kVec; ++j) add += exp_<T>(v[j] - mn);
      s = s * exp_<T>(m - mn) + add;  // rescale what was summed under the old max
      m = mn;
    }
    const float row_max = reduce.max(m, blockDim.x);
    const float mine = m == kNegInf ? s : s * exp_<T>(m - row_max);
    const float inv = 1.f / reduce.sum(mine, blockDim.x);
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float v[kVec];
      kwb::load_vec<T, kVec>(xr + i * kVec, v);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = exp_<T>(v[j] - row_max) * inv;
      kwb::store_vec<T, kVec>(y + r * cols + i * kVec, v);
    }
  }
}

template <typename T, int kVec, int kVecs, int kTpr = 0>
__global__ void __launch_bounds__(kwb::row_max_threads(kVecs)) backward_regs(const T* __restrict__ grad, const T* __restrict__ y,
                                                      T* __restrict__ grad_x, int64_t rows, int64_t cols_arg,
                                                      int tpr_arg) {
  constexpr bool kExact = kTpr > 0;  // as forward_regs'
  const int tpr = kExact ? kTpr : tpr_arg;
  const int64_t cols = kExact ? static_cast<int64_t>(kTpr) * kVecs * kVec : cols_arg;
  __shared__ float scratch[2][32];
  kwb::RowReducer<1> reduce(scratch);
  const int rpb = (kExact ? (kTpr > kwb::kRowBlockMin ? kTpr : kwb::kRowBlockMin) : blockDim.x) / tpr;
  const int lane = threadIdx.x % tpr;
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rpb; base < rows; base += static_cast<int64_t>(gridDim.x) * rpb) {
    const int64_t r = base + threadIdx.x / tpr;
    const int64_t n = r < rows ? cols : 0;
    kwb::RowRegs<T, kVec, kVecs> g, out;
    if constexpr (kExact) {
      g.load_all_if(grad + r * cols, lane, tpr, n != 0);
      out.load_all_if(y + r * cols, lane, tpr, n != 0);
    } else {
      g.load(grad + r * cols, n, lane, tpr);
      out.load(y + r * cols, n, lane, tpr);
    }
    auto has = [&](int i) { return kExact || g.in_row(i, lane, tpr, n); };  // as forward_regs
    float dot = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      if (has(i))
#pragma unroll
        for (int j = 0; j < kVec; ++j) dot += g.at(i, j) * out.at(i, j);
    dot = reduce.sum(dot, tpr);
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (!has(i) || n == 0) continue;
      float d[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) d[j] = out.at(i, j) * (g.at(i, j) - dot);
      kwb::store_vec<T, kVec>(grad_x + r * cols + g.col(i, lane, tpr), d);
    }
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(1024) backward_loop(const T* __restrict__ grad, const T* __restrict__ y,
                                                      T* __restrict__ grad_x, int64_t rows, int64_t cols) {
  __shared__ float scratch[2][32];
  kwb::RowReducer<1> reduce(scratch);
  const int64_t nv = cols / kVec;
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    float dot = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float g[kVec], o[kVec];
      kwb::load_vec<T, kVec>(grad + r * cols + i * kVec, g);
      kwb::load_vec<T, kVec>(y + r * cols + i * kVec, o);
#pragma unroll
      for (int j = 0; j < kVec; ++j) dot += g[j] * o[j];
    }
    dot = reduce.sum(dot, blockDim.x);
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float g[kVec], o[kVec];
      kwb::load_vec<T, kVec>(grad + r * cols + i * kVec, g);
      kwb::load_vec<T, kVec>(y + r * cols + i * kVec, o);
#pragma unroll
      for (int j = 0; j < kVec; ++j) o[j] *= g[j] - dot;
      kwb::store_vec<T, kVec>(grad_x + r * cols + i * kVec, o);
    }
  }
}

template <typename T, int kVec>
void forward_launch(const SoftmaxParams& p, const kwb::RowwiseLaunch& L, cudaStream_t stream) {
  const auto* x = static_cast<const T*>(p.x);
  auto* y = static_cast<T*>(p.y);
  if (L.vecs == 0) {
    forward_loop<T, kVec><<<L.launch_blocks(), L.block, 0, stream>>>(x, y, p.rows, p.cols);
    return;
  }
  if constexpr (kVec * sizeof(T) == 16) {
    const kwb::ExactRows e = kwb::exact_rows(p.rows, p.cols, kVec, sizeof(T));
    if (e.tpr > 0) {
      KWB_EXACT_SWITCH(e, T, kTpr, kVecs, [&] {
        forward_regs<T, kVec, kVecs, kTpr><<<e.launch_blocks(), e.block, 0, stream>>>(x, y, p.rows, p.cols, kTpr);
      });
      return;
    }
  }
  KWB_VECS_SWITCH(L.vecs, kVecs, [&] {
    forward_regs<T, kVec, kVecs><<<L.launch_blocks(), L.block, 0, stream>>>(x, y, p.rows, p.cols, L.tpr);
  });
}

template <typename T, int kVec>
void backward_launch(const SoftmaxBackwardParams& p, const kwb::RowwiseLaunch& L, cudaStream_t stream) {
  const auto* g = static_cast<const T*>(p.grad);
  const auto* y = static_cast<const T*>(p.y);
  auto* gx = static_cast<T*>(p.grad_x);
  if (L.vecs == 0) {
    backward_loop<T, kVec><<<L.launch_blocks(), L.block, 0, stream>>>(g, y, gx, p.rows, p.cols);
    return;
  }
  if constexpr (kVec * sizeof(T) == 16) {
    const kwb::ExactRows e = kwb::exact_rows(p.rows, p.cols, kVec, sizeof(T), kBackwardVecs);
    if (e.tpr > 0) {
      KWB_TPR_SWITCH(e.tpr, kTpr, [&] {
        backward_regs<T, kVec, kBackwardVecs, kTpr><<<e.launch_blocks(), e.block, 0, stream>>>(g, y, gx, p.rows, p.cols, kTpr);
      });
      return;
    }
  }
  KWB_VECS_SWITCH(L.vecs, kVecs, [&] {
    backward_regs<T, kVec, kVecs><<<L.launch_blocks(), L.block, 0, stream>>>(g, y, gx, p.rows, p.cols, L.tpr);
  });
}

}  // namespace

const char* softmax_cuda(const SoftmaxParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] {
    const int vec = kwb::row_vec<T>(p.cols, aligned);
    const kwb::RowwiseLaunch L = kwb::rowwise_launch(p.rows, p.cols, vec, kForwardVecs, false);
    if (L.grid == 0 || p.cols == 0) return static_cast<const char*>(nullptr);
    if (vec > 1) forward_launch<T, 16 / sizeof(T)>(p, L, stream);
    else forward_launch<T, 1>(p, L, stream);
    return kwb::last_launch_error();
  });
}

const char* softmax_backward_cuda(const SoftmaxBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] {
    const int vec = kwb::row_vec<T>(p.cols, aligned);
    const kwb::RowwiseLaunch L = kwb::rowwise_launch(p.rows, p.cols, vec, kBackwardVecs, false);
    if (L.grid == 0 || p.cols == 0) return static_cast<const char*>(nullptr);
    if (vec > 1) backward_launch<T, 16 / sizeof(T)>(p, L, stream);
    else backward_launch<T, 1>(p, L, stream);
    return kwb::last_launch_error();
  });
}
