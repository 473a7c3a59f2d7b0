"""Where does an LLTM training step spend its GPU time? Kernel-by-kernel times (torch.profiler)
of kwb's lltm and of torch.compile's, forward then backward, at its two measured sizes.

    python benchmarks/profile_lltm.py            # needs a CUDA GPU; prints one table per case
"""
from __future__ import annotations

import torch
from torch.profiler import ProfilerActivity, profile

import workbench as wb


def step(fn, args, grads):
    leaves = [a.detach().requires_grad_() for a in args]
    outs = fn(*leaves)
    torch.autograd.grad(outs, leaves, grads)


def main() -> None:
    k = wb.load("lltm", device="cuda")
    spec = k.spec
    for shape in [(16, 32, 128), (4096, 1024, 1024)]:
        args = spec.make_inputs(shape, torch.float32, "cuda", torch.Generator().manual_seed(0))
        grads = [torch.randn(shape[0], shape[2], device="cuda") for _ in range(2)]
        compiled = torch.compile(spec.reference, fullgraph=True, dynamic=False)
        for name, fn in (("kwb", k.lltm), ("torch.compile", compiled)):
            for _ in range(5):
                step(fn, args, grads)
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(10):
                    step(fn, args, grads)
                torch.cuda.synchronize()
            print(f"\n=== {name}, fp32 {shape}: 10 steps")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=90))


if __name__ == "__main__":
    main()
