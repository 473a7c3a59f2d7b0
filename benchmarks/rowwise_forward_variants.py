"""Variants of the row-wise forward kernels (softmax, LayerNorm, RMSNorm) side by side (llm.c's
dev/cuda style): each is checked against PyTorch, then timed beside eager PyTorch and
torch.compile with the harness, at the shapes where the shipped forwards lose to torch.compile
(`kwb run --full` at 7892f55, H100): 4096 x 1024 (16 MB of fp32 each way, a 11-18 us kernel)
and 16384 x 4096 (fp32 at 96% of the copy ceiling, compile at 98.7%).

    python benchmarks/rowwise_forward_variants.py [--out DIR] [--shapes 4096x1024,16384x4096]
        [--dtypes float32,bfloat16] [--ops softmax,layernorm,rmsnorm] [--variants 0,1,6]
    ncu --clock-control none -k regex:'forward_regs|rwv_fwd|triton_' \
        python benchmarks/rowwise_forward_variants.py --once     # each variant, and torch.compile's
                                                                 # kernel, launched once a case

What the shipped forwards do (kwb_rowwise.cuh's register path, kForwardVecs = kNormForwardVecs =
4): a row in the registers of tpr threads, 4 16-byte vectors a thread, one read of x and one
write of y, __launch_bounds__(512, 2) (64 registers: 8 blocks of 128 threads or 4 of 256 an SM).
  fp32 4096 x 1024: tpr 64 (2 warps a row, so each reduction crosses warps: a __syncthreads()
      each, 2 a row in softmax and LayerNorm), 2 rows a 128-thread block, 2048 blocks on 1056
      slots: 1.94 waves.
  bf16 4096 x 1024: tpr 32 (a warp a row, no barrier), 4 rows a block, 1024 blocks: 0.97 wave.
  fp32 16384 x 4096: tpr 256, 1 row a block, 4 blocks an SM; bf16: tpr 128, 8 blocks an SM.
Found in the shipped build's PTX/SASS (nvcc 13.0, sm_90): of a thread's 4 output vectors, only
the first 2 are 16-byte stores; vectors 2 and 3 become 4 32-bit stores each (store_vec's
aggregate copy; even a float4 store is split this way), in all three forwards and both dtypes.
LayerNorm/RMSNorm load the weight (and bias) after both reductions, one vector at a time,
each behind the previous vector's store (NormParams' pointers may alias): 4 dependent L1/L2
round trips at the end of every row. bf16 LayerNorm spills 16 bytes at the 64-register cap.
torch.compile (Inductor's persistent reduction, upstream heuristics after pytorch#168335):
rows of 256-1024 elements run XBLOCK=1 with num_warps=1 (a warp a row, 32 elements a thread,
no shared memory, 4096 CTAs of 32 threads); rows of 4096 run XBLOCK=1 with 8 warps, 16 elements
a thread: kwb's own geometry. --once launches compile's kernel too, so ncu shows which it is.

Variants 1 and 2 are shipped since 9f6d034 for rows that fill their threads exactly (kwb_rowwise.cuh's
exact_rows: a compile-time tpr, fp32 rows of 1024 a warp at 8 vectors); variant 0 runs them there.

variant 0: the shipped forwards, called as the project ships them (wb.load: k.softmax,
           k.layernorm, k.rmsnorm)
variant 1: the shipped geometry (tpr = cols / (4 x 16-byte vectors), block max(tpr, 128), a
           64-register cap), rebuilt: every 16-byte store one st.global.v4; the weight and
           bias loaded together (restrict, __ldg) right after the reductions; tpr a template
           constant (reductions unrolled, a barrier only where a row spans warps); 1 / cols
           from the host and __fdividef for softmax's 1 / sum (no division slow-path call).
           Softmax isolates the stores; the norms add the weight loads. Fewer registers than
           shipped, so more blocks an SM (softmax fp32 48: 10 blocks of 128 an SM, not 8)
variant 2: a warp a row with 8 vectors (128 bytes) a lane, as torch.compile's num_warps=1: no
           shared memory, no barrier; 4 rows a 128-thread block, grid = rows / 4, a 64-register
           cap. fp32 rows of 1024 only (bf16 1024 is already a warp a row in variant 1; 2 rows a
           warp at 8 vectors a lane spilled 180-350 bytes in bf16)
variant 3: variant 1 at a 32-register cap (2048 threads an SM), fp32 only: 4096 x 1024 becomes
           2048 blocks in one wave (16 an SM), 16384 x 4096 has 8 rows in flight an SM, not 4.
           (bf16 spilled 100-300 bytes at 32 registers.)
variant 4: variant 1 on a persistent grid (as many blocks as fit at once), the next row group
           copied into shared memory by cp.async while this one reduces (2 stages; each thread
           reads back only what it copied, so the pipeline needs no barrier): the change that
           won the backward (norm_backward_variants.py), for the forward
variant 5: softmax only: variant 1 (fp32 1024: variant 2) with one reduction a row, of each
           thread's (max, sum of exp(x - its max)) pair, as Inductor's online softmax (its
           prepare_softmax_online); fp32 rescales its kept exps by exp(own max - row max)
variant 6: variant 1 with one row a block where a row is a warp or more (blocks of tpr threads,
           no smaller than a warp): Inductor's grid at 1024 bf16 columns, 4096 CTAs of 32
           threads, each one row, one trip, no shared memory. The 16-bit norm forwards at
           4096 x 1024 stayed at x0.97-0.99 torch.compile with 4 rows a 128-thread block, and the
           elementwise map's gap at 2^20 was its code's shape (kernels/relu_scale/NOTES.md)
variant 7: the norms only, Inductor's looped reduction (its triton_red_ kernels, which ran the
           fp32 16384 x 4096 norms at 98% of the H200's copy ceiling where the register path
           ran 93.5%): one row a 256-thread block, the row read twice, 2 vectors a thread a trip:
           a first loop sums (LayerNorm: x minus the row's first element, and its square) with
           its loads kept in L2 (createpolicy evict_last, as Inductor's first loop), then a second
           loop reads the row again, marked evict_first, normalizes and writes. A thread holds 2
           vectors, not its part of the row: 48 registers (LayerNorm) and 39 (RMSNorm) by ncu
variant 8: variant 7 at 4 vectors a thread a trip (one trip at fp32 4096)
variant 9: Inductor's own launch of the fp32 16384 x 4096 LayerNorm (its triton_red_ kernel at
           XBLOCK=1, R0_BLOCK=2048, 16 warps, 32 registers: benchmarks/inductor_kernels.py):
           variant 7 with blocks of 512 threads, 1 vector a thread a trip, a 32-register cap
           (4 blocks, 2048 threads an SM: 100% theoretical occupancy, where variant 8 had 50%)
variant 10: variant 9 at 2 vectors a thread a trip (Inductor's RMSNorm: R0_BLOCK=4096, one trip)
variant 11: variant 10 at a 40-register cap (3 blocks of 512 an SM), for LayerNorm's weight and
           bias vectors beside x's
variant 12: variant 8 at a 64-register cap (4 blocks of 256 an SM)
variant 13: variant 8 at a 48-register cap (5 blocks of 256 an SM): LayerNorm spilled 256-264 bytes
           in fp32 (not run)
variant 14: variant 12 with the weight (and bias) vectors loaded one output vector at a time,
           after the trip's x vectors (LayerNorm: 48 registers, no spills, where loading them
           beside x took 82)
variant 15: variant 10 with the late weight loads of variant 14
variant 16: the shipped norm_forward_reread (fp32) held to 4 blocks an SM by unused shared memory:
           RMSNorm's has 40 registers (6 blocks an SM) and ran 133 us where variant 12 (49
           registers, so 4 blocks of 256: ncu's register limit 4, 50% theoretical occupancy)
           ran 129.4; this asks whether occupancy is why
variant 17: the same held to 5 blocks an SM (LayerNorm's 47 registers give it 5 already).
           First run (4b801ac): 17 ran LayerNorm 151.8, RMSNorm 146.2 against the shipped
           131.4 / 132.6 (16 did not launch: its padding passed 48 KB). Not an answer on
           occupancy: the padding also takes the SM's L1 share (see shipped_reread_held).
variant 18: the shipped norm_forward_reread with the largest L1 share asked for (carveout 0):
           ncu put the second read's L1 hits at 48.8% (LayerNorm) and 32.4% (RMSNorm) in the
           shipped kernel, 2.4% in variant 17, 49-59% in Inductor's; this asks whether more L1
           closes RMSNorm's 3%. It did not (a3d21f0: LayerNorm 131.9 against shipped 131.3,
           RMSNorm 132.5 against 132.7, compile 129.2 / 128.8)
variant 19: the shipped norm_forward_reread with L1 eviction hints as Inductor's loads carry them
           (ld.global.L1::evict_last.L2::cache_hint for the first read and the weight,
           L1::evict_first for the second read): Inductor's L1 hit rate was 59% / 49% where
           the shipped kernel's was 49% / 33%
variant 20: the shipped norm_forward_reread with its register cap set for 4 blocks an SM (64
           registers): variant 12, at 4 blocks an SM, ran RMSNorm in 128.9 us against the
           shipped kernel's 132.7 (6 blocks, 40 registers); padding to 4 blocks (16) took L1
variant 21: variants 19 and 20 together. (ptxas: RMSNorm keeps 40 registers under either cap,
           so 20 and 21 change LayerNorm only: 64 registers, 4 blocks an SM.)
variant 22: the then shipped norm_forward_reread (<5, no hints>) held to 4 blocks an SM by 23 KB of unused shared
           memory a block, with a carveout of 44% (the 100 KB configuration: 4 x 24 KB fit, 5 do
           not), so that L1 keeps about 156 KB where variant 16's 47 KB blocks left it 28
variant 23: variant 22 with variant 19's L1 hints
Variants 19-23 at 031dd89 (H200, one run, us; torch.compile LayerNorm 129.9, RMSNorm 129.3;
shipped then <5 blocks, no hints> 132.0 / 133.5; variant 12 148.4 / 129.8):
  19: 131.3 / 130.8; 20: 130.1 / 133.0; 21: 130.1 / 130.8; 22: 133.6 / 130.8; 23: 130.8 / 130.4.
  ncu: the hints took RMSNorm's L1 hits from 32% to 47% (Inductor's 49%), LayerNorm's from 49%
  to 58% (Inductor's 59%); variant 22's carveout request gave the 132 KB configuration (5 blocks
  fit: not held to 4). Shipped since: variant 21 (kwb::RereadTuning<4, true>), so variant 0 is
  21 and variant 18 runs 21's build with the largest L1 share.
variants 24-26: the shipped kernel with the hints, built for and looping over rows on a
           persistent grid of 4, 5 or 6 blocks an SM (kPersistent), every block the same rows
           give or take one: blocks an SM set by the grid with all of L1 kept, where 16 and 22
           set them by shared memory and 20 by registers (variant 12, 4 an SM by its 49
           registers, ran 129.8 us where the shipped build ran 130.5-130.8). Refused where fewer
           blocks fit. At 402cfe1 all three were built for 4 blocks, so only these ran as
           persistent grids: LayerNorm 24 (138.9 us; 64 registers, 4 fit) and RMSNorm 24 and 25
           (136.8 and 136.8; 48 registers, 5 fit), against 129.1 and 130.3 with a block a row.
           LayerNorm 25/26 (167.0, 147.6) and RMSNorm 26 (153.2) ran their grids in waves.
variant 27 (removed; its code is at 0c7e09f): the shipped register path for exact rows
           (norm_forward_regs) with each thread's weight (and bias) lines prefetched into L1
           beside x's loads: the weight is read after the reductions, and with all 1024 blocks of bf16 4096 x 1024 in one wave every block's
           first weight read misses L1 at about the same time (16-bit rows: the CUDA-graph rows at
           x0.968-0.996 torch.compile, 5.5-5.9 us). Measured at 0c7e09f (H100, us a call with
           events; v0 / v27 / compile): LayerNorm bf16 10.2 / 20.9 / 10.0, fp32 15.3 / 30.3 / 16.4;
           RMSNorm bf16 10.1 / 21.2 / 9.7, fp32 15.1 / 24.4 / 15.6. ncu: warp cycles per issued
           instruction 17.0 -> 59.2 (bf16 LayerNorm), each lane's prefetch an L1 request that x's
           loads queue behind. Not shipped (kernels/layernorm/NOTES.md, "Round 16")
variant 28: the shipped register path for exact rows (norm_forward_regs) with the weight's vectors
           read beside x's, before the reductions, as Inductor's triton_per_ kernels load theirs
           (kEarlyWeight; shipped for RMSNorm from a6b01cd until PDL, variant 0 then 40 there; since,
           variant 0 is 41 for both norms)
variant 29: the same kernel with the weight read after the reductions, a vector at a time (shipped
           before a6b01cd, and for LayerNorm). Both launch with <<<>>>: variant 0 (kwb_norm.cuh's
           launch, programmatic dependent launch unless KWB_PDL=0) against 28 (RMSNorm) or 29
           (LayerNorm) is PDL against none, the kernel the same
variants 40 and 41: 28 and 29 launched as the shipped kernels are (kwb::launch_kernel: PDL unless
           KWB_PDL=0), so the weight's early read and PDL are two factors, each timed with the
           other on and off (H100, 44cf259, bf16 RMSNorm, us a call; v40 / v28 / v29 / v41 /
           compile: 4096 x 1024 events 10.72 / 10.69 / 10.27 / 10.27 / 10.13, graphs over 26 copies
           5.50 / 6.01 / 6.28 / 5.75 / 6.16; 16384 x 4096 events 90.69 / 90.69 / 91.04 / 91.07 /
           94.40, graphs 90.09 / 90.66 / 91.30 / 90.61 / 91.35): PDL is worth 0.25-0.5 us a graph
           replay and nothing with events, the late weight 0.4 us with events; 41 shipped
variants 30 and 31 (removed; their code is at b8017f6): the weight read behind x's loads, by making
           its address depend on the thread's sum of squares (30; ptxas then sank the loads past the
           row's reduction) or by plain loads after x's (31; issued once x's values arrived).
           bf16 RMSNorm 4096 x 1024 (H100, us a call; v28 / v29 / v30 / v31 / compile): graphs from
           the L2 4.30 / 4.83 / 4.74 / 4.76 / 4.48; over 26 copies 6.00 / 6.29 / 6.21 / 6.36 / 6.15;
           events 10.66 / 10.21-10.30 / 10.14 / 10.14 / 10.08-10.16
           (benchmarks/results/nvidia-h100-80gb-hbm3/2026-12-06-b8017f6-weight-early/)
variant 32: RMSNorm only: variant 1 (kwb's geometry, 4 vectors a thread, a 64-register cap) with the
           weight's vectors read beside x's, before the reductions, as the shipped kernel since
           a6b01cd (ptxas issues the weight's first): the control for 33
variant 33: variant 32 with the weight's loads marked evict_last in L1 and L2, as Inductor's
           eviction_policy='evict_last'. With the events timer (each call behind a write over twice
           the L2), the shipped weight-beside-x kernel ran 10.66 us where the weight read late ran
           10.14-10.30 and torch.compile 10.08-10.16; in CUDA graphs it ran 4.30 against 4.83 and
           4.48. Whether the weight's lines kept through the flush is torch.compile's edge there:
           no (H100, 0228551, us a call; v32 / v33 / v29 / compile): events 10.66 / 10.62 / 10.27 /
           10.08; graphs from the L2 4.26 / 4.28 / 4.84 / 4.44; over 26 copies 5.96 / 5.96 / 6.30 /
           6.14 (benchmarks/results/nvidia-h100-80gb-hbm3/2026-12-06-0228551/)
variant 34: variant 32 with x's loads issued first and the weight's right behind them (in 32 and 33,
           ptxas issues the weight's first, their address being ready ~16 instructions before x's):
           the weight's address is tied to x's row offset, and the thread's sum of squares to the
           weight's bits, through a mask ptxas cannot fold (with the address alone ptxas sank the
           weight's loads past the row's reduction, as in variant 30). Whether
           the order is what costs the early weight its 0.5 us in the events rows, where under ncu
           (one launch, the L2 invalidated, not written over) it is the fastest: 6.85 against 7.23
           (late) and Inductor's 7.71
           (bf16 4096 x 1024, H100, 07f59c1, us a call; v32 / v34 / v29 / compile: events 10.72 /
           10.62 / 10.40 / 10.18; graphs from the L2 4.24 / 4.26 / 4.83 / 4.49; over 26 copies 5.98 /
           5.94 / 6.31 / 6.19): the order is a third of it at most
variants 35-37: x is read once, and the events timer's flush leaves the L2 full of dirty lines, each
           of which a line of x or y must evict (a write to HBM) where it takes a dirty line's place.
           Marked evict_first, x's own clean lines are what y's replace. 35: variant 32 with x's loads
           L2 evict_first (createpolicy) and L1 no_allocate (two changes); 36: variant 32 with x's loads
           .cs; 37: variant 1 (rwv_fwd with the weight read late: not the shipped kernel, so v1, not v29,
           is its control) with x's loads as 35's (H100, 7dfb843, us a call; v0 / v1 / v37 / compile:
           events 10.56 / 10.18 / 10.02 / 9.98; graphs from the L2 4.28 / 4.96 / 4.98 / 4.48; over 26
           copies 6.04 / 6.50 / 6.43 / 6.16)
variants 38-39: the weight issued at the block's start as v0's, but into shared memory (cp.async, one
           copy a block, no registers held), and read from there after the reductions as v1's: v0
           wins the graph rows by the weight's early issue and loses the events rows to 4096 rows'
           warps each loading the same 2 KB before x; here a block's 128 threads copy it once. 38:
           variant 1 with the weight so staged (its control: v1); 39: 38 with x's loads as 35's
           (control: v37). LayerNorm too, its weight and bias both staged (control: v1; the early
           weight in registers spilled 8-28 bytes there): its 16-bit graph row at 4096 x 1024 ran
           ×0.993 / ×0.996 torch.compile at b8017f6
Variants 7-15 read rows of 4096 with the row length a compile-time constant (Inductor compiles its
kernels for the shape); every other length reads it from the argument.

Measured on the H200 at fp32 16384 x 4096 (us; torch.compile 128.5-130.1 in the same runs; the
register path, variant 0 before 7fb9119, 134.1-135.6; benchmarks/results/nvidia-h200/):
  LayerNorm  v7 136.0-136.7, v8 130.5 (64-bit indices, 64 registers) / 168.5-171.9 (82-87
             registers), v9 147.0-148.8, v10 247.8-314.2 (spills), v11 176.6, v12 147.6-149.1,
             v14 130.4-131.2, v15 134.3; shipped (norm_forward_reread) 131.8
  RMSNorm    v7 130.8-131.5, v8 128.5-134.8, v9 140.3-141.1, v10 129.3-146.6, v11 137.2,
             v12 129.4-129.5, v14 130.7-131.2, v15 130.8; shipped 133.0

ptxas (nvcc 13.0, sm_90), registers / spill bytes, at 4096 x 1024 | 16384 x 4096:
  shipped       softmax fp32 63 | 63, bf16 64 | 64; layernorm fp32 63 | 63, bf16 64 + 16 B
                spilled | 64 + 16 B; rmsnorm fp32 64 | 64, bf16 64 | 64
  variant 1     softmax fp32 48 | 48, bf16 47 | 48; layernorm fp32 62 | 64, bf16 64 | 64;
                rmsnorm fp32 54 | 54, bf16 62 | 64; no spills
  variant 2     fp32 1024: softmax, layernorm, rmsnorm 64, no spills
  variant 3     fp32: softmax 32 | 32, rmsnorm 32 | 32, no spills; layernorm 32 with 100 B of
                spill stores and loads (25 STL a thread a row)
  variant 4     softmax fp32 56 | 54, bf16 55 | 54; layernorm 64 | 64; rmsnorm fp32 56 | 56,
                bf16 64 | 64; no spills; 16 KB (128 threads) or 32 KB (256) of shared memory
"""
from __future__ import annotations

import argparse

import torch
import torch.nn.functional as F
from in_turns import time_each_way

import workbench as wb

CUDA = r"""
#include "kwb_norm.cuh"
#include "kwb_rowwise.cuh"

namespace rwv {

enum : int { kSoftmax = 0, kLayerNorm = 1, kRmsNorm = 2, kSoftmaxOnline = 3 };

// 16 bytes of T as floats, and back (fp32 and bf16; bf16 widens exactly by a shift).
template <typename T> struct V16;
template <> struct V16<float> {
  static constexpr int kN = 4;
  static __device__ __forceinline__ void unpack(const uint4& u, float (&f)[4]) {
    f[0] = __uint_as_float(u.x); f[1] = __uint_as_float(u.y); f[2] = __uint_as_float(u.z); f[3] = __uint_as_float(u.w);
  }
  static __device__ __forceinline__ uint4 pack(const float (&f)[4]) {
    return make_uint4(__float_as_uint(f[0]), __float_as_uint(f[1]), __float_as_uint(f[2]), __float_as_uint(f[3]));
  }
};
template <> struct V16<__nv_bfloat16> {
  static constexpr int kN = 8;
  static __device__ __forceinline__ void unpack(const uint4& u, float (&f)[8]) {
    const uint32_t w[4] = {u.x, u.y, u.z, u.w};
#pragma unroll
    for (int k = 0; k < 4; ++k) {
      f[2 * k] = __uint_as_float(w[k] << 16);
      f[2 * k + 1] = __uint_as_float(w[k] & 0xffff0000u);
    }
  }
  static __device__ __forceinline__ uint32_t pack2(float lo, float hi) {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return (static_cast<uint32_t>(__bfloat16_as_ushort(h.y)) << 16) | __bfloat16_as_ushort(h.x);
  }
  static __device__ __forceinline__ uint4 pack(const float (&f)[8]) {
    return make_uint4(pack2(f[0], f[1]), pack2(f[2], f[3]), pack2(f[4], f[5]), pack2(f[6], f[7]));
  }
};

__device__ __forceinline__ uint4 ld16(const void* p) { return __ldg(static_cast<const uint4*>(p)); }
// One st.global.v4 whatever NVVM would make of a 16-byte aggregate copy (the shipped store_vec
// and a plain float4 store both come out as 4 32-bit stores for a thread's 3rd and 4th vector).
__device__ __forceinline__ void st16(void* p, const uint4& v) {
  asm volatile("st.global.v4.b32 [%0], {%1, %2, %3, %4};\n" ::"l"(p), "r"(v.x), "r"(v.y), "r"(v.z), "r"(v.w));
}

// Variants 32-34: loads as volatile asm (ptxas still issues the weight's first where their address
// is ready first; made to depend on x's values, ptxas sank them past the row's reduction).
__device__ __forceinline__ uint4 ld16_nc_ordered(const void* p) {
  uint4 v;
  asm volatile("ld.global.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
// x read once: variant 35 marks its lines L2 evict_first (and skips L1), 36 loads them .cs (evict-first
// in both); 37 is 35 with the weight read late
__device__ __forceinline__ uint4 ld16_nc_drop(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::no_allocate.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
  return v;
}
__device__ __forceinline__ uint4 ld16_nc_stream(const void* p) {
  uint4 v;
  asm volatile("ld.global.cs.nc.v4.u32 {%0, %1, %2, %3}, [%4];\n" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p));
  return v;
}
// Inductor's eviction_policy='evict_last' on the weight: both levels (kwb_norm.cuh's policy)
__device__ __forceinline__ uint4 ld16_nc_keep(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.nc.L1::evict_last.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
  return v;
}

template <typename T> __device__ __forceinline__ float exp_(float v) { return sizeof(T) == 2 ? __expf(v) : expf(v); }

// Max or sum over the kTpr threads of a row: shuffles, then (rows spanning warps) one barrier
// over a double-buffered scratch, the warps' partials added in one fixed order.
template <int kTpr, int kWarps, bool kMax>
__device__ __forceinline__ float row_reduce(float v, float (*red)[kWarps], int& parity) {
  constexpr int kWidth = kTpr < 32 ? kTpr : 32;
#pragma unroll
  for (int o = kWidth / 2; o > 0; o >>= 1) {
    const float u = __shfl_xor_sync(0xffffffffu, v, o);
    if constexpr (kMax) v = fmaxf(v, u);
    else v += u;
  }
  if constexpr (kTpr > 32) {
    constexpr int kRowWarps = kTpr / 32;
    float* buf = red[parity];
    parity ^= 1;
    const int warp = threadIdx.x / 32, first = warp / kRowWarps * kRowWarps;
    if ((threadIdx.x & 31) == 0) buf[warp] = v;
    __syncthreads();
    v = buf[first];
#pragma unroll
    for (int k = 1; k < kRowWarps; ++k) {
      if constexpr (kMax) v = fmaxf(v, buf[first + k]);
      else v += buf[first + k];
    }
  }
  return v;
}

// A norm's output vector: (x - mean) * rstd * w (+ b, LayerNorm), from 16-byte vectors.
template <typename T, bool kCentered>
__device__ __forceinline__ uint4 normalized(const uint4& x, const uint4& w, const uint4& b, float mean, float rstd) {
  using V = V16<T>;
  constexpr int kVec = V::kN;
  float f[kVec], fw[kVec], o[kVec];
  V::unpack(x, f);
  V::unpack(w, fw);
#pragma unroll
  for (int j = 0; j < kVec; ++j) o[j] = (f[j] - mean) * rstd * fw[j];
  if constexpr (kCentered) {
    float fb[kVec];
    V::unpack(b, fb);
#pragma unroll
    for (int j = 0; j < kVec; ++j) o[j] += fb[j];
  }
  return V::pack(o);
}

// The row's (max, sum of exp(x - max)) from each thread's own pair in one reduction (variant 5):
// a pair merges as (M, s_a e^(m_a - M) + s_b e^(m_b - M)), M = max(m_a, m_b); a side already at M
// keeps its sum (no -inf - -inf).
template <typename T, int kTpr, int kWarps>
__device__ __forceinline__ void row_reduce_online(float& m, float& s, float2 (*red)[kWarps], int& parity) {
  constexpr int kWidth = kTpr < 32 ? kTpr : 32;
  auto merge = [](float& m, float& s, float mo, float so) {
    const float M = fmaxf(m, mo);
    s = (m == M ? s : s * exp_<T>(m - M)) + (mo == M ? so : so * exp_<T>(mo - M));
    m = M;
  };
#pragma unroll
  for (int o = kWidth / 2; o > 0; o >>= 1) merge(m, s, __shfl_xor_sync(0xffffffffu, m, o), __shfl_xor_sync(0xffffffffu, s, o));
  if constexpr (kTpr > 32) {
    constexpr int kRowWarps = kTpr / 32;
    float2* buf = red[parity];
    parity ^= 1;
    const int warp = threadIdx.x / 32, first = warp / kRowWarps * kRowWarps;
    if ((threadIdx.x & 31) == 0) buf[warp] = make_float2(m, s);
    __syncthreads();
    m = buf[first].x;
    s = buf[first].y;
#pragma unroll
    for (int k = 1; k < kRowWarps; ++k) merge(m, s, buf[first + k].x, buf[first + k].y);
  }
}

// A row in the registers of kTpr threads, kVecs 16-byte vectors a thread at columns
// (i * kTpr + lane) * kVec (kwb::RowRegs' layout); kBlock / kTpr rows a block. Rows are visited
// by a loop over row groups: with kStaged false the grid is one block a group (one trip);
// with kStaged the grid is persistent and the next group's row is copied into shared memory
// (cp.async) while this one reduces. Every thread of a block makes the same trips.
// kWeightEarly (unstaged; 1-6 RMSNorm, 7-8 both norms): 0, the weight after the reductions; 1, the weight's vectors
// and x's read before the reductions, x's unpredicated (a group past the last row reads the last
// row again); 2, as 1 with the weight's loads marked evict_last in L1 and L2, as Inductor's; 3, as 1
// with x's loads issued first and the weight's right behind them: the weight's address tied to x's
// row offset, and the thread's sum of squares to the weight's bits, both through zero_mask (tied
// only by its address, ptxas sank the weight's loads past the row's reduction); 4, as 1 with x's loads
// L2 evict_first; 5, as 1 with x's loads .cs; 6, as 0 with x's loads L2 evict_first; 7, as 0 with the
// weight copied into shared memory (cp.async) at the block's start and read from there; 8, as 7 with
// x's loads L2 evict_first.
template <int kOp, typename T, int kTpr, int kVecs, int kBlock, int kMinBlocks, bool kStaged, int kWeightEarly = 0>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    rwv_fwd(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
            float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t rows, int64_t cols, float inv_cols,
            float eps) {
  using V = V16<T>;
  constexpr int kVec = V::kN, kRpb = kBlock / kTpr, kWarps = kBlock / 32;
  // weight/bias vectors loaded at once: all 4 where 64 registers leave room, else one at a time
  constexpr int kChunk = 65536 / (kBlock * kMinBlocks) >= 64 && kVecs <= 4 ? kVecs : 1;
  __shared__ float red[2][kWarps];
  __shared__ float2 red2[2][kOp == kSoftmaxOnline ? kWarps : 1];
  extern __shared__ uint4 stage[];  // kStaged: [2][kVecs][kBlock]
  constexpr bool kWeightShared = kWeightEarly == 7 || kWeightEarly == 8;
  __shared__ uint4 w_shared[kWeightShared ? kTpr * kVecs : 1];  // the row's weight vectors, in column order
  __shared__ uint4 b_shared[kWeightShared && kOp == kLayerNorm ? kTpr * kVecs : 1];  // LayerNorm's bias, the same
  int parity = 0;
  const int lane = threadIdx.x % kTpr, group = threadIdx.x / kTpr;
  const int64_t step = static_cast<int64_t>(gridDim.x) * kRpb;
  // Vector i of a thread is at column (i * kTpr + lane) * kVec: a base pointer a row plus a
  // constant offset.
  constexpr int kStride = kTpr * kVec;
  const T* wl = w + lane * kVec;
  const T* bl = b + lane * kVec;
  auto slot = [&](int s, int i) -> uint4& { return stage[(s * kVecs + i) * kBlock + threadIdx.x]; };
  auto issue = [&](int64_t r, int s) {
    if constexpr (kStaged) {
      if (r < rows)
#pragma unroll
        for (int i = 0; i < kVecs; ++i) kwb::copy_async16(&slot(s, i), x + r * cols + lane * kVec + i * kStride);
      kwb::copy_async_commit();  // an empty group past the last row keeps wait's count right
    }
  };
  constexpr bool kEarly = kWeightEarly >= 1 && kWeightEarly <= 5;
  constexpr int kXHint = kWeightEarly == 4 || kWeightEarly == 6 || kWeightEarly == 8 ? 1 : kWeightEarly == 5 ? 2 : 0;
  // 0 for any row count under 2^62, which ptxas cannot fold: variant 34's ties
  const int64_t zero_mask = -(rows >> 62);
  int64_t base = static_cast<int64_t>(blockIdx.x) * kRpb;
  issue(base + group, 0);
  bool weight_waited = false;
  if constexpr (kWeightShared) {
    for (int t = threadIdx.x; t < kTpr * kVecs; t += kBlock) {
      kwb::copy_async16(&w_shared[t], w + t * kVec);
      if constexpr (kOp == kLayerNorm) kwb::copy_async16(&b_shared[t], b + t * kVec);
    }
    kwb::copy_async_commit();
  }
  for (int s = 0; base < rows; base += step, s ^= 1) {
    const int64_t r = base + group;
    const bool valid = r < rows;
    const T* xr = x + r * cols + lane * kVec;
    T* yr = y + r * cols + lane * kVec;
    uint4 v[kVecs];
    if constexpr (kStaged) {
      issue(r + step, s ^ 1);
      kwb::copy_async_wait<1>();
#pragma unroll
      for (int i = 0; i < kVecs; ++i) v[i] = valid ? slot(s, i) : make_uint4(0u, 0u, 0u, 0u);
    } else if constexpr (kEarly) {
      const T* xs = x + (valid ? r : rows - 1) * cols + lane * kVec;
      if constexpr (kXHint == 1) {
        const uint64_t drop = kwb::l2_evict_first_policy();
#pragma unroll
        for (int i = 0; i < kVecs; ++i) v[i] = ld16_nc_drop(xs + i * kStride, drop);
      } else if constexpr (kXHint == 2) {
#pragma unroll
        for (int i = 0; i < kVecs; ++i) v[i] = ld16_nc_stream(xs + i * kStride);
      } else {
#pragma unroll
        for (int i = 0; i < kVecs; ++i) v[i] = ld16_nc_ordered(xs + i * kStride);
      }
    } else if constexpr (kXHint == 1) {
      const uint64_t drop = kwb::l2_evict_first_policy();
#pragma unroll
      for (int i = 0; i < kVecs; ++i) v[i] = valid ? ld16_nc_drop(xr + i * kStride, drop) : make_uint4(0u, 0u, 0u, 0u);
    } else {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) v[i] = valid ? ld16(xr + i * kStride) : make_uint4(0u, 0u, 0u, 0u);
    }
    static_assert(kWeightEarly == 0 || (kOp == kRmsNorm && !kStaged) || (kWeightShared && kOp == kLayerNorm && !kStaged),
                  "the early weight is RMSNorm's (the shared one the norms'), unstaged");
    uint4 w_early[kEarly ? kVecs : 1];
    if constexpr (kWeightEarly == 1 || kWeightEarly == 4 || kWeightEarly == 5) {
#pragma unroll
      for (int i = 0; i < kVecs; ++i) w_early[i] = ld16_nc_ordered(wl + i * kStride);
    } else if constexpr (kWeightEarly == 2) {
      const uint64_t keep = kwb::l2_evict_last_policy();
#pragma unroll
      for (int i = 0; i < kVecs; ++i) w_early[i] = ld16_nc_keep(wl + i * kStride, keep);
    } else if constexpr (kWeightEarly == 3) {
      const int64_t tie = ((valid ? r : rows - 1) * cols) & zero_mask;
      const T* wt = wl + tie;
#pragma unroll
      for (int i = 0; i < kVecs; ++i) w_early[i] = ld16_nc_ordered(wt + i * kStride);
    }
    if constexpr (kOp == kSoftmax || kOp == kSoftmaxOnline) {
      // kSoftmaxOnline (variant 5): each thread's (max, sum) from its own values, then one
      // reduction of the pairs; fp32 rescales its kept exps by exp(own max - row max) in the write
      constexpr bool kOnline = kOp == kSoftmaxOnline;
      float m = -INFINITY;
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        float f[kVec];
        V::unpack(v[i], f);
#pragma unroll
        for (int j = 0; j < kVec; ++j) m = fmaxf(m, f[j]);
      }
      if constexpr (!kOnline) m = row_reduce<kTpr, kWarps, true>(m, red, parity);
      // fp32 keeps exp(x - max) in x's registers. bf16 asks for it again in the write, as shipped,
      // but ptxas keeps the first pass's values (32 MUFU.EX2 a thread, 47 registers: no spill).
      constexpr bool kKeep = sizeof(T) == 4;
      float sum = 0.f;
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        float f[kVec];
        V::unpack(v[i], f);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          f[j] = exp_<T>(f[j] - m);
          sum += f[j];
        }
        if constexpr (kKeep) v[i] = V::pack(f);
      }
      // __fdividef: an IEEE division's slow path is a call, whose saved registers spill at 32
      float inv, scale;  // scale: what a kept exp is multiplied by
      if constexpr (kOnline) {
        float row_m = m, row_s = sum;
        row_reduce_online<T, kTpr, kWarps>(row_m, row_s, red2, parity);
        inv = __fdividef(1.f, row_s);
        scale = (m == row_m ? 1.f : exp_<T>(m - row_m)) * inv;
        m = row_m;
      } else {
        inv = __fdividef(1.f, row_reduce<kTpr, kWarps, false>(sum, red, parity));
        scale = inv;
      }
      if (valid)
#pragma unroll
        for (int i = 0; i < kVecs; ++i) {
          float f[kVec];
          V::unpack(v[i], f);
#pragma unroll
          for (int j = 0; j < kVec; ++j) f[j] = kKeep ? f[j] * scale : exp_<T>(f[j] - m) * inv;
          st16(yr + i * kStride, V::pack(f));
        }
    } else {
      constexpr bool kCentered = kOp == kLayerNorm;
      float mean = 0.f;
      if constexpr (kCentered) {
        float s1 = 0.f;
#pragma unroll
        for (int i = 0; i < kVecs; ++i) {
          float f[kVec];
          V::unpack(v[i], f);
#pragma unroll
          for (int j = 0; j < kVec; ++j) s1 += f[j];
        }
        mean = row_reduce<kTpr, kWarps, false>(s1, red, parity) * inv_cols;
      }
      float ss = 0.f;  // from the centered row in registers, as shipped
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        float f[kVec];
        V::unpack(v[i], f);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float d = f[j] - mean;
          ss += d * d;
        }
      }
      if constexpr (kWeightEarly == 3) {  // the row's sum waits for the weight: ptxas cannot sink its loads
        uint32_t wbits = 0;
#pragma unroll
        for (int i = 0; i < kVecs; ++i) wbits |= w_early[i].x | w_early[i].y | w_early[i].z | w_early[i].w;
        ss = __int_as_float(__float_as_int(ss) | static_cast<int>(wbits & static_cast<uint32_t>(zero_mask)));
      }
      const float rstd = rsqrtf(row_reduce<kTpr, kWarps, false>(ss, red, parity) * inv_cols + eps);
      if constexpr (kWeightShared) {  // every thread of the block makes the same trips: one barrier, once
        if (!weight_waited) {
          kwb::copy_async_wait<0>();
          __syncthreads();
          weight_waited = true;
        }
      }
      if (valid) {
        if (lane == 0) {
          if constexpr (kCentered) mean_out[r] = mean;
          rstd_out[r] = rstd;
        }
        if constexpr (kEarly) {
#pragma unroll
          for (int i = 0; i < kVecs; ++i)
            st16(yr + i * kStride, normalized<T, false>(v[i], w_early[i], w_early[i], mean, rstd));
        } else
#pragma unroll
        for (int c = 0; c < kVecs; c += kChunk) {
          uint4 wv[kChunk], bv[kCentered ? kChunk : 1];
#pragma unroll
          for (int i = 0; i < kChunk; ++i) {
            wv[i] = kWeightShared ? w_shared[(c + i) * kTpr + lane] : ld16(wl + (c + i) * kStride);
            if constexpr (kCentered) bv[i] = kWeightShared ? b_shared[(c + i) * kTpr + lane] : ld16(bl + (c + i) * kStride);
          }
#pragma unroll
          for (int i = 0; i < kChunk; ++i)
            st16(yr + (c + i) * kStride, normalized<T, kCentered>(v[c + i], wv[i], bv[kCentered ? i : 0], mean, rstd));
        }
      }
    }
  }
  if constexpr (kStaged) kwb::copy_async_wait<0>();
}

// L2 eviction priorities, as Triton's eviction_policy: a policy register (kwb_norm.cuh's), then
// loads that carry it.
__device__ __forceinline__ uint64_t l2_policy_keep() { return kwb::l2_evict_last_policy(); }
__device__ __forceinline__ uint64_t l2_policy_drop() { return kwb::l2_evict_first_policy(); }
__device__ __forceinline__ uint4 ld16_policy(const void* p, uint64_t policy) {
  uint4 v;
  asm volatile("ld.global.L2::cache_hint.v4.u32 {%0, %1, %2, %3}, [%4], %5;\n"
               : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(p), "l"(policy));
  return v;
}

// Variants 7 to 10: one row a block, read twice (module docstring). Each thread walks its own
// pointers, so a trip's vectors sit at constant offsets from them (immediates in the loads):
// indexing by a 64-bit column gave LayerNorm's 256 x 4 kernel 64 registers, by a 32-bit one 87.
// kNv > 0: rows of kNv vectors, known to the compiler (trip counts and bounds folded, as in
// Inductor's kernels, which are compiled for the shape); 0: cols / vector from the argument.
// kLate: the weight and bias vectors loaded one output vector at a time, after the trip's x
// vectors (3 x 4 vectors in flight were 48 registers of LayerNorm's 256 x 4 kernel's 82).
template <int kOp, typename T, int kBlock, int kVecs, int kMinBlocks, int kNv, bool kLate = false>
__global__ void __launch_bounds__(kBlock, kMinBlocks)
    rwv_fwd_reread(const T* __restrict__ x, const T* __restrict__ w, const T* __restrict__ b, T* __restrict__ y,
                   float* __restrict__ mean_out, float* __restrict__ rstd_out, int64_t cols, float inv_cols, float eps) {
  using V = V16<T>;
  constexpr int kVec = V::kN, kWarps = kBlock / 32, kStride = kBlock * kVecs;
  constexpr bool kCentered = kOp == kLayerNorm;
  __shared__ float red[2][kWarps];
  int parity = 0;
  const int64_t r = blockIdx.x;
  const int nv = kNv > 0 ? kNv : static_cast<int>(cols / kVec), first = threadIdx.x;
  const T* xr = x + r * cols;
  // LayerNorm sums x - x[0] and its square: the variance as E[d^2] - E[d]^2 without the
  // cancellation of raw moments where the mean is large
  const float shift = kCentered ? static_cast<float>(xr[0]) : 0.f;
  float s1 = 0.f, s2 = 0.f;
  {
    const uint64_t keep = l2_policy_keep();
    const T* px = xr + first * kVec;
    for (int base = first; base < nv; base += kStride, px += kStride * kVec) {
      uint4 v[kVecs];
#pragma unroll
      for (int i = 0; i < kVecs; ++i)
        v[i] = base + i * kBlock < nv ? ld16_policy(px + i * kBlock * kVec, keep) : make_uint4(0u, 0u, 0u, 0u);
#pragma unroll
      for (int i = 0; i < kVecs; ++i) {
        if (base + i * kBlock >= nv) break;
        float f[kVec];
        V::unpack(v[i], f);
#pragma unroll
        for (int j = 0; j < kVec; ++j) {
          const float d = f[j] - shift;
          s1 += d;
          s2 += d * d;
        }
      }
    }
  }
  float mean = 0.f, var;
  if constexpr (kCentered) {
    const float m1 = row_reduce<kBlock, kWarps, false>(s1, red, parity) * inv_cols;
    var = fmaxf(row_reduce<kBlock, kWarps, false>(s2, red, parity) * inv_cols - m1 * m1, 0.f);
    mean = shift + m1;
  } else {
    var = row_reduce<kBlock, kWarps, false>(s2, red, parity) * inv_cols;
  }
  const float rstd = rsqrtf(var + eps);
  if (threadIdx.x == 0) {
    if constexpr (kCentered) mean_out[r] = mean;
    rstd_out[r] = rstd;
  }
  const uint64_t drop = l2_policy_drop();
  const T* px = xr + first * kVec;
  const T* pw = w + first * kVec;
  const T* pb = b + first * kVec;
  T* py = y + r * cols + first * kVec;
  for (int base = first; base < nv; base += kStride, px += kStride * kVec, pw += kStride * kVec, pb += kStride * kVec,
           py += kStride * kVec) {
    constexpr int kParams = kLate ? 1 : kVecs;
    uint4 v[kVecs], wv[kParams], bv[kCentered ? kParams : 1];
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (base + i * kBlock < nv) {
        v[i] = ld16_policy(px + i * kBlock * kVec, drop);
        if constexpr (!kLate) {
          wv[i] = ld16(pw + i * kBlock * kVec);
          if constexpr (kCentered) bv[i] = ld16(pb + i * kBlock * kVec);
        }
      }
    }
#pragma unroll
    for (int i = 0; i < kVecs; ++i) {
      if (base + i * kBlock >= nv) break;
      const int k = kLate ? 0 : i;
      if constexpr (kLate) {
        wv[0] = ld16(pw + i * kBlock * kVec);
        if constexpr (kCentered) bv[0] = ld16(pb + i * kBlock * kVec);
      }
      st16(py + i * kBlock * kVec, normalized<T, kCentered>(v[i], wv[k], bv[kCentered ? k : 0], mean, rstd));
    }
  }
}

struct Args {
  const void* x;
  const void* w;
  const void* b;
  void* y;
  float* mean;
  float* rstd;
  int64_t rows, cols;
  float eps;
};

// kRegs: the register cap (__launch_bounds__' second argument = 65536 / (kRegs * kBlock) blocks).
// kBlockMin: the smallest block (128; variant 6: one row a block, as Inductor's grid).
template <int kOp, typename T, int kTpr, int kVecs, int kRegs, bool kStaged, int kBlockMin = 128, int kWeightEarly = 0>
const char* launch(const Args& a, cudaStream_t stream) {
  constexpr int kBlock = kTpr > kBlockMin ? kTpr : kBlockMin;
  constexpr int kMinBlocks = 65536 / (kRegs * kBlock);
  constexpr int kVec = V16<T>::kN;
  auto kernel = rwv_fwd<kOp, T, kTpr, kVecs, kBlock, kMinBlocks, kStaged, kWeightEarly>;
  if (a.cols != static_cast<int64_t>(kTpr) * kVecs * kVec) return "internal: the geometry does not cover the row";
  const int64_t groups = (a.rows + kBlock / kTpr - 1) / (kBlock / kTpr);
  int64_t grid = groups;
  size_t smem = 0;
  if constexpr (kStaged) {
    smem = static_cast<size_t>(2) * kVecs * kBlock * 16;
    static int per_sm = 0;  // blocks an SM holds, asked once (one device)
    if (per_sm == 0) {
      if (smem > 48 * 1024) cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
      if (cudaOccupancyMaxActiveBlocksPerMultiprocessor(&per_sm, kernel, kBlock, smem) != cudaSuccess || per_sm < 1) per_sm = 1;
      (void)cudaGetLastError();
    }
    const int64_t wave = static_cast<int64_t>(per_sm) * kwb::sm_count();
    grid = groups < wave ? groups : wave;
  }
  if (grid == 0) return nullptr;
  if (grid > 0x7fffffff) grid = 0x7fffffff;  // the row loop covers the rest
  kernel<<<static_cast<unsigned>(grid), kBlock, smem, stream>>>(
      static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.b), static_cast<T*>(a.y), a.mean,
      a.rstd, a.rows, a.cols, 1.f / static_cast<float>(a.cols), a.eps);  // 1 / cols on the host: no division in the kernel
  return kwb::last_launch_error();
}

template <int kOp, typename T, int kBlock, int kVecs, int kMinBlocks = 1, bool kLate = false>
const char* launch_reread(const Args& a, cudaStream_t stream) {
  constexpr int kNv4096 = 4096 / V16<T>::kN;  // rows of 4096, the shape Inductor's kernel is compiled for
  if constexpr (kOp != kLayerNorm && kOp != kRmsNorm) {
    return "does not apply: the two-read row is the norms'";
  } else {
    if (a.rows == 0) return nullptr;
    if (a.rows > 0x7fffffff) return "does not apply: one row a block, 2^31 - 1 rows at most";
    if (a.cols > 0x7fffffff) return "does not apply: rows of 2^31 - 1 elements at most";
    auto kernel = a.cols == 4096 ? rwv_fwd_reread<kOp, T, kBlock, kVecs, kMinBlocks, kNv4096, kLate>
                                 : rwv_fwd_reread<kOp, T, kBlock, kVecs, kMinBlocks, 0, kLate>;
    kernel<<<static_cast<unsigned>(a.rows), kBlock, 0, stream>>>(
        static_cast<const T*>(a.x), static_cast<const T*>(a.w), static_cast<const T*>(a.b), static_cast<T*>(a.y), a.mean,
        a.rstd, a.cols, 1.f / static_cast<float>(a.cols), a.eps);
    return kwb::last_launch_error();
  }
}

// The shipped norm_forward_reread (kwb_norm.cuh) launched with smem bytes of unused dynamic shared
// memory and a carveout preference (percent of the SM's 256 KB as shared memory), the function's
// default restored after the launch so that variant 0's launches keep theirs.
template <int kOp, typename T, typename Tuning = kwb::ShippedReread>
const char* shipped_reread(const Args& a, size_t smem, int carveout, cudaStream_t stream, int64_t grid = 0) {
  if constexpr ((kOp != kLayerNorm && kOp != kRmsNorm) || sizeof(T) != 4) {
    return "does not apply: the shipped two-read kernel is the fp32 norms'";
  } else {
    if (a.cols != kwb::kRereadCols) return "does not apply: the shipped two-read kernel is for rows of 4096";
    if (a.rows == 0) return nullptr;
    auto kernel = kwb::norm_forward_reread<kOp == kLayerNorm, Tuning>;
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, carveout);
    const kwb::NormParams p{a.x, a.w, a.b, a.y, a.mean, a.rstd, a.rows, a.cols, a.eps};
    kernel<<<static_cast<unsigned>(grid > 0 ? grid : a.rows), kwb::kRereadBlock, smem, stream>>>(p);
    const char* err = kwb::last_launch_error();
    cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout, -1);
    return err;
  }
}

// Variants 16 and 17: held to kBlocks blocks an SM by unused shared memory, where its registers
// allow more (RMSNorm's 40: 6), all 228 KB as shared memory so that the padding, not the
// carveout, decides. 1 KB reserved a block: 4 blocks at 47 KB (5 x 48 > 228), 5 at 40 KB
// (6 x 41 > 228 >= 5 x 41); with the kernel's 64 static bytes, 48 KB of padding passed the 48 KB
// a block takes without opting in ("invalid argument" on the H200). The padding also takes the
// L1 cache's share of the SM's 256 KB: these variants run with at most 28-68 KB of L1, the
// shipped kernel with what its 6 blocks leave (about 250 KB).
// Variants 16-18 and 22 keep the build they were measured with, the shipped one until 71bbf6d.
using FirstReread = kwb::RereadTuning<5, false>;

template <int kOp, typename T, int kBlocks>
const char* shipped_reread_held(const Args& a, cudaStream_t stream) {
  constexpr size_t kPad = (kBlocks == 4 ? 47 : 40) << 10;
  return shipped_reread<kOp, T, FirstReread>(a, kPad, 100, stream);
}

// Variant 18: the largest L1 share asked for (carveout 0: its 64 bytes of shared memory need
// none). Its ncu row's "Shared Memory Configuration Size" shows whether the request held.
template <int kOp, typename T>
const char* shipped_reread_most_l1(const Args& a, cudaStream_t stream) {
  return shipped_reread<kOp, T, FirstReread>(a, 0, 0, stream);
}

// Variants 19-21: the shipped norm_forward_reread built another way (kwb::RereadTuning): its
// register cap set for 4 blocks an SM, not 5, and/or L1 eviction hints on its loads.
template <int kOp, typename T, int kMinBlocks, bool kL1Hints>
const char* shipped_reread_tuned(const Args& a, cudaStream_t stream) {
  return shipped_reread<kOp, T, kwb::RereadTuning<kMinBlocks, kL1Hints>>(a, 0, -1, stream);
}

// Variants 24-26: the shipped kernel with the hints, built for kBlocks an SM and looping over
// rows on a grid of kBlocks an SM, sized so that every block takes the same number of rows,
// give or take one (16384 rows at 4 an SM: 32 rows each on 512 blocks, not 31.03 on 528).
// Refused where fewer than kBlocks fit (the grid would run in waves, not persist).
template <int kOp, typename T, int kBlocks>
const char* shipped_reread_persistent(const Args& a, cudaStream_t stream) {
  if constexpr ((kOp != kLayerNorm && kOp != kRmsNorm) || sizeof(T) != 4) {
    return "does not apply: the shipped two-read kernel is the fp32 norms'";
  } else {
    if (a.rows == 0) return nullptr;
    using Tuning = kwb::RereadTuning<kBlocks, true, true>;
    int fit = 0;
    cudaOccupancyMaxActiveBlocksPerMultiprocessor(&fit, kwb::norm_forward_reread<kOp == kLayerNorm, Tuning>,
                                                  kwb::kRereadBlock, 0);
    if (fit < kBlocks) return "does not apply: fewer blocks than asked fit an SM";
    const int64_t slots = static_cast<int64_t>(kBlocks) * kwb::sm_count();
    const int64_t per_block = (a.rows + slots - 1) / slots;
    const int64_t grid = (a.rows + per_block - 1) / per_block;
    return shipped_reread<kOp, T, Tuning>(a, 0, -1, stream, grid);
  }
}

// Variants 28 and 29 (40 and 41 with kPdl): the shipped register path for exact rows
// (norm_forward_regs) with the weight read beside x or after the reductions, as the variant says,
// whatever the shipped launch (kwb::norm_forward) picks for this op and dtype.
template <int kOp, typename T, bool kEarly, bool kPdl = false>
const char* shipped_exact(const Args& a, cudaStream_t stream) {
  if constexpr (kOp != kLayerNorm && kOp != kRmsNorm) {
    return "does not apply: the weight is the norms'";
  } else {
    const kwb::ExactRows e = kwb::exact_rows(a.rows, a.cols, 16 / sizeof(T), sizeof(T));
    if (e.tpr == 0) return "does not apply: not an exact row";
    const kwb::NormParams p{a.x, a.w, a.b, a.y, a.mean, a.rstd, a.rows, a.cols, a.eps};
    return KWB_EXACT_SWITCH(e, T, kTpr, kVecs, [&] {
      auto kernel = kwb::norm_forward_regs<T, 16 / sizeof(T), kVecs, kOp == kLayerNorm, kTpr, kEarly>;
      if constexpr (kPdl) kwb::launch_kernel(kernel, e.launch_blocks(), e.block, 0, stream, p, kTpr);
      else kernel<<<e.launch_blocks(), e.block, 0, stream>>>(p, kTpr);
      return kwb::last_launch_error();
    });
  }
}

// 4 vectors a thread, tpr = cols / (4 vectors): the shipped register path's pick for rows of
// 512-4096 fp32 / 1024-8192 bf16 columns.
template <int kOp, typename T, int kRegs, bool kStaged, int kBlockMin = 128, int kWeightEarly = 0>
const char* four_vectors(const Args& a, int64_t tpr, cudaStream_t stream) {
  switch (tpr) {
    case 32: return launch<kOp, T, 32, 4, kRegs, kStaged, kBlockMin, kWeightEarly>(a, stream);
    case 64: return launch<kOp, T, 64, 4, kRegs, kStaged, kBlockMin, kWeightEarly>(a, stream);
    case 128: return launch<kOp, T, 128, 4, kRegs, kStaged, kBlockMin, kWeightEarly>(a, stream);
    case 256: return launch<kOp, T, 256, 4, kRegs, kStaged, kBlockMin, kWeightEarly>(a, stream);
    default: return "does not apply: 4 vectors a thread need cols / (4 x 16 bytes) threads in 32, 64, 128, 256";
  }
}

template <int kOp, typename T>
const char* run(const Args& a, int variant, cudaStream_t stream) {
  constexpr int kVec = V16<T>::kN;
  if (a.cols <= 0 || a.cols % kVec != 0) return "does not apply: rows must be whole 16-byte vectors";
  const int64_t nv = a.cols / kVec;
  if (variant != 2 && nv % 4 != 0) return "does not apply: 4 vectors a thread";
  switch (variant) {
    case 1: return four_vectors<kOp, T, 64, false>(a, nv / 4, stream);
    case 2:  // bf16 rows of 1024 at 8 vectors a lane (2 rows a warp) spilled 180-350 bytes: fp32 only
      if constexpr (sizeof(T) == 4)
        if (nv == 256) return launch<kOp, T, 32, 8, 64, false>(a, stream);
      return "does not apply: a warp a row at 8 vectors a lane is for fp32 rows of 1024";
    case 3:  // bf16 spilled 100-300 bytes at 32 registers (ptxas keeps the row widened): fp32 only
      if constexpr (sizeof(T) == 4) return four_vectors<kOp, T, 32, false>(a, nv / 4, stream);
      return "does not apply: the 32-register cap is for fp32";
    case 4: return four_vectors<kOp, T, 64, true>(a, nv / 4, stream);
    case 5:  // softmax only: variant 1 (variant 2's warp at fp32 1024) with one (max, sum) reduction
      if constexpr (kOp == kSoftmax) {
        if constexpr (sizeof(T) == 4)
          if (nv == 256) return launch<kSoftmaxOnline, T, 32, 8, 64, false>(a, stream);
        return four_vectors<kSoftmaxOnline, T, 64, false>(a, nv / 4, stream);
      }
      return "does not apply: the online reduction is softmax's";
    case 6: return four_vectors<kOp, T, 64, false, 32>(a, nv / 4, stream);
    case 7: return launch_reread<kOp, T, 256, 2>(a, stream);
    case 8: return launch_reread<kOp, T, 256, 4>(a, stream);
    case 9: return launch_reread<kOp, T, 512, 1, 4>(a, stream);  // 4 blocks of 512: 32 registers
    case 10: return launch_reread<kOp, T, 512, 2, 4>(a, stream);
    case 11: return launch_reread<kOp, T, 512, 2, 3>(a, stream);  // 3 blocks of 512: 40 registers
    case 12: return launch_reread<kOp, T, 256, 4, 4>(a, stream);  // 4 blocks of 256: 64 registers
    case 13: return launch_reread<kOp, T, 256, 4, 5>(a, stream);  // 5 blocks of 256: 48 registers
    case 14: return launch_reread<kOp, T, 256, 4, 4, true>(a, stream);
    case 15: return launch_reread<kOp, T, 512, 2, 4, true>(a, stream);
    case 16: return shipped_reread_held<kOp, T, 4>(a, stream);
    case 17: return shipped_reread_held<kOp, T, 5>(a, stream);
    case 18: return shipped_reread_most_l1<kOp, T>(a, stream);
    case 19: return shipped_reread_tuned<kOp, T, 5, true>(a, stream);
    case 20: return shipped_reread_tuned<kOp, T, 4, false>(a, stream);
    case 21: return shipped_reread_tuned<kOp, T, 4, true>(a, stream);
    case 22: return shipped_reread<kOp, T, FirstReread>(a, 23 << 10, 44, stream);
    case 23: return shipped_reread<kOp, T, kwb::RereadTuning<5, true>>(a, 23 << 10, 44, stream);
    case 24: return shipped_reread_persistent<kOp, T, 4>(a, stream);
    case 25: return shipped_reread_persistent<kOp, T, 5>(a, stream);
    case 26: return shipped_reread_persistent<kOp, T, 6>(a, stream);
    case 28: return shipped_exact<kOp, T, true>(a, stream);
    case 29: return shipped_exact<kOp, T, false>(a, stream);
    case 40: return shipped_exact<kOp, T, true, true>(a, stream);
    case 41: return shipped_exact<kOp, T, false, true>(a, stream);
    case 32:
    case 33:
    case 34:
    case 35:
    case 36:
    case 37:
      if constexpr (kOp == kRmsNorm) {
        if (variant == 32) return four_vectors<kOp, T, 64, false, 128, 1>(a, nv / 4, stream);
        if (variant == 33) return four_vectors<kOp, T, 64, false, 128, 2>(a, nv / 4, stream);
        if (variant == 34) return four_vectors<kOp, T, 64, false, 128, 3>(a, nv / 4, stream);
        if (variant == 35) return four_vectors<kOp, T, 64, false, 128, 4>(a, nv / 4, stream);
        if (variant == 36) return four_vectors<kOp, T, 64, false, 128, 5>(a, nv / 4, stream);
        return four_vectors<kOp, T, 64, false, 128, 6>(a, nv / 4, stream);
      }
      return "does not apply: the early weight in program order is RMSNorm's";
    case 38:  // the weight (and LayerNorm's bias) in shared memory: the norms'
    case 39:
      if constexpr (kOp == kRmsNorm || kOp == kLayerNorm) {
        if (variant == 38) return four_vectors<kOp, T, 64, false, 128, 7>(a, nv / 4, stream);
        return four_vectors<kOp, T, 64, false, 128, 8>(a, nv / 4, stream);
      }
      return "does not apply: the weight in shared memory is the norms'";
    default: return "no such variant";
  }
}

}  // namespace rwv

const char* rowwise_forward_variant_launch(const void* x, const void* w, const void* b, void* y, float* mean, float* rstd,
                                           int64_t rows, int64_t cols, double eps, int op, bool bf16, int variant,
                                           cudaStream_t stream) {
  const rwv::Args a{x, w, b, y, mean, rstd, rows, cols, static_cast<float>(eps)};
  switch (op) {
    case rwv::kSoftmax:
      return bf16 ? rwv::run<rwv::kSoftmax, __nv_bfloat16>(a, variant, stream) : rwv::run<rwv::kSoftmax, float>(a, variant, stream);
    case rwv::kLayerNorm:
      return bf16 ? rwv::run<rwv::kLayerNorm, __nv_bfloat16>(a, variant, stream) : rwv::run<rwv::kLayerNorm, float>(a, variant, stream);
    case rwv::kRmsNorm:
      return bf16 ? rwv::run<rwv::kRmsNorm, __nv_bfloat16>(a, variant, stream) : rwv::run<rwv::kRmsNorm, float>(a, variant, stream);
    default: return "no such op";
  }
}
"""

CPP = r"""
const char* rowwise_forward_variant_launch(const void* x, const void* w, const void* b, void* y, float* mean, float* rstd,
                                           int64_t rows, int64_t cols, double eps, int op, bool bf16, int variant,
                                           cudaStream_t stream);

// (y, mean, rstd) of softmax (op 0: weight and bias unused), LayerNorm (1) or RMSNorm (2: bias
// unused) over the last dimension of a contiguous [rows, cols] fp32 or bf16 x.
std::vector<at::Tensor> rowwise_forward_variant(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias,
                                               int64_t op, int64_t variant, double eps) {
  TORCH_CHECK(op >= 0 && op <= 2, "rowwise_forward_variant: op 0 (softmax), 1 (layernorm) or 2 (rmsnorm)");
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), "rowwise_forward_variant: x contiguous [rows, cols]");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, "rowwise_forward_variant: fp32 or bf16");
  const int64_t rows = x.size(0), cols = x.size(1);
  auto aligned = [](const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.const_data_ptr()) % 16 == 0; };
  for (int k = 0; k < (op == 0 ? 0 : (op == 1 ? 2 : 1)); ++k) {
    const at::Tensor& p = k == 0 ? weight : bias;
    TORCH_CHECK(p.dim() == 1 && p.size(0) == cols && p.is_contiguous() && p.scalar_type() == x.scalar_type() && aligned(p),
                "rowwise_forward_variant: weight and bias contiguous [cols], x's dtype, 16-byte aligned");
  }
  at::Tensor y = at::empty_like(x);
  const auto stat = x.options().dtype(at::kFloat);
  at::Tensor mean = at::empty({rows}, stat), rstd = at::empty({rows}, stat);
  TORCH_CHECK(aligned(x) && aligned(y), "rowwise_forward_variant: x and y 16-byte aligned");
  KWB_CHECK_LAUNCH("rowwise_forward_variant",
                   rowwise_forward_variant_launch(x.const_data_ptr(), weight.const_data_ptr(), bias.const_data_ptr(),
                                                  y.mutable_data_ptr(), mean.mutable_data_ptr<float>(),
                                                  rstd.mutable_data_ptr<float>(), rows, cols, eps, static_cast<int>(op),
                                                  x.scalar_type() == at::kBFloat16, static_cast<int>(variant),
                                                  kwb::current_stream(x)));
  return {y, mean, rstd};
}
"""

OPS = {"softmax": 0, "layernorm": 1, "rmsnorm": 2}
EPS = {"softmax": 0.0, "layernorm": 1e-5, "rmsnorm": 1e-6}  # the specs' (kernels/*/spec.py)
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
VARIANTS = tuple(range(27)) + (28, 29, 32, 33, 34, 35, 36, 37, 38, 39, 40, 41)
GRAPH_CALLS = 200  # calls a CUDA graph holds with --in-turns: ~1.4 ms of 7 us calls a replay


# The references are the specs' expressions (kernels/*/spec.py): what `kwb run` times under
# eager and torch.compile.
def softmax_reference(x):
    return torch.softmax(x, dim=-1)


def layernorm_reference(x, weight, bias):
    return F.layer_norm(x, x.shape[-1:], weight, bias, EPS["layernorm"])


def rmsnorm_reference(x, weight):
    return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + EPS["rmsnorm"]) * weight


REFERENCES = {"softmax": softmax_reference, "layernorm": layernorm_reference, "rmsnorm": rmsnorm_reference}

# The harness's check against float64 (the specs' tolerances), and this script's own check
# against PyTorch in fp32 before anything is timed: (atol, rtol).
HARNESS_TOLERANCES = {
    "softmax": {torch.float32: wb.Tolerance(1e-10, 1e-5, 1e-6), torch.bfloat16: wb.Tolerance(1e-6, 1.6e-2, 8e-3)},
    "norm": {torch.float32: wb.Tolerance(1e-5, 1e-5, 1e-6), torch.bfloat16: wb.Tolerance(1.6e-2, 1.6e-2, 8e-3)},
}
CHECK_TOLERANCES = {
    ("softmax", torch.float32): (1e-7, 1e-5), ("softmax", torch.bfloat16): (1e-6, 1.6e-2),
    ("norm", torch.float32): (1e-5, 1e-5), ("norm", torch.bfloat16): (1.6e-2, 1.6e-2),
}


def kind(op: str) -> str:
    return "softmax" if op == "softmax" else "norm"


def make_inputs(op: str, rows: int, cols: int, dtype: torch.dtype, seed: int = 0) -> tuple:
    """The specs' inputs: softmax x of spread 3; LayerNorm x off-center (mean 2, spread 3),
    weight ~1, bias ~0; RMSNorm x of mean 1, spread 2, weight ~1."""
    gen = torch.Generator(device="cuda").manual_seed(seed)

    def randn(*shape, scale=1.0, shift=0.0):
        return (torch.randn(*shape, generator=gen, device="cuda") * scale + shift).to(dtype)

    if op == "softmax":
        return (randn(rows, cols, scale=3.0),)
    if op == "layernorm":
        return randn(rows, cols, scale=3.0, shift=2.0), randn(cols, shift=1.0), randn(cols)
    return randn(rows, cols, scale=2.0, shift=1.0), randn(cols, shift=1.0)


def bytes_moved(op: str, rows: int, cols: int, dtype: torch.dtype) -> int:
    """The specs' bytes models: x read and y written, plus weight (and bias) once."""
    vectors = {"softmax": 0, "layernorm": 2, "rmsnorm": 1}[op]
    return (2 * rows * cols + vectors * cols) * torch.empty((), dtype=dtype).element_size()


def shipped(kernels: dict, op: str, stats: bool = False):
    """Variant 0: the shipped op (y), or with stats=True (y, mean, rstd) from its forward op."""
    k, eps = kernels[op], EPS[op]
    if op == "softmax":
        def fn(x):
            y = k.softmax(x)
            return (y, None, None) if stats else y
    elif op == "layernorm":
        def fn(x, w, b):
            return tuple(k.layernorm_forward(x, w, b, eps)) if stats else k.layernorm(x, w, b, eps)
    else:
        def fn(x, w):
            if not stats:
                return k.rmsnorm(x, w, eps)
            y, rstd = k.rmsnorm_forward(x, w, eps)
            return y, None, rstd
    return fn


def variant(k, op: str, v: int, stats: bool = False):
    """Variant v's op (y), or with stats=True its (y, mean, rstd)."""
    code, eps = OPS[op], EPS[op]

    def fn(x, w=None, b=None):
        w = x if w is None else w  # softmax: unused
        b = w if b is None else b  # RMSNorm: unused
        out = k.rowwise_forward_variant(x, w, b, code, v, eps)
        return tuple(out) if stats else out[0]
    return fn


def check(op: str, got: tuple, args: tuple) -> None:
    """y against PyTorch in fp32 on the same inputs; LayerNorm's mean and both norms' rstd
    against the row statistics."""
    x = args[0]
    atol, rtol = CHECK_TOLERANCES[(kind(op), x.dtype)]
    want = REFERENCES[op](*[a.float() for a in args])
    torch.testing.assert_close(got[0].float(), want, atol=atol, rtol=rtol)
    if op == "softmax":
        return
    xf = x.float()
    if op == "layernorm":
        torch.testing.assert_close(got[1], xf.mean(-1), atol=1e-5, rtol=1e-4)
        var = xf.var(-1, unbiased=False)
    else:
        var = xf.pow(2).mean(-1)
    torch.testing.assert_close(got[2], torch.rsqrt(var + EPS[op]), atol=1e-5, rtol=1e-4)


def parse_shapes(text: str) -> list[tuple[int, int]]:
    return [tuple(int(n) for n in s.lower().split("x")) for s in text.split(",") if s]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/variants", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--shapes", default="4096x1024,16384x4096", help="ROWSxCOLS, comma-separated")
    parser.add_argument("--dtypes", default="float32,bfloat16", help="float32, bfloat16")
    parser.add_argument("--ops", default="softmax,layernorm,rmsnorm")
    parser.add_argument("--variants", default=",".join(map(str, VARIANTS)))
    parser.add_argument("--once", action="store_true",
                        help="launch each variant and torch.compile's kernel once a case, for a profiler; nothing timed")
    parser.add_argument("--no-compile", action="store_true", help="with --once: leave torch.compile's kernel out")
    parser.add_argument("--in-turns", type=float, default=0.0, metavar="S",
                        help="then the variants, eager and torch.compile again in turns, about S seconds of samples each")
    parser.add_argument("--copies", default="events,0", metavar="LIST",
                        help="with --in-turns: how each round in turns is timed: 'events' (calls back to back on one "
                             f"input), or N (CUDA-graph replays of {GRAPH_CALLS} calls over N input copies; 0: twice the L2)")
    parser.add_argument("--turns-only", action="store_true", help="with --in-turns: skip timing each variant on its own")
    args = parser.parse_args()
    ops = [o for o in args.ops.split(",") if o]
    dtypes = [DTYPES[d] for d in args.dtypes.split(",") if d]
    variants = [int(v) for v in args.variants.split(",") if v]
    kernels = {op: wb.load(op) for op in ops} if 0 in variants else {}
    k = wb.load_inline("rowwise_forward_variants", cuda=CUDA, cpp=CPP, functions=["rowwise_forward_variant"])
    for op in ops:
        for dtype in dtypes:
            for rows, cols in parse_shapes(args.shapes):
                inputs = make_inputs(op, rows, cols, dtype)
                shape = f"{rows}x{cols}"
                if args.once:
                    for v in variants:
                        try:
                            (shipped(kernels, op) if v == 0 else variant(k, op, v))(*inputs)
                        except RuntimeError as e:
                            print(f"{op:>9} {dtype!s:>14} {shape:>10} v{v} does not launch: {str(e).splitlines()[0]}", flush=True)
                    if not args.no_compile:
                        torch.compile(REFERENCES[op], fullgraph=True, dynamic=False)(*inputs)
                    torch.cuda.synchronize()
                    continue
                checked = {}
                for v in variants:
                    try:
                        got = (shipped(kernels, op, stats=True) if v == 0 else variant(k, op, v, stats=True))(*inputs)
                    except RuntimeError as e:  # a variant whose geometry does not fit this row length
                        print(f"{op:>9} {dtype!s:>14} {shape:>10} v{v} does not apply: {str(e).splitlines()[0]}", flush=True)
                        continue
                    try:
                        check(op, got, inputs)
                    except AssertionError as e:
                        print(f"{op:>9} {dtype!s:>14} {shape:>10} v{v} WRONG, not timed: {str(e).strip().splitlines()[0]}",
                              flush=True)
                        continue
                    fn = checked[f"v{v}"] = shipped(kernels, op) if v == 0 else variant(k, op, v)
                    if args.turns_only and args.in_turns:
                        continue
                    report = wb.bench(fn, REFERENCES[op], inputs=[inputs], name=f"{op} forward variant {v}",
                                      label=f"{op} fwd variant {v}", baselines="eager,compile" if v == 0 else "none",
                                      bytes_moved=bytes_moved(op, rows, cols, dtype),
                                      tolerance=HARNESS_TOLERANCES[kind(op)])
                    for r in report.rows:
                        print(f"{op:>9} {r['dtype']:>8} {shape:>10} v{v} {r['provider']:>24} {r['median_us'] or 0:8.1f} us "
                              f"{r['pct_of_ceiling'] or 0:5.1f}%  {r['status']}", flush=True)
                    if args.out:
                        report.save(args.out)
                if args.in_turns:
                    checked.update({"eager": REFERENCES[op],
                                    "torch.compile": torch.compile(REFERENCES[op], fullgraph=True, dynamic=False)})
                    checked["torch.compile"](*inputs)  # compiled here, not in the timed calls' first
                    time_each_way(checked, inputs, args.in_turns, f"{op} {shape} {str(dtype).removeprefix('torch.')}",
                                  args.copies, GRAPH_CALLS, nbytes=bytes_moved(op, rows, cols, dtype))


if __name__ == "__main__":
    main()
