// linear_gelu CUDA kernels: the GELU passes around cuBLAS's product, and two matrix kernels,
// side by side as in llm.c's dev/cuda (each validated by the harness before it is timed;
// benchmarks/linear_gelu_variants.py times them):
//
//   naive  one thread per output element, the dot product over k read from global memory:
//          the tutorials' kernel. Threads of a warp read W rows k elements apart (no
//          coalescing), and nothing is reused through shared memory or registers.
//   tiled  32 x 32 output tiles, 32-wide slabs of x and W staged in shared memory, each thread
//          4 outputs in registers, bias + GELU applied before the one store; split over k
//          when the tiles alone do not fill the GPU: with one block per tile, each waits on
//          its slabs' loads with nothing else on its SM to hide them (kernels/linear_gelu/NOTES.md).
//
// Large and half-precision products go to cuBLASLt (linear_gelu.cpp): no SIMT kernel comes
// near its tensor-core kernels (kernels/linear_gelu/NOTES.md).
#include "kwb_bias_gelu.cuh"
#include "kwb_elementwise.cuh"
#include "kwb_gelu.cuh"
#include "kwb_gelu_backward.cuh"
#include "linear_gelu.h"

namespace {


template <typename T, bool kTanh>
__device__ __forceinline__ void epilogue(const LinearGeluParams& p, int64_t row, int64_t col, kwb::acc_t<T> acc) {
  using A = kwb::acc_t<T>;
  const A v = acc + kwb::to_acc<A>(static_cast<const T*>(p.bias)[col]);
  if (p.pre) static_cast<T*>(p.pre)[row * p.n + col] = kwb::from_acc<T>(v);
  static_cast<T*>(p.y)[row * p.n + col] = kwb::from_acc<T>(kwb::gelu<kTanh, kwb::kHalfType<T>>(v));
}

template <typename T, bool kTanh>
__global__ void naive_kernel(LinearGeluParams p) {
  using A = kwb::acc_t<T>;
  const int64_t row = static_cast<int64_t>(blockIdx.y) * blockDim.y + threadIdx.y;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (row >= p.m || col >= p.n) return;
  const T* x = static_cast<const T*>(p.x) + row * p.k;
  const T* w = static_cast<const T*>(p.w) + col * p.k;
  A acc = A(0);
  for (int64_t i = 0; i < p.k; ++i) acc += kwb::to_acc<A>(x[i]) * kwb::to_acc<A>(w[i]);
  epilogue<T, kTanh>(p, row, col, acc);
}

constexpr int kTile = 32;      // outputs per block: kTile x kTile
constexpr int kSlab = 32;      // k per shared-memory stage
constexpr int kThreads2d = 16; // 16 x 16 threads, each 2 x 2 outputs (rows ty, ty + 16; cols tx, tx + 16)

template <typename T, bool kTanh>
__global__ void __launch_bounds__(kThreads2d * kThreads2d) tiled_kernel(LinearGeluParams p) {
  using A = kwb::acc_t<T>;
  // +1 column: W's tile is read down a column (tx + 16 j, kk); 33-float rows put the 16 rows a
  // warp reads on 16 different banks.
  __shared__ A xs[kTile][kSlab + 1];
  __shared__ A ws[kTile][kSlab + 1];
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.w);
  const int tx = threadIdx.x, ty = threadIdx.y, tid = ty * kThreads2d + tx;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kTile, col0 = static_cast<int64_t>(blockIdx.x) * kTile;
  A acc[2][2] = {};
  // this block's piece of k: whole slabs, [k_begin, k_end)
  const int64_t k_per = ((p.k + p.splits - 1) / p.splits + kSlab - 1) / kSlab * kSlab;
  const int64_t k_begin = static_cast<int64_t>(blockIdx.z) * k_per;
  const int64_t k_end = k_begin + k_per < p.k ? k_begin + k_per : p.k;
  for (int64_t k0 = k_begin; k0 < k_end; k0 += kSlab) {
    // 1024 elements of each tile, 4 per thread; consecutive threads take consecutive k (coalesced)
#pragma unroll
    for (int e = tid; e < kTile * kSlab; e += kThreads2d * kThreads2d) {
      const int r = e / kSlab, kk = e % kSlab;
      const bool in_k = k0 + kk < k_end;
      xs[r][kk] = row0 + r < p.m && in_k ? kwb::to_acc<A>(x[(row0 + r) * p.k + k0 + kk]) : A(0);
      ws[r][kk] = col0 + r < p.n && in_k ? kwb::to_acc<A>(w[(col0 + r) * p.k + k0 + kk]) : A(0);
    }
    __syncthreads();
#pragma unroll
    for (int kk = 0; kk < kSlab; ++kk) {
      const A a0 = xs[ty][kk], a1 = xs[ty + kThreads2d][kk];
      const A b0 = ws[tx][kk], b1 = ws[tx + kThreads2d][kk];
      acc[0][0] += a0 * b0;
      acc[0][1] += a0 * b1;
      acc[1][0] += a1 * b0;
      acc[1][1] += a1 * b1;
    }
    __syncthreads();
  }
#pragma unroll
  for (int i = 0; i < 2; ++i)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      const int64_t row = row0 + ty + i * kThreads2d, col = col0 + tx + j * kThreads2d;
      if (row >= p.m || col >= p.n) continue;
      if (p.splits == 1) epilogue<T, kTanh>(p, row, col, acc[i][j]);
      else static_cast<A*>(p.partial)[(blockIdx.z * p.m + row) * p.n + col] = acc[i][j];
    }
}

// Split k: y = GELU(b + the pieces' sums, added in order).
template <typename T, bool kTanh>
__global__ void __launch_bounds__(256) splitk_epilogue(LinearGeluParams p) {
  using A = kwb::acc_t<T>;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= p.m * p.n) return;
  const A* partial = static_cast<const A*>(p.partial);
  A acc = A(0);
  for (int z = 0; z < p.splits; ++z) acc += partial[z * p.m * p.n + i];
  epilogue<T, kTanh>(p, i / p.n, i % p.n, acc);
}

// skinny: fp32, few rows. A block owns kCols of W's rows (output columns) and up to kRows rows
// of x; k runs in chunks of kChunk, each staged in shared memory for all the block's rows
// (coalesced row pieces), while thread (column c, slice s) holds its 2 float4s of W's row in
// registers, loaded a chunk ahead. Slices take k interleaved in 16-byte steps: a warp reads
// whole 32-byte sectors of its W rows. One accumulator a row a thread; the slices are summed in
// shared memory in a fixed order, then bias + GELU. No second kernel and no global partial sums
// (the tiled kernel's split k). A first version read x through L1 from every thread, a row at a
// time: 67 us at 32 x 768 -> 3072, each load a round trip (kernels/linear_gelu/NOTES.md).
// kRows x kCols outputs a block, 256 threads; kMinBlocks a launch bound (registers: 65536 /
// (256 kMinBlocks)). benchmarks/linear_gelu_skinny_variants.py times the shapes side by side:
// at 3 blocks an SM the shipped shapes spill 8-12 bytes a thread, and still beat 2 blocks an SM
// without spills (16 x 16 at 32 rows: 21.0 against 28.5 us).
template <int kRows_, int kCols_, int kMinBlocks_>
struct SkinnyShape {
  static constexpr int kRows = kRows_, kCols = kCols_, kMinBlocks = kMinBlocks_;
  static constexpr int kThreads = 256;
  static constexpr int kSlices = kThreads / kCols;       // threads a column, each a slice of k
  static constexpr int kQuads = 2;                       // float4s of k a thread takes a chunk
  static constexpr int kChunk = kSlices * kQuads * 4;    // k a chunk
  // the slices' sums at the end, kCols floats of padding a slice: a warp's slices write
  // different banks (kRows * kCols is a multiple of 32)
  static constexpr int kSumStride = kRows * kCols + kCols;
  static constexpr int kSmemFloats = kSlices * kSumStride;
  static_assert(kRows * kChunk <= kSmemFloats, "x's chunk fits the sums' buffer");
  static_assert((kRows * kCols) % 32 == 0 && kCols <= 32, "bank-spread partial sums");
};
// x [m, 768] -> 3072 (H100, variants at 1 / 8 / 32 / 64 rows): 16 x 8 took 13.5 / 13.6 / 22.1 /
// 37.8 us, 16 x 16 15.9 / 16.7 / 21.0 / 34.9; torch.compile 13.3 / 17.3 / 23.2 / 23.4.
using SkinnyFew = SkinnyShape<16, 8, 3>;    // up to 16 rows: twice the blocks
using SkinnyMany = SkinnyShape<16, 16, 3>;  // past 16 rows: W's rows read by half the blocks

template <bool kTanh, typename Shape>
__global__ void __launch_bounds__(Shape::kThreads, Shape::kMinBlocks) skinny_kernel(LinearGeluParams p) {
  constexpr int kRows = Shape::kRows, kCols = Shape::kCols, kSlices = Shape::kSlices, kQuads = Shape::kQuads;
  constexpr int kChunk = Shape::kChunk, kThreads = Shape::kThreads;
  // x's chunk [kRows][kChunk] while k runs, then the slices' sums [kSlices][kSumStride]
  __shared__ __align__(16) float smem[Shape::kSmemFloats];
  const int c = threadIdx.x % kCols, s = threadIdx.x / kCols;
  const int64_t col = static_cast<int64_t>(blockIdx.x) * kCols + c;
  const int64_t row0 = static_cast<int64_t>(blockIdx.y) * kRows;
  const int64_t rows = p.m - row0 < kRows ? p.m - row0 : kRows;
  // columns past n read W's last row and rows past m x's last row; neither is stored
  const float* w = static_cast<const float*>(p.w) + (col < p.n ? col : p.n - 1) * p.k;
  const float* x = static_cast<const float*>(p.x) + row0 * p.k;
  const auto load_w = [&](int64_t k0, float4 (&wq)[kQuads]) {
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const int64_t kk = k0 + (q * kSlices + s) * 4;
      wq[q] = kk < p.k ? __ldg(reinterpret_cast<const float4*>(w + kk)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
  };
  float acc[kRows] = {};
  float4 wq[kQuads], wnext[kQuads];
  load_w(0, wq);
  for (int64_t k0 = 0; k0 < p.k; k0 += kChunk) {
    // x's chunk: kRows x kChunk / 4 float4s, consecutive threads along a row
    constexpr int kRowQuads = kChunk / 4;
#pragma unroll
    for (int e = threadIdx.x; e < kRows * kRowQuads; e += kThreads) {
      const int r = e / kRowQuads, f = e % kRowQuads;
      const int64_t kk = k0 + 4 * f;
      const float* src = x + (r < rows ? r : rows - 1) * p.k + kk;
      reinterpret_cast<float4*>(smem)[e] =
          kk < p.k ? __ldg(reinterpret_cast<const float4*>(src)) : make_float4(0.f, 0.f, 0.f, 0.f);
    }
    load_w(k0 + kChunk, wnext);
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kQuads; ++q) {
      const int kq = (q * kSlices + s) * 4;
      const float4 wv = wq[q];
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        const float4 v = *reinterpret_cast<const float4*>(smem + r * kChunk + kq);
        acc[r] = fmaf(v.x, wv.x, fmaf(v.y, wv.y, fmaf(v.z, wv.z, fmaf(v.w, wv.w, acc[r]))));
      }
    }
    __syncthreads();
#pragma unroll
    for (int q = 0; q < kQuads; ++q) wq[q] = wnext[q];
  }
#pragma unroll
  for (int r = 0; r < kRows; ++r) smem[s * Shape::kSumStride + r * kCols + c] = acc[r];
  __syncthreads();
  // output o: (row o / kCols, column o % kCols) of the block's kRows x kCols
  for (int o = threadIdx.x; o < kRows * kCols; o += kThreads) {
    const int r = o / kCols, cc = o % kCols;
    float total = 0.f;
#pragma unroll 8
    for (int i = 0; i < kSlices; ++i) total += smem[i * Shape::kSumStride + o];
    const int64_t out_col = static_cast<int64_t>(blockIdx.x) * kCols + cc;
    if (r < rows && out_col < p.n) epilogue<float, kTanh>(p, row0 + r, out_col, total);
  }
}

template <typename Shape>
const char* launch_skinny(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream) {
  const auto aligned = [](const void* ptr) { return reinterpret_cast<uintptr_t>(ptr) % 16 == 0; };
  if (dtype != kwb::DType::Float32 || p.k % 4 != 0 || !aligned(p.x) || !aligned(p.w))
    return "linear_gelu_skinny: needs fp32 data, k a multiple of 4 and x and weight 16-byte aligned";
  if ((p.m + Shape::kRows - 1) / Shape::kRows > 65535)
    return "linear_gelu_skinny: at most 65535 blocks of 16 rows (1048560 rows); larger batches take linear_gelu";
  if (p.m == 0 || p.n == 0) return nullptr;
  const dim3 grid(static_cast<unsigned>((p.n + Shape::kCols - 1) / Shape::kCols),
                  static_cast<unsigned>((p.m + Shape::kRows - 1) / Shape::kRows));
  if (p.tanh) skinny_kernel<true, Shape><<<grid, Shape::kThreads, 0, stream>>>(p);
  else skinny_kernel<false, Shape><<<grid, Shape::kThreads, 0, stream>>>(p);
  return kwb::last_launch_error();
}

template <typename T, bool kTanh>
struct Gelu {
  __device__ __forceinline__ T operator()(T v) const {
    return kwb::from_acc<T>(kwb::gelu<kTanh, kwb::kHalfType<T>>(kwb::to_acc<kwb::acc_t<T>>(v)));
  }
};

dim3 grid_2d(int64_t m, int64_t n, int tile) {
  return dim3(static_cast<unsigned>((n + tile - 1) / tile), static_cast<unsigned>((m + tile - 1) / tile));
}

}  // namespace

const char* linear_gelu_naive_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return nullptr;
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    if (p.tanh) naive_kernel<T, true><<<grid_2d(p.m, p.n, 16), dim3(16, 16), 0, stream>>>(p);
    else naive_kernel<T, false><<<grid_2d(p.m, p.n, 16), dim3(16, 16), 0, stream>>>(p);
    return kwb::last_launch_error();
  });
}

// Pieces of k: enough blocks for 4 per SM, each piece at least 4 slabs (128 of k).
int linear_gelu_tiled_splits(int64_t m, int64_t n, int64_t k) {
  const int64_t tiles = ((m + kTile - 1) / kTile) * ((n + kTile - 1) / kTile);
  if (tiles == 0) return 1;
  int64_t splits = (4 * kwb::sm_count() + tiles - 1) / tiles;
  const int64_t most = k / (4 * kSlab);
  if (splits > most) splits = most;
  if (splits > 64) splits = 64;
  return splits < 1 ? 1 : static_cast<int>(splits);
}

const char* linear_gelu_tiled_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return nullptr;
  if (p.splits > 1 && p.partial == nullptr) return "linear_gelu_tiled: splits > 1 needs the partial-sum workspace";
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const dim3 threads(kThreads2d, kThreads2d);
    dim3 grid = grid_2d(p.m, p.n, kTile);
    grid.z = static_cast<unsigned>(p.splits);
    if (p.tanh) tiled_kernel<T, true><<<grid, threads, 0, stream>>>(p);
    else tiled_kernel<T, false><<<grid, threads, 0, stream>>>(p);
    if (p.splits > 1) {
      const unsigned blocks = static_cast<unsigned>((p.m * p.n + 255) / 256);
      if (p.tanh) splitk_epilogue<T, true><<<blocks, 256, 0, stream>>>(p);
      else splitk_epilogue<T, false><<<blocks, 256, 0, stream>>>(p);
    }
    return kwb::last_launch_error();
  });
}

bool linear_gelu_skinny_fills_gpu(int64_t m, int64_t n) {
  const int64_t cols = m <= 16 ? SkinnyFew::kCols : SkinnyMany::kCols;
  return (n + cols - 1) / cols * ((m + 15) / 16) >= kwb::sm_count();
}

bool linear_gelu_sm90a_schedule(int swizzle, int raster, Sm90aSchedule* s) {
  int device = 0, major = 0, minor = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return false;
  cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device);
  cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device);
  *s = Sm90aSchedule{device, kwb::sm_count(), swizzle, raster};
  return major == 9 && minor == 0;
}

const char* linear_gelu_skinny_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream) {
  return p.m <= 16 ? launch_skinny<SkinnyFew>(p, dtype, stream) : launch_skinny<SkinnyMany>(p, dtype, stream);
}

const char* gelu_cuda(const GeluParams& p, kwb::DType dtype, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    const kwb::MapArgs<T, 1> args{{static_cast<const T*>(p.pre)}, static_cast<T*>(p.y), p.n};
    return p.tanh ? kwb::elementwise(args, Gelu<T, true>{}, stream) : kwb::elementwise(args, Gelu<T, false>{}, stream);
  });
}

const char* bias_gelu_pass_cuda(const BiasGeluPassParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return kwb::bias_gelu_forward(p.pre, p.bias, p.y, p.rows, p.cols, p.tanh, dtype, aligned, stream);
}

int64_t linear_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned) {
  return kwb::gelu_backward_workspace_rows(rows, cols, dtype, aligned);
}

const char* gelu_backward_cuda(const GeluBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_DTYPE_SWITCH(dtype, T, [&] {
    using A = kwb::acc_t<T>;
    const auto* g = static_cast<const T*>(p.grad);
    const auto* pre = static_cast<const T*>(p.pre);
    auto* gp = static_cast<T*>(p.grad_pre);
    auto* gb = static_cast<T*>(p.grad_bias);
    auto* ws = static_cast<A*>(p.workspace);
    return p.tanh ? kwb::gelu_backward_rows<T, true>(g, pre, nullptr, gp, gb, ws, p.rows, p.cols, aligned, stream)
                  : kwb::gelu_backward_rows<T, false>(g, pre, nullptr, gp, gb, ws, p.rows, p.cols, aligned, stream);
  });
}
