// LayerNorm and RMSNorm over the last dimension, forward and backward, as one implementation
// templated on kCentered (LayerNorm: subtract the mean, add a bias). layernorm.cu and
// rmsnorm.cu instantiate it; the geometry is kwb_rowwise.cuh's.
//
// Forward, per row: the statistics (mean and rstd) from the row in registers, then
// y = xhat * w (+ b), xhat = (x - mean) * rstd; mean and rstd are saved (fp32) for backward.
// fp32 rows of 4096 are read twice instead, the second read from L2 (norm_forward_reread).
// Bytes: read x, write y (predicted and measured: kernels/layernorm/NOTES.md, kernels/rmsnorm/NOTES.md).
//
// Backward, per row, with g = grad * w:
//   grad_x = rstd * (g - mean(g) - xhat * mean(g * xhat))     (RMSNorm: no mean(g) term)
//   grad_w = sum over rows of grad * xhat,  grad_b = sum over rows of grad
// A fixed grid of at most one wave walks the rows; each thread keeps its columns' grad_w / grad_b
// sums in registers and writes them once to a workspace row, and column_sums() adds the
// workspace rows in a fixed order (deterministic, no atomics). Bytes: read grad and x, write
// grad_x, plus the fp32 partials (kernels/layernorm/NOTES.md). Rows of 128 to 1024 16-byte
// vectors (1024-8192 bf16 columns) take the staged kernel: a block a row, the next rows' grad
// and x copied into shared memory (cp.async) while this step's rows reduce (two rows a step
// of a vector a thread below 512 vectors; from 512, one row a step of two vectors a thread).
//
// Rows longer than the register path holds (forward: 8192 fp32, 16384 bf16; backward: half
// that): two passes per row (statistics, then the write), and the weight/bias gradients from
// a separate column kernel that reads grad and x once more.
#pragma once
#include <type_traits>

#include "kwb_norm.h"
#include "kwb_rowwise.cuh"

namespace kwb {
namespace {

// Vectors per thread: the forward holds x (4 x 16 bytes in flight, 128 threads for a 4096
// bf16 row); the backward holds grad, x, w and 2 column sums per element: 1 vector each, as
// 2 vectors at 1024 threads spilled (kernels/layernorm/NOTES.md). So the backward keeps rows
// of up to 1024 vectors in registers (4096 fp32, 8192 bf16).
constexpr int kNormForwardVecs = 4, kNormBackwardVecs = 1;

// Merges two (count, mean, M2) partials of a row (Chan, Golub and LeVeque's pairwise update;
// M2 = sum of squared deviations from the mean), for the long-row path, which cannot hold the
// row to center it first. Symmetric, as RowReducer needs:
// na*ma + nb*mb and (mb - ma)^2 give the same bits either way round.
struct MeanM2Combine {
  __device__ __forceinline__ void operator()(float (&a)[3], const float (&b)[3]) const {
    const float n = a[0] + b[0];
    if (n == 0.f) return;  // both empty (threads past a row's end)
    const float inv_n = 1.f / n, delta = b[1] - a[1];
    const float mean = (a[0] * a[1] + b[0] * b[1]) * inv_n;
    a[2] = a[2] + b[2] + delta * delta * (a[0] * b[0] * inv_n);
    a[1] = mean;
    a[0] = n;
  }
};

// kTpr > 0: rows of exactly kTpr x kVecs vectors (exact_rows()), with tpr, the block and cols
// compile-time constants; 0: any row the register path holds, tpr given at launch.
// kEarlyWeight (exact rows only): the weight's vectors read into registers beside x's (ptxas issues
// them first), as Inductor's persistent reductions load theirs, not after the reductions a vector at a
// time: the row's last L1/L2 round trip leaves its critical path, for kVecs vectors of registers.
// bf16 RMSNorm 4096 x 1024, CUDA-graph replays from the L2, plain launches (H100): 4.30 us early,
// 4.83 late, torch.compile 4.48-4.50 (kernels/rmsnorm/NOTES.md, "Round 21"). Not shipped since
// programmatic dependent launch (norm_forward's launch); where PDL is off (KWB_PDL=0, below sm_90, an
// 8.0+PTX build) the late read gives that graph-replay lead back. Kept for rowwise_forward_variants.py
// (28, 40).
template <typename T, int kVec, int kVecs, bool kCentered, int kTpr = 0, bool kEarlyWeight = false>
__global__ void __launch_bounds__(row_max_threads(kVecs), row_min_blocks(kVecs)) norm_forward_regs(NormParams p, int tpr_arg) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  constexpr bool kExact = kTpr > 0;
  static_assert(kExact || !kEarlyWeight, "the weight is read early on exact rows only");
  const int tpr = kExact ? kTpr : tpr_arg;
  const int64_t cols = kExact ? static_cast<int64_t>(kTpr) * kVecs * kVec : p.cols;
  __shared__ float scratch[2][32];
  RowReducer<1> reduce(scratch);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  const int rpb = (kExact ? (kTpr > kRowBlockMin ? kTpr : kRowBlockMin) : blockDim.x) / tpr;
  const int lane = threadIdx.x % tpr;
  const float inv_cols = 1.f / static_cast<float>(cols);
  for (int64_t base = static_cast<int64_t>(blockIdx.x) * rpb; base < p.rows; base += static_cast<int64_t>(gridDim.x) * rpb) {
    const int64_t r = base + threadIdx.x / tpr;
    const int64_t n = r < p.rows ? cols : 0;  // a group past the last row holds no columns
    RowRegs<T, kVec, kVecs> in;
    RowRegs<T, kVec, kVecs> wr;  // kEarlyWeight: the weight's vectors
    if constexpr (kExact) {
      in.load_all_if(x + r * cols, lane, tpr, n != 0);
      if constexpr (kEarlyWeight)
#pragma unroll
        for (int i = 0; i < kVecs; ++i) wr.v[i] = ldg_vec<T, kVec>(w + in.col(i, lane, tpr));
    } else {
      in.load(x + r * cols, n, lane, tpr);
    }
    // vector i of this thread is in its row. Exact rows: every vector, and a group past the last
    // row computes on zeros and stores nothing, so only the stores are predicated (as softmax's
    // forward_regs, where the predicated form cost 11.4 us against 10.3 at bf16 4096 x 1024).
    auto has = [&](int i) { return kExact || in.in_row(i, lane, tpr, n); };
    float mean = 0.f;
    if constexpr (kCentered) {
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kVecs; ++i)
        if (has(i))
#pragma unroll
          for (int j = 0; j < kVec; ++j) s += in.at(i, j);
      mean = reduce.sum(s, tpr) * inv_cols;
    }
    // The variance from the centered values (held in registers, so a second pass is free):
    // no E[x^2] - E[x]^2 cancellation.
    float ss = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      if (has(i))
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float d = in.at(i, j) - mean;
          ss += d * d;
        }
    const float var = reduce.sum(ss, tpr) * inv_cols;
    const float rstd = rsqrtf(var + p.eps);
    if (lane == 0 && r < p.rows) {
      if constexpr (kCentered) p.mean[r] = mean;
      p.rstd[r] = rstd;
    }
    // Read late, w and b go through the read-only path (ld.global.nc): y may alias them for all
    // the compiler knows, and a plain load of vector i + 1 waits behind vector i's store. All 4
    // loaded at once here spilled 66-240 bytes at 64 registers in 16-bit types (LayerNorm's weight
    // and bias); RMSNorm's weight read beside x fits, and is not shipped (kEarlyWeight).
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (!has(i) || n == 0) continue;
      const int64_t c = in.col(i, lane, tpr);
      const Vec<T, kVec> wv = kEarlyWeight ? wr.v[i] : ldg_vec<T, kVec>(w + c);
      float out[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j) out[j] = (in.at(i, j) - mean) * rstd * to_acc<float>(wv.v[j]);
      if constexpr (kCentered) {
        const Vec<T, kVec> bv = ldg_vec<T, kVec>(b + c);
#pragma unroll
        for (int j = 0; j < kVec; ++j) out[j] += to_acc<float>(bv.v[j]);
      }
      store_vec<T, kVec>(y + r * cols + c, out);
    }
  }
}

template <typename T, int kVec, bool kCentered>
__global__ void __launch_bounds__(1024) norm_forward_loop(NormParams p) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  __shared__ float scratch[2][3 * 32];
  RowReducer<3> reduce(scratch);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  const T* b = static_cast<const T*>(p.bias);
  T* y = static_cast<T*>(p.y);
  const int64_t nv = p.cols / kVec;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const T* xr = x + r * p.cols;
    // One pass for the statistics. LayerNorm: each vector's (count, mean, M2), merged into the
    // thread's running triple and then across the row (MeanM2Combine): no cancellation, even
    // for a row far from zero or with one outlier, at one division a vector.
    float stats[3] = {0.f, 0.f, 0.f};
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float v[kVec];
      load_vec<T, kVec>(xr + i * kVec, v);
      if constexpr (kCentered) {
        float vs = 0.f;
#pragma unroll
        for (int j = 0; j < kVec; ++j) vs += v[j];
        const float vm = vs * (1.f / kVec);
        float vm2 = 0.f;
#pragma unroll
        for (int j = 0; j < kVec; ++j) vm2 += (v[j] - vm) * (v[j] - vm);
        const float part[3] = {static_cast<float>(kVec), vm, vm2};
        MeanM2Combine()(stats, part);
      } else {
#pragma unroll
        for (int j = 0; j < kVec; ++j) stats[0] += v[j] * v[j];
      }
    }
    float mean = 0.f, var;
    if constexpr (kCentered) {
      reduce.all_reduce(stats, blockDim.x, MeanM2Combine());
      mean = stats[1];
      var = stats[2] * inv_cols;
    } else {
      var = reduce.sum(stats[0], blockDim.x) * inv_cols;
    }
    const float rstd = rsqrtf(var + p.eps);
    if (threadIdx.x == 0) {
      if constexpr (kCentered) p.mean[r] = mean;
      p.rstd[r] = rstd;
    }
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float v[kVec], wv[kVec];
      load_vec<T, kVec>(xr + i * kVec, v);
      load_vec<T, kVec>(w + i * kVec, wv);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = (v[j] - mean) * rstd * wv[j];
      if constexpr (kCentered) {
        float bv[kVec];
        load_vec<T, kVec>(b + i * kVec, bv);
#pragma unroll
        for (int j = 0; j < kVec; ++j) v[j] += bv[j];
      }
      store_vec<T, kVec>(y + r * p.cols + i * kVec, v);
    }
  }
}

// fp32 rows of 4096: one row a block of 256 threads, read twice, as Inductor's looped reduction
// (its triton_red_ kernel: benchmarks/inductor_kernels.py). The first read, kept in L2
// (evict_last), gives the statistics; the second, marked evict_first, is normalized and written.
// So a thread's 4 vectors are not held through the reductions and the store, and fewer registers
// let more blocks share an SM. On the H200 at 16384 x 4096 (kwb run --full) this kernel first
// ran LayerNorm in 132.0 us and RMSNorm in 132.8, the register path 135.3 and 135.5,
// torch.compile 129.4-130.0. Built as RereadTuning<4, true> (below): 129.5-129.6 and
// 130.5-130.6 (two runs at 71bbf6d; compile 129.1 and 128.9-129.0).
constexpr int kRereadCols = 4096, kRereadBlock = 256, kRereadVecs = 4;
constexpr int kRereadWarps = kRereadBlock / 32, kRereadThreadCols = kRereadCols / kRereadBlock;  // 16 a thread

// L2 policies and hinted loads are sm_80+; before that the loads are plain (and the policy unused).
__device__ __forceinline__ uint64_t l2_evict_last_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}
__device__ __forceinline__ uint64_t l2_evict_first_policy() {
  uint64_t policy = 0;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;" : "=l"(policy));
#endif
  return policy;
}
// Loads and stores as volatile asm, in program order, as the variants it follows were written
// (the first build, through __ldg / __stwb and with MeanM2Combine's division a merge, ran
// LayerNorm at 143 us and RMSNorm at 133).
// kL1: the L1 eviction priority asked for as well (Inductor's eviction_policy= sets both
// levels: ld.global.L1::evict_last.L2::cache_hint), or none.
enum class L1Hint { kNone, kEvictLast, kEvictFirst };
template <L1Hint kL1 = L1Hint::kNone>
__device__ __forceinline__ float4 load_f4_hinted(const float* p, uint64_t policy) {
  float4 v;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
  if constexpr (kL1 == L1Hint::kEvictLast)
    asm volatile("ld.global.L1::evict_last.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  else if constexpr (kL1 == L1Hint::kEvictFirst)
    asm volatile("ld.global.L1::evict_first.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
  else
    asm volatile("ld.global.L2::cache_hint.v4.f32 {%0, %1, %2, %3}, [%4], %5;"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p), "l"(policy));
#else
  (void)policy;
  asm volatile("ld.global.v4.f32 {%0, %1, %2, %3}, [%4];" : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
#endif
  return v;
}
template <L1Hint kL1 = L1Hint::kNone>
__device__ __forceinline__ float4 load_f4_readonly(const float* p) {
  static_assert(kL1 != L1Hint::kEvictFirst, "the read-only loads keep (evict_last) or take no hint");
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 700
  if constexpr (kL1 == L1Hint::kEvictLast) {
    float4 v;
    asm volatile("ld.global.nc.L1::evict_last.v4.f32 {%0, %1, %2, %3}, [%4];"
                 : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "l"(p));
    return v;
  }
#endif
  return __ldg(reinterpret_cast<const float4*>(p));
}
__device__ __forceinline__ void store_f4(float* p, float a, float b, float c, float d) {
  asm volatile("st.global.v4.f32 [%0], {%1, %2, %3, %4};" ::"l"(p), "f"(a), "f"(b), "f"(c), "f"(d));
}

// (mean, M2) of two halves of n values each, in place (Chan et al. with equal counts: no
// division, where MeanM2Combine divides at every merge). Symmetric, so the lanes of a butterfly
// agree bit for bit.
__device__ __forceinline__ void merge_equal_halves(float& mean, float& m2, float other_mean, float other_m2, float n) {
  const float d = other_mean - mean;
  m2 = (m2 + other_m2) + d * d * (0.5f * n);
  mean = 0.5f * (mean + other_mean);
}

// How the two-read forward is built: the blocks an SM its register cap is set for
// (65536 / (256 x kMinBlocks)) and whether its loads ask L1 to keep the first read
// (evict_last, the weight too) and drop the second (evict_first), as Inductor's do.
// Shipped: 4 blocks and the hints. H200, fp32 16384 x 4096, in one run (rowwise_forward_variants
// 19-21, us): LayerNorm 132.0 as <5, no hints>, 131.3 with hints, 130.1 at <4> (64 registers,
// 4 blocks an SM where 47 gave 5) with or without them; RMSNorm 133.5, 130.8 with hints (40
// registers under either cap: L1 hits 32% -> 47%, Inductor's 49%); torch.compile 129.9 / 129.3.
// kPersistent: a block loops over rows (r += gridDim.x), so the launch's grid, not the
// registers, sets the blocks an SM (when the build lets that many fit). Not shipped: as
// persistent grids LayerNorm ran 138.9 us at 4 blocks an SM and RMSNorm 136.8 at 4 and at 5
// (rowwise_forward_variants 24-25), against 129.1 and 130.3 with a block a row.
template <int MinBlocks, bool L1Hints, bool Persistent = false>
struct RereadTuning {
  static constexpr int kMinBlocks = MinBlocks;
  static constexpr bool kPersistent = Persistent;
  static constexpr L1Hint kKeep = L1Hints ? L1Hint::kEvictLast : L1Hint::kNone;
  static constexpr L1Hint kDrop = L1Hints ? L1Hint::kEvictFirst : L1Hint::kNone;
};
using ShippedReread = RereadTuning<4, true>;

// LayerNorm's weight and bias are loaded one output vector at a time (x's 4 vectors and
// 2 x 4 of theirs in flight took the variant to 82 registers, 2 blocks an SM: 170 us);
// RMSNorm's weight beside x (variant 12 129.5 us, loaded late 131.2).
template <bool kCentered, typename Tuning>
__device__ __forceinline__ void norm_forward_reread_row(const NormParams& p, int64_t r, float (&scratch)[2][kRereadWarps]) {
  constexpr int kStride = kRereadBlock * kRereadVecs * 4;  // columns a trip covers
  static_assert(kRereadCols == kStride, "one trip a read");
  const int first = threadIdx.x * 4;  // this thread's vector i starts at column first + i * kRereadBlock * 4
  const float* xr = static_cast<const float*>(p.x) + r * kRereadCols + first;
  float mean = 0.f, var;
  {
    const uint64_t keep = l2_evict_last_policy();
    float4 v[kRereadVecs];
#pragma unroll
    for (int i = 0; i < kRereadVecs; ++i) v[i] = load_f4_hinted<Tuning::kKeep>(xr + i * kRereadBlock * 4, keep);
    if constexpr (kCentered) {
      // the thread's 16 values centered on their own mean, then merged pairwise: the variance of
      // centered values, whatever the row's offset or an outlier
      float s = 0.f;
#pragma unroll
      for (int i = 0; i < kRereadVecs; ++i) s += (v[i].x + v[i].y) + (v[i].z + v[i].w);
      mean = s * (1.f / kRereadThreadCols);
      float m2 = 0.f;
#pragma unroll
      for (int i = 0; i < kRereadVecs; ++i)
        m2 += (v[i].x - mean) * (v[i].x - mean) + (v[i].y - mean) * (v[i].y - mean) + (v[i].z - mean) * (v[i].z - mean) +
              (v[i].w - mean) * (v[i].w - mean);
      float n = kRereadThreadCols;
#pragma unroll
      for (int o = 1; o < 32; o <<= 1, n *= 2.f)
        merge_equal_halves(mean, m2, __shfl_xor_sync(0xffffffffu, mean, o), __shfl_xor_sync(0xffffffffu, m2, o), n);
      if ((threadIdx.x & 31) == 0) {
        scratch[0][threadIdx.x / 32] = mean;
        scratch[1][threadIdx.x / 32] = m2;
      }
      __syncthreads();
      float wm[kRereadWarps], wm2[kRereadWarps];
#pragma unroll
      for (int k = 0; k < kRereadWarps; ++k) {
        wm[k] = scratch[0][k];
        wm2[k] = scratch[1][k];
      }
#pragma unroll
      for (int step = 1; step < kRereadWarps; step <<= 1, n *= 2.f)
#pragma unroll
        for (int k = 0; k < kRereadWarps; k += 2 * step) merge_equal_halves(wm[k], wm2[k], wm[k + step], wm2[k + step], n);
      mean = wm[0];
      var = wm2[0] * (1.f / kRereadCols);
    } else {
      float ss = 0.f;
#pragma unroll
      for (int i = 0; i < kRereadVecs; ++i) ss += v[i].x * v[i].x + v[i].y * v[i].y + v[i].z * v[i].z + v[i].w * v[i].w;
#pragma unroll
      for (int o = 16; o > 0; o >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, o);
      if ((threadIdx.x & 31) == 0) scratch[0][threadIdx.x / 32] = ss;
      __syncthreads();
      ss = 0.f;
#pragma unroll
      for (int k = 0; k < kRereadWarps; ++k) ss += scratch[0][k];
      var = ss * (1.f / kRereadCols);
    }
  }
  const float rstd = rsqrtf(var + p.eps);
  if (threadIdx.x == 0) {
    if constexpr (kCentered) p.mean[r] = mean;
    p.rstd[r] = rstd;
  }
  const float* w = static_cast<const float*>(p.weight) + first;
  const float* b = kCentered ? static_cast<const float*>(p.bias) + first : nullptr;  // RMSNorm has none
  float* y = static_cast<float*>(p.y) + r * kRereadCols + first;
  const uint64_t drop = l2_evict_first_policy();
  float4 v[kRereadVecs], wv[kCentered ? 1 : kRereadVecs];
#pragma unroll
  for (int i = 0; i < kRereadVecs; ++i) {
    v[i] = load_f4_hinted<Tuning::kDrop>(xr + i * kRereadBlock * 4, drop);
    if constexpr (!kCentered) wv[i] = load_f4_readonly<Tuning::kKeep>(w + i * kRereadBlock * 4);
  }
#pragma unroll
  for (int i = 0; i < kRereadVecs; ++i) {
    const int at = i * kRereadBlock * 4;
    if constexpr (kCentered) {
      const float4 wi = load_f4_readonly<Tuning::kKeep>(w + at), bi = load_f4_readonly<Tuning::kKeep>(b + at);
      store_f4(y + at, (v[i].x - mean) * rstd * wi.x + bi.x, (v[i].y - mean) * rstd * wi.y + bi.y,
               (v[i].z - mean) * rstd * wi.z + bi.z, (v[i].w - mean) * rstd * wi.w + bi.w);
    } else {
      store_f4(y + at, v[i].x * rstd * wv[i].x, v[i].y * rstd * wv[i].y, v[i].z * rstd * wv[i].z, v[i].w * rstd * wv[i].w);
    }
  }
}

template <bool kCentered, typename Tuning = ShippedReread>
__global__ void __launch_bounds__(kRereadBlock, Tuning::kMinBlocks) norm_forward_reread(NormParams p) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  __shared__ float scratch[2][kRereadWarps];
  if constexpr (Tuning::kPersistent) {
    for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
      norm_forward_reread_row<kCentered, Tuning>(p, r, scratch);
      __syncthreads();  // the next row's reduction rewrites scratch
    }
  } else {
    norm_forward_reread_row<kCentered, Tuning>(p, blockIdx.x, scratch);
  }
}

// grad_x of one row from its sums: rstd * (g - mean(g) - xhat * mean(g * xhat)).
__device__ __forceinline__ float norm_grad_x(float g, float xhat, float rstd, float mean_g, float mean_gx) {
  return rstd * (g - mean_g - xhat * mean_gx);
}

template <bool kCentered> constexpr int kPlanes = kCentered ? 2 : 1;  // grad_w (and grad_b)

template <typename T, int kVec, int kVecs, bool kCentered>
__global__ void __launch_bounds__(row_max_threads(kVecs)) norm_backward_regs(NormBackwardParams p, int tpr) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  __shared__ float scratch[2][2 * 32];
  RowReducer<2> reduce(scratch);
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  const int rpb = blockDim.x / tpr, lane = threadIdx.x % tpr;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  RowRegs<T, kVec, kVecs> w;  // the weight, loaded once for every row this thread visits
  w.load(static_cast<const T*>(p.weight), p.cols, lane, tpr);
  float sum_w[kVecs][kVec] = {}, sum_b[kVecs][kVec] = {};
  const int64_t stride = static_cast<int64_t>(gridDim.x) * rpb;
  int64_t base = static_cast<int64_t>(blockIdx.x) * rpb;
  // The next row's grad and x are loaded before this row's reductions, so that their loads are
  // in flight while the block waits at __syncthreads() (kernels/layernorm/NOTES.md, backward v2).
  RowRegs<T, kVec, kVecs> g, in;
  {
    const int64_t r = base + threadIdx.x / tpr, n = r < p.rows ? p.cols : 0;
    g.load(grad + r * p.cols, n, lane, tpr);
    in.load(x + r * p.cols, n, lane, tpr);
  }
  for (; base < p.rows; base += stride) {
    const int64_t r = base + threadIdx.x / tpr;
    const bool valid = r < p.rows;
    const int64_t n = valid ? p.cols : 0;
    RowRegs<T, kVec, kVecs> g_next, in_next;
    const int64_t r_next = r + stride, n_next = r_next < p.rows ? p.cols : 0;
    g_next.load(grad + r_next * p.cols, n_next, lane, tpr);
    in_next.load(x + r_next * p.cols, n_next, lane, tpr);
    const float mean = kCentered && valid ? p.mean[r] : 0.f;
    const float rstd = valid ? p.rstd[r] : 0.f;
    float sg = 0.f, sgx = 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i)
      if (g.in_row(i, lane, tpr, n))
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float gw = g.at(i, j) * w.at(i, j), xhat = (in.at(i, j) - mean) * rstd;
          sg += gw;
          sgx += gw * xhat;
          sum_w[i][j] += g.at(i, j) * xhat;
          sum_b[i][j] += g.at(i, j);
        }
    // one reduction for both sums (RMSNorm: mean(g * xhat) only)
    float sums[kCentered ? 2 : 1];
    sums[0] = sgx;
    if constexpr (kCentered) sums[1] = sg;
    reduce.all_reduce(sums, tpr, SumCombine());
    const float mean_gx = sums[0] * inv_cols;
    const float mean_g = kCentered ? sums[kCentered ? 1 : 0] * inv_cols : 0.f;
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (!g.in_row(i, lane, tpr, n)) continue;
      float d[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        d[j] = norm_grad_x(g.at(i, j) * w.at(i, j), (in.at(i, j) - mean) * rstd, rstd, mean_g, mean_gx);
      store_vec<T, kVec>(gx + r * p.cols + g.col(i, lane, tpr), d);
    }
    g = g_next;
    in = in_next;
  }
  // This row group's column sums: workspace row blockIdx.x * rpb + group, laid out
  // [row][plane][col] (every group writes, zeros if it had no rows, so the sums read only
  // written values).
  const int64_t ws_row = static_cast<int64_t>(blockIdx.x) * rpb + threadIdx.x / tpr;
  float* ws = p.workspace + ws_row * kPlanes<kCentered> * p.cols;
#pragma unroll
  for (int i = 0; i < kVecs; ++i) {
    if (!w.in_row(i, lane, tpr, p.cols)) continue;
    const int64_t c = w.col(i, lane, tpr);
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      ws[c + j] = sum_w[i][j];
      if constexpr (kCentered) ws[p.cols + c + j] = sum_b[i][j];
    }
  }
}

// The staged backward's shape: kPer 16-byte vectors of a row a thread (per tensor), kRows rows
// reduced at once a step, kStages steps in shared memory. From the variants in
// benchmarks/norm_backward_variants.py (H100, 16384 x 4096, backward alone, kwb / torch.compile):
// 2 rows a step with one reduction for both (bf16 LayerNorm 168 us against 199; the register
// path's 227), 2 stages (3 and 4 gained nothing), each row read again from shared memory after
// the reduction (as fast, fewer registers held). 4 rows a step took 128 KB a block: 1 block an
// SM, 253 us.
template <int Per, int Rows, int Stages>
struct StagedShape {
  static constexpr int kPer = Per, kRows = Rows, kStages = Stages;
  // A block's threads at most: 1024 / kPer lets a thread of kPer vectors use up to 64 * kPer
  // registers (at fp32 LayerNorm, 4 vectors a thread spilled 48-68 bytes under a 64 cap).
  static constexpr int kMaxThreads = 1024 / kPer;
  static size_t smem_bytes(int threads) { return static_cast<size_t>(kStages) * kRows * 2 * kPer * threads * 16; }
};
using DefaultStaged = StagedShape<1, 2, 2>;

// Steps a block takes at least (fewer blocks when rows are few, down to a block an SM): at 4096
// rows, each block's prologue (the weight), epilogue (its column sums) and partial row in
// column_sums are paid over 8 rows, not 4. Backward alone, cold L2, H100 (bf16 LayerNorm / RMSNorm 4096 x 1024, us): 1 step 25.8 /
// 21.7, 2 steps 24.6 / 21.5, 4 steps 23.8 / 20.7, 8 steps 28.0 / 24.1; 16384 x 4096 and fp32
// within 0.3% (kernels/layernorm/NOTES.md).
constexpr int64_t kStagedMinSteps = 4;

// Sums of M floats over the block (one row a block, blockDim.x a multiple of 32), one
// __syncthreads() a call: lane 0 of each warp writes its partials to red[parity], and every
// thread adds them back as float4s in one fixed order (8 shared loads for 2 sums over 16 warps,
// not 32: with one reduction a row, the scalar loads were most of the kernel's instructions).
// red must start zeroed: entries past the last warp stay 0.
template <int M>
__device__ __forceinline__ void row_block_sums(float (&v)[M], float4 (*red)[M][8], int& parity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int k = 0; k < M; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
  float* buf = reinterpret_cast<float*>(red[parity]);
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int k = 0; k < M; ++k) buf[k * 32 + threadIdx.x / 32] = v[k];
  __syncthreads();
  const int quads = (blockDim.x / 32 + 3) / 4;
#pragma unroll
  for (int k = 0; k < M; ++k) {
    float s = 0.f;
    for (int q = 0; q < quads; ++q) {
      const float4 a = red[parity][k][q];
      s += (a.x + a.y) + (a.z + a.w);
    }
    v[k] = s;
  }
  parity ^= 1;
}

// One row a block (blockDim.x = cols / (kVec * kPer) threads; a thread's vectors of a row are
// blockDim.x vectors apart, so that each warp copies contiguous bytes), rows
// blockIdx.x + i * gridDim.x; each step reduces kRows rows at once while the next steps' rows
// are copied into shared memory. Dynamic shared memory: Shape::smem_bytes().
template <typename T, int kVec, bool kCentered, typename Shape = DefaultStaged>
__global__ void __launch_bounds__(Shape::kMaxThreads) norm_backward_staged(NormBackwardParams p) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  constexpr int kPer = Shape::kPer, kRows = Shape::kRows, kStages = Shape::kStages, kSums = kCentered ? 2 : 1;
  extern __shared__ uint4 staged[];  // [kStages][kRows][grad, x][kPer][blockDim.x]
  __shared__ float4 red[2][kRows * kSums][8];
  if (threadIdx.x < 2 * kRows * kSums * 8) reinterpret_cast<float4*>(red)[threadIdx.x] = make_float4(0.f, 0.f, 0.f, 0.f);
  __syncthreads();
  int parity = 0;
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  const int tpr = blockDim.x;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  RowRegs<T, kVec, kPer> w;  // the weight, loaded once for every row this thread visits
  w.load_all(static_cast<const T*>(p.weight), threadIdx.x, tpr);
  float sum_w[kPer][kVec] = {}, sum_b[kPer][kVec] = {};
  const int64_t grid = gridDim.x, step = grid * kRows;
  auto slot = [&](int stage, int i, int tensor, int k) -> uint4& {
    return staged[(((stage * kRows + i) * 2 + tensor) * kPer + k) * tpr + threadIdx.x];
  };
  auto copy_step = [&](int64_t base, int stage) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      if (r < p.rows)
#pragma unroll
        for (int k = 0; k < kPer; ++k) {
          const int64_t c = RowRegs<T, kVec, kPer>::col(k, threadIdx.x, tpr);
          copy_async16(&slot(stage, i, 0, k), grad + r * p.cols + c);
          copy_async16(&slot(stage, i, 1, k), x + r * p.cols + c);
        }
    }
    copy_async_commit();  // a group even past the last row, so that wait's count stays right
  };
  auto read_row = [&](int stage, int i, RowRegs<T, kVec, kPer>& g, RowRegs<T, kVec, kPer>& in) {
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      g.v[k] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 0, k));
      in.v[k] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 1, k));
    }
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) copy_step(blockIdx.x + s * step, s);
  int stage = 0;
  for (int64_t base = blockIdx.x; base < p.rows; base += step) {
    copy_step(base + (kStages - 1) * step, (stage + kStages - 1) % kStages);
    copy_async_wait<kStages - 1>();
    float mean[kRows], rstd[kRows], sums[kRows * kSums];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      const bool valid = r < p.rows;
      RowRegs<T, kVec, kPer> g, in;
      read_row(stage, i, g, in);
      mean[i] = kCentered && valid ? p.mean[r] : 0.f;
      rstd[i] = valid ? p.rstd[r] : 0.f;
      float sg = 0.f, sgx = 0.f;
      if (valid)
#pragma unroll
        for (int k = 0; k < kPer; ++k)
#pragma unroll
          for (int j = 0; j < kVec; ++j) {
            const float gw = g.at(k, j) * w.at(k, j), xhat = (in.at(k, j) - mean[i]) * rstd[i];
            sg += gw;
            sgx += gw * xhat;
            sum_w[k][j] += g.at(k, j) * xhat;
            sum_b[k][j] += g.at(k, j);
          }
      sums[i * kSums] = sgx;  // one reduction for both sums of both rows (RMSNorm: mean(g * xhat) only)
      if constexpr (kCentered) sums[i * kSums + 1] = sg;
    }
    row_block_sums<kRows * kSums>(sums, red, parity);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      if (r >= p.rows) continue;
      const float mean_gx = sums[i * kSums] * inv_cols;
      const float mean_g = kCentered ? sums[i * kSums + (kCentered ? 1 : 0)] * inv_cols : 0.f;
      RowRegs<T, kVec, kPer> g, in;
      read_row(stage, i, g, in);
#pragma unroll
      for (int k = 0; k < kPer; ++k) {
        float d[kVec];
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          d[j] = norm_grad_x(g.at(k, j) * w.at(k, j), (in.at(k, j) - mean[i]) * rstd[i], rstd[i], mean_g, mean_gx);
        store_vec<T, kVec>(gx + r * p.cols + RowRegs<T, kVec, kPer>::col(k, threadIdx.x, tpr), d);
      }
    }
    stage = (stage + 1) % kStages;
  }
  copy_async_wait<0>();
  // This block's column sums: workspace row blockIdx.x, laid out [row][plane][col] (every block
  // writes, zeros if it had no rows). They pass through the staging memory, now free, so that a
  // warp's stores are 512 contiguous bytes: stored straight from registers, a thread's 4-byte
  // stores 4 * kVec bytes apart made 2.1 million partial L2 sector writes at bf16 4096 x 1024
  // (ncu: the kernel at 62% of L2 throughput and 17% of DRAM's; kernels/layernorm/NOTES.md).
  // One plane at a time: a bf16 plane fills the staging memory of a one-stage, one-row shape.
  static_assert(kVec * sizeof(float) <= kStages * kRows * 2 * sizeof(uint4), "a plane must fit the staging memory");
  float* plane = reinterpret_cast<float*>(staged);
  const float4* from = reinterpret_cast<const float4*>(plane);
  const int quads = static_cast<int>(p.cols / 4);  // cols is a multiple of kVec >= 4
#pragma unroll
  for (int k_plane = 0; k_plane < kPlanes<kCentered>; ++k_plane) {
    __syncthreads();  // every thread is done reading the staged rows (or the last plane)
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const int64_t c = RowRegs<T, kVec, kPer>::col(k, threadIdx.x, tpr);
#pragma unroll
      for (int j = 0; j < kVec; ++j) plane[c + j] = k_plane == 0 ? sum_w[k][j] : sum_b[k][j];
    }
    __syncthreads();
    float4* ws = reinterpret_cast<float4*>(p.workspace + (static_cast<int64_t>(blockIdx.x) * kPlanes<kCentered> + k_plane) * p.cols);
    for (int q = threadIdx.x; q < quads; q += blockDim.x) ws[q] = from[q];
  }
}

// The staged kernel's grid for rows of cols in Shape: as many blocks as the GPU holds at once,
// at most one per kStagedMinSteps steps of rows; 0 where the shape does not apply (not whole
// 16-byte vectors, rows of fewer than 128 vectors, or blocks of more than Shape::kMaxThreads
// threads, not whole warps, or too few to zero the reduction scratch). Blocks an SM: read once
// per device and row width.
template <typename T, bool kCentered, typename Shape = DefaultStaged>
int64_t norm_backward_staged_grid(int64_t rows, int64_t cols, bool aligned) {
  constexpr int kVec = 16 / sizeof(T);
  if (!aligned || cols % (kVec * Shape::kPer) != 0 || rows == 0) return 0;
  const int64_t threads = cols / (kVec * Shape::kPer);
  // a thread zeroes each float4 of the reduction scratch (2 x kRows x 2 sums x 8 of them)
  if (cols / kVec < 128 || threads > Shape::kMaxThreads || threads % 32 != 0 || threads < 2 * Shape::kRows * 2 * 8)
    return 0;
  static int cache[64][33] = {};  // [device][threads / 32]: blocks an SM
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess || device < 0 || device >= 64) return 0;
  int& per_sm = cache[device][threads / 32];
  if (per_sm == 0) {
    // A block's shared memory past 48 KB must be asked for, up to the device's opt-in limit
    // (227 KB on the H100, 99 KB on sm_86/sm_89, 64 KB on sm_75); rows needing more take the
    // register path. A refused call must not leave its error for last_launch_error() to find.
    const size_t smem = Shape::smem_bytes(static_cast<int>(threads));
    int optin = 0;
    cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
    auto kernel = norm_backward_staged<T, kVec, kCentered, Shape>;
    cudaFuncAttributes attrs{};
    int n = 0;
    if (cudaFuncGetAttributes(&attrs, kernel) == cudaSuccess) {
      const int dynamic_max = optin - static_cast<int>(attrs.sharedSizeBytes);  // the static reduction scratch counts too
      if (dynamic_max > 0 && smem <= static_cast<size_t>(dynamic_max) &&
          cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, dynamic_max) == cudaSuccess &&
          cudaOccupancyMaxActiveBlocksPerMultiprocessor(&n, kernel, static_cast<int>(threads), smem) != cudaSuccess)
        n = 0;
    }
    (void)cudaGetLastError();
    per_sm = n > 0 ? n : -1;
  }
  if (per_sm < 0) return 0;
  const int64_t grid = static_cast<int64_t>(per_sm) * sm_count();
  const int64_t rows_a_block = static_cast<int64_t>(Shape::kRows) * kStagedMinSteps;
  // the floor never takes a batch below a block an SM (or a block a row, when rows are fewer)
  const int64_t one_each = rows < sm_count() ? rows : sm_count();
  int64_t few = (rows + rows_a_block - 1) / rows_a_block;
  if (few < one_each) few = one_each;
  return grid < few ? grid : few;
}

// Launches the staged kernel in Shape on grid blocks (norm_backward_staged_grid()'s).
template <typename T, bool kCentered, typename Shape = DefaultStaged>
void norm_backward_staged_launch(const NormBackwardParams& p, int64_t grid, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int threads = static_cast<int>(p.cols / (kVec * Shape::kPer));
  launch_kernel(norm_backward_staged<T, kVec, kCentered, Shape>, static_cast<unsigned>(grid), threads,
                Shape::smem_bytes(threads), stream, p);
}

// Rows of 512-1024 vectors (2048-4096 fp32 columns, 4096-8192 16-bit): 2 vectors a thread, one
// row a step, 2 stages. At 1 vector a thread an fp32 row of 4096 took 1024 threads and 128 KB a
// block, 1 block an SM; this shape is 512 threads and 64 KB, 2 blocks an SM. Backward alone,
// 16384 x 4096, H200 (benchmarks/norm_backward_variants.py, variant 11 against 0, us): fp32
// LayerNorm 206.4 against 269.9, RMSNorm 202.4 against 227.9; bf16 142.5 against 151.9 and
// 113.9 against 122.9 (torch.compile's backward: 236.2, 221.9, 165.8, 141.6).
using WideStaged = StagedShape<2, 1, 2>;
// 16-bit rows of 512-1024 vectors (4096-8192 columns) by op: at <2, 1, 2> a thread holds 16
// values of each tensor and the block's registers limit it (LayerNorm 99-111 registers,
// RMSNorm fp16 96: 2 blocks of 256 an SM). Backward alone, H200, fp16 / bf16 (us, against
// <2, 1, 2>): LayerNorm <2, 2, 1> 133.6 / 139.8 against 138.4 / 142.6 at 16384 x 4096, 273.9 /
// 290.5 against 308.5 / 319.3 at 16384 x 8192; RMSNorm <4, 1, 2> (128 registers, 128 threads:
// 4 blocks an SM) 110.4 / 110.6 against 128.9 / 114.0, 205.1 / 208.5 against 279.0 / 295.9
// (torch.compile: LayerNorm 165.1 / 165.8, 330.8 / 333.6; RMSNorm 129.3 / 142.7, 289.2 / 289.1).
template <typename T, bool kCentered>
using WideStagedFor = std::conditional_t<sizeof(T) == 4, WideStaged,
                                         std::conditional_t<kCentered, StagedShape<2, 2, 1>, StagedShape<4, 1, 2>>>;

// The staged shape for rows of cols and its grid: f(Shape{}, grid) with the first shape that
// applies; returns the grid, 0 where none does (the register and loop paths take those rows).
template <typename T, bool kCentered, typename F>
int64_t with_staged_shape(int64_t rows, int64_t cols, bool aligned, F&& f) {
  constexpr int kVec = 16 / sizeof(T);
  if (cols / kVec >= 512 && cols / kVec <= 1024) {
    using Wide = WideStagedFor<T, kCentered>;
    const int64_t grid = norm_backward_staged_grid<T, kCentered, Wide>(rows, cols, aligned);
    if (grid > 0) {
      f(Wide{}, grid);
      return grid;
    }
  }
  const int64_t grid = norm_backward_staged_grid<T, kCentered, DefaultStaged>(rows, cols, aligned);
  if (grid > 0) f(DefaultStaged{}, grid);
  return grid;
}

template <typename T, int kVec, bool kCentered>
__global__ void __launch_bounds__(1024) norm_backward_loop(NormBackwardParams p) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  __shared__ float scratch[2][2 * 32];
  RowReducer<2> reduce(scratch);
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  const T* w = static_cast<const T*>(p.weight);
  T* gx = static_cast<T*>(p.grad_x);
  const int64_t nv = p.cols / kVec;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  for (int64_t r = blockIdx.x; r < p.rows; r += gridDim.x) {
    const float mean = kCentered ? p.mean[r] : 0.f, rstd = p.rstd[r];
    float sg = 0.f, sgx = 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float g[kVec], v[kVec], wv[kVec];
      load_vec<T, kVec>(grad + r * p.cols + i * kVec, g);
      load_vec<T, kVec>(x + r * p.cols + i * kVec, v);
      load_vec<T, kVec>(w + i * kVec, wv);
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        sg += g[j] * wv[j];
        sgx += g[j] * wv[j] * (v[j] - mean) * rstd;
      }
    }
    float sums[2] = {sgx, sg};
    reduce.all_reduce(sums, blockDim.x, SumCombine());
    const float mean_gx = sums[0] * inv_cols;
    const float mean_g = kCentered ? sums[1] * inv_cols : 0.f;
    for (int64_t i = threadIdx.x; i < nv; i += blockDim.x) {
      float g[kVec], v[kVec], wv[kVec];
      load_vec<T, kVec>(grad + r * p.cols + i * kVec, g);
      load_vec<T, kVec>(x + r * p.cols + i * kVec, v);
      load_vec<T, kVec>(w + i * kVec, wv);
#pragma unroll
      for (int j = 0; j < kVec; ++j) v[j] = norm_grad_x(g[j] * wv[j], (v[j] - mean) * rstd, rstd, mean_g, mean_gx);
      store_vec<T, kVec>(gx + r * p.cols + i * kVec, v);
    }
  }
}

// The long-row path's weight (and bias) gradients: a thread owns a column and walks a run of
// rows (kwb_rows.cuh's tiling), writing its run's sums to the workspace.
template <typename T, bool kCentered>
__global__ void __launch_bounds__(256) norm_param_grads(NormBackwardParams p, RowTiling t) {
  wait_prior_grid();  // first: see kwb_cuda.cuh
  release_next_grid();
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  const int64_t col_block = blockIdx.x % t.col_blocks, row_block = blockIdx.x / t.col_blocks;
  const int64_t c = col_block * blockDim.x + threadIdx.x;
  if (c >= t.cols) return;
  const int64_t r0 = row_block * t.rows_per_block;
  const int64_t r1 = r0 + t.rows_per_block < t.rows ? r0 + t.rows_per_block : t.rows;
  float sw = 0.f, sb = 0.f;
  for (int64_t r = r0; r < r1; ++r) {
    const float g = to_acc<float>(grad[r * t.cols + c]);
    const float mean = kCentered ? p.mean[r] : 0.f;
    sw += g * (to_acc<float>(x[r * t.cols + c]) - mean) * p.rstd[r];
    sb += g;
  }
  float* ws = p.workspace + row_block * kPlanes<kCentered> * t.cols;
  ws[c] = sw;
  if constexpr (kCentered) ws[t.cols + c] = sb;
}

template <typename T>
RowwiseLaunch norm_backward_launch(int64_t rows, int64_t cols, bool aligned) {
  return rowwise_launch(rows, cols, row_vec<T>(cols, aligned), kNormBackwardVecs, true, kNormBackwardVecs);
}

// Rows of each of the (1 or 2) workspace planes the backward needs.
template <typename T, bool kCentered>
int64_t norm_workspace_rows(int64_t rows, int64_t cols, bool aligned) {
  const int64_t staged = with_staged_shape<T, kCentered>(rows, cols, aligned, [](auto, int64_t) {});
  if (staged > 0) return staged;
  const RowwiseLaunch L = norm_backward_launch<T>(rows, cols, aligned);
  if (L.vecs == 0) return column_sum_tiling(rows, cols, 1).row_blocks;
  return L.grid * L.rows_per_block;
}

template <typename T, bool kCentered>
const char* norm_forward(const NormParams& p, bool aligned, cudaStream_t stream) {
  const int vec = row_vec<T>(p.cols, aligned);
  const RowwiseLaunch L = rowwise_launch(p.rows, p.cols, vec, kNormForwardVecs, false);
  if (L.grid == 0 || p.cols == 0) return nullptr;
  const bool wide = vec > 1;
  const ExactRows e = exact_rows(p.rows, p.cols, vec, sizeof(T));
  if (sizeof(T) == 4 && wide && p.cols == kRereadCols && p.rows <= 0x7fffffff) {
    launch_kernel(norm_forward_reread<kCentered>, static_cast<unsigned>(p.rows), kRereadBlock, 0, stream, p);
  } else if (e.tpr > 0) {
    // The weight read late (kEarlyWeight false), RMSNorm's too: with PDL that keeps the graph rows
    // and wins the events rows (bf16 4096 x 1024, H100, 44cf259, us a call; early / late, both
    // with PDL / torch.compile): events 10.72 / 10.27 / 10.13, graph replays over 26 input copies
    // 5.50 / 5.75 / 6.16; at 16384 x 4096, 90.69 / 91.07 / 94.40 and 90.09 / 90.61 / 91.35
    // (rowwise_forward_variants.py 40 and 41).
    KWB_EXACT_SWITCH(e, T, kTpr, kVecs, [&] {
      launch_kernel(norm_forward_regs<T, 16 / sizeof(T), kVecs, kCentered, kTpr>, e.launch_blocks(), e.block, 0, stream,
                    p, kTpr);
    });
  } else if (L.vecs == 0) {
    if (wide) launch_kernel(norm_forward_loop<T, 16 / sizeof(T), kCentered>, L.launch_blocks(), L.block, 0, stream, p);
    else launch_kernel(norm_forward_loop<T, 1, kCentered>, L.launch_blocks(), L.block, 0, stream, p);
  } else {
    KWB_VECS_SWITCH(L.vecs, kVecs, [&] {
      if (wide) launch_kernel(norm_forward_regs<T, 16 / sizeof(T), kVecs, kCentered>, L.launch_blocks(), L.block, 0, stream, p, L.tpr);
      else launch_kernel(norm_forward_regs<T, 1, kVecs, kCentered>, L.launch_blocks(), L.block, 0, stream, p, L.tpr);
    });
  }
  return last_launch_error();
}

template <typename T, bool kCentered>
const char* norm_backward(const NormBackwardParams& p, bool aligned, cudaStream_t stream) {
  if (p.cols == 0) return nullptr;
  const int vec = row_vec<T>(p.cols, aligned);
  const RowwiseLaunch L = norm_backward_launch<T>(p.rows, p.cols, aligned);
  const bool wide = vec > 1;
  // the staged kernel where a shape applies; else the loop path (rows too long) or the register path
  int64_t ws_rows = with_staged_shape<T, kCentered>(p.rows, p.cols, aligned, [&](auto shape, int64_t grid) {
    norm_backward_staged_launch<T, kCentered, decltype(shape)>(p, grid, stream);
  });
  if (ws_rows == 0 && L.vecs == 0) {
    if (L.grid > 0) {
      if (wide) launch_kernel(norm_backward_loop<T, 16 / sizeof(T), kCentered>, L.launch_blocks(), L.block, 0, stream, p);
      else launch_kernel(norm_backward_loop<T, 1, kCentered>, L.launch_blocks(), L.block, 0, stream, p);
    }
    const RowTiling t = column_sum_tiling(p.rows, p.cols, 1);
    ws_rows = t.row_blocks;
    if (t.blocks() > 0) launch_kernel(norm_param_grads<T, kCentered>, static_cast<unsigned>(t.blocks()), t.threads, 0, stream, p, t);
  } else if (ws_rows == 0) {
    ws_rows = L.grid * L.rows_per_block;
    if (L.grid > 0) {
      constexpr int kVecs = kNormBackwardVecs;
      if (wide) launch_kernel(norm_backward_regs<T, 16 / sizeof(T), kVecs, kCentered>, L.launch_blocks(), L.block, 0, stream, p, L.tpr);
      else launch_kernel(norm_backward_regs<T, 1, kVecs, kCentered>, L.launch_blocks(), L.block, 0, stream, p, L.tpr);
    }
  }
  // 0 rows: no partials, and the sums come out zero
  if constexpr (kCentered)
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), static_cast<T*>(p.grad_bias), ws_rows, p.cols, stream);
  else
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), ws_rows, p.cols, stream);
  return last_launch_error();
}

// layernorm.cu's and rmsnorm.cu's launchers, for a runtime dtype (fp32, fp16, bf16): each .cu
// passes its kCentered, so it instantiates only its own norm's kernels.
template <bool kCentered>
int64_t norm_backward_workspace_rows(int64_t rows, int64_t cols, DType dtype, bool aligned) {
  int64_t ws_rows = 0;
  KWB_FLOAT_SWITCH(dtype, T, [&] {
    ws_rows = norm_workspace_rows<T, kCentered>(rows, cols, aligned);
    return static_cast<const char*>(nullptr);
  });
  return ws_rows;
}

template <bool kCentered>
const char* norm_forward_cuda(const NormParams& p, DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return norm_forward<T, kCentered>(p, aligned, stream); });
}

template <bool kCentered>
const char* norm_backward_cuda(const NormBackwardParams& p, DType dtype, bool aligned, cudaStream_t stream) {
  return KWB_FLOAT_SWITCH(dtype, T, [&] { return norm_backward<T, kCentered>(p, aligned, stream); });
}

}  // namespace
}  // namespace kwb
