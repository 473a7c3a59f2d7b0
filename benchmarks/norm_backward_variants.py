"""Variants of the LayerNorm / RMSNorm backward's row kernel, side by side (llm.c's dev/cuda
style): each is checked against the shipped kernel, then timed beside eager PyTorch and
torch.compile's backward with the harness. The winner goes into kernels/common/kwb_norm.cuh.

    python benchmarks/norm_backward_variants.py [--out DIR] [--shapes 16384x4096] [--dtypes float32]
        [--ops layernorm,rmsnorm] [--variants 0,14,17]                   # a CUDA GPU
    ncu --clock-control none -k regex:'norm_backward|backward_staged|triton_' \
        python benchmarks/norm_backward_variants.py --once ...   # each variant and compile's once

The backward reads grad and x and writes grad_x (403 MB at bf16 16384 x 4096, 134 us at the
H100's copy ceiling) and sums grad * xhat and grad down the columns. The register path's row
kernel (norm_backward_regs, shipped until variant 7 replaced it for rows of 128-1024 vectors)
keeps the next row's grad and x in registers while this row reduces: with the column sums it
holds in registers too, a thread has 64 registers and 2 rows in flight at most.

variant 0: the shipped backward (row kernel + column_sums)
variant 1: the register path's row kernel alone, no column_sums (splits the time between the two)
variant 2: rows staged through shared memory by cp.async, 2 stages (1 row ahead, no registers)
variant 3: cp.async, 3 stages (2 rows ahead)
variant 4: cp.async, 4 stages (3 rows ahead)
variant 5: variant 2 with the row reduction's partials read back as float4s (8 shared loads a
           thread a row instead of 32: the reduction was most of the instructions)
variant 6: variant 5 with 2 rows a step: one reduction and one barrier for both
variant 7: variant 6, each row read again from shared memory after the reduction (fewer
           registers); shipped as kwb_norm.cuh's norm_backward_staged
variant 8: variant 7 with 4 rows a step
variant 9: 4 rows a step, held in registers
variant 10: variant 7 with 3 stages
variants 11-19: the shipped staged kernel (norm_backward_staged) in other shapes, StagedShape<vectors
           a thread, rows a step, stages>: 11 <2,1,2>, 12 <2,1,3>, 13 <2,2,1>, 14 <4,1,2>,
           15 <4,1,3>, 16 <4,2,1>, 17 <4,1,1> (no copy ahead: Inductor's shape, one row of
           256 threads at fp32 4096 with other blocks hiding the loads), 18 <2,1,1>, 19 <1,1,2>.
           At fp32 4096 the shipped <1,2,2> took 1024 threads and 128 KB a block: 1 block an SM.
           Shipped since: rows of 512-1024 vectors take 11 <2,1,2> in fp32 (86fa668), and in
           16-bit 13 <2,2,1> for LayerNorm and 14 <4,1,2> for RMSNorm (031dd89; a3d21f0's run:
           benchmarks/results/nvidia-h200/2026-11-29-a3d21f0/norm_backward_variants.log, and
           kernels/layernorm/NOTES.md "Round 12"), so variant 0 is one of those there.
"""
from __future__ import annotations

import argparse

import torch

import workbench as wb

CUDA = r"""
#include "kwb_norm.cuh"

namespace variants {
using namespace kwb;

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem) {
  const unsigned s = static_cast<unsigned>(__cvta_generic_to_shared(smem));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" ::"r"(s), "l"(gmem));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int N> __device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" ::"n"(N)); }

// One 16-byte vector of grad and of x a thread a row (tpr * kVec == cols), kStages - 1 rows
// ahead in shared memory; a thread reads back only the vectors it copied, so the pipeline needs
// no barrier of its own.
template <typename T, int kVec, int kStages, bool kCentered>
__global__ void __launch_bounds__(1024) backward_staged(NormBackwardParams p, int tpr) {
  extern __shared__ uint4 stages[];  // [kStages][2][blockDim.x]
  __shared__ float scratch[2][2 * 32];
  RowReducer<2> reduce(scratch);
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  const int rpb = blockDim.x / tpr, lane = threadIdx.x % tpr;
  const int64_t col = static_cast<int64_t>(lane) * kVec;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  RowRegs<T, kVec, 1> w;
  w.load(static_cast<const T*>(p.weight), p.cols, lane, tpr);
  float sum_w[kVec] = {}, sum_b[kVec] = {};
  const int64_t stride = static_cast<int64_t>(gridDim.x) * rpb;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * rpb + threadIdx.x / tpr;
  auto issue = [&](int64_t r, int stage) {
    if (r < p.rows) {
      cp_async16(&stages[(stage * 2 + 0) * blockDim.x + threadIdx.x], grad + r * p.cols + col);
      cp_async16(&stages[(stage * 2 + 1) * blockDim.x + threadIdx.x], x + r * p.cols + col);
    }
    cp_async_commit();  // an empty group past the last row keeps wait_group's count right
  };
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(first + s * stride, s);
  int stage = 0;
  for (int64_t r = first; r - threadIdx.x / tpr < p.rows; r += stride) {
    issue(r + (kStages - 1) * stride, (stage + kStages - 1) % kStages);
    cp_async_wait<kStages - 1>();
    const bool valid = r < p.rows;
    RowRegs<T, kVec, 1> g, in;
    g.v[0] = reinterpret_cast<const Vec<T, kVec>&>(stages[(stage * 2 + 0) * blockDim.x + threadIdx.x]);
    in.v[0] = reinterpret_cast<const Vec<T, kVec>&>(stages[(stage * 2 + 1) * blockDim.x + threadIdx.x]);
    const float mean = kCentered && valid ? p.mean[r] : 0.f;
    const float rstd = valid ? p.rstd[r] : 0.f;
    float sg = 0.f, sgx = 0.f;
    if (valid)
#pragma unroll
      for (int j = 0; j < kVec; ++j) {
        const float gw = g.at(0, j) * w.at(0, j), xhat = (in.at(0, j) - mean) * rstd;
        sg += gw;
        sgx += gw * xhat;
        sum_w[j] += g.at(0, j) * xhat;
        sum_b[j] += g.at(0, j);
      }
    float sums[kCentered ? 2 : 1];
    sums[0] = sgx;
    if constexpr (kCentered) sums[1] = sg;
    reduce.all_reduce(sums, tpr, SumCombine());
    const float mean_gx = sums[0] * inv_cols;
    const float mean_g = kCentered ? sums[kCentered ? 1 : 0] * inv_cols : 0.f;
    if (valid) {
      float d[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        d[j] = norm_grad_x(g.at(0, j) * w.at(0, j), (in.at(0, j) - mean) * rstd, rstd, mean_g, mean_gx);
      store_vec<T, kVec>(gx + r * p.cols + col, d);
    }
    stage = (stage + 1) % kStages;
  }
  cp_async_wait<0>();
  const int64_t ws_row = static_cast<int64_t>(blockIdx.x) * rpb + threadIdx.x / tpr;
  float* ws = p.workspace + ws_row * kPlanes<kCentered> * p.cols;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    ws[col + j] = sum_w[j];
    if constexpr (kCentered) ws[p.cols + col + j] = sum_b[j];
  }
}

// The persistent grid: as many blocks as the GPU holds at once (registers and shared memory
// permitting), one row a block at a time.
template <typename T, bool kCentered, int kStages>
int64_t staged_grid(int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int tpr = static_cast<int>(cols / kVec);
  const size_t smem = static_cast<size_t>(kStages) * 2 * tpr * 16;
  auto kernel = backward_staged<T, kVec, kStages, kCentered>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tpr, smem);
  const int64_t grid = static_cast<int64_t>(per_sm < 1 ? 1 : per_sm) * sm_count();
  return grid < rows ? grid : rows;
}

template <typename T, bool kCentered, int kStages>
const char* staged(const NormBackwardParams& p, int64_t grid, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int tpr = static_cast<int>(p.cols / kVec);
  const size_t smem = static_cast<size_t>(kStages) * 2 * tpr * 16;
  backward_staged<T, kVec, kStages, kCentered><<<static_cast<unsigned>(grid), tpr, smem, stream>>>(p, tpr);
  if constexpr (kCentered)
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), static_cast<T*>(p.grad_bias), grid, p.cols, stream);
  else
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), grid, p.cols, stream);
  return last_launch_error();
}

// Sums of M floats over a block of `warps` warps (one row a block), with one __syncthreads():
// the warps' partials are read back as float4s (8 shared loads for 2 sums over 16 warps, not
// 32), in one fixed order, so every thread ends with the same bits.
template <int M>
__device__ __forceinline__ void block_sums(float (&v)[M], float4 (*red)[M][8], int& parity) {
#pragma unroll
  for (int o = 16; o > 0; o >>= 1)
#pragma unroll
    for (int k = 0; k < M; ++k) v[k] += __shfl_xor_sync(0xffffffffu, v[k], o);
  float* buf = reinterpret_cast<float*>(red[parity]);
  const int warps = blockDim.x / 32;
  if ((threadIdx.x & 31) == 0)
#pragma unroll
    for (int k = 0; k < M; ++k) buf[k * 32 + threadIdx.x / 32] = v[k];
  __syncthreads();
#pragma unroll
  for (int k = 0; k < M; ++k) {
    float4 a = red[parity][k][0];
    float s = (a.x + a.y) + (a.z + a.w);
    for (int q = 1; q < warps / 4; ++q) {
      a = red[parity][k][q];
      s += (a.x + a.y) + (a.z + a.w);
    }
    v[k] = s;
  }
  parity ^= 1;
}

// Variants 5 and 6: the staged rows with block_sums(), kRows rows a step (one reduction for
// all of them). Needs blockDim.x a multiple of 128 (whole float4s of warps).
template <typename T, int kVec, int kStages, int kRows, bool kReread, bool kCentered>
__global__ void __launch_bounds__(1024) backward_staged_rows(NormBackwardParams p) {
  extern __shared__ uint4 stages[];  // [kStages][kRows][2][blockDim.x]
  constexpr int kSums = kCentered ? 2 : 1;
  __shared__ float4 red[2][kRows * kSums][8];
  int parity = 0;
  const T* grad = static_cast<const T*>(p.grad);
  const T* x = static_cast<const T*>(p.x);
  T* gx = static_cast<T*>(p.grad_x);
  const int64_t col = static_cast<int64_t>(threadIdx.x) * kVec;
  const float inv_cols = 1.f / static_cast<float>(p.cols);
  RowRegs<T, kVec, 1> w;
  w.load(static_cast<const T*>(p.weight), p.cols, threadIdx.x, blockDim.x);
  float sum_w[kVec] = {}, sum_b[kVec] = {};
  const int64_t grid = gridDim.x, step = grid * kRows;
  auto slot = [&](int stage, int i, int t) -> uint4& { return stages[((stage * kRows + i) * 2 + t) * blockDim.x + threadIdx.x]; };
  auto issue = [&](int64_t base, int stage) {
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      if (r < p.rows) {
        cp_async16(&slot(stage, i, 0), grad + r * p.cols + col);
        cp_async16(&slot(stage, i, 1), x + r * p.cols + col);
      }
    }
    cp_async_commit();
  };
  const int64_t first = blockIdx.x;
#pragma unroll
  for (int s = 0; s < kStages - 1; ++s) issue(first + s * step, s);
  int stage = 0;
  for (int64_t base = first; base < p.rows; base += step) {
    issue(base + (kStages - 1) * step, (stage + kStages - 1) % kStages);
    cp_async_wait<kStages - 1>();
    RowRegs<T, kVec, 1> g[kReread ? 1 : kRows], in[kReread ? 1 : kRows];
    float mean[kRows], rstd[kRows], sums[kRows * kSums];
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      const bool valid = r < p.rows;
      auto& gi = g[kReread ? 0 : i];
      auto& ini = in[kReread ? 0 : i];
      gi.v[0] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 0));
      ini.v[0] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 1));
      mean[i] = kCentered && valid ? p.mean[r] : 0.f;
      rstd[i] = valid ? p.rstd[r] : 0.f;
      float sg = 0.f, sgx = 0.f;
      if (valid)
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float gw = gi.at(0, j) * w.at(0, j), xhat = (ini.at(0, j) - mean[i]) * rstd[i];
          sg += gw;
          sgx += gw * xhat;
          sum_w[j] += gi.at(0, j) * xhat;
          sum_b[j] += gi.at(0, j);
        }
      sums[i * kSums] = sgx;
      if constexpr (kCentered) sums[i * kSums + 1] = sg;
    }
    block_sums<kRows * kSums>(sums, red, parity);
#pragma unroll
    for (int i = 0; i < kRows; ++i) {
      const int64_t r = base + i * grid;
      if (r >= p.rows) continue;
      const float mean_gx = sums[i * kSums] * inv_cols;
      const float mean_g = kCentered ? sums[i * kSums + (kCentered ? 1 : 0)] * inv_cols : 0.f;
      auto& gi = g[kReread ? 0 : i];
      auto& ini = in[kReread ? 0 : i];
      if constexpr (kReread) {  // read the row again from shared memory: fewer registers held across the reduction
        gi.v[0] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 0));
        ini.v[0] = reinterpret_cast<const Vec<T, kVec>&>(slot(stage, i, 1));
      }
      float d[kVec];
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        d[j] = norm_grad_x(gi.at(0, j) * w.at(0, j), (ini.at(0, j) - mean[i]) * rstd[i], rstd[i], mean_g, mean_gx);
      store_vec<T, kVec>(gx + r * p.cols + col, d);
    }
    stage = (stage + 1) % kStages;
  }
  cp_async_wait<0>();
  float* ws = p.workspace + static_cast<int64_t>(blockIdx.x) * kPlanes<kCentered> * p.cols;
#pragma unroll
  for (int j = 0; j < kVec; ++j) {
    ws[col + j] = sum_w[j];
    if constexpr (kCentered) ws[p.cols + col + j] = sum_b[j];
  }
}

template <typename T, bool kCentered, int kStages, int kRows, bool kReread>
int64_t staged_rows_grid(int64_t rows, int64_t cols) {
  constexpr int kVec = 16 / sizeof(T);
  const int tpr = static_cast<int>(cols / kVec);
  const size_t smem = static_cast<size_t>(kStages) * kRows * 2 * tpr * 16;
  auto kernel = backward_staged_rows<T, kVec, kStages, kRows, kReread, kCentered>;
  cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  int per_sm = 0;
  cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, tpr, smem);
  const int64_t grid = static_cast<int64_t>(per_sm < 1 ? 1 : per_sm) * sm_count();
  return grid < rows ? grid : rows;
}

template <typename T, bool kCentered, int kStages, int kRows, bool kReread>
const char* staged_rows(const NormBackwardParams& p, int64_t grid, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  const int tpr = static_cast<int>(p.cols / kVec);
  if (tpr % 128 != 0) return "staged_rows: cols / vector must be a multiple of 128";
  const size_t smem = static_cast<size_t>(kStages) * kRows * 2 * tpr * 16;
  backward_staged_rows<T, kVec, kStages, kRows, kReread, kCentered><<<static_cast<unsigned>(grid), tpr, smem, stream>>>(p);
  if constexpr (kCentered)
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), static_cast<T*>(p.grad_bias), grid, p.cols, stream);
  else
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), grid, p.cols, stream);
  return last_launch_error();
}

template <typename T, bool kCentered>
const char* shipped_rows_only(const NormBackwardParams& p, cudaStream_t stream) {
  const RowwiseLaunch L = norm_backward_launch<T>(p.rows, p.cols, true);
  norm_backward_regs<T, 16 / sizeof(T), kNormBackwardVecs, kCentered><<<L.launch_blocks(), L.block, 0, stream>>>(p, L.tpr);
  return last_launch_error();
}

// Variants 11-19: the shipped staged kernel in another shape (vectors a thread, rows a step,
// stages), on the grid the shipped code would give it.
template <typename T, bool kCentered, typename Shape>
const char* shipped_shape(const NormBackwardParams& p, int64_t grid, cudaStream_t stream) {
  if (grid <= 0) return "this shape does not apply to these rows (or does not fit the GPU)";
  norm_backward_staged_launch<T, kCentered, Shape>(p, grid, stream);
  if constexpr (kCentered)
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), static_cast<T*>(p.grad_bias), grid, p.cols, stream);
  else
    column_sums(p.workspace, static_cast<T*>(p.grad_weight), grid, p.cols, stream);
  return last_launch_error();
}

// variant -> f(StagedShape<per, rows, stages>{}); false for variants of another kind
template <typename F>
bool with_variant_shape(int variant, F&& f) {
  switch (variant) {
    case 11: f(StagedShape<2, 1, 2>{}); return true;
    case 12: f(StagedShape<2, 1, 3>{}); return true;
    case 13: f(StagedShape<2, 2, 1>{}); return true;
    case 14: f(StagedShape<4, 1, 2>{}); return true;
    case 15: f(StagedShape<4, 1, 3>{}); return true;
    case 16: f(StagedShape<4, 2, 1>{}); return true;
    case 17: f(StagedShape<4, 1, 1>{}); return true;
    case 18: f(StagedShape<2, 1, 1>{}); return true;
    case 19: f(StagedShape<1, 1, 2>{}); return true;
    default: return false;
  }
}

template <typename T, bool kCentered>
const char* run(const NormBackwardParams& p, int variant, int64_t grid, cudaStream_t stream) {
  const char* err = nullptr;
  if (with_variant_shape(variant, [&](auto shape) { err = shipped_shape<T, kCentered, decltype(shape)>(p, grid, stream); }))
    return err;
  switch (variant) {
    case 0: return norm_backward<T, kCentered>(p, true, stream);
    case 1: return shipped_rows_only<T, kCentered>(p, stream);
    case 2: return staged<T, kCentered, 2>(p, grid, stream);
    case 3: return staged<T, kCentered, 3>(p, grid, stream);
    case 4: return staged<T, kCentered, 4>(p, grid, stream);
    case 5: return staged_rows<T, kCentered, 2, 1, false>(p, grid, stream);
    case 6: return staged_rows<T, kCentered, 2, 2, false>(p, grid, stream);
    case 7: return staged_rows<T, kCentered, 2, 2, true>(p, grid, stream);
    case 8: return staged_rows<T, kCentered, 2, 4, true>(p, grid, stream);
    case 9: return staged_rows<T, kCentered, 2, 4, false>(p, grid, stream);
    case 10: return staged_rows<T, kCentered, 3, 2, true>(p, grid, stream);
    default: return "no such variant";
  }
}

// Workspace rows (= the staged variants' grid) of a variant.
template <typename T, bool kCentered>
int64_t ws_rows(int64_t rows, int64_t cols, int variant) {
  int64_t grid = 0;
  if (with_variant_shape(variant, [&](auto shape) { grid = norm_backward_staged_grid<T, kCentered, decltype(shape)>(rows, cols, true); }))
    return grid;  // 0 where the shape does not apply: run() says so
  switch (variant) {
    case 1: {
      const RowwiseLaunch L = norm_backward_launch<T>(rows, cols, true);
      return L.grid * L.rows_per_block;
    }
    case 2: return staged_grid<T, kCentered, 2>(rows, cols);
    case 3: return staged_grid<T, kCentered, 3>(rows, cols);
    case 4: return staged_grid<T, kCentered, 4>(rows, cols);
    case 5: return staged_rows_grid<T, kCentered, 2, 1, false>(rows, cols);
    case 6: return staged_rows_grid<T, kCentered, 2, 2, false>(rows, cols);
    case 7: return staged_rows_grid<T, kCentered, 2, 2, true>(rows, cols);
    case 8: return staged_rows_grid<T, kCentered, 2, 4, true>(rows, cols);
    case 9: return staged_rows_grid<T, kCentered, 2, 4, false>(rows, cols);
    case 10: return staged_rows_grid<T, kCentered, 3, 2, true>(rows, cols);
    default: return norm_workspace_rows<T, kCentered>(rows, cols, true);
  }
}
}  // namespace variants

// dtype: 0 fp32, 1 bf16, 2 fp16
const char* norm_backward_variant_launch(const kwb::NormBackwardParams& p, bool centered, int dtype, int variant,
                                         int64_t grid, cudaStream_t stream) {
  if (dtype == 1) return centered ? variants::run<__nv_bfloat16, true>(p, variant, grid, stream)
                                  : variants::run<__nv_bfloat16, false>(p, variant, grid, stream);
  if (dtype == 2) return centered ? variants::run<__half, true>(p, variant, grid, stream)
                                  : variants::run<__half, false>(p, variant, grid, stream);
  return centered ? variants::run<float, true>(p, variant, grid, stream) : variants::run<float, false>(p, variant, grid, stream);
}

int64_t norm_backward_variant_ws_rows(int64_t rows, int64_t cols, bool centered, int dtype, int variant) {
  if (dtype == 1) return centered ? variants::ws_rows<__nv_bfloat16, true>(rows, cols, variant)
                                  : variants::ws_rows<__nv_bfloat16, false>(rows, cols, variant);
  if (dtype == 2) return centered ? variants::ws_rows<__half, true>(rows, cols, variant)
                                  : variants::ws_rows<__half, false>(rows, cols, variant);
  return centered ? variants::ws_rows<float, true>(rows, cols, variant) : variants::ws_rows<float, false>(rows, cols, variant);
}
"""

CPP = r"""
#include "kwb_norm.h"
const char* norm_backward_variant_launch(const kwb::NormBackwardParams& p, bool centered, int dtype, int variant,
                                         int64_t grid, cudaStream_t stream);
int64_t norm_backward_variant_ws_rows(int64_t rows, int64_t cols, bool centered, int dtype, int variant);

std::vector<at::Tensor> norm_backward_variant(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& weight,
                                              const at::Tensor& mean, const at::Tensor& rstd, bool centered,
                                              int64_t variant) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && grad.is_contiguous() && grad.sizes() == x.sizes(),
              "norm_backward_variant: grad and x contiguous [rows, cols]");
  const auto st = x.scalar_type();
  TORCH_CHECK(st == at::kFloat || st == at::kBFloat16 || st == at::kHalf, "norm_backward_variant: fp32, bf16 or fp16");
  const int dtype = st == at::kBFloat16 ? 1 : st == at::kHalf ? 2 : 0;
  const int64_t rows = x.size(0), cols = x.size(1), vec = dtype == 0 ? 4 : 8;
  TORCH_CHECK(cols % vec == 0 && cols / vec <= 1024 && cols / vec >= 32, "norm_backward_variant: one 16-byte vector a thread");
  const int64_t planes = centered ? 2 : 1;
  const int64_t ws_rows = norm_backward_variant_ws_rows(rows, cols, centered, dtype, (int)variant);
  at::Tensor gx = at::empty_like(x), gw = at::empty_like(weight), gb = at::empty_like(weight);
  at::Tensor ws = at::empty({std::max<int64_t>(ws_rows, 1) * planes, cols}, x.options().dtype(at::kFloat));
  kwb::NormBackwardParams p{};
  p.grad = grad.const_data_ptr(); p.x = x.const_data_ptr(); p.weight = weight.const_data_ptr();
  p.mean = centered ? mean.const_data_ptr<float>() : nullptr; p.rstd = rstd.const_data_ptr<float>();
  p.grad_x = gx.mutable_data_ptr(); p.grad_weight = gw.mutable_data_ptr(); p.grad_bias = centered ? gb.mutable_data_ptr() : nullptr;
  p.workspace = ws.mutable_data_ptr<float>(); p.rows = rows; p.cols = cols;
  KWB_CHECK_LAUNCH("norm_backward_variant", norm_backward_variant_launch(p, centered, dtype, (int)variant, ws_rows,
                   kwb::current_stream(x)));
  return {gx, gw, gb};
}
"""

VARIANTS = (0, 1, 2, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19)


def reference_backward(grad, x, weight, mean, rstd, centered: bool):
    """The backward in eager PyTorch ops (fp32 math), as torch.compile sees it."""
    g, xf, w = grad.float(), x.float(), weight.float()
    xhat = (xf - mean[:, None]) * rstd[:, None] if centered else xf * rstd[:, None]
    gw = g * w
    mean_gx = (gw * xhat).mean(-1, keepdim=True)
    if centered:
        dx = rstd[:, None] * (gw - gw.mean(-1, keepdim=True) - xhat * mean_gx)
        return dx.to(x.dtype), (g * xhat).sum(0).to(x.dtype), g.sum(0).to(x.dtype)
    dx = rstd[:, None] * (gw - xhat * mean_gx)
    return dx.to(x.dtype), (g * xhat).sum(0).to(x.dtype)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    shapes = []
    for item in text.split(","):
        parts = item.strip().lower().split("x")
        if len(parts) != 2 or not all(p.isdigit() and int(p) > 0 for p in parts):
            raise SystemExit(f"--shapes: ROWSxCOLS with positive sizes, comma-separated (got {text!r})")
        shapes.append((int(parts[0]), int(parts[1])))
    return shapes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--shapes", default="16384x4096", help="ROWSxCOLS, comma-separated")
    parser.add_argument("--dtypes", default="bfloat16,float32", help="bfloat16, float16, float32")
    parser.add_argument("--ops", default="layernorm,rmsnorm")
    parser.add_argument("--variants", default=",".join(map(str, VARIANTS)))
    parser.add_argument("--once", action="store_true",
                        help="launch each variant (and torch.compile's backward) once, for a profiler")
    args = parser.parse_args()
    shapes = parse_shapes(args.shapes)
    known = {"bfloat16": torch.bfloat16, "float16": torch.float16, "float32": torch.float32}
    if any(name not in known for name in args.dtypes.split(",")):
        raise SystemExit(f"--dtypes: bfloat16, float16 or float32 (got {args.dtypes!r})")
    dtypes = [known[name] for name in args.dtypes.split(",")]
    ops = args.ops.split(",")
    if any(op not in ("layernorm", "rmsnorm") for op in ops):
        raise SystemExit(f"--ops: layernorm or rmsnorm (got {args.ops!r})")
    variants = [int(v) if v.strip().isdigit() else -1 for v in args.variants.split(",")]
    if any(v not in VARIANTS for v in variants):
        raise SystemExit(f"--variants: some of {VARIANTS} (got {args.variants!r})")
    k = wb.load_inline("norm_backward_variants", cuda=CUDA, cpp=CPP, functions=["norm_backward_variant"])
    for rows, cols in shapes:
        for dtype in dtypes:
            for kind in ops:
                run_case(k, rows, cols, dtype, kind, variants, args)


def run_case(k, rows: int, cols: int, dtype, kind: str, variants: list[int], args) -> None:
    centered = kind == "layernorm"
    x = torch.randn(rows, cols, device="cuda").to(dtype)
    grad = torch.randn_like(x)
    weight = (1 + 0.1 * torch.randn(cols, device="cuda")).to(dtype)
    xf = x.float()
    mean = xf.mean(-1) if centered else None
    var = xf.var(-1, unbiased=False) if centered else xf.pow(2).mean(-1)
    rstd = torch.rsqrt(var + 1e-5)
    m = mean if centered else rstd  # unused for RMSNorm
    try:
        want = k.norm_backward_variant(grad, x, weight, m, rstd, centered, 0)
    except RuntimeError as e:  # rows of more than 1024 vectors, say
        print(f"{kind:>9} {dtype!s:>8} {rows}x{cols}: the variants do not take these rows: {e}", flush=True)
        return
    if args.once:
        for v in variants:
            try:
                k.norm_backward_variant(grad, x, weight, m, rstd, centered, v)
            except RuntimeError as e:
                print(f"{kind:>9} {dtype!s:>8} {rows}x{cols} v{v} does not launch: {e}", flush=True)
        compiled = torch.compile(reference_backward)
        compiled(grad, x, weight, m if centered else None, rstd, centered)
        torch.cuda.synchronize()
        return
    for v in variants:
        n = 1 if v == 1 else (3 if centered else 2)  # variant 1 writes grad_x only
        try:
            got = k.norm_backward_variant(grad, x, weight, m, rstd, centered, v)
        except RuntimeError as e:  # 4 rows of fp32 4096 take 256 KB of shared memory a block
            print(f"{kind:>9} {dtype!s:>8} {rows}x{cols} v{v} does not launch: {e}", flush=True)
            continue
        for a, b in zip(got[:n], want[:n]):
            torch.testing.assert_close(a.float(), b.float(), rtol=2e-2, atol=2e-2)
        report = wb.bench(lambda *t, v=v, n=n: tuple(k.norm_backward_variant(*t, centered, v)[:n]),
                          lambda g_, x_, w_, m_, r_, n=n: reference_backward(g_, x_, w_, m_ if centered else None, r_, centered)[:n],
                          inputs=[(grad, x, weight, m, rstd)], name=f"{kind} backward variant {v}",
                          label=f"{kind} bwd variant {v}", baselines="eager,compile" if v == 0 else "none",
                          bytes_moved=3 * x.numel() * x.element_size(),
                          tolerance=None if dtype != torch.float32 else (1e-3, 1e-3))  # fp32: sums of 16384 rows
        for r in report.rows:
            print(f"{kind:>9} {r['dtype']:>8} {rows}x{cols} v{v} {r['provider']:>14} {r['median_us'] or 0:9.1f} us "
                  f"{r['pct_of_ceiling'] or 0:5.1f}%  {r['status']}", flush=True)
        if args.out:
            report.save(args.out)


if __name__ == "__main__":
    main()
