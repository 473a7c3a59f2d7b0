"""Variants of bias_gelu's forward and backward side by side (llm.c's dev/cuda style): each is
checked against PyTorch, then timed beside eager PyTorch and torch.compile with the harness (CUDA
graph rows too, under ~10 us), at the spec's sizes, where the shipped kernels lose to
torch.compile (`kwb run --full` at 61b0c02, H100):
  256 x 4096 forward, fp32: 4.68 us against 4.25 in a graph (erf 4.84 against 4.05); bf16 erf 3.98
      against 3.47. 1024 blocks of 256 threads, one row each; 44 registers (62.5% occupancy,
      660 slots): 1.55 waves.
  8192 x 8192 forward, fp32: 93% of the copy ceiling against compile's 97.4%. 16 rows a block
      (kForwardWaves = 4), 8 blocks a row: at any time ~80 runs of rows 32 KB apart, where
      Inductor sweeps the flat index.
  256 x 4096 training step, 16-bit: x0.90-0.97. The backward's column sums: one row a block, so
      256 rows of fp32 partials (4 MB, as much as grad, x and grad_x together in bf16) written and
      summed again.

    python benchmarks/bias_gelu_variants.py [--out DIR] [--shapes 256x4096,8192x8192]
        [--dtypes float32,bfloat16] [--forms tanh,none] [--forward 0,1,2,3,4,5,6] [--backward 0,1,2,3,4,5]
        [--in-turns S] [--copies events,0]

forward 0: the shipped kernel (k.bias_gelu): a flat map, one 16-byte vector a thread over the
           flat index (kwb_elementwise.cuh's shape for one input; relu_scale at 98% of the ceiling), the bias
           vector at (i mod cols/vec) by a 32-bit multiply-shift divider; fp32 from 2^22 vectors
           in forward 3's shape (shipped since 2026-12-05); 16-bit types below 2^22 16-byte vectors
           in forward 5's (shipped since 2026-12-07)
forward 1: rows x columns tiling: a block owns 256 column vectors and a run of rows
           (kForwardWaves = 4 grids' worth of blocks), up to 4 rows' loads in flight a thread
forward 2: forward 0 with 2 vectors a thread (i and i + 256 in a block's 512), both loads first
forward 3: 2 vectors a thread in 128-thread blocks (Inductor's block and share), loads first
forward 4: 4 vectors a thread in 256-thread blocks, loads first
forward 5: forward 0's shape at 8-byte vectors (2 floats, 4 halves), one a thread in 256-thread
           blocks: the elementwise map's for two inputs (kernels/relu_scale/NOTES.md, "Round 23")
forward 6: one 16-byte vector a thread in 256-thread blocks: forward 0's shape for 16-bit types below
           2^22 vectors until 2026-12-07
--in-turns S: then the forward variants, eager and torch.compile timed again in turns (about S
           seconds of samples each, 1000 at most), so the GPU's drifting clocks land on all alike
backward 0: the shipped kernel (k.bias_gelu_backward)
backward 1-5: the shipped backward kernel (kwb_gelu_backward.cuh) under other tilings, (threads a block, rows a block):
           1 = (64, 8), 2 = (128, 4), 3 = (64, 4), 4 = (128, 8), 5 = (256, 1); the partial sums are
           rows / rows-a-block rows of fp32

Measured in turns (H200, 2026-12-05, f1f0a10, before forward 3's shape shipped; us at fp32
8192 x 8192, 1000 samples each; torch.compile in brackets):
  erf:  forward 3 130.40, forward 0 132.99, 2 134.08, 4 134.82, 1 139.04 [130.27]
  tanh: forward 3 130.72, forward 0 130.88, 4 134.24, 2 134.40, 1 138.11 [130.91]
Measured (H100, 2026-11-27; CUDA-graph us at 256 x 4096, % of the copy ceiling at 8192 x 8192;
torch.compile in brackets):
  fp32 tanh: forward 1 4.66 us, 93.4%; forward 0 3.91 us, 98.6%; forward 2 4.13 us, 98.1% [4.24, 97.8%]
  fp32 erf:  forward 1 4.84, 92.8%; forward 0 3.89, 98.6%; forward 2 4.14, 98.2% [3.99, 98.0%]
  bf16 tanh: forward 1 3.43, 92.6%; forward 0 2.99, 95.4%; forward 2 3.02, 95.3% [3.54, 90.6%]
  bf16 erf:  forward 1 3.94, 91.5%; forward 0 3.43, 87.4%; forward 2 3.56, 88.4% [3.49, 80.7%]
Backward at 256 x 4096 (one call, CUDA events, so launch-bound: the kernels' own time is
profile_step.py's), us, variants 0 to 5, with 16-byte partial stores:
  fp32 tanh 14.82 15.55 14.35 14.91 15.50 15.55; bf16 tanh 12.29 12.45 12.02 12.10 12.61 13.62
  bf16 training step's kernels (profile_step.py): backward 9.05 us at (256, 1) with scalar partial
  stores, 3.34 at (64, 4) with 16-byte ones; the column sums 2.63 and 2.36 us.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F
from in_turns import time_each_way

import workbench as wb

GRAPH_CALLS = 200  # calls a CUDA graph holds with --copies N: ~0.8 ms of 4 us calls a replay
KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels" / "bias_gelu"

CUDA = r"""
#include "bias_gelu.cu"  // the shipped kernels: one translation unit, so its anonymous namespace is ours

namespace bgv {

// Forward 1: a block owns 256 column vectors and a run of rows, kUnroll rows' loads in flight.
constexpr int kUnroll = 4;
template <typename T, int kVec, bool kTanh>
__global__ void __launch_bounds__(256) tiled_forward(const T* __restrict__ x, const T* __restrict__ bias,
                                                     T* __restrict__ y, kwb::RowTiling t) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const kwb::TilePlace p = kwb::tile_place(t, kVec);
  if (p.c >= t.cols) return;
  const V bv = *reinterpret_cast<const V*>(bias + p.c);
  for (int64_t r = p.r0; r < p.r1; r += kUnroll) {
    V in[kUnroll];
#pragma unroll
    for (int u = 0; u < kUnroll; ++u)
      if (r + u < p.r1) in[u] = *reinterpret_cast<const V*>(x + (r + u) * t.cols + p.c);
#pragma unroll
    for (int u = 0; u < kUnroll; ++u) {
      if (r + u < p.r1) {
        V out;
#pragma unroll
        for (int j = 0; j < kVec; ++j)
          out.v[j] = kwb::from_acc<T>(kwb::gelu<kTanh, kwb::kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + kwb::to_acc<A>(bv.v[j])));
        *reinterpret_cast<V*>(y + (r + u) * t.cols + p.c) = out;
      }
    }
  }
}

// Forwards 2-6: kPer vectors a thread, i, i + kThreads, ... of the block's kThreads x kPer, all
// loads first (2: 256 x 2; 3: 128 x 2, Inductor's block and share; 4: 256 x 4; 5: 256 x 1 at 8 bytes;
// 6: 256 x 1).
template <typename T, int kVec, bool kTanh, int kThreads, int kPer>
__global__ void __launch_bounds__(kThreads) flat_forward_n(const T* __restrict__ x, const T* __restrict__ bias,
                                                           T* __restrict__ y, uint32_t n_vec, kwb::Divider32 col_vecs) {
  using A = kwb::acc_t<T>;
  using V = kwb::Vec<T, kVec>;
  const uint32_t first = blockIdx.x * uint32_t(kThreads * kPer) + threadIdx.x;
  V in[kPer], b[kPer];
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const uint32_t i = first + u * uint32_t(kThreads);
    if (i < n_vec) {
      in[u] = reinterpret_cast<const V*>(x)[i];
      b[u] = reinterpret_cast<const V*>(bias)[col_vecs.mod(i)];
    }
  }
#pragma unroll
  for (int u = 0; u < kPer; ++u) {
    const uint32_t i = first + u * uint32_t(kThreads);
    if (i < n_vec) {
      V out;
#pragma unroll
      for (int j = 0; j < kVec; ++j)
        out.v[j] = kwb::from_acc<T>(kwb::gelu<kTanh, kwb::kHalfType<T>>(kwb::to_acc<A>(in[u].v[j]) + kwb::to_acc<A>(b[u].v[j])));
      reinterpret_cast<V*>(y)[i] = out;
    }
  }
}

template <typename T, bool kTanh>
const char* forward(const void* x, const void* bias, void* y, int64_t rows, int64_t cols, int variant, cudaStream_t stream) {
  if (variant == 5) {
    constexpr int kVec8 = 8 / sizeof(T);
    if (cols % kVec8 != 0 || rows * cols / kVec8 >= (int64_t(1) << 31)) return "does not apply: whole 8-byte vectors, under 2^31";
    const int64_t n8 = rows * cols / kVec8;
    flat_forward_n<T, kVec8, kTanh, 256, 1><<<static_cast<unsigned>((n8 + 255) / 256), 256, 0, stream>>>(
        static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(y), static_cast<uint32_t>(n8),
        kwb::Divider32(static_cast<uint32_t>(cols / kVec8)));
    return kwb::last_launch_error();
  }
  constexpr int kVec = 16 / sizeof(T);
  if (cols % kVec != 0) return "does not apply: rows of whole 16-byte vectors";
  const auto* xp = static_cast<const T*>(x);
  const auto* bp = static_cast<const T*>(bias);
  auto* yp = static_cast<T*>(y);
  if (variant == 1) {
    const kwb::RowTiling t = kwb::row_tiling(rows, cols, kVec, 4.0);
    tiled_forward<T, kVec, kTanh><<<static_cast<unsigned>(t.blocks()), t.threads, 0, stream>>>(xp, bp, yp, t);
    return kwb::last_launch_error();
  }
  const int64_t n_vec = rows * cols / kVec;
  if (n_vec >= (int64_t(1) << 31)) return "does not apply: over 2^31 vectors";
  const auto n = static_cast<uint32_t>(n_vec);
  const kwb::Divider32 col_vecs(static_cast<uint32_t>(cols / kVec));
  const auto blocks = [n_vec](int per_block) { return static_cast<unsigned>((n_vec + per_block - 1) / per_block); };
  if (variant == 2) flat_forward_n<T, kVec, kTanh, 256, 2><<<blocks(512), 256, 0, stream>>>(xp, bp, yp, n, col_vecs);
  else if (variant == 3) flat_forward_n<T, kVec, kTanh, 128, 2><<<blocks(256), 128, 0, stream>>>(xp, bp, yp, n, col_vecs);
  else if (variant == 4) flat_forward_n<T, kVec, kTanh, 256, 4><<<blocks(1024), 256, 0, stream>>>(xp, bp, yp, n, col_vecs);
  else flat_forward_n<T, kVec, kTanh, 256, 1><<<blocks(256), 256, 0, stream>>>(xp, bp, yp, n, col_vecs);
  return kwb::last_launch_error();
}

// The shipped backward kernel under tiling (threads a block, rows a block).
kwb::RowTiling tiling(int64_t rows, int64_t cols, int vec, int variant) {
  static const int kThreads[] = {0, 64, 128, 64, 128, 256};
  static const int kRows[] = {0, 8, 4, 4, 8, 1};
  kwb::RowTiling t{};
  t.rows = rows;
  t.cols = cols;
  t.threads = kThreads[variant];
  t.col_blocks = (cols / vec + t.threads - 1) / t.threads;
  t.rows_per_block = kRows[variant];
  t.row_blocks = (rows + t.rows_per_block - 1) / t.rows_per_block;
  return t;
}

template <typename T, bool kTanh>
const char* backward(const void* g, const void* x, const void* bias, void* gx, void* gb, float* ws, int64_t rows,
                     int64_t cols, int variant, cudaStream_t stream) {
  constexpr int kVec = 16 / sizeof(T);
  if (cols % kVec != 0) return "does not apply: rows of whole 16-byte vectors";
  const kwb::RowTiling t = tiling(rows, cols, kVec, variant);
  kwb::gelu_backward_rows_kernel<T, kVec, kTanh><<<static_cast<unsigned>(t.blocks()), t.threads, 0, stream>>>(
      static_cast<const T*>(g), static_cast<const T*>(x), static_cast<const T*>(bias), static_cast<T*>(gx), ws,
      static_cast<T*>(gb), t);
  kwb::sum_row_blocks(t, ws, static_cast<T*>(gb), cols, stream);
  return kwb::last_launch_error();
}

}  // namespace bgv

const char* bgv_forward(const void* x, const void* bias, void* y, int64_t rows, int64_t cols, bool bf16, bool tanh,
                        int variant, cudaStream_t stream) {
  if (bf16) return tanh ? bgv::forward<__nv_bfloat16, true>(x, bias, y, rows, cols, variant, stream)
                        : bgv::forward<__nv_bfloat16, false>(x, bias, y, rows, cols, variant, stream);
  return tanh ? bgv::forward<float, true>(x, bias, y, rows, cols, variant, stream)
              : bgv::forward<float, false>(x, bias, y, rows, cols, variant, stream);
}

int64_t bgv_workspace_rows(int64_t rows, int64_t cols, bool bf16, int variant) {
  return bgv::tiling(rows, cols, bf16 ? 8 : 4, variant).row_blocks;
}

const char* bgv_backward(const void* g, const void* x, const void* bias, void* gx, void* gb, float* ws, int64_t rows,
                         int64_t cols, bool bf16, bool tanh, int variant, cudaStream_t stream) {
  if (bf16) return tanh ? bgv::backward<__nv_bfloat16, true>(g, x, bias, gx, gb, ws, rows, cols, variant, stream)
                        : bgv::backward<__nv_bfloat16, false>(g, x, bias, gx, gb, ws, rows, cols, variant, stream);
  return tanh ? bgv::backward<float, true>(g, x, bias, gx, gb, ws, rows, cols, variant, stream)
              : bgv::backward<float, false>(g, x, bias, gx, gb, ws, rows, cols, variant, stream);
}
"""

CPP = r"""
const char* bgv_forward(const void* x, const void* bias, void* y, int64_t rows, int64_t cols, bool bf16, bool tanh,
                        int variant, cudaStream_t stream);
int64_t bgv_workspace_rows(int64_t rows, int64_t cols, bool bf16, int variant);
const char* bgv_backward(const void* g, const void* x, const void* bias, void* gx, void* gb, float* ws, int64_t rows,
                         int64_t cols, bool bf16, bool tanh, int variant, cudaStream_t stream);

static void check_inputs(const char* op, const at::Tensor& x, const at::Tensor& bias) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous(), op, ": x contiguous [rows, cols]");
  TORCH_CHECK(x.scalar_type() == at::kFloat || x.scalar_type() == at::kBFloat16, op, ": fp32 or bf16");
  TORCH_CHECK(bias.dim() == 1 && bias.size(0) == x.size(1) && bias.scalar_type() == x.scalar_type(), op,
              ": bias [cols] of x's dtype");
  for (const at::Tensor* t : {&x, &bias})
    TORCH_CHECK(reinterpret_cast<uintptr_t>(t->const_data_ptr()) % 16 == 0, op, ": 16-byte aligned");
}

at::Tensor forward_variant(const at::Tensor& x, const at::Tensor& bias, bool tanh, int64_t variant) {
  check_inputs("forward_variant", x, bias);
  TORCH_CHECK(variant >= 1 && variant <= 6, "forward_variant: variant 1 to 6");
  at::Tensor y = at::empty_like(x);
  KWB_CHECK_LAUNCH("forward_variant", bgv_forward(x.const_data_ptr(), bias.const_data_ptr(), y.mutable_data_ptr(),
                                                  x.size(0), x.size(1), x.scalar_type() == at::kBFloat16, tanh,
                                                  static_cast<int>(variant), kwb::current_stream(x)));
  return y;
}

std::vector<at::Tensor> backward_variant(const at::Tensor& grad, const at::Tensor& x, const at::Tensor& bias, bool tanh,
                                         int64_t variant) {
  check_inputs("backward_variant", x, bias);
  TORCH_CHECK(variant >= 1 && variant <= 5, "backward_variant: variant 1 to 5");
  TORCH_CHECK(grad.sizes() == x.sizes() && grad.is_contiguous() && grad.scalar_type() == x.scalar_type() &&
                  reinterpret_cast<uintptr_t>(grad.const_data_ptr()) % 16 == 0,
              "backward_variant: grad like x, 16-byte aligned");
  TORCH_CHECK(x.numel() > 0, "backward_variant: no empty inputs");
  const bool bf16 = x.scalar_type() == at::kBFloat16;
  at::Tensor gx = at::empty_like(x), gb = at::empty_like(bias);
  at::Tensor ws = at::empty({bgv_workspace_rows(x.size(0), x.size(1), bf16, static_cast<int>(variant)), x.size(1)},
                            x.options().dtype(at::kFloat));
  KWB_CHECK_LAUNCH("backward_variant",
                   bgv_backward(grad.const_data_ptr(), x.const_data_ptr(), bias.const_data_ptr(), gx.mutable_data_ptr(),
                                gb.mutable_data_ptr(), ws.mutable_data_ptr<float>(), x.size(0), x.size(1), bf16, tanh,
                                static_cast<int>(variant), kwb::current_stream(x)));
  return {gx, gb};
}
"""

DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}
FORWARD = (0, 1, 2, 3, 4, 5, 6)
BACKWARD = (0, 1, 2, 3, 4, 5)


def reference(x, bias, approximate):
    return F.gelu(x + bias, approximate=approximate)


def reference_backward(grad, x, bias, approximate):
    """(grad_x, grad_bias) of GELU(x + bias) by autograd, in the inputs' dtype."""
    with torch.enable_grad():
        x, bias = x.detach().requires_grad_(), bias.detach().requires_grad_()
        return torch.autograd.grad(F.gelu(x + bias, approximate=approximate), (x, bias), grad)


def tolerance(dtype):
    return (1e-5, 1e-5) if dtype == torch.float32 else (2e-2, 2e-2)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", default="benchmarks/variants", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--shapes", default="256x4096,8192x8192", help="ROWSxCOLS, comma-separated")
    parser.add_argument("--dtypes", default="float32,bfloat16")
    parser.add_argument("--forms", default="tanh,none", help="GELU's approximate: tanh, none (erf)")
    parser.add_argument("--forward", default=",".join(map(str, FORWARD)), help="forward variants ('' for none)")
    parser.add_argument("--backward", default=",".join(map(str, BACKWARD)), help="backward variants ('' for none)")
    parser.add_argument("--copies", default="events", metavar="LIST",
                        help="with --in-turns: how each round in turns is timed, comma-separated: 'events' (calls back "
                             f"to back), or N (CUDA-graph replays of {GRAPH_CALLS} calls over N input copies; 0: twice the L2)")
    parser.add_argument("--in-turns", type=float, default=0.0, metavar="S",
                        help="also time the forward variants, eager and torch.compile in turns, about S seconds of samples each (1000 at most)")
    args = parser.parse_args()
    shipped = wb.load("bias_gelu")
    k = wb.load_inline("bias_gelu_variants", cuda=CUDA, cpp=CPP, functions=["forward_variant", "backward_variant"],
                       extra_include_paths=[str(KERNEL_DIR)])
    gen = torch.Generator(device="cuda").manual_seed(0)
    for shape in args.shapes.split(","):
        rows, cols = (int(n) for n in shape.split("x"))
        for dtype in (DTYPES[d] for d in args.dtypes.split(",") if d):
            x = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
            bias = torch.randn(cols, device="cuda", generator=gen).to(dtype)
            grad = torch.randn(rows, cols, device="cuda", generator=gen).to(dtype)
            atol, rtol = tolerance(dtype)
            for form in (f for f in args.forms.split(",") if f):
                want = reference(x.float(), bias.float(), form)
                want_gx, want_gb = reference_backward(grad.float(), x.float(), bias.float(), form)
                forwards = {}
                for v in (int(s) for s in args.forward.split(",") if s):
                    fn = (lambda a, b, f: shipped.bias_gelu(a, b, f)) if v == 0 else \
                         (lambda a, b, f, v=v: k.forward_variant(a, b, f == "tanh", v))
                    torch.testing.assert_close(fn(x, bias, form).float(), want, atol=atol, rtol=rtol)
                    report = wb.bench(fn, reference, inputs=[(x, bias, form)], name=f"bias_gelu {form} forward variant {v}",
                                      label=f"fwd variant {v}", baselines="eager,compile" if v == 0 else "none",
                                      bytes_moved=2 * x.numel() * x.element_size())
                    show(report, shape, form, f"fwd v{v}", args.out)
                    forwards[f"v{v}"] = fn
                if args.in_turns and forwards:
                    forwards["eager"] = reference
                    forwards["torch.compile"] = torch.compile(reference, fullgraph=True, dynamic=False)
                    forwards["torch.compile"](x, bias, form)
                    time_each_way(forwards, (x, bias, form), args.in_turns,
                                  f"{shape} {form} {str(dtype).removeprefix('torch.')}", args.copies, GRAPH_CALLS,
                                  nbytes=2 * x.numel() * x.element_size())
                for v in (int(s) for s in args.backward.split(",") if s):
                    fn = (lambda g, a, b, f: tuple(shipped.bias_gelu_backward(g, a, b, f))) if v == 0 else \
                         (lambda g, a, b, f, v=v: tuple(k.backward_variant(g, a, b, f == "tanh", v)))
                    gx, gb = fn(grad, x, bias, form)
                    torch.testing.assert_close(gx.float(), want_gx, atol=atol, rtol=rtol)
                    torch.testing.assert_close(gb.float(), want_gb, atol=atol * rows ** 0.5, rtol=rtol)
                    report = wb.bench(fn, reference_backward, inputs=[(grad, x, bias, form)], name=f"bias_gelu {form} backward variant {v}",
                                      label=f"bwd variant {v}", baselines="none", tolerance=shipped.spec.GRAD_TOLERANCES,
                                      bytes_moved=3 * x.numel() * x.element_size())
                    show(report, shape, form, f"bwd v{v}", args.out)


def show(report, shape: str, form: str, what: str, out: str | None) -> None:
    for r in report.rows:
        print(f"{shape:>10} {form:>4} {r['dtype']:>8} {what:>7} {r['provider']:>22} {r['method']:>11} "
              f"{r['median_us'] or 0:8.2f} us {r['pct_of_ceiling'] or 0:5.1f}%  {r['status']}", flush=True)
    if out:
        report.save(out)


if __name__ == "__main__":
    main()
