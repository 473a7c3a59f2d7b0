// GELU's backward over rows x cols, with the column sums of what it writes:
//   grad_x[r, c] = grad[r, c] * GELU'(x[r, c] + bias[c]),  grad_bias[c] = sum over r of grad_x[r, c]
// bias_gelu's backward, and linear_gelu's with no bias (x is then the product x W^T + b, and
// grad_bias b's gradient): one pass over grad and x, where an elementwise map and at::sum took
// two (linear_gelu bf16, 32 x 768 -> 3072 on the H100: 1.4 us, then 4.1 us).
//
// A block owns a run of column vectors and a run of rows (kwb_rows.cuh's tiling), keeps its
// column sums in registers and writes them as one row of fp32 partials (fp64 for double data),
// which column_sums then adds in a fixed order: no atomics, the same result every run. The sums
// take the unrounded fp32 products: one rounding at the end, not one per row.
#pragma once
#include "kwb_gelu.cuh"
#include "kwb_rows.cuh"

namespace kwb {
namespace {

constexpr int kGeluBackwardUnroll = 4;  // rows in flight a thread: 4 x 16-byte loads each of grad and x

// bias may be nullptr (no bias).
template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(256) gelu_backward_rows_kernel(const T* __restrict__ grad, const T* __restrict__ x,
                                                                 const T* __restrict__ bias, T* __restrict__ grad_x,
                                                                 acc_t<T>* __restrict__ partial,
                                                                 T* __restrict__ grad_bias, RowTiling t) {
  using A = acc_t<T>;
  using V = Vec<T, kVec>;
  constexpr bool kFast = sizeof(T) == 2;
  constexpr int kUnroll = kGeluBackwardUnroll;
  const TilePlace p = tile_place(t, kVec);
  if (p.c >= t.cols) return;
  A b[kVec], sum[kVec];
  if (bias != nullptr) {
    const V bv = *reinterpret_cast<const V*>(bias + p.c);
#pragma unroll
    for (int j = 0; j < kVec; ++j) b[j] = to_acc<A>(bv.v[j]);
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) b[j] = A(0);
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) sum[j] = A(0);
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
          const A d = to_acc<A>(g[u].v[j]) * gelu_grad<kTanh, kFast>(to_acc<A>(in[u].v[j]) + b[j]);
          sum[j] += d;
          out.v[j] = from_acc<T>(d);
        }
        *reinterpret_cast<V*>(grad_x + (r + u) * t.cols + p.c) = out;
      }
    }
  }
  if (t.row_blocks == 1) {  // one run covers every row
#pragma unroll
    for (int j = 0; j < kVec; ++j) grad_bias[p.c + j] = from_acc<T>(sum[j]);
  } else {
    store_sums<kVec>(partial + p.row_block * t.cols + p.c, sum);
  }
}

// Batches of kGeluBackwardMinRows + 1 to kLaneMaxRows rows, in one launch: a block holds every
// row of kLaneCols column vectors, kLanes row lanes a column, and adds the lanes' sums in shared
// memory in a fixed order, so grad_bias needs no second kernel: the tiling below writes partial
// sums that column_sums adds in a second launch, where Inductor's one persistent reduction takes
// 2.0 us at linear_gelu's 32 x 3072 bf16 on the H100.
constexpr int kLanes = 32, kLaneCols = 8, kLaneUnroll = 4;
constexpr int64_t kLaneMaxRows = kLanes * kLaneUnroll;

template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(kLanes * kLaneCols) gelu_backward_lanes_kernel(
    const T* __restrict__ grad, const T* __restrict__ x, const T* __restrict__ bias, T* __restrict__ grad_x,
    T* __restrict__ grad_bias, int64_t rows, int64_t cols) {
  using A = acc_t<T>;
  using V = Vec<T, kVec>;
  constexpr bool kFast = sizeof(T) == 2;
  constexpr int kWidth = kLaneCols * kVec;  // columns a block
  __shared__ A lane_sums[kLanes][kWidth];
  const int cv = threadIdx.x % kLaneCols, lane = threadIdx.x / kLaneCols;  // 8 threads: 128 bytes of a row
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kWidth + cv * kVec;
  const bool live = c < cols;
  A b[kVec], sum[kVec];
#pragma unroll
  for (int j = 0; j < kVec; ++j) sum[j] = b[j] = A(0);
  if (live && bias != nullptr) {
    const V bv = *reinterpret_cast<const V*>(bias + c);
#pragma unroll
    for (int j = 0; j < kVec; ++j) b[j] = to_acc<A>(bv.v[j]);
  }
  V g[kLaneUnroll], in[kLaneUnroll];
#pragma unroll
  for (int u = 0; u < kLaneUnroll; ++u) {  // every row's loads before any math
    const int64_t r = lane + u * kLanes;
    if (live && r < rows) {
      g[u] = *reinterpret_cast<const V*>(grad + r * cols + c);
      in[u] = *reinterpret_cast<const V*>(x + r * cols + c);
    }
  }
#pragma unroll
  for (int u = 0; u < kLaneUnroll; ++u) {
    const int64_t r = lane + u * kLanes;
    if (live && r < rows) {
      V out;
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const A d = to_acc<A>(g[u].v[j]) * gelu_grad<kTanh, kFast>(to_acc<A>(in[u].v[j]) + b[j]);
        sum[j] += d;
        out.v[j] = from_acc<T>(d);
      }
      *reinterpret_cast<V*>(grad_x + r * cols + c) = out;
    }
  }
#pragma unroll
  for (int j = 0; j < kVec; ++j) lane_sums[lane][cv * kVec + j] = sum[j];
  __syncthreads();
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kWidth + threadIdx.x;
  if (threadIdx.x < kWidth && col < cols) {
    A total = A(0);
#pragma unroll
    for (int y = 0; y < kLanes; ++y) total += lane_sums[y][threadIdx.x];
    grad_bias[col] = from_acc<T>(total);
  }
}

// column_sum_tiling's, but no fewer than kGeluBackwardMinRows rows a block, in narrower blocks (64
// threads) where that leaves too few. At bias_gelu's 256 x 4096 bf16 one row a block wrote 256
// rows of fp32 partial sums (4 MB, more than grad, x and grad_x together): 9.0 us on the H100
// (profile_step.py); 3.3 us at 4 rows a block with 16-byte partial stores (Inductor's pointwise
// backward: 3.4 us, then 3.4 us of sums).
constexpr int64_t kGeluBackwardMinRows = 4;

inline RowTiling gelu_backward_tiling(int64_t rows, int64_t cols, int vec) {
  RowTiling t = column_sum_tiling(rows, cols, vec);
  if (t.rows_per_block >= kGeluBackwardMinRows || rows <= 1) return t;
  t.threads = t.threads < 64 ? t.threads : 64;
  t.col_blocks = ((cols + vec - 1) / vec + t.threads - 1) / t.threads;
  t.rows_per_block = rows < kGeluBackwardMinRows ? rows : kGeluBackwardMinRows;
  t.row_blocks = (rows + t.rows_per_block - 1) / t.rows_per_block;
  return t;
}

// Rows of the partial-sum workspace gelu_backward_rows needs: the binding .cpp allocates
// them (of float, double for double data) before the launch.
inline bool uses_lanes(int64_t rows) { return rows > kGeluBackwardMinRows && rows <= kLaneMaxRows; }

inline int64_t gelu_backward_workspace_rows(int64_t rows, int64_t cols, DType dtype, bool aligned) {
  if (uses_lanes(rows)) return 0;
  int vec = 1;
  KWB_DTYPE_SWITCH(dtype, T, [&] {
    vec = row_vec<T>(cols, aligned);
    return nullptr;
  });
  return gelu_backward_tiling(rows, cols, vec).row_blocks;
}

// aligned: grad, x, bias (when given) and grad_x are 16-byte aligned. Returns CUDA's error or nullptr.
template <typename T, bool kTanh>
const char* gelu_backward_rows(const T* grad, const T* x, const T* bias, T* grad_x, T* grad_bias, acc_t<T>* workspace,
                               int64_t rows, int64_t cols, bool aligned, cudaStream_t stream) {
  const int vec = row_vec<T>(cols, aligned);
  if (uses_lanes(rows) && cols > 0) {
    const unsigned blocks = static_cast<unsigned>((cols + kLaneCols * vec - 1) / (kLaneCols * vec));
    constexpr int kThreads = kLanes * kLaneCols;
    if (vec > 1)
      gelu_backward_lanes_kernel<T, 16 / sizeof(T), kTanh><<<blocks, kThreads, 0, stream>>>(grad, x, bias, grad_x,
                                                                                            grad_bias, rows, cols);
    else gelu_backward_lanes_kernel<T, 1, kTanh><<<blocks, kThreads, 0, stream>>>(grad, x, bias, grad_x, grad_bias, rows, cols);
    return last_launch_error();
  }
  const RowTiling t = gelu_backward_tiling(rows, cols, vec);
  if (t.blocks() > 0) {
    const unsigned blocks = static_cast<unsigned>(t.blocks());
    if (vec > 1)
      gelu_backward_rows_kernel<T, 16 / sizeof(T), kTanh><<<blocks, t.threads, 0, stream>>>(grad, x, bias, grad_x, workspace,
                                                                                             grad_bias, t);
    else gelu_backward_rows_kernel<T, 1, kTanh><<<blocks, t.threads, 0, stream>>>(grad, x, bias, grad_x, workspace, grad_bias, t);
  }
  sum_row_blocks(t, workspace, grad_bias, cols, stream);
  return last_launch_error();
}

}  // namespace
}  // namespace kwb
