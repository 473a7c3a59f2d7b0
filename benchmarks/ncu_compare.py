"""One op's kwb kernel beside torch.compile's, for Nsight Compute: runs each a few times, warm,
inside NVTX ranges named "kwb" and "compile", so ncu can profile just those launches.

    ncu --clock-control none --nvtx --nvtx-include "kwb/" --nvtx-include "compile/" \\
        --metrics gpu__time_duration.sum,launch__grid_size,launch__block_size,... \\
        python benchmarks/ncu_compare.py KERNEL OP DTYPE SHAPE [--calls N]

SHAPE: sizes joined by x ("1048576", "4096x1024"). Prints the two outputs' largest difference.
"""
from __future__ import annotations

import argparse

import torch

import workbench as wb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernel")
    parser.add_argument("op")
    parser.add_argument("dtype", choices=["float32", "float16", "bfloat16", "float64"])
    parser.add_argument("shape")
    parser.add_argument("--calls", type=int, default=3)
    args = parser.parse_args()
    k = wb.load(args.kernel)
    spec = k.spec.SPEC.op(args.op)
    shape = tuple(int(v) for v in args.shape.split("x"))
    inputs = spec.make_inputs(shape, getattr(torch, args.dtype), "cuda", torch.Generator().manual_seed(0))
    fns = {"kwb": getattr(k, spec.calls or spec.name, None) or k.op(spec.calls or spec.name),
           "compile": torch.compile(spec.reference)}
    outs = {}
    for name, fn in fns.items():
        for _ in range(3):
            outs[name] = fn(*inputs)  # warm: compile, autotune, first-call setup
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_push(name)
        for _ in range(args.calls):
            fn(*inputs)
        torch.cuda.synchronize()
        torch.cuda.nvtx.range_pop()
    a, b = outs["kwb"], outs["compile"]
    a, b = (a[0], b[0]) if isinstance(a, tuple) else (a, b)
    print(f"{args.op} {args.dtype} {args.shape}: max |kwb - compile| = {(a.float() - b.float()).abs().max().item():.3g}")


if __name__ == "__main__":
    main()
