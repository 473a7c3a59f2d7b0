// A vectorized elementwise map: out[i] = f(in_0[i], ..., in_{K-1}[i]) over n elements of one
// type T, for any n (0 and over 2^31 included).
//
// How: one 16-byte vector (4 floats, 8 halves) per thread when every pointer is 16-byte
// aligned, as many 256-thread blocks as the data needs, and the n % kVec tail element by
// element on the first threads; unaligned pointers take the scalar path. 64-bit indices.
//
// Why no grid-stride loop: one vector per thread keeps more bytes in flight; the loop, more
// vectors per thread and streaming cache hints were all slower (kernels/relu_scale/NOTES.md).
#pragma once
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

template <typename T, int K, int kVec, typename F>
__global__ void __launch_bounds__(kThreads) map_kernel(MapArgs<T, K> args, F f) {
  using V = Vec<T, kVec>;
  const int64_t n_vec = args.n / kVec;
  const int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < n_vec) {
    V in[K];
#pragma unroll
    for (int k = 0; k < K; ++k) in[k] = reinterpret_cast<const V*>(args.in[k])[i];
    V out;
#pragma unroll
    for (int j = 0; j < kVec; ++j) {
      if constexpr (K == 1) out.v[j] = f(in[0].v[j]);
      else if constexpr (K == 2) out.v[j] = f(in[0].v[j], in[1].v[j]);
      else out.v[j] = f(in[0].v[j], in[1].v[j], in[2].v[j]);
    }
    reinterpret_cast<V*>(args.out)[i] = out;
  }
  // The tail: fewer than kVec elements, one per thread of the first threads.
  const int64_t t = n_vec * kVec + i;
  if (t < args.n) {
    if constexpr (K == 1) args.out[t] = f(args.in[0][t]);
    else if constexpr (K == 2) args.out[t] = f(args.in[0][t], args.in[1][t]);
    else args.out[t] = f(args.in[0][t], args.in[1][t], args.in[2][t]);
  }
}

template <typename T, int K, int kVec, typename F>
void launch_map(const MapArgs<T, K>& args, F f, cudaStream_t stream) {
  const int64_t n_vec = args.n / kVec;
  const int64_t work = n_vec > args.n - n_vec * kVec ? n_vec : args.n - n_vec * kVec;  // threads needed
  const int64_t blocks = (work + kThreads - 1) / kThreads;
  map_kernel<T, K, kVec><<<static_cast<unsigned>(blocks), kThreads, 0, stream>>>(args, f);
}

// Runs f over the K inputs; returns nullptr or CUDA's error string.
template <typename T, int K, typename F>
const char* elementwise(const MapArgs<T, K>& args, F f, cudaStream_t stream) {
  if (args.n == 0) return nullptr;
  constexpr int kVec = 16 / sizeof(T) > 0 ? 16 / sizeof(T) : 1;
  bool aligned = is_aligned(args.out, 16);
#pragma unroll
  for (int k = 0; k < K; ++k) aligned = aligned && is_aligned(args.in[k], 16);
  if (aligned) launch_map<T, K, kVec>(args, f, stream);
  else launch_map<T, K, 1>(args, f, stream);
  return last_launch_error();
}

}  // namespace
}  // namespace kwb
