// lltm CUDA kernels: everything of the LLTM cell around its matrix product, one kernel each way.
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

const char* lltm_backward_cuda(const LltmBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] { return backward<T>(p, aligned, stream); });
}
