// lltm CUDA kernels: everything of the LLTM cell around its matrix product, one kernel each way;
// for small batches (lltm.h, lltm_small_step), a forward kernel that does the product as
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

// 16-bit data (kwb::kHalfType) take the fast exp and reciprocal (kwb_cuda.cuh) in the sigmoids and
// the elu: with expf, expm1f and IEEE divisions the cell was compute-bound, 31 us (bf16) and 22 us
// (fp16) at 4096 x 1024 against Inductor's 18 us (kernels/lltm/NOTES.md).

// exp(v) - 1 for v <= 0. Fast: __expf(v) - 1 is off by up to ~2.4e-7, more than half a 16-bit ulp
// of the result for |v| below ~5e-4, so near 0 a cubic (relative error under 1.3e-6 at 1/32).
template <bool kFast> __device__ __forceinline__ float expm1_(float v) {
  if (!kFast) return expm1f(v);
  return v > -0x1p-5f ? v * (1.f + v * (0.5f + v * (1.f / 6))) : __expf(v) - 1.f;
}
template <bool kFast> __device__ __forceinline__ double expm1_(double v) { return expm1(v); }
__device__ __forceinline__ float tanh_(float v) { return tanhf(v); }
__device__ __forceinline__ double tanh_(double v) { return tanh(v); }

template <bool kFast, typename A> __device__ __forceinline__ A sigmoid(A z) {
  return kwb::div_<kFast>(A(1), A(1) + kwb::exp_<kFast>(-z));
}
template <bool kFast, typename A> __device__ __forceinline__ A elu(A z) {  // alpha = 1
  return z > A(0) ? z : expm1_<kFast>(z);
}

// The cell at one (row, unit), from its three gates (bias included) and old_cell.
template <typename A> struct CellOut { A cell, h; };
template <bool kFast, typename A> __device__ __forceinline__ CellOut<A> cell_forward(A zi, A zo, A zg, A old_cell) {
  const A nc = old_cell + sigmoid<kFast>(zi) * elu<kFast>(zg);
  return {nc, tanh_(nc) * sigmoid<kFast>(zo)};
}

// Its backward from dL/dnew_h (gh) and dL/dnew_cell (gcell): the three gates' gradients, and
// old_cell's (dL/dnew_cell along all paths).
template <typename A> struct CellGrad { A zi, zo, zg, cell; };
template <bool kFast, typename A>
__device__ __forceinline__ CellGrad<A> cell_backward(A zi, A zo, A zg, A old_cell, A gh, A gcell) {
  const A i = sigmoid<kFast>(zi), o = sigmoid<kFast>(zo), g = elu<kFast>(zg);
  const A tc = tanh_(old_cell + i * g);
  const A gc = gcell + gh * o * (A(1) - tc * tc);
  // elu'(z) = exp(z) for z <= 0
  return {gc * g * i * (A(1) - i), gh * tc * o * (A(1) - o), gc * i * (zg > A(0) ? A(1) : kwb::exp_<kFast>(zg)), gc};
}

template <typename T, int kVec>
__global__ void __launch_bounds__(256) forward_kernel(LltmForwardParams p, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const kwb::TilePlace at = kwb::tile_place(t, kVec);
  if (at.c >= t.cols) return;
  const int64_t S = p.state;
  const T* gates = static_cast<const T*>(p.gates);
  // One row at a time: its 4 loads of 16 bytes are in flight together. Two rows a thread took
  // 100 registers in bf16 (5 blocks of 128 an SM) and the cell 21 us at 4096 x 1024, one row
  // 40 (kernels/lltm/NOTES.md).
  for (int64_t r = at.r0; r < at.r1; ++r) {
    const T* row = gates + r * 3 * S + at.c;
    const V gi = *reinterpret_cast<const V*>(row);
    const V go = *reinterpret_cast<const V*>(row + S);
    const V gg = *reinterpret_cast<const V*>(row + 2 * S);
    const V c = *reinterpret_cast<const V*>(static_cast<const T*>(p.old_cell) + r * S + at.c);
    V h, cell;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      const CellOut<A> out = cell_forward<kwb::kHalfType<T>>(kwb::to_acc<A>(gi.v[j]), kwb::to_acc<A>(go.v[j]),
                                                            kwb::to_acc<A>(gg.v[j]), kwb::to_acc<A>(c.v[j]));
      cell.v[j] = kwb::from_acc<T>(out.cell);
      h.v[j] = kwb::from_acc<T>(out.h);
    }
    *reinterpret_cast<V*>(static_cast<T*>(p.new_h) + r * S + at.c) = h;
    *reinterpret_cast<V*>(static_cast<T*>(p.new_cell) + r * S + at.c) = cell;
  }
}

// Lane r's end of forward_small_kernel: the bias, the rounded gates, the cell, from the bias and
// old_cell values it read before the product.
template <typename T, typename A>
__device__ __forceinline__ void finish_row(const LltmSmallForwardParams& p, int b, int j, A zi, A zo, A zg,
                                           const T (&bias)[3], T old_cell) {
  const int S = static_cast<int>(p.state);
  const T ti = kwb::from_acc<T>(zi + kwb::to_acc<A>(bias[0]));
  const T to = kwb::from_acc<T>(zo + kwb::to_acc<A>(bias[1]));
  const T tg = kwb::from_acc<T>(zg + kwb::to_acc<A>(bias[2]));
  T* gates = static_cast<T*>(p.gates) + static_cast<int64_t>(b) * 3 * S + j;
  gates[0] = ti;
  gates[S] = to;
  gates[2 * S] = tg;
  const CellOut<A> out = cell_forward<kwb::kHalfType<T>>(kwb::to_acc<A>(ti), kwb::to_acc<A>(to), kwb::to_acc<A>(tg),
                                                         kwb::to_acc<A>(old_cell));
  static_cast<T*>(p.new_cell)[static_cast<int64_t>(b) * S + j] = kwb::from_acc<T>(out.cell);
  static_cast<T*>(p.new_h)[static_cast<int64_t>(b) * S + j] = kwb::from_acc<T>(out.h);
}

constexpr int kSmallThreads = 128;
constexpr int kRows = 4;    // batch rows a forward warp sums: a unit's batch is split over warps
constexpr int kChunk = 8;   // of W's and X's columns a lane loads before it multiplies: K <= 256 in one trip

// Small batches: the product, the bias and the cell in one launch. A warp takes a unit j and
// kRows rows of the batch from b0 (ceil(batch / kRows) consecutive warps a unit: at batches 1-8
// and 13-16 they share a block, and W's rows in L1). Its lanes split the K = state + features
// columns of W's rows j, S + j, 2S + j and of X's rows, read where they lie (old_h's or input's
// row, no cat); the warp sums the 3 x kRows partial dots, and lane r adds the bias, rounds the
// gates to T (as addmm's output was) and finishes row b0 + r's cell. X goes out for backward
// from the whole grid.
// The work is a few trips to memory, not arithmetic: the loads are issued before the first store
// and before any arithmetic waits on them (X's copy, W and X in chunks of kChunk columns a lane,
// the bias and old_cell), so where K <= 32 kChunk and batch x K <= the grid's threads (the
// tutorial's 16 / 32 / 128: 160 and 2560 <= 16384) a warp waits on memory once; a longer row
// takes a trip a chunk, and X's elements past the grid's threads are copied at the end. With the
// copy first, the product loop 4 columns at a time and the bias and old_cell read after the sums
// it waited 4 times: 5.9 us a call in CUDA graphs against torch.compile's 6.5 (kernels/lltm/NOTES.md).
// Accumulation is fp32 for half types (as cuBLAS's).
template <typename T>
__global__ void __launch_bounds__(kSmallThreads) forward_small_kernel(LltmSmallForwardParams p) {
  using A = kwb::acc_t<T>;
  // int indices: batch * K is bounded (lltm_small_step); W's rows are 64-bit offsets
  const int B = static_cast<int>(p.batch), F = static_cast<int>(p.features), S = static_cast<int>(p.state), K = S + F;
  const T* in = static_cast<const T*>(p.input);
  const T* h = static_cast<const T*>(p.old_h);
  const int thread = blockIdx.x * kSmallThreads + threadIdx.x, threads = gridDim.x * kSmallThreads;
  const T zero = kwb::from_acc<T>(A(0));
  auto x_at = [&](int e) {
    const int b = e / K, k = e - b * K;
    return k < S ? h[b * S + k] : in[b * F + (k - S)];
  };
  // this thread's first element of X, stored last
  const T x_first = thread < B * K ? x_at(thread) : zero;

  const int groups = (B + kRows - 1) / kRows, warp = thread / 32, lane = threadIdx.x % 32;
  if (warp < S * groups) {  // warp-uniform: the shuffles below see whole warps
    const int j = warp / groups, b0 = (warp - j * groups) * kRows;
    const bool owns_row = lane < kRows && b0 + lane < B;
    T bias[3] = {zero, zero, zero}, old_cell = zero;
    if (owns_row) {
      const T* bias_p = static_cast<const T*>(p.bias);
      bias[0] = bias_p[j], bias[1] = bias_p[S + j], bias[2] = bias_p[2 * S + j];
      old_cell = static_cast<const T*>(p.old_cell)[(b0 + lane) * S + j];
    }
    const T* wi = static_cast<const T*>(p.weights) + static_cast<int64_t>(j) * K;
    const T* wo = wi + static_cast<int64_t>(S) * K;
    const T* wg = wo + static_cast<int64_t>(S) * K;
    A ai[kRows], ao[kRows], ag[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) ai[r] = ao[r] = ag[r] = A(0);
    for (int k0 = 0; k0 < K; k0 += 32 * kChunk) {
      T w[3][kChunk], x[kRows][kChunk];
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const int k = k0 + 32 * c + lane;
        const bool in_row = k < K;
        w[0][c] = in_row ? wi[k] : zero;
        w[1][c] = in_row ? wo[k] : zero;
        w[2][c] = in_row ? wg[k] : zero;
        const T* col = k < S ? h + b0 * S + k : in + b0 * F + (k - S);
        const int stride = k < S ? S : F;
#pragma unroll
        for (int r = 0; r < kRows; ++r) x[r][c] = in_row && b0 + r < B ? col[r * stride] : zero;
      }
#pragma unroll
      for (int c = 0; c < kChunk; ++c) {
        const A w0 = kwb::to_acc<A>(w[0][c]), w1 = kwb::to_acc<A>(w[1][c]), w2 = kwb::to_acc<A>(w[2][c]);
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          const A xv = kwb::to_acc<A>(x[r][c]);
          ai[r] += w0 * xv;
          ao[r] += w1 * xv;
          ag[r] += w2 * xv;
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
    if (owns_row) finish_row<T>(p, b0 + lane, j, zi, zo, zg, bias, old_cell);
  }
  T* X = static_cast<T*>(p.X);
  if (thread < B * K) X[thread] = x_first;
  for (int e = thread + threads; e < B * K; e += threads) X[e] = x_at(e);  // batch * K past the grid's threads
}

// Small batches, backward: a warp takes a unit j and a slice of 32 of X's K columns (ceil(K / 32)
// warps a unit), lane b the batch row b (batch <= 32): the cell's backward for (b, j) as
// backward_kernel's (each slice's warp computes it; slice 0 writes it and the bias gradient, a
// warp sum), then lane c the weights' gradient at column 32 s + c of rows j, S + j, 2S + j: the
// batch's rounded gate gradients (shuffled from lane b) times X[b, c] (what mm(grad_gates^T, X)
// computes).
template <typename T>
__global__ void __launch_bounds__(kSmallThreads) backward_small_kernel(LltmSmallBackwardParams p) {
  using A = kwb::acc_t<T>;
  const int B = static_cast<int>(p.batch), S = static_cast<int>(p.state), K = S + static_cast<int>(p.features);
  const int slices = (K + 31) / 32, warp = (blockIdx.x * kSmallThreads + threadIdx.x) / 32, lane = threadIdx.x % 32;
  if (warp >= S * slices) return;
  const int j = warp / slices, slice = warp - j * slices;
  A si = A(0), so = A(0), sg = A(0), ri = A(0), ro = A(0), rg = A(0);  // s*: exact, r*: rounded to T
  if (lane < B) {
    const int b = lane;
    const T* z = static_cast<const T*>(p.gates) + b * 3 * S + j;
    const CellGrad<A> d = cell_backward<kwb::kHalfType<T>>(kwb::to_acc<A>(z[0]), kwb::to_acc<A>(z[S]), kwb::to_acc<A>(z[2 * S]),
                                        kwb::to_acc<A>(static_cast<const T*>(p.old_cell)[b * S + j]),
                                        kwb::to_acc<A>(static_cast<const T*>(p.grad_h)[b * S + j]),
                                        kwb::to_acc<A>(static_cast<const T*>(p.grad_cell)[b * S + j]));
    si = d.zi;
    so = d.zo;
    sg = d.zg;
    const T ti = kwb::from_acc<T>(si), to = kwb::from_acc<T>(so), tg = kwb::from_acc<T>(sg);
    ri = kwb::to_acc<A>(ti), ro = kwb::to_acc<A>(to), rg = kwb::to_acc<A>(tg);
    if (slice == 0) {
      T* gz = static_cast<T*>(p.grad_gates) + b * 3 * S + j;
      gz[0] = ti;
      gz[S] = to;
      gz[2 * S] = tg;
      static_cast<T*>(p.grad_old_cell)[b * S + j] = kwb::from_acc<T>(d.cell);
    }
  }
  if (slice == 0) {
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
  }
  const int k = slice * 32 + lane;
  const T* x = static_cast<const T*>(p.X) + (k < K ? k : 0);
  A wi = A(0), wo = A(0), wg = A(0);
#pragma unroll 4
  for (int b = 0; b < B; ++b) {
    const A di = __shfl_sync(0xffffffffu, ri, b), dout = __shfl_sync(0xffffffffu, ro, b),
            dg = __shfl_sync(0xffffffffu, rg, b);
    const A xv = kwb::to_acc<A>(x[b * K]);
    wi += di * xv;
    wo += dout * xv;
    wg += dg * xv;
  }
  if (k < K) {
    T* gw = static_cast<T*>(p.grad_weights) + static_cast<int64_t>(j) * K + k;
    gw[0] = kwb::from_acc<T>(wi);
    gw[static_cast<int64_t>(S) * K] = kwb::from_acc<T>(wo);
    gw[static_cast<int64_t>(2 * S) * K] = kwb::from_acc<T>(wg);
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
      const CellGrad<A> d = cell_backward<kwb::kHalfType<T>>(kwb::to_acc<A>(gi.v[j]), kwb::to_acc<A>(go.v[j]), kwb::to_acc<A>(gg.v[j]),
                                          kwb::to_acc<A>(c.v[j]), kwb::to_acc<A>(dh.v[j]), kwb::to_acc<A>(dc.v[j]));
      si[j] += d.zi;
      so[j] += d.zo;
      sg[j] += d.zg;
      d_i.v[j] = kwb::from_acc<T>(d.zi);
      d_o.v[j] = kwb::from_acc<T>(d.zo);
      d_g.v[j] = kwb::from_acc<T>(d.zg);
      d_c.v[j] = kwb::from_acc<T>(d.cell);
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
  const int64_t warps = p.state * ((p.batch + kRows - 1) / kRows);  // a warp a unit and kRows rows
  const int64_t blocks = (warps * 32 + kSmallThreads - 1) / kSmallThreads;
  forward_small_kernel<T><<<static_cast<unsigned>(blocks), kSmallThreads, 0, stream>>>(p);
  return kwb::last_launch_error();
}

template <typename T>
const char* backward_small(const LltmSmallBackwardParams& p, cudaStream_t stream) {
  const int64_t warps = p.state * ((p.state + p.features + 31) / 32);  // a warp a unit and 32 columns
  const int64_t blocks = (warps * 32 + kSmallThreads - 1) / kSmallThreads;
  backward_small_kernel<T><<<static_cast<unsigned>(blocks), kSmallThreads, 0, stream>>>(p);
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
