// lltm CUDA kernels: everything of the LLTM cell around its matrix product, one kernel each way;
// for small batches (lltm.h, lltm_small_forward_fits), a forward kernel that does the product as
// well and a backward kernel that does the weights' gradient.
//
// Forward: one pass reads the three gate blocks (bias added by the product's epilogue:
// addmm through cuBLASLt) and old_cell, and writes new_h and
// new_cell (eager PyTorch spends 7 kernels on the same: add, 2 sigmoid, elu, mul, add, tanh,
// mul). The activated gates are not stored: backward recomputes them from the gates it
// already has (4 fewer [batch, state] writes forward, 2 exps more backward).
// Backward: one pass from grad_h, grad_cell, the gates and old_cell to the gates'
// gradient (which is what the weight, input and old_h gradients are matrix products of),
// old_cell's gradient, and the bias gradient's partial column sums (kwb_rows.cuh).
//
// Rows are the batch, columns the state: thread (row r, column j) reads gates[r, j],
// gates[r, S + j], gates[r, 2S + j] (input, output and candidate gates of unit j).
#include "kwb_rows.cuh"
#include "lltm.h"

namespace {

constexpr int kUnroll = 2;  // rows in flight per thread (each row is 4 loads of 16 bytes)

__device__ __forceinline__ float exp_(float v) { return expf(v); }
__device__ __forceinline__ double exp_(double v) { return exp(v); }
__device__ __forceinline__ float expm1_(float v) { return expm1f(v); }
__device__ __forceinline__ double expm1_(double v) { return expm1(v); }
__device__ __forceinline__ float tanh_(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_(double v) { return tanh(v); }

template <typename A> __device__ __forceinline__ A sigmoid(A z) { return A(1) / (A(1) + exp_(-z)); }
template <typename A> __device__ __forceinline__ A elu(A z) { return z > A(0) ? z : expm1_(z); }  // alpha = 1

template <typename T, int kVec>
__global__ void __launch_bounds__(256) forward_kernel(LltmForwardParams p, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const kwb::TilePlace at = kwb::tile_place(t, kVec);
  if (at.c >= t.cols) return;
  const int64_t S = p.state;
  const T* gates = static_cast<const T*>(p.gates);
  for (int64_t r = at.r0; r < at.r1; r += kUnroll) {
    V gi[kUnroll], go[kUnroll], gg[kUnroll], c[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < at.r1) {
        const T* row = gates + (r + u) * 3 * S + at.c;
        gi[u] = *reinterpret_cast<const V*>(row);
        go[u] = *reinterpret_cast<const V*>(row + S);
        gg[u] = *reinterpret_cast<const V*>(row + 2 * S);
        c[u] = *reinterpret_cast<const V*>(static_cast<const T*>(p.old_cell) + (r + u) * S + at.c);
      }
    }
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < at.r1) {
        V h, cell;
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const A i = sigmoid(kwb::to_acc<A>(gi[u].v[j]));
          const A o = sigmoid(kwb::to_acc<A>(go[u].v[j]));
          const A g = elu(kwb::to_acc<A>(gg[u].v[j]));
          const A nc = kwb::to_acc<A>(c[u].v[j]) + i * g;
          cell.v[j] = kwb::from_acc<T>(nc);
          h.v[j] = kwb::from_acc<T>(tanh_(nc) * o);
        }
        *reinterpret_cast<V*>(static_cast<T*>(p.new_h) + (r + u) * S + at.c) = h;
        *reinterpret_cast<V*>(static_cast<T*>(p.new_cell) + (r + u) * S + at.c) = cell;
      }
    }
  }
}

// Lane r's end of forward_small_kernel: the bias, the rounded gates, the cell.
template <typename T, typename A>
__device__ __forceinline__ void finish_row(const LltmSmallForwardParams& p, int64_t b, int64_t j, A zi, A zo, A zg) {
  const int64_t S = p.state;
  const T* bias = static_cast<const T*>(p.bias);
  const T ti = kwb::from_acc<T>(zi + kwb::to_acc<A>(bias[j]));
  const T to = kwb::from_acc<T>(zo + kwb::to_acc<A>(bias[S + j]));
  const T tg = kwb::from_acc<T>(zg + kwb::to_acc<A>(bias[2 * S + j]));
  T* gates = static_cast<T*>(p.gates) + b * 3 * S + j;
  gates[0] = ti;
  gates[S] = to;
  gates[2 * S] = tg;
  const A i = sigmoid(kwb::to_acc<A>(ti)), o = sigmoid(kwb::to_acc<A>(to)), g = elu(kwb::to_acc<A>(tg));
  const A nc = kwb::to_acc<A>(static_cast<const T*>(p.old_cell)[b * S + j]) + i * g;
  static_cast<T*>(p.new_cell)[b * S + j] = kwb::from_acc<T>(nc);
  static_cast<T*>(p.new_h)[b * S + j] = kwb::from_acc<T>(tanh_(nc) * o);
}

// Copies n elements of src into shared memory as A, kStage loads in flight a thread: a loop that
// waits on each load before its store pays one trip to memory a step (a forward that staged X
// that way took 18 us at 16 / 32 / 128, kernels/lltm/NOTES.md).
template <int kThreads, typename T, typename A>
__device__ __forceinline__ void stage(int n, const T* src, A* dst) {
  constexpr int kStage = 16;
  for (int base = 0; base < n; base += kThreads * kStage) {
    T v[kStage];
#pragma unroll
    for (int i = 0; i < kStage; ++i) {
      const int e = base + i * kThreads + static_cast<int>(threadIdx.x);
      if (e < n) v[i] = __ldg(src + e);
    }
#pragma unroll
    for (int i = 0; i < kStage; ++i) {
      const int e = base + i * kThreads + static_cast<int>(threadIdx.x);
      if (e < n) dst[e] = kwb::to_acc<A>(v[i]);
    }
  }
}

constexpr int kSmallThreads = 128;

// Small batches: the product, the bias and the cell in one launch. A warp takes a unit j (grid
// stride): its lanes split the K = state + features columns of W's rows j, S + j, 2S + j and of
// kRows rows of X at a time, the warp sums the 3 x kRows partial dots, and lane r finishes row
// b0 + r. X is read where it lies (old_h's or input's row) and also written out, for backward.
// Accumulation is fp32 for half types (as cuBLAS's), and the gates are rounded to T before the
// cell reads them, as the product-then-cell path does. The fastest of five forms measured at
// 16 / 32 / 128 on the H100: X staged in shared memory, or W, the bias and old_cell read into
// registers before the product, took 11.5-18.7 us against 10.0 (kernels/lltm/NOTES.md).
template <typename T, int kRows>
__global__ void __launch_bounds__(kSmallThreads) forward_small_kernel(LltmSmallForwardParams p) {
  using A = kwb::acc_t<T>;
  const int64_t B = p.batch, F = p.features, S = p.state, K = S + F;
  const T* in = static_cast<const T*>(p.input);
  const T* h = static_cast<const T*>(p.old_h);
  const T* W = static_cast<const T*>(p.weights);
  const int64_t thread = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t threads = static_cast<int64_t>(gridDim.x) * blockDim.x;
  T* X = static_cast<T*>(p.X);
  for (int64_t e = thread; e < B * K; e += threads) {
    const int64_t b = e / K, k = e - b * K;
    X[e] = k < S ? h[b * S + k] : in[b * F + (k - S)];
  }
  const int lane = threadIdx.x % 32;
  for (int64_t j = thread / 32; j < S; j += threads / 32) {
    const T* wi = W + j * K;
    const T* wo = W + (S + j) * K;
    const T* wg = W + (2 * S + j) * K;
    for (int64_t b0 = 0; b0 < B; b0 += kRows) {
      A ai[kRows], ao[kRows], ag[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) ai[r] = ao[r] = ag[r] = A(0);
#pragma unroll 2
      for (int64_t k = lane; k < K; k += 32) {
        const A w0 = kwb::to_acc<A>(wi[k]), w1 = kwb::to_acc<A>(wo[k]), w2 = kwb::to_acc<A>(wg[k]);
        const T* col = k < S ? h + b0 * S + k : in + b0 * F + (k - S);
        const int64_t stride = k < S ? S : F;
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (b0 + r < B) {
            const A x = kwb::to_acc<A>(col[r * stride]);
            ai[r] += w0 * x;
            ao[r] += w1 * x;
            ag[r] += w2 * x;
          }
        }
      }
#pragma unroll
      for (int o = 16; o > 0; o >>= 1)
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          ai[r] += __shfl_xor_sync(0xffffffffu, ai[r], o);
          ao[r] += __shfl_xor_sync(0xffffffffu, ao[r], o);
          ag[r] += __shfl_xor_sync(0xffffffffu, ag[r], o);
        }
      A zi = A(0), zo = A(0), zg = A(0);  // lane r's row, picked without indexing registers by lane
#pragma unroll
      for (int r = 0; r < kRows; ++r)
        if (lane == r) zi = ai[r], zo = ao[r], zg = ag[r];
      const int64_t b = b0 + lane;
      if (lane < kRows && b < B) finish_row<T>(p, b, j, zi, zo, zg);
    }
  }
}

// Small batches, backward: a warp takes a unit j and lane b its batch row b (batch <= 32): the
// cell's backward for (b, j) as backward_kernel's, the bias gradient as a warp sum, then the
// weights' gradient rows j, S + j, 2S + j: lanes split X's K columns, each summing the batch's
// rounded gate gradients times X (what mm(grad_gates^T, X) computes) from shared memory.
template <typename T>
__global__ void __launch_bounds__(kSmallThreads) backward_small_kernel(LltmSmallBackwardParams p) {
  using A = kwb::acc_t<T>;
  constexpr int kWarps = kSmallThreads / 32;
  extern __shared__ unsigned char smem[];
  A* xs = reinterpret_cast<A*>(smem);  // batch x K
  __shared__ A dz[kWarps][3][32];      // each warp's unit: the batch's rounded gate gradients
  const int64_t B = p.batch, S = p.state, K = S + p.features;
  const T* X = static_cast<const T*>(p.X);
  stage<kSmallThreads>(static_cast<int>(B * K), X, xs);  // fits shared memory
  __syncthreads();
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int64_t warps = static_cast<int64_t>(gridDim.x) * kWarps;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * kWarps + warp; j < S; j += warps) {
    A si = A(0), so = A(0), sg = A(0);
    if (lane < B) {
      const int64_t b = lane;
      const T* z = static_cast<const T*>(p.gates) + b * 3 * S + j;
      const A zi = kwb::to_acc<A>(z[0]), zo = kwb::to_acc<A>(z[S]), zg = kwb::to_acc<A>(z[2 * S]);
      const A i = sigmoid(zi), o = sigmoid(zo), g = elu(zg);
      const A tc = tanh_(kwb::to_acc<A>(static_cast<const T*>(p.old_cell)[b * S + j]) + i * g);
      const A gh = kwb::to_acc<A>(static_cast<const T*>(p.grad_h)[b * S + j]);
      const A gc = kwb::to_acc<A>(static_cast<const T*>(p.grad_cell)[b * S + j]) + gh * o * (A(1) - tc * tc);
      si = gc * g * i * (A(1) - i);
      so = gh * tc * o * (A(1) - o);
      sg = gc * i * (zg > A(0) ? A(1) : exp_(zg));
      const T ti = kwb::from_acc<T>(si), to = kwb::from_acc<T>(so), tg = kwb::from_acc<T>(sg);
      T* gz = static_cast<T*>(p.grad_gates) + b * 3 * S + j;
      gz[0] = ti;
      gz[S] = to;
      gz[2 * S] = tg;
      static_cast<T*>(p.grad_old_cell)[b * S + j] = kwb::from_acc<T>(gc);
      dz[warp][0][lane] = kwb::to_acc<A>(ti);
      dz[warp][1][lane] = kwb::to_acc<A>(to);
      dz[warp][2][lane] = kwb::to_acc<A>(tg);
    }
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      si += __shfl_xor_sync(0xffffffffu, si, o);
      so += __shfl_xor_sync(0xffffffffu, so, o);
      sg += __shfl_xor_sync(0xffffffffu, sg, o);
    }
    if (lane == 0) {
      T* gb = static_cast<T*>(p.grad_bias) + j;
      gb[0] = kwb::from_acc<T>(si);
      gb[S] = kwb::from_acc<T>(so);
      gb[2 * S] = kwb::from_acc<T>(sg);
    }
    __syncwarp();
    T* gw = static_cast<T*>(p.grad_weights);
#pragma unroll 2
    for (int64_t k = lane; k < K; k += 32) {
      A wi = A(0), wo = A(0), wg = A(0);
      for (int64_t b = 0; b < B; ++b) {
        const A x = xs[b * K + k];
        wi += dz[warp][0][b] * x;
        wo += dz[warp][1][b] * x;
        wg += dz[warp][2][b] * x;
      }
      gw[j * K + k] = kwb::from_acc<T>(wi);
      gw[(S + j) * K + k] = kwb::from_acc<T>(wo);
      gw[(2 * S + j) * K + k] = kwb::from_acc<T>(wg);
    }
    __syncwarp();  // dz is rewritten by the warp's next unit
  }
}

template <typename T, int kVec>
__global__ void __launch_bounds__(256) backward_kernel(LltmBackwardParams p, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const kwb::TilePlace at = kwb::tile_place(t, kVec);
  if (at.c >= t.cols) return;
  const int64_t S = p.state;
  const T* gates = static_cast<const T*>(p.gates);
  A si[kVec], so[kVec], sg[kVec];  // this thread's partial sums of the bias gradient
#pragma unroll
  for (int j = 0; j < kVec; ++j) si[j] = so[j] = sg[j] = A(0);
  for (int64_t r = at.r0; r < at.r1; ++r) {
    const T* row = gates + r * 3 * S + at.c;
    const V gi = *reinterpret_cast<const V*>(row), go = *reinterpret_cast<const V*>(row + S),
            gg = *reinterpret_cast<const V*>(row + 2 * S);
    const V c = *reinterpret_cast<const V*>(static_cast<const T*>(p.old_cell) + r * S + at.c);
    const V dh = *reinterpret_cast<const V*>(static_cast<const T*>(p.grad_h) + r * S + at.c);
    const V dc = *reinterpret_cast<const V*>(static_cast<const T*>(p.grad_cell) + r * S + at.c);
    V d_i, d_o, d_g, d_c;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const A zi = kwb::to_acc<A>(gi.v[j]), zo = kwb::to_acc<A>(go.v[j]), zg = kwb::to_acc<A>(gg.v[j]);
      const A i = sigmoid(zi), o = sigmoid(zo), g = elu(zg);
      const A tc = tanh_(kwb::to_acc<A>(c.v[j]) + i * g);
      const A gh = kwb::to_acc<A>(dh.v[j]);
      const A gc = kwb::to_acc<A>(dc.v[j]) + gh * o * (A(1) - tc * tc);  // dL/dnew_cell, all paths
      const A dzi = gc * g * i * (A(1) - i);
      const A dzo = gh * tc * o * (A(1) - o);
      const A dzg = gc * i * (zg > A(0) ? A(1) : exp_(zg));  // elu'(z) = exp(z) for z <= 0
      si[j] += dzi;
      so[j] += dzo;
      sg[j] += dzg;
      d_i.v[j] = kwb::from_acc<T>(dzi);
      d_o.v[j] = kwb::from_acc<T>(dzo);
      d_g.v[j] = kwb::from_acc<T>(dzg);
      d_c.v[j] = kwb::from_acc<T>(gc);
    }
    T* grow = static_cast<T*>(p.grad_gates) + r * 3 * S + at.c;
    *reinterpret_cast<V*>(grow) = d_i;
    *reinterpret_cast<V*>(grow + S) = d_o;
    *reinterpret_cast<V*>(grow + 2 * S) = d_g;
    *reinterpret_cast<V*>(static_cast<T*>(p.grad_old_cell) + r * S + at.c) = d_c;
  }
  if (t.row_blocks == 1) {  // one run covers the batch: these are the bias gradient itself
    T* grad_bias = static_cast<T*>(p.grad_bias) + at.c;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      grad_bias[j] = kwb::from_acc<T>(si[j]);
      grad_bias[S + j] = kwb::from_acc<T>(so[j]);
      grad_bias[2 * S + j] = kwb::from_acc<T>(sg[j]);
    }
    return;
  }
  A* partial = static_cast<A*>(p.workspace) + at.row_block * 3 * S + at.c;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    partial[j] = si[j];
    partial[S + j] = so[j];
    partial[2 * S + j] = sg[j];
  }
}

constexpr double kForwardWaves = 4;

template <typename T>
const char* forward(const LltmForwardParams& p, bool aligned, cudaStream_t stream) {
  const int vec = kwb::row_vec<T>(p.state, aligned);
  const kwb::RowTiling t = kwb::row_tiling(p.batch, p.state, vec, kForwardWaves);
  if (t.blocks() == 0) return nullptr;
  const unsigned blocks = static_cast<unsigned>(t.blocks());
  if (vec > 1) forward_kernel<T, 16 / sizeof(T)><<<blocks, t.threads, 0, stream>>>(p, t);
  else forward_kernel<T, 1><<<blocks, t.threads, 0, stream>>>(p, t);
  return kwb::last_launch_error();
}

template <typename T>
const char* forward_small(const LltmSmallForwardParams& p, cudaStream_t stream) {
  constexpr int kWarps = kSmallThreads / 32;
  const int64_t blocks = (p.state + kWarps - 1) / kWarps, cap = static_cast<int64_t>(kwb::sm_count()) * 16;
  const unsigned grid = static_cast<unsigned>(blocks < cap ? blocks : cap);
  // 4 rows a pass at tiny batches: the warp's sums are 3 x kRows shuffle reductions
  if (p.batch <= 4) forward_small_kernel<T, 4><<<grid, kSmallThreads, 0, stream>>>(p);
  else forward_small_kernel<T, 16><<<grid, kSmallThreads, 0, stream>>>(p);
  return kwb::last_launch_error();
}

template <typename T>
const char* backward_small(const LltmSmallBackwardParams& p, cudaStream_t stream) {
  constexpr int kWarps = kSmallThreads / 32;
  const int64_t blocks = (p.state + kWarps - 1) / kWarps;  // a warp a unit
  const unsigned grid = static_cast<unsigned>(blocks < 0x7fffffff ? blocks : 0x7fffffff);
  const size_t smem = static_cast<size_t>(p.batch * (p.state + p.features)) * sizeof(kwb::acc_t<T>);
  backward_small_kernel<T><<<grid, kSmallThreads, smem, stream>>>(p);
  return kwb::last_launch_error();
}

template <typename T>
const char* backward(const LltmBackwardParams& p, bool aligned, cudaStream_t stream) {
  using A = kwb::acc_t<T>;
  const int vec = kwb::row_vec<T>(p.state, aligned);
  const kwb::RowTiling t = kwb::column_sum_tiling(p.batch, p.state, vec);
  if (t.blocks() > 0) {
    const unsigned blocks = static_cast<unsigned>(t.blocks());
    if (vec > 1) backward_kernel<T, 16 / sizeof(T)><<<blocks, t.threads, 0, stream>>>(p, t);
    else backward_kernel<T, 1><<<blocks, t.threads, 0, stream>>>(p, t);
  }
  // a workspace row holds the three gates' partial sums side by side
  kwb::sum_row_blocks(t, static_cast<const A*>(p.workspace), static_cast<T*>(p.grad_bias), 3 * p.state, stream);
  return kwb::last_launch_error();
}

}  // namespace

int64_t lltm_backward_workspace_rows(int64_t batch, int64_t state, kwb::DType dtype, bool aligned) {
  return kwb::column_sum_workspace_rows(batch, state, dtype, aligned);
}

const char* lltm_forward_cuda(const LltmForwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] { return forward<T>(p, aligned, stream); });
}

const char* lltm_forward_small_cuda(const LltmSmallForwardParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] { return forward_small<T>(p, stream); });
}

const char* lltm_backward_small_cuda(const LltmSmallBackwardParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] { return backward_small<T>(p, stream); });
}

const char* lltm_backward_cuda(const LltmBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] { return backward<T>(p, aligned, stream); });
}
