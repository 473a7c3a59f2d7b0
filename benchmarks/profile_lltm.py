"""Where does an LLTM step spend its GPU time? Kernel-by-kernel times (torch.profiler) of kwb's
lltm and of torch.compile's, forward then backward (or the forward alone), at the measured sizes.

    python benchmarks/profile_lltm.py [--shapes 16x32x128,4096x1024x1024] [--dtype float32]
                                      [--steps 10] [--forward]
    ncu --clock-control none -k regex:'forward_small|triton_' \\
        python benchmarks/profile_lltm.py --shapes 16x32x128 --dtype bfloat16 --steps 1 --forward
                                                  # each kernel of one step, kwb's and Inductor's
Needs a CUDA GPU; prints one table per case.
"""
from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

import workbench as wb


def step(fn, args, grads, forward_only: bool):
    if forward_only:
        with torch.no_grad():
            fn(*args)
        return
    leaves = [a.detach().requires_grad_() for a in args]
    outs = fn(*leaves)
    torch.autograd.grad(outs, leaves, grads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shapes", default="16x32x128,4096x1024x1024", help="batch x features x state, comma-separated")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--steps", type=int, default=10, help="profiled steps a case (after 5 warm-up steps)")
    parser.add_argument("--forward", action="store_true", help="the forward alone, under no_grad")
    opts = parser.parse_args()
    dtype = getattr(torch, opts.dtype)
    k = wb.load("lltm", device="cuda")
    spec = k.spec
    for shape in [tuple(int(n) for n in s.split("x")) for s in opts.shapes.split(",")]:
        args = spec.make_inputs(shape, dtype, "cuda", torch.Generator().manual_seed(0))
        grads = [torch.randn(shape[0], shape[2], device="cuda", dtype=dtype) for _ in range(2)]
        compiled = torch.compile(spec.reference, fullgraph=True, dynamic=False)
        for name, fn in (("kwb", k.lltm), ("torch.compile", compiled)):
            for _ in range(5):
                step(fn, args, grads, opts.forward)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(opts.steps):
                    step(fn, args, grads, opts.forward)
                torch.cuda.synchronize()
            what = "forward" if opts.forward else "steps"
            print(f"\n=== {name}, {opts.dtype} {shape}: {opts.steps} {what}")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=90))


if __name__ == "__main__":
    main()
