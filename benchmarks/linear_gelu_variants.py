"""linear_gelu, from the tutorials' kernel to the shipped route, side by side (llm.c's
dev/cuda style): each variant is validated, then timed with the harness beside eager PyTorch,
torch.compile and cuBLASLt's GELU + bias epilogue.

    python benchmarks/linear_gelu_variants.py [--out DIR]     # needs a CUDA GPU

naive    one thread per output, the dot product from global memory (kernels/linear_gelu: the
         tutorials' kernel, kept for teaching)
tiled    32 x 32 output tiles through shared memory, bias + GELU in the epilogue
skinny   16 rows x 8 or 16 columns a block, k over 32 or 16 threads a column, summed in shared
         memory (benchmarks/linear_gelu_skinny_variants.py: its shapes)
shipped  k.linear_gelu: the skinny kernel for fp32 batches of 2 to 32 rows; the erf form's large
         16-bit products on the H100 the CUTLASS kernel (sm90a below); else cuBLASLt (GELU + bias
         epilogue for the tanh form; bias epilogue, then a GELU pass, for erf)
addmm_activation  torch._addmm_activation: cuBLASLt's GELU + bias epilogue alone (tanh form only)
mm_bias_gelu  torch.mm (cuBLAS, no epilogue), then bias_gelu's forward pass: Inductor's shape
         of the fp32 product at small batches (its own pointwise kernel after the mm)
addmm_gelu_   the erf form as one addmm (bias epilogue), then ATen's GELU in place over all of y
chunkR        the same in blocks of R rows: each block's GELU pass reads the block's product
         while it is still in the 50 MB L2 (--erf-chunks: bf16 and fp16, 8192 x 4096 -> 16384)
sm90a_cC_sS_rR  (--sm90a, H100) CUTLASS's product with bias + GELU in its epilogue
         (k.linear_gelu_sm90a): tile config C (0 shipped: ping-pong 128 x 128, cluster 1 x 2;
         7: the same, cluster 2 x 1; cooperative 128 x 256 with 8: cluster 2 x 1, 1: 1 x 2,
         2: 1 x 1, 4: 2 x 1 and GELU's tanh form, 5 and 6: stream-K, clusters 2 x 1 and 1 x 2;
         3: cooperative 256 x 128), tile swizzle S, raster R (0 heuristic, 1 along m, 2 along
         n). Builds linear_gelu with -DKWB_LINEAR_GELU_SM90A_VARIANTS (eight more CUTLASS
         instantiations).
train_*  (--sm90a) linear_gelu_forward (y and the product before the GELU), shipped, against
         addmm then F.gelu (the cuBLAS route's kernels)

--erf-few-rows --in-turns 1 (H100, 0c7e09f; bf16 / fp16, 32 x 768 -> 3072, median us in turns):
shipped 11.856 / 11.904, mm_bias_gelu 11.776 / 11.648, addmm_gelu_ 11.936 / 11.840, torch.compile
11.744 / 11.744 (kernels/linear_gelu/NOTES.md, "Round 16").

Sizes: (m, k, n), x is m x k, W is n x k. The naive kernel is timed only where it finishes in
reasonable time (at 8192 x 4096 -> 16384 bf16 it would take seconds a call).
"""
from __future__ import annotations

import argparse

import torch
from in_turns import time_in_turns

import workbench as wb

SMALL = [(1, 768, 3072), (8, 768, 3072), (32, 768, 3072), (64, 768, 3072), (128, 768, 3072), (512, 768, 3072)]
LARGE = [(2048, 4096, 4096), (8192, 4096, 16384)]


def show(report) -> None:
    for r in report.rows:
        print(f"{r['dtype']:>5} {r['op']:>34} {r['provider']:>10} {r['median_us'] or 0:10.1f} us "
              f"{(r.get('tflops') or 0):7.1f} TFLOP/s  {r['status']}")


def time_one(spec, name, fn, inputs, size, dtype, approximate, out) -> None:
    """Validate and time one variant (eager and torch.compile beside the shipped op); print it,
    and append it to out/<device>/bench.csv where out is given."""
    m, k, n = size
    report = wb.bench(fn, spec.reference, inputs=[inputs], name=f"linear_gelu {approximate} {m}x{k}->{n}", label=name,
                      baselines="eager,compile" if name == "shipped" else "none", flops=spec.flops(size, dtype),
                      bytes_moved=spec.bytes_moved(size, dtype), tolerance=spec.TOLERANCES)
    show(report)
    if out:
        report.save(out)


def chunked(rows):
    """addmm with the bias epilogue, then GELU (erf) in place, over blocks of `rows` rows (None: all)."""
    def run(x, w, b, approximate):
        y = torch.empty(x.shape[0], w.shape[0], dtype=x.dtype, device=x.device)
        step = rows or x.shape[0]
        for r in range(0, x.shape[0], step):
            block = y[r:r + step]
            torch.addmm(b, x[r:r + step], w.t(), out=block)
            torch.ops.aten.gelu_(block, approximate=approximate)
        return y
    return run


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--out", help="append the rows to DIR/<device>/bench.csv")
    parser.add_argument("--sizes", help="only these sizes, MxKxN comma-separated (default: every case's)")
    parser.add_argument("--erf-chunks", action="store_true", help="only the erf form's large 16-bit product, whole and in row blocks")
    parser.add_argument("--sm90a", action="store_true", help="only the CUTLASS product's configs and schedules (H100)")
    parser.add_argument("--erf-few-rows", action="store_true",
                        help="only the erf form in bf16 and fp16 at 32 x 768 -> 3072: the shipped addmm + GELU pass, "
                             "mm + bias_gelu's pass (Inductor's shape), addmm + ATen's GELU; with --in-turns, "
                             "then in turns beside eager and torch.compile")
    parser.add_argument("--in-turns", type=float, metavar="SECONDS", default=0.0,
                        help="(--sm90a) then time bf16 8192x4096->16384's variants again in turns, a batch of each a "
                             "round, about SECONDS of samples each (1000 at most): the GPU's clocks drift over a run (only where --sizes "
                             "includes that size, as it does by default; with --erf-few-rows, its two cases)")
    args = parser.parse_args()
    if args.sm90a:
        return sm90a(args)
    k = wb.load("linear_gelu")
    bg = wb.load("bias_gelu")
    spec = k.spec
    variants = {"naive": k.linear_gelu_naive, "tiled": k.linear_gelu_tiled, "skinny": k.linear_gelu_skinny, "shipped": k.linear_gelu,
                "addmm_activation": spec.addmm_gelu,
                "mm_bias_gelu": lambda x, w, b, a: bg.bias_gelu(torch.mm(x, w.t()), b, a)}
    if args.erf_chunks:
        variants = {"shipped": k.linear_gelu, "addmm_gelu_": chunked(None)}
        variants.update({f"chunk{r}": chunked(r) for r in (256, 512, 1024, 2048)})
    if args.erf_few_rows:
        variants = {"shipped": k.linear_gelu, "mm_bias_gelu": variants["mm_bias_gelu"], "addmm_gelu_": chunked(None)}
    only = {tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")} if args.sizes else None
    cases = [(torch.float32, "none", SMALL), (torch.float32, "tanh", SMALL[2:3]),
             (torch.bfloat16, "tanh", SMALL[2:3] + LARGE)]
    if args.erf_chunks:
        cases = [(torch.bfloat16, "none", LARGE[1:]), (torch.float16, "none", LARGE[1:])]
    if args.erf_few_rows:
        cases = [(torch.bfloat16, "none", SMALL[2:3]), (torch.float16, "none", SMALL[2:3])]
    for dtype, approximate, sizes in cases:
        for size in sizes:
            if only is not None and tuple(size) not in only:
                continue
            m, kk, n = size
            args_ = spec.inputs_for(approximate)(size, dtype, "cuda", torch.Generator().manual_seed(0))
            for name, fn in variants.items():
                if name == "naive" and m * kk * n > 2048 * 4096 * 4096:
                    continue  # seconds a call
                if name == "tiled" and m * kk * n > 2048 * 4096 * 4096:
                    continue
                if name == "skinny" and dtype != torch.float32:
                    continue  # fp32 only
                if name == "addmm_activation" and approximate != "tanh":
                    continue  # its epilogue is the tanh form only
                time_one(spec, name, fn, args_, size, dtype, approximate, args.out)
            if args.erf_few_rows and args.in_turns:
                turns = dict(variants, eager=spec.reference,
                             **{"torch.compile": torch.compile(spec.reference, fullgraph=True, dynamic=False)})
                turns["torch.compile"](*args_)  # compiled here, not in the timed calls' first
                time_in_turns(turns, args_, args.in_turns, f"{approximate} {dtype} {size}", flops=spec.flops(size, dtype))


def sm90a(args) -> None:
    k = wb.load("linear_gelu", extra_cuda_cflags=["-DKWB_LINEAR_GELU_SM90A_VARIANTS"])
    spec = k.spec
    only = {tuple(int(v) for v in s.split("x")) for s in args.sizes.split(",")} if args.sizes else None

    def cutlass(config, swizzle=1, raster=0):
        return lambda x, w, b, a: k.linear_gelu_sm90a(x, w, b, a, config, swizzle, raster)

    def train_route(fn):  # y and pre, as the training forward returns them; checked on y
        return lambda x, w, b, a: fn(x, w, b, a)[0]

    def addmm_then_gelu(x, w, b, a):
        pre = torch.addmm(b, x, w.t())
        return torch.nn.functional.gelu(pre, approximate=a), pre

    cases = [(torch.bfloat16, "none", LARGE), (torch.float16, "none", LARGE[1:]), (torch.bfloat16, "tanh", LARGE[1:])]
    for dtype, approximate, sizes in cases:
        for size in sizes:
            if only is not None and tuple(size) not in only:
                continue
            if approximate == "tanh":
                variants = {"shipped": k.linear_gelu, "sm90a_c4_s1_r0": cutlass(4), "sm90a_c4_s2_r1": cutlass(4, 2, 1)}
            else:
                variants = {"shipped": k.linear_gelu, "addmm_gelu_": chunked(None)}
                configs = (0,)
                variants.update({f"sm90a_c{c}_s1_r0": cutlass(c) for c in configs})
                if dtype == torch.bfloat16 and size == LARGE[1]:
                    grid = [(0, 2, 1), (0, 4, 1), (0, 8, 1), (0, 2, 2), (7, 2, 2), (7, 4, 2), (8, 2, 2), (8, 8, 2),
                            (1, 2, 1), (5, 2, 2)]
                    variants.update({f"sm90a_c{c}_s{s_}_r{r}": cutlass(c, s_, r) for c, s_, r in grid})
                    variants["shipped_again"] = k.linear_gelu  # timed last: the run's drift
                variants.update({"train_shipped": train_route(k.linear_gelu_forward), "train_addmm_gelu": train_route(addmm_then_gelu)})
            args_ = spec.inputs_for(approximate)(size, dtype, "cuda", torch.Generator().manual_seed(0))
            for name, fn in variants.items():
                time_one(spec, name, fn, args_, size, dtype, approximate, args.out)
            if args.in_turns and "shipped_again" in variants:
                del variants["shipped_again"]
                variants.update({"eager": spec.reference, "torch.compile": torch.compile(spec.reference, fullgraph=True, dynamic=False)})
                variants["torch.compile"](*args_)  # compiled here, not in the timed calls' first
                time_in_turns(variants, args_, args.in_turns, f"{approximate} {dtype} {size}", flops=spec.flops(size, dtype))


if __name__ == "__main__":
    main()
