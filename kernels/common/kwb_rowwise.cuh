// Row-wise reductions over the last dimension (softmax, LayerNorm, RMSNorm): the launch
// geometry, a reduction over the threads of one row, and row loads/stores.
//
// Two paths, chosen per launch by rowwise_launch():
//
// - Register path: a row lives in the registers of `tpr` threads (a power of two, 1 to 1024),
//   each holding `vecs` 16-byte vectors (1, 2 or 4; 8 for fp32 rows of 1024, exact_rows()) at columns (i * tpr + lane) * kVec, so a
//   warp's loads of vector i are one contiguous run. x is read once and y written once: the
//   fewest bytes there are. Short rows share a block (a 128-thread block holds 128 / tpr
//   rows), long rows take up to 1024 threads. Rows of up to 2048 vectors fit: 8192 fp32 or
//   16384 bf16 elements (2048 with 1-element "vectors", when a row is not a whole number of
//   16-byte vectors or a pointer is not 16-byte aligned).
// - Looping path, for longer rows: 1024 threads per row walk it in two passes (reduce, then
//   write), reading x twice; once the rows in flight outgrow the L2, the second read comes from
//   HBM (the prediction: kernels/softmax/NOTES.md; the sweep in each kernel's NOTES.md shows where).
//
// Rows are visited by a loop over row groups (`for base = blockIdx.x * rows_per_block; ...;
// base += gridDim.x * rows_per_block`): a forward launches one block per group; a backward
// that sums over rows (grad_weight) launches a fixed grid and keeps its column sums in
// registers until the end (see kwb_rows.cuh for the deterministic column_sums()).
// Every thread of a block runs the same number of iterations, so __syncthreads() in the
// reductions is safe; threads past the last row compute on zeros and store nothing.
#pragma once
#include <cstdlib>

#include "kwb_rows.cuh"

namespace kwb {
namespace {

constexpr int kRowMaxThreads = 1024;
constexpr int kRowBlockMin = 128;  // short rows: 128 / tpr rows share a block

struct RowwiseLaunch {
  int vecs;            // vectors per thread in registers (1, 2, 4); 0: the looping path
  int tpr;             // threads per row, a power of two
  int block;           // threads per block
  int rows_per_block;  // block / tpr
  int64_t grid;        // blocks

  // blocks to launch: at most 2^31 - 1 (gridDim.x's limit); the row loop covers the rest
  unsigned launch_blocks() const { return static_cast<unsigned>(grid < 0x7fffffff ? grid : 0x7fffffff); }
};

inline int64_t pow2_ceil(int64_t v) {
  int64_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

// The most threads a register-path block may have with kVecs vectors per thread: 4 vectors of
// one tensor are 32 floats, which a 1024-thread block (64 registers a thread) spilled
// (kernels/layernorm/NOTES.md).
constexpr int row_max_threads(int vecs) { return vecs > 2 ? 512 : 1024; }
// Blocks of row_max_threads an SM must hold (__launch_bounds__' second argument): 2 at 4 (or 8)
// vectors caps a thread at 64 registers, so 8 blocks of 128 threads (8 rows of 4096 bf16) are
// in flight an SM, not 5 or 7 (kernels/layernorm/NOTES.md, kernels/softmax/NOTES.md).
constexpr int row_min_blocks(int vecs) { return vecs >= 4 ? 2 : 1; }

// target_vecs: vectors per thread to aim for (fewer threads per row, cheaper reductions, more
// bytes in flight per thread); max_vecs: the most a kernel may hold. Rows of more than 2048
// vectors (1024 x 2 or 512 x 4), or of more than 1024 x max_vecs, take the looping path. persistent: a fixed grid of one wave (at 2048 threads per SM) whose blocks
// loop over rows, for kernels that sum over rows; else one block per row group.
inline RowwiseLaunch rowwise_launch(int64_t rows, int64_t cols, int vec, int target_vecs, bool persistent,
                                    int max_vecs = 4) {
  // KWB_ROW_VECS=1|2|4 overrides the kernel's target for tuning runs (every variant is
  // compiled; a benchmark compares them without a rebuild). Rows that exact_rows() takes do
  // not come here, so the override leaves them as they are. 4 won, and an 8-vector path lost
  // (kernels/layernorm/NOTES.md, kernels/softmax/NOTES.md).
  static const int env_vecs = [] {
    const char* v = std::getenv("KWB_ROW_VECS");
    const int n = v ? std::atoi(v) : 0;
    return n == 1 || n == 2 || n == 4 ? n : 0;
  }();
  if (env_vecs) target_vecs = env_vecs;
  RowwiseLaunch L{};
  const int64_t nv = (cols + vec - 1) / vec;
  int64_t tpr = pow2_ceil((nv + target_vecs - 1) / target_vecs);
  if (tpr > kRowMaxThreads) tpr = kRowMaxThreads;
  const int64_t vecs = (nv + tpr - 1) / tpr;
  if (vecs > max_vecs || tpr > row_max_threads(static_cast<int>(vecs))) {
    L.vecs = 0;
    L.tpr = kRowMaxThreads;
  } else {
    L.vecs = vecs <= 1 ? 1 : (vecs <= 2 ? 2 : 4);
    L.tpr = static_cast<int>(tpr);
  }
  L.block = L.tpr > kRowBlockMin ? L.tpr : kRowBlockMin;
  L.rows_per_block = L.block / L.tpr;
  const int64_t groups = (rows + L.rows_per_block - 1) / L.rows_per_block;
  const int64_t wave = static_cast<int64_t>(sm_count()) * (2048 / L.block);
  L.grid = persistent && groups > wave ? wave : groups;
  return L;
}

// Rows that fill their threads exactly: cols = tpr x vecs 16-byte vectors, tpr a width the
// kernels are compiled for (32-256), so lanes, rows a block and the reductions' shuffles and
// barriers are constants and no column is checked against the row's end. The forwards hold 4
// vectors a thread (1024-8192 bf16 columns, 512-4096 fp32), and fp32 rows of 1024 take a warp
// at 8 vectors a lane, as torch.compile does (4 rows a 128-thread block, no barrier); softmax's
// backward holds 2 of each of its two tensors. Measured against the runtime-tpr kernels at 4096
// x 1024 and 16384 x 4096 on the H100: benchmarks/rowwise_forward_variants.py, variants 1 and
// 2, and kernels/layernorm/NOTES.md, "Round 4".
struct ExactRows {
  int tpr = 0;   // 0: the row is not one of these widths
  int vecs = 0;
  int block = 0;
  int64_t grid = 0;

  unsigned launch_blocks() const { return static_cast<unsigned>(grid < 0x7fffffff ? grid : 0x7fffffff); }
};

// vecs: the vectors a thread holds (4 or 2); 4 gives fp32 rows of 1024 their warp at 8.
inline ExactRows exact_rows(int64_t rows, int64_t cols, int vec, int elem_bytes, int vecs = 4) {
  ExactRows e;
  if (vec * elem_bytes != 16 || cols % vec != 0 || rows == 0) return e;
  const int64_t nv = cols / vec;
  if (vecs == 4 && elem_bytes == 4 && nv == 256) {
    e.tpr = 32;
    e.vecs = 8;
  } else if (nv % vecs == 0 && (nv / vecs == 32 || nv / vecs == 64 || nv / vecs == 128 || nv / vecs == 256)) {
    e.tpr = static_cast<int>(nv / vecs);
    e.vecs = vecs;
  } else {
    return e;
  }
  e.block = e.tpr > kRowBlockMin ? e.tpr : kRowBlockMin;
  const int rpb = e.block / e.tpr;
  e.grid = (rows + rpb - 1) / rpb;
  return e;
}

// Calls body with a constexpr kTpr for an ExactRows' tpr (32, 64, 128 or 256).
#define KWB_TPR_SWITCH(tpr, kTpr, ...)                                  \
  [&]() {                                                               \
    if ((tpr) == 32) { constexpr int kTpr = 32; return __VA_ARGS__(); }   \
    if ((tpr) == 64) { constexpr int kTpr = 64; return __VA_ARGS__(); }   \
    if ((tpr) == 128) { constexpr int kTpr = 128; return __VA_ARGS__(); } \
    constexpr int kTpr = 256;                                           \
    return __VA_ARGS__();                                               \
  }()

// Calls body with constexpr kTpr and kVecs for a forward's ExactRows (exact_rows(..., 4)) of
// element type T (8 vectors for fp32 only: nothing else takes them).
#define KWB_EXACT_SWITCH(e, T, kTpr, kVecs, ...)                                         \
  [&]() {                                                                              \
    if constexpr (sizeof(T) == 4) {                                                    \
      if ((e).vecs == 8) { constexpr int kTpr = 32, kVecs = 8; return __VA_ARGS__(); } \
    }                                                                                  \
    constexpr int kVecs = 4;                                                           \
    return KWB_TPR_SWITCH((e).tpr, kTpr, __VA_ARGS__);                                 \
  }()

// Reduction over the tpr threads of each row of a block, of up to N floats at once (LayerNorm's
// backward sums mean(g) and mean(g * xhat) together), with one __syncthreads() a call: the
// scratch is double-buffered, so a call's writes cannot race the previous call's reads (those
// ended before the previous call's barrier, which every thread has passed). The forwards keep
// two simple reductions (max, then sum; mean, then M2): merging them into one (count, mean, M2)
// or online (max, sum) reduction puts a division or two exps on every merge step, which was
// slower (kernels/layernorm/NOTES.md, kernels/softmax/NOTES.md).
//
// combine(a, b) merges b into a and must be symmetric (same bits for (a, b) and (b, a)): the
// warp's butterfly merges in different orders on different lanes; the block stage merges the
// warps in one fixed order, so every thread of a row ends with the same bits.
template <int N>
class RowReducer {
 public:
  // scratch: __shared__ float[2][N * 32], one buffer per parity
  __device__ explicit RowReducer(float (*scratch)[N * 32]) : scratch_(scratch) {}

  // v: M <= N floats (a kernel may reduce fewer than its scratch holds)
  template <int M, typename Combine>
  __device__ __forceinline__ void all_reduce(float (&v)[M], int tpr, Combine combine) {
    static_assert(M <= N, "RowReducer: more floats than the scratch holds");
    const int width = tpr < 32 ? tpr : 32;
#pragma unroll
    for (int o = 16; o > 0; o >>= 1) {
      if (o >= width) continue;
      float other[M];
#pragma unroll
      for (int k = 0; k < M; ++k) other[k] = __shfl_xor_sync(0xffffffffu, v[k], o);
      combine(v, other);
    }
    if (tpr <= 32) return;
    float* buf = scratch_[phase_];
    phase_ ^= 1;
    const int warps = tpr / 32, first = (threadIdx.x / tpr) * warps;
    if ((threadIdx.x & 31) == 0)
#pragma unroll
      for (int k = 0; k < M; ++k) buf[k * 32 + threadIdx.x / 32] = v[k];
    __syncthreads();
#pragma unroll
    for (int k = 0; k < M; ++k) v[k] = buf[k * 32 + first];
    for (int w = 1; w < warps; ++w) {
      float other[M];
#pragma unroll
      for (int k = 0; k < M; ++k) other[k] = buf[k * 32 + first + w];
      combine(v, other);
    }
  }

  // the common cases: one float, summed or maxed
  __device__ __forceinline__ float sum(float v, int tpr) {
    float a[1] = {v};
    all_reduce(a, tpr, [](float(&x)[1], const float(&y)[1]) { x[0] += y[0]; });
    return a[0];
  }
  // fmaxf drops a NaN; the row still ends NaN, as PyTorch's does: exp(NaN - max) poisons its sum.
  __device__ __forceinline__ float max(float v, int tpr) {
    float a[1] = {v};
    all_reduce(a, tpr, [](float(&x)[1], const float(&y)[1]) { x[0] = fmaxf(x[0], y[0]); });
    return a[0];
  }

 private:
  float (*scratch_)[N * 32];
  int phase_ = 0;
};

// Sums of N floats (LayerNorm's backward: mean(g) and mean(g * xhat) together).
struct SumCombine {
  template <int N>
  __device__ __forceinline__ void operator()(float (&a)[N], const float (&b)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) a[k] += b[k];
  }
};

// A thread's share of one row held raw (not widened to float): bf16 data takes half the
// registers, which lets a 1024-thread block hold two tensors' worth (64 registers at most).
template <typename T, int kVec, int kVecs>
struct RowRegs {
  Vec<T, kVec> v[kVecs];

  __device__ __forceinline__ static int64_t col(int i, int lane, int tpr) {
    return (static_cast<int64_t>(i) * tpr + lane) * kVec;
  }
  // Columns past the row are not loaded; their values are undefined, and callers skip them
  // with in_row().
  __device__ __forceinline__ void load(const T* row, int64_t cols, int lane, int tpr) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      if (col(i, lane, tpr) < cols) v[i] = *reinterpret_cast<const Vec<T, kVec>*>(row + col(i, lane, tpr));
  }
  // Every vector: the row fills its threads exactly (exact_rows()).
  __device__ __forceinline__ void load_all(const T* row, int lane, int tpr) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) v[i] = *reinterpret_cast<const Vec<T, kVec>*>(row + col(i, lane, tpr));
  }
  // load_all(), or zeros where the row does not exist (valid false: nothing is read).
  __device__ __forceinline__ void load_all_if(const T* row, int lane, int tpr, bool valid) {
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (valid) {
        v[i] = *reinterpret_cast<const Vec<T, kVec>*>(row + col(i, lane, tpr));
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[i].v[j] = from_acc<T>(0.f);
      }
    }
  }
  __device__ __forceinline__ static bool in_row(int i, int lane, int tpr, int64_t cols) {
    return col(i, lane, tpr) < cols;
  }
  __device__ __forceinline__ float at(int i, int j) const { return to_acc<float>(v[i].v[j]); }
};

// A 16-byte vector goes out as one 16-byte store: nvcc 13.0 wrote a thread's 3rd and 4th vector
// of a row (an aggregate copy, even a float4's) as four 32-bit stores each (SASS, sm_90), and
// one store instruction took softmax's bf16 forward at 4096 x 1024 from 12.1 to 10.5 us on the
// H100 (benchmarks/rowwise_forward_variants.py, variant 1).
template <typename T, int kVec>
__device__ __forceinline__ void store_vec(T* p, const float (&vals)[kVec]) {
  Vec<T, kVec> out;
#pragma unroll
  for (int j = 0; j < kVec; ++j) out.v[j] = from_acc<T>(vals[j]);
  if constexpr (sizeof(out) == 16) {
    uint4 bits;
    memcpy(&bits, &out, sizeof(bits));
    __stwb(reinterpret_cast<uint4*>(p), bits);
  } else {
    *reinterpret_cast<Vec<T, kVec>*>(p) = out;
  }
}

// A vector read through the read-only path: what no thread of the kernel writes (a weight).
template <typename T, int kVec>
__device__ __forceinline__ Vec<T, kVec> ldg_vec(const T* p) {
  Vec<T, kVec> v;
  if constexpr (sizeof(v) == 16) {
    const uint4 bits = __ldg(reinterpret_cast<const uint4*>(p));
    memcpy(&v, &bits, sizeof(v));
  } else {
    v = *reinterpret_cast<const Vec<T, kVec>*>(p);
  }
  return v;
}

template <typename T, int kVec>
__device__ __forceinline__ void load_vec(const T* p, float (&vals)[kVec]) {
  const Vec<T, kVec> in = *reinterpret_cast<const Vec<T, kVec>*>(p);
#pragma unroll
  for (int j = 0; j < kVec; ++j) vals[j] = to_acc<float>(in.v[j]);
}

// fp32, fp16 and bf16 (the row-wise kernels compute in fp32; the .cpp rejects other types).
#define KWB_FLOAT_SWITCH(dtype, T, ...)                                              \
  [&]() -> const char* {                                                             \
    switch (dtype) {                                                                 \
      case ::kwb::DType::Float32: { using T = float; return __VA_ARGS__(); }          \
      case ::kwb::DType::Float16: { using T = __half; return __VA_ARGS__(); }         \
      case ::kwb::DType::BFloat16: { using T = __nv_bfloat16; return __VA_ARGS__(); } \
      default: return "unsupported dtype (fp32, fp16 and bf16 only)";                \
    }                                                                                \
  }()

// The register path's vectors per thread as a template constant (flash-attention's
// static_switch.h idea): 1, 2 or 4.
#define KWB_VECS_SWITCH(vecs, kVecs, ...)           \
  [&]() {                                            \
    if ((vecs) == 1) { constexpr int kVecs = 1; return __VA_ARGS__(); } \
    if ((vecs) == 2) { constexpr int kVecs = 2; return __VA_ARGS__(); } \
    constexpr int kVecs = 4;                         \
    return __VA_ARGS__();                            \
  }()

}  // namespace
}  // namespace kwb
