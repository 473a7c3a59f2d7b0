// linear_gelu's launch interface, shared by linear_gelu.cpp and linear_gelu.cu (no torch headers).
// y = GELU(x W^T + b): x is m x k, W is n x k (nn.Linear's layout), b is n, y is m x n.
//
// The matrix products of the shipped route run on cuBLAS / cuBLASLt (through ATen, in
// linear_gelu.cpp) or, for the erf form's large 16-bit products on the H100, on CUTLASS with
// the GELU in its epilogue (linear_gelu_sm90a.cuh); linear_gelu.cu's kernels are the GELU
// passes, and matrix kernels of our own: the naive one of the tutorials and a shared-memory
// tiled one (kept for teaching), and a skinny one, which wins for small fp32 batches (NOTES.md).
#pragma once
#include <cstddef>

#include "kwb_dtype.h"

struct LinearGeluParams {
  const void* x;     // m x k, row-major
  const void* w;     // n x k, row-major
  const void* bias;  // n
  void* y;           // m x n, written in full
  void* pre;         // m x n, x W^T + b before the GELU (written in full), or nullptr
  int64_t m, n, k;
  bool tanh;         // GELU's tanh approximation, else the exact erf form
  void* partial;     // tiled kernel, splits > 1: splits x m x n sums (float; double for fp64 data)
  int splits;        // tiled kernel: the k range is cut in this many pieces (linear_gelu_tiled_splits)
};

// y = GELU(pre) elementwise over n values (y may be pre: in place).
struct GeluParams {
  const void* pre;
  void* y;
  int64_t n;
  bool tanh;
};

// y = GELU(pre + bias[col]) over rows x cols: the pass after a product without an epilogue
// (at::mm), as bias_gelu's forward (kwb_bias_gelu.cuh).
struct BiasGeluPassParams {
  const void* pre;   // rows x cols: x W^T
  const void* bias;  // cols
  void* y;           // rows x cols, written in full (not pre)
  int64_t rows, cols;
  bool tanh;
};

// grad_pre = grad * GELU'(pre) over rows x cols, and grad_bias = its column sums, in one pass
// (kwb_gelu_backward.cuh).
struct GeluBackwardParams {
  const void* grad;   // rows x cols
  const void* pre;    // rows x cols: the product before the GELU
  void* grad_pre;     // rows x cols, written in full
  void* grad_bias;    // cols, written in full
  void* workspace;    // linear_gelu_backward_workspace_rows x cols of float (double for fp64): partial sums
  int64_t rows, cols;
  bool tanh;
};

// Each returns nullptr on success, else CUDA's error string.
// One thread per output, a dot product over k straight from global memory (the tutorials' kernel).
const char* linear_gelu_naive_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream);
// 32 x 32 output tiles through shared memory, fp32 accumulation, bias + GELU in the epilogue;
// with splits > 1, each of `splits` blocks per tile sums a piece of k into p.partial and a
// second kernel adds the pieces in order (deterministic) before the epilogue.
int linear_gelu_tiled_splits(int64_t m, int64_t n, int64_t k);
const char* linear_gelu_tiled_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream);
// fp32, few rows: each block 16 rows x 8 or 16 columns with k split over 32 or 16 threads a
// column, summed in shared memory in a fixed order; needs k % 4 == 0 and x and W 16-byte aligned.
const char* linear_gelu_skinny_cuda(const LinearGeluParams& p, kwb::DType dtype, cudaStream_t stream);
// Whether its grid for m x n outputs has a block for every SM of the current GPU.
bool linear_gelu_skinny_fills_gpu(int64_t m, int64_t n);
const char* gelu_cuda(const GeluParams& p, kwb::DType dtype, cudaStream_t stream);
// aligned: pre, bias and y 16-byte aligned.
const char* bias_gelu_pass_cuda(const BiasGeluPassParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);
// aligned: grad, pre and grad_pre are 16-byte aligned.
int64_t linear_gelu_backward_workspace_rows(int64_t rows, int64_t cols, kwb::DType dtype, bool aligned);
const char* gelu_backward_cuda(const GeluBackwardParams& p, kwb::DType dtype, bool aligned, cudaStream_t stream);

// ---- Hopper (sm_90a) products with the GELU in the epilogue: the *_sm90a.cu units --------

// How the persistent kernel walks its tiles; device and sm_count as the caller's GPU has them.
struct Sm90aSchedule {
  int device;
  int sm_count;
  int swizzle;  // tiles grouped 1, 2, 4 or 8 at a time along the raster (L2 reuse)
  int raster;   // 0: CUTLASS's heuristic, 1: along m, 2: along n
};

// The current GPU's schedule for the entries below; false where that GPU is not compute
// capability 9.0 (an sm_90a cubin runs there alone).
bool linear_gelu_sm90a_schedule(int swizzle, int raster, Sm90aSchedule* s);

// What an entry returns where its unit was not compiled for sm_90a (the build does not target
// 9.0, or CUTLASS's headers were missing): linear_gelu.cpp then takes cuBLAS's route.
inline constexpr const char* kLinearGeluSm90aAbsent = "not built for sm_90a";

// Each: with workspace == nullptr and bytes given, checks that it takes the problem (nullptr,
// and the workspace it needs in *bytes) or says why not; else runs it. Inputs contiguous
// 16-bit, k and n multiples of 8, every pointer 16-byte aligned. Erf form; *_pre also write
// p.pre = x W^T + b.
using LinearGeluSm90aEntry = const char* (*)(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_bf16(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_fp16(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_bf16_pre(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_fp16_pre(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
// Other tile configurations (bf16, benchmarks/linear_gelu_variants.py), compiled only with
// -DKWB_LINEAR_GELU_SM90A_VARIANTS, else they return kLinearGeluSm90aAbsent. The cooperative
// 128 x 256 tile: 1, clusters of 1 x 2; 2, of 1 x 1; 4, GELU's tanh form; 5 and 6, stream-K
// with clusters of 2 x 1 and 1 x 2; 8, clusters of 2 x 1 (the tile shipped before the ping-pong
// one). 3, cooperative 256 x 128 tiles; 7, the shipped ping-pong tile with clusters of 2 x 1.
const char* linear_gelu_sm90a_v1(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v2(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v3(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v4(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v5(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v6(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v7(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
const char* linear_gelu_sm90a_v8(const LinearGeluParams&, const Sm90aSchedule&, void*, size_t*, cudaStream_t);
