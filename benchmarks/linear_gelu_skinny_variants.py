"""Shapes of linear_gelu's skinny fp32 kernel side by side (llm.c's dev/cuda style): each
variant is checked against PyTorch, then timed with the harness beside the shipped op, eager
PyTorch and torch.compile, at x [m, 768] -> 3072 for small m.

    python benchmarks/linear_gelu_skinny_variants.py [--out DIR] [--rows 1,8,16,24,32,48,64] [--variants 0,1,2]

variant (rows x columns a block, launch bound's blocks an SM -> register cap):
  0  shipped (k.linear_gelu_skinny): 2 up to 16 rows, else 1
  1  16 x 16, 3 -> 80
  2  16 x 8, 3 -> 80
  3  32 x 16, 2 -> 128
  4  32 x 8, 2 -> 128
Dropped after one H100 run (x [m, 768] -> 3072, us at m = 1 / 8 / 32 / 64): 16 x 16, 2 -> 128:
15.7 / 16.1 / 28.5 / 41.5; 8 x 32, 4 -> 64: 21.3 / 22.5 / 25.4 / 48.5.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import torch
import torch.nn.functional as F

import workbench as wb

KERNEL_DIR = Path(__file__).resolve().parent.parent / "kernels" / "linear_gelu"

CUDA = r"""
#include "linear_gelu.cu"  // the shipped kernels: one translation unit, so its anonymous namespace is ours

const char* lgs_skinny(const void* x, const void* w, const void* b, void* y, int64_t m, int64_t n, int64_t k, bool tanh,
                       int variant, cudaStream_t stream) {
  const LinearGeluParams p{x, w, b, y, nullptr, m, n, k, tanh, nullptr, 1};
  const kwb::DType f32 = kwb::DType::Float32;
  switch (variant) {
    case 1: return launch_skinny<SkinnyShape<16, 16, 3>>(p, f32, stream);
    case 2: return launch_skinny<SkinnyShape<16, 8, 3>>(p, f32, stream);
    case 3: return launch_skinny<SkinnyShape<32, 16, 2>>(p, f32, stream);
    case 4: return launch_skinny<SkinnyShape<32, 8, 2>>(p, f32, stream);
    default: return "skinny_variant: variant 1 to 4";
  }
}
"""

CPP = r"""
const char* lgs_skinny(const void* x, const void* w, const void* b, void* y, int64_t m, int64_t n, int64_t k, bool tanh,
                       int variant, cudaStream_t stream);

at::Tensor skinny_variant(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, bool tanh, int64_t variant) {
  TORCH_CHECK(x.dim() == 2 && x.is_contiguous() && w.is_contiguous() && b.is_contiguous(), "skinny_variant: contiguous 2-D x");
  TORCH_CHECK(x.scalar_type() == at::kFloat, "skinny_variant: fp32");
  at::Tensor y = at::empty({x.size(0), w.size(0)}, x.options());
  KWB_CHECK_LAUNCH("skinny_variant", lgs_skinny(x.const_data_ptr(), w.const_data_ptr(), b.const_data_ptr(),
                                                y.mutable_data_ptr(), x.size(0), w.size(0), x.size(1), tanh,
                                                static_cast<int>(variant), kwb::current_stream(x)));
  return y;
}
"""


def reference(x, w, b, approximate):
    return F.gelu(F.linear(x, w, b), approximate=approximate)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--rows", default="1,8,16,24,32,48,64", help="m, comma-separated (x is m x 768, W 3072 x 768)")
    parser.add_argument("--variants", default="0,1,2,3,4")
    args = parser.parse_args()
    shipped = wb.load("linear_gelu")
    k = wb.load_inline("linear_gelu_skinny_variants", cuda=CUDA, cpp=CPP, functions=["skinny_variant"],
                       extra_include_paths=[str(KERNEL_DIR)])
    spec = shipped.spec
    for m in (int(s) for s in args.rows.split(",")):
        size = (m, 768, 3072)
        x, w, b, a = spec.inputs_for("none")(size, torch.float32, "cuda", torch.Generator().manual_seed(m))
        want = reference(x.double(), w.double(), b.double(), a).float()
        for v in (int(s) for s in args.variants.split(",") if s):
            fn = shipped.linear_gelu_skinny if v == 0 else (lambda x, w, b, a, v=v: k.skinny_variant(x, w, b, a == "tanh", v))
            torch.testing.assert_close(fn(x, w, b, a), want, atol=1e-5, rtol=1e-5)
            report = wb.bench(fn, spec.reference, inputs=[(x, w, b, a)], name=f"linear_gelu skinny {m}x768->3072",
                              label=f"skinny v{v}", baselines="eager,compile" if v == 0 else "none",
                              flops=spec.flops(size, torch.float32), bytes_moved=spec.bytes_moved(size, torch.float32),
                              tolerance=spec.TOLERANCES)
            for r in report.rows:
                print(f"{m:4d} v{v} {r['provider']:>14} {r['method']:>11} {r['median_us'] or 0:8.2f} us "
                      f"{(r.get('tflops') or 0):6.1f} TFLOP/s {r['status']}", flush=True)
            if args.out:
                report.save(args.out)


if __name__ == "__main__":
    main()
