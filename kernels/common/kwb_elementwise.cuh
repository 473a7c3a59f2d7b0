// A vectorized elementwise map: out[i] = f(in_0[i], ..., in_{K-1}[i]) over n elements of one
// type T, for any n (0 and over 2^31 included).
//
// How: a vector per input per thread, 16 bytes for one input and 8 for two or more, when every
// pointer is aligned to it (else 8-byte vectors where they are 8-byte aligned, else scalars); as
// many 256-thread blocks as the data needs; the n % kVec tail element by element on the threads
// after the vectors'. 32-bit indices below 2^31 elements, 64-bit above.
//
// Why 16 bytes of loads a thread for one input or two (16-byte aligned): full runs of every map op on the H100,
// 16-byte vectors (b8017f6) against 8-byte (7dfb843), us, two runs each
// (benchmarks/results/nvidia-h100-80gb-hbm3/): one-input ops at 2^26 ran 92.8-93.4 in 16-bit
// types (fp32 180.4-180.9) at 16 bytes and 96.6-97.3 (187.8-188.2) at 8, torch.compile
// 92.7-94.0 (180.8-182.3); two-input ops were level at 2^26 (the fp32 add 264.9-265.2 and
// 265.4-266.0) and faster at 8 bytes as CUDA-graph replays at 2^20 (the fp32 add 5.00 against
// 5.10, compile 4.97). 8-byte vectors for two inputs are Inductor's pick for the fp32 add (XBLOCK
// 512, 256 threads, LDG.E.64; kernels/relu_scale/NOTES.md, "Round 23" and "Round 24").
//
// Why no grid-stride loop: one vector per thread keeps more bytes in flight; the loop, more
// vectors per thread and streaming cache hints were all slower (kernels/relu_scale/NOTES.md).
// At 2^20 elements what counted was the code's shape, not its length or the block size (measured
// on the 16-byte map): the bf16 add at 73 SASS instructions a thread ran 3.47 us in a CUDA graph, at
// 27 with the tail's branch still in 3.51, at 128-512 threads a block 3.49-3.52; without the tail's
// code, 3.42, as Inductor's (see map_kernel). fp64: 2 elements a thread for one input, 1 for two
// (not timed).
//
// Packed 16-bit math: a functor with `static constexpr bool kPacked = true` and a
// `pair(P, ...)` on __half2 / __nv_bfloat162 gets two elements an instruction. Only for math
// where the packed instruction rounds exactly as fp32 math then one rounding to 16 bits does:
// add, subtract, multiply of two 16-bit values (fp32's 24 bits are >= 2p + 2 for p = 8 and 11,
// so the double rounding is innocuous), negation. Not __hmax2 / __hmin2: they return the other
// operand for a NaN, where torch.maximum propagates it.
#pragma once
#include <type_traits>

#include "kwb_cuda.cuh"

namespace kwb {
namespace {

constexpr int kThreads = 256;

template <typename T, int K>
struct MapArgs {
  const T* in[K];
  T* out;
  int64_t n;
};

// Two 16-bit elements in one register, for packed functors.
template <typename T> struct PairOf { using type = void; };
template <> struct PairOf<__half> { using type = __half2; };
template <> struct PairOf<__nv_bfloat16> { using type = __nv_bfloat162; };

template <typename F, typename = void> struct IsPacked : std::false_type {};
template <typename F> struct IsPacked<F, std::void_t<decltype(F::kPacked)>> : std::bool_constant<F::kPacked> {};

template <typename T, int K, int kVec, typename F>
__device__ __forceinline__ void map_vector(const Vec<T, kVec> (&in)[K], Vec<T, kVec>& out, const F& f) {
  if constexpr (kHalfType<T> && IsPacked<F>::value && kVec % 2 == 0) {
    using P = typename PairOf<T>::type;
    const P* a = reinterpret_cast<const P*>(in[0].v);
    P* o = reinterpret_cast<P*>(out.v);
#pragma unroll
    for (int j = 0; j < kVec / 2; ++j) {
      if constexpr (K == 1) o[j] = f.pair(a[j]);
      else if constexpr (K == 2) o[j] = f.pair(a[j], reinterpret_cast<const P*>(in[1].v)[j]);
      else o[j] = f.pair(a[j], reinterpret_cast<const P*>(in[1].v)[j], reinterpret_cast<const P*>(in[2].v)[j]);
    }
  } else {
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      if constexpr (K == 1) out.v[j] = f(in[0].v[j]);
      else if constexpr (K == 2) out.v[j] = f(in[0].v[j], in[1].v[j]);
      else out.v[j] = f(in[0].v[j], in[1].v[j], in[2].v[j]);
    }
  }
}

// Index: uint32_t when n < 2^31 (one IMAD.WIDE an address, a shift for n / kVec), else int64_t.
// kTail: n % kVec != 0, and the threads after the vectors' take the rest, one element each. Without
// a tail the kernel is Inductor's shape, load, compute, store, exit: with the tail's code behind a
// branch, the 2^20-element maps in CUDA graphs ran 3.45-3.47 us (bf16) where it and Inductor's ran
// 3.41-3.43 (benchmarks/map_block_variants.py).
template <typename T, int K, int kVec, typename Index, bool kTail, int kBlock, typename F>
__global__ void __launch_bounds__(kBlock) map_kernel(MapArgs<T, K> args, F f) {
  using V = Vec<T, kVec>;
  wait_prior_grid();
  release_next_grid();
  const Index n = static_cast<Index>(args.n);
  const Index n_vec = n / kVec;
  const Index i = static_cast<Index>(blockIdx.x) * kBlock + threadIdx.x;
  if (i >= n_vec) {
    if constexpr (kTail) {
      const Index t = n_vec * (kVec - 1) + i;
      if (t < n) {
        if constexpr (K == 1) args.out[t] = f(args.in[0][t]);
        else if constexpr (K == 2) args.out[t] = f(args.in[0][t], args.in[1][t]);
        else args.out[t] = f(args.in[0][t], args.in[1][t], args.in[2][t]);
      }
    }
    return;
  }
  V in[K];
#pragma unroll
  for (int k = 0; k < K; ++k) in[k] = reinterpret_cast<const V*>(args.in[k])[i];
  V out;
  map_vector<T, K, kVec>(in, out, f);
  reinterpret_cast<V*>(args.out)[i] = out;
}

template <typename T, int K, int kVec, typename Index, int kBlock, typename F>
void launch_indexed(const MapArgs<T, K>& args, F f, unsigned blocks, bool tail, cudaStream_t stream) {
  if constexpr (kVec > 1) {  // kVec 1: never a tail
    if (tail) return launch_kernel(map_kernel<T, K, kVec, Index, true, kBlock, F>, blocks, kBlock, 0, stream, args, f);
  }
  launch_kernel(map_kernel<T, K, kVec, Index, false, kBlock, F>, blocks, kBlock, 0, stream, args, f);
}

template <typename T, int K, int kVec, int kBlock, typename F>
void launch_map(const MapArgs<T, K>& args, F f, cudaStream_t stream) {
  const int64_t n_vec = args.n / kVec;
  const int64_t tail = args.n - n_vec * kVec;
  const unsigned blocks = static_cast<unsigned>((n_vec + tail + kBlock - 1) / kBlock);  // a thread a vector, then one a tail element
  // i < n_vec + tail + kBlock <= n + kBlock, so below 2^31 elements 32 bits hold every index.
  if (args.n < (int64_t{1} << 31)) launch_indexed<T, K, kVec, uint32_t, kBlock>(args, f, blocks, tail != 0, stream);
  else launch_indexed<T, K, kVec, int64_t, kBlock>(args, f, blocks, tail != 0, stream);
}

// Bytes of one input's vector: 16 bytes of loads in flight a thread (see the top).
template <int K> constexpr int kVecBytes = K == 1 ? 16 : 8;

template <typename T, int kBytes> constexpr int kVecOf = kBytes / int(sizeof(T)) > 0 ? kBytes / int(sizeof(T)) : 1;

template <typename T, int K>
bool all_aligned(const MapArgs<T, K>& args, int bytes) {
  bool aligned = is_aligned(args.out, bytes);
#pragma unroll
  for (int k = 0; k < K; ++k) aligned = aligned && is_aligned(args.in[k], bytes);
  return aligned;
}

// Runs f over the K inputs; returns nullptr or CUDA's error string.
template <typename T, int K, int kBlock = kThreads, typename F>
const char* elementwise(const MapArgs<T, K>& args, F f, cudaStream_t stream) {
  if (args.n == 0) return nullptr;
  constexpr int kBytes = kVecBytes<K>;
  if (all_aligned(args, kBytes)) launch_map<T, K, kVecOf<T, kBytes>, kBlock>(args, f, stream);
  else if (kBytes > 8 && all_aligned(args, 8)) launch_map<T, K, kVecOf<T, 8>, kBlock>(args, f, stream);
  else launch_map<T, K, 1, kBlock>(args, f, stream);
  return last_launch_error();
}

}  // namespace
}  // namespace kwb
