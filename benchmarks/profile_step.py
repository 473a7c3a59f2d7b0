"""Where does a kernel's call or training step spend its GPU time? Kernel-by-kernel times
(torch.profiler) of kwb's op and of torch.compile's, as `kwb bench` runs them: the forward alone,
or a training step (the forward, then the backward of a fixed random output gradient).

    python benchmarks/profile_step.py KERNEL [--op NAME] [--shapes 4096x1024,16384x4096]
                                      [--dtype bfloat16] [--steps 10] [--forward]
    ncu --clock-control none -k regex:'forward_small|triton_' \\
        python benchmarks/profile_step.py lltm --shapes 16x32x128 --dtype bfloat16 --steps 1 --forward
                                                  # each kernel of one call, kwb's and Inductor's
Shapes are the spec's (lltm: batch x features x state; row kernels: rows x cols). Needs a CUDA
GPU; prints one table per case.
"""
from __future__ import annotations

import argparse

import torch
from torch.profiler import ProfilerActivity, profile

import workbench as wb
from workbench.harness.benchmark import _output_gradients, _training_step
from workbench.harness.cases import spec_of


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("kernel", help="a shipped kernel's name (lltm, layernorm, ...)")
    parser.add_argument("--op", help="the spec's op to run (default: its first)")
    parser.add_argument("--shapes", help="sizes, comma-separated, each as AxB[xC] (default: the spec's bench sizes)")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float16", "bfloat16"])
    parser.add_argument("--steps", type=int, default=10, help="profiled calls a case (after 5 warm-up calls)")
    parser.add_argument("--forward", action="store_true", help="the forward alone, under no_grad")
    opts = parser.parse_args()
    dtype = getattr(torch, opts.dtype)
    k = wb.load(opts.kernel, device="cuda")
    spec = spec_of(k)
    ops = [o for o in spec.ops if opts.op in (None, o.name)]
    if not ops:
        parser.error(f"--op: {opts.kernel} has no op {opts.op!r}; it has {', '.join(o.name for o in spec.ops)}")
    op = ops[0]
    shapes = ([tuple(int(n) for n in s.split("x")) for s in opts.shapes.split(",")] if opts.shapes
              else spec.sizes_for("cuda"))
    for shape in shapes:
        gen = torch.Generator(device="cuda").manual_seed(0)
        args = op.make_inputs(shape, dtype, "cuda", gen)
        compiled = torch.compile(op.reference, fullgraph=True, dynamic=False)
        for name, fn in (("kwb", getattr(k, op.kernel_op)), ("torch.compile", compiled)):
            if opts.forward:
                def call(fn=fn, args=args):
                    with torch.no_grad():
                        fn(*args)
            else:
                step = _training_step(fn, op.grad_inputs, _output_gradients(op, args, gen))
                def call(step=step, args=args):
                    step(*args)
            for _ in range(5):
                call()
            torch.cuda.synchronize()
            with profile(activities=[ProfilerActivity.CUDA]) as prof:
                for _ in range(opts.steps):
                    call()
                torch.cuda.synchronize()
            what = "forwards" if opts.forward else "steps"
            print(f"\n=== {name}, {opts.kernel} {op.name}, {opts.dtype} {shape}: {opts.steps} {what}")
            print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=14, max_name_column_width=90))


if __name__ == "__main__":
    main()
