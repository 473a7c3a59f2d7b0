// Row-major [rows, cols] data where each column has values of its own (a bias, a per-feature
// gate): the launch geometry, and the column sums a backward needs (grad_bias = sum over rows).
//
// Each block owns `threads` column vectors (kVec consecutive columns each) and a run of
// rows_per_block rows. A thread loads its column's per-column values once and walks down its
// rows: no division or modulo per element (a flat index would need `i % cols` for the bias),
// and a column sum that stays in registers until the end of the run.
//
// Column sums are deterministic: each block writes its partial sums to workspace[row_block,
// col] (no atomics), and column_sums() adds the row blocks up in a fixed order. The rows per
// block are chosen so that the workspace stays small: one wave of blocks over the GPU, and
// at most kMaxSumBlocks row blocks (its size at bf16 8192 x 8192: kernels/bias_gelu/NOTES.md).
#pragma once
#include "kwb_cuda.cuh"

namespace kwb {
namespace {

struct RowTiling {
  int64_t rows, cols;      // the data is rows x cols, row-major
  int64_t col_blocks;      // blocks across the columns
  int64_t row_blocks;      // blocks down the rows
  int64_t rows_per_block;
  int threads;             // threads per block, each owning one column vector

  int64_t blocks() const { return col_blocks * row_blocks; }
};

// 16-byte vectors when every pointer is aligned and a row is a whole number of them.
template <typename T>
int row_vec(int64_t cols, bool aligned) {
  constexpr int kVec = 16 / sizeof(T);
  return aligned && cols % kVec == 0 ? kVec : 1;
}

// Row blocks that write column sums are capped at this many: the cap bounds the partials to sum
// without taking parallelism from small batches, as a floor of rows per block did (kernels/lltm/NOTES.md).
constexpr int64_t kMaxSumBlocks = 256;

// waves: how many times the grid should fill the GPU (at 2048 threads per SM). More waves,
// shorter runs of rows; 1 wave keeps the column-sum workspace small. max_row_blocks: a cap on
// the blocks down the rows (0: none).
inline RowTiling row_tiling(int64_t rows, int64_t cols, int vec, double waves, int64_t max_row_blocks = 0) {
  RowTiling t{};
  t.rows = rows;
  t.cols = cols;
  const int64_t col_vecs = (cols + vec - 1) / vec;
  // Narrow rows get narrower blocks: 37 columns use one warp, not 256 threads of which 219 idle.
  const int64_t warps = (col_vecs + 31) / 32;
  t.threads = static_cast<int>(warps >= 8 ? 256 : (warps < 1 ? 32 : warps * 32));
  t.col_blocks = (col_vecs + t.threads - 1) / t.threads;
  if (t.col_blocks == 0) return t;  // no columns: no blocks (and no division by zero below)
  const double slots = static_cast<double>(sm_count()) * (2048 / t.threads) * waves;
  int64_t want = static_cast<int64_t>(slots / static_cast<double>(t.col_blocks));
  want = want < 1 ? 1 : (want > rows ? rows : want);
  t.rows_per_block = rows > 0 ? (rows + want - 1) / want : 1;
  if (max_row_blocks > 0 && rows > 0) {
    const int64_t floor_rows = (rows + max_row_blocks - 1) / max_row_blocks;
    if (t.rows_per_block < floor_rows) t.rows_per_block = floor_rows;
  }
  t.row_blocks = rows > 0 ? (rows + t.rows_per_block - 1) / t.rows_per_block : 0;
  return t;
}

// The tiling of a backward that sums columns over rows: one wave of long runs of rows (a small
// workspace of partial sums), at most kMaxSumBlocks row blocks.
inline RowTiling column_sum_tiling(int64_t rows, int64_t cols, int vec) {
  return row_tiling(rows, cols, vec, 1.0, kMaxSumBlocks);
}

// column_sum_tiling()'s row blocks for the dtype's 16-byte vectors: the workspace rows a binding
// .cpp allocates before the launch.
inline int64_t column_sum_workspace_rows(int64_t rows, int64_t cols, DType dtype, bool aligned) {
  int vec = 1;
  KWB_DTYPE_SWITCH(dtype, T, [&] {
    vec = row_vec<T>(cols, aligned);
    return nullptr;
  });
  return column_sum_tiling(rows, cols, vec).row_blocks;
}

// A thread's place under tiling t: its first column c (vec columns from there; none when
// c >= t.cols) and its run of rows [r0, r1), in row block row_block.
struct TilePlace {
  int64_t c, r0, r1, row_block;
};

__device__ __forceinline__ TilePlace tile_place(const RowTiling& t, int vec) {
  const int64_t col_block = blockIdx.x % t.col_blocks;
  const int64_t row_block = blockIdx.x / t.col_blocks;
  const int64_t r0 = row_block * t.rows_per_block;
  const int64_t r1 = r0 + t.rows_per_block < t.rows ? r0 + t.rows_per_block : t.rows;
  return {(col_block * blockDim.x + threadIdx.x) * vec, r0, r1, row_block};
}

// A thread's kVec column sums, stored to dst (kVec consecutive A's, aligned to their size) as
// 16-byte stores: one scalar store a sum left a warp's stores 32 bytes apart (8 fp32 sums a
// thread for bf16 data), 8 partial sector writes where 2 whole ones do.
template <int kVec, typename A>
__device__ __forceinline__ void store_sums(A* dst, const A (&sum)[kVec]) {
  constexpr int kPer16 = 16 / sizeof(A);
  if constexpr (kVec % kPer16 == 0) {
#pragma unroll
    for (int q = 0; q < kVec / kPer16; ++q) {
      Vec<A, kPer16> v;
#pragma unroll
      for (int j = 0; j < kPer16; ++j) v.v[j] = sum[q * kPer16 + j];
      reinterpret_cast<Vec<A, kPer16>*>(dst)[q] = v;
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) dst[j] = sum[j];
  }
}

// out[c] = sum over r of partial[r, c], r = 0 .. row_blocks-1, for c < cols. A workspace row
// may hold several sums side by side ([row][plane][col], e.g. LayerNorm's grad_w and grad_b):
// one launch sums every plane, plane i into out.plane[i] (two launches were slower:
// kernels/layernorm/NOTES.md). A block takes 32 columns (128-byte rows of fp32) and 32
// lanes down the rows: lane y adds rows y, y + 32, ..., then lane 0 adds the 32 lane sums in
// order, so the result never depends on timing. (8 lanes: 2048 columns are 64 blocks on 132
// SMs, and summing 1056 rows took 14 us at 12% achieved occupancy; ncu, bf16 LayerNorm.)
constexpr int kSumCols = 32;
constexpr int kSumLanes = 32;
constexpr int kMaxSumPlanes = 2;

template <typename T>
struct SumOutputs {
  T* plane[kMaxSumPlanes];
};

template <typename T, typename A>
__global__ void __launch_bounds__(kSumCols * kSumLanes) column_sums_kernel(const A* __restrict__ partial,
                                                                            SumOutputs<T> out, int64_t row_blocks,
                                                                            int64_t cols, int planes) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  __shared__ A lane_sums[kSumLanes][kSumCols + 1];
  const int64_t width = planes * cols;
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kSumCols + threadIdx.x;
  A sum = A(0);
  if (c < width) {
#pragma unroll 4
    for (int64_t r = threadIdx.y; r < row_blocks; r += kSumLanes) sum += partial[r * width + c];
  }
  lane_sums[threadIdx.y][threadIdx.x] = sum;
  __syncthreads();
  if (threadIdx.y == 0 && c < width) {
    A total = A(0);
#pragma unroll
    for (int y = 0; y < kSumLanes; ++y) total += lane_sums[y][threadIdx.x];
    out.plane[c / cols][c % cols] = from_acc<T>(total);
  }
}

// Sums of one plane (the usual case) ...
template <typename T, typename A>
void column_sums(const A* partial, T* out, int64_t row_blocks, int64_t cols, cudaStream_t stream) {
  if (cols == 0) return;
  launch_kernel(column_sums_kernel<T, A>, static_cast<unsigned>((cols + kSumCols - 1) / kSumCols), dim3(kSumCols, kSumLanes),
                0, stream, partial, SumOutputs<T>{{out, nullptr}}, row_blocks, cols, 1);
}

// ... or of two planes in one launch.
template <typename T, typename A>
void column_sums(const A* partial, T* out0, T* out1, int64_t row_blocks, int64_t cols, cudaStream_t stream) {
  if (cols == 0) return;
  launch_kernel(column_sums_kernel<T, A>, static_cast<unsigned>((2 * cols + kSumCols - 1) / kSumCols),
                dim3(kSumCols, kSumLanes), 0, stream, partial, SumOutputs<T>{{out0, out1}}, row_blocks, cols, 2);
}

// The sums of a backward tiled by column_sum_tiling() whose kernel writes `out` itself when one
// row block covers every row (one launch fewer at small batches), else partial: row_blocks x
// width. No rows: out comes out zeros.
template <typename T, typename A>
void sum_row_blocks(const RowTiling& t, const A* partial, T* out, int64_t width, cudaStream_t stream) {
  if (t.row_blocks != 1) column_sums(partial, out, t.row_blocks, width, stream);
}

}  // namespace
}  // namespace kwb
