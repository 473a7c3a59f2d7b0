// A vectorized elementwise map: out[i] = f(in_0[i], ..., in_{K-1}[i]) over n elements of one
// type T, for any n (0 and over 2^31 included).
//
// How: a grid-stride loop over 16-byte vectors (4 floats, 8 halves) when every pointer is
// 16-byte aligned, then the n % kVec tail element by element; unaligned pointers take the
// scalar path. The grid is a few waves of blocks (kBlocksPerSm per SM), enough loads in
// flight to cover HBM latency, with 64-bit indices throughout.
#pragma once
#include "kwb_cuda.cuh"

namespace kwb {
namespace {

constexpr int kThreads = 256;
constexpr int kBlocksPerSm = 8;  // 8 x 256 threads = 2048, the H100's max resident per SM

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
  const int64_t stride = static_cast<int64_t>(gridDim.x) * blockDim.x;
  const int64_t tid = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  for (int64_t i = tid; i < n_vec; i += stride) {
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
  const int64_t t = n_vec * kVec + tid;
  if (t < args.n) {
    if constexpr (K == 1) args.out[t] = f(args.in[0][t]);
    else if constexpr (K == 2) args.out[t] = f(args.in[0][t], args.in[1][t]);
    else args.out[t] = f(args.in[0][t], args.in[1][t], args.in[2][t]);
  }
}

template <typename T, int K, int kVec, typename F>
void launch_map(const MapArgs<T, K>& args, F f, cudaStream_t stream) {
  const int64_t work = args.n / kVec + 1;  // +1 so the tail always has a thread
  const int64_t needed = (work + kThreads - 1) / kThreads;
  const int64_t cap = static_cast<int64_t>(sm_count()) * kBlocksPerSm;
  const int blocks = static_cast<int>(needed < cap ? needed : cap);
  map_kernel<T, K, kVec><<<blocks, kThreads, 0, stream>>>(args, f);
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
