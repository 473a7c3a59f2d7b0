"""Where linear_gelu's CPU training step spends its time: the step through autograd (the C++
autograd kernel), beside the same two ops called directly, eager's F.gelu(F.linear(...)) step,
and autograd's own fixed cost on a step of 16 floats; a 64 MiB write before each call (cold
caches, as the harness times), median of REPS, interleaved, three rounds, with the minor page
faults a call (memory the allocator took back from the OS).

    python benchmarks/cpu_linear_gelu_step.py [M K N] [--dtype float64]   # default 32 768 3072, fp32
"""
import argparse
import resource
import time

import torch
import torch.nn.functional as F

import workbench as wb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("size", nargs="*", type=int, default=[32, 768, 3072], help="m k n")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--reps", type=int, default=100)
    args = parser.parse_args()
    if len(args.size) != 3 or min(args.size) < 1:
        parser.error(f"size must be three positive numbers, m k n; got {args.size}")
    m, k, n = args.size
    dtype = getattr(torch, args.dtype)
    lg = wb.load("linear_gelu", device="cpu")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(m, k, generator=gen, dtype=dtype)
    w = torch.randn(n, k, generator=gen, dtype=dtype) / k ** 0.5
    b = torch.randn(n, generator=gen, dtype=dtype) * 0.5
    g = torch.randn(m, n, generator=gen, dtype=dtype)
    flush = torch.empty(64 << 20, dtype=torch.uint8)

    def leaves():
        return [v.detach().requires_grad_() for v in (x, w, b)]

    def eager_step():
        xs, ws, bs = leaves()
        torch.autograd.grad(F.gelu(F.linear(xs, ws, bs)), (xs, ws, bs), g)

    def kwb_step():
        xs, ws, bs = leaves()
        torch.autograd.grad(lg.linear_gelu(xs, ws, bs, "none"), (xs, ws, bs), g)

    def kwb_ops():
        _, pre = lg.linear_gelu_forward(x, w, b, "none")
        lg.linear_gelu_backward(g, x, w, pre, "none")

    tiny = torch.randn(16, dtype=dtype)

    def autograd_alone():  # the engine's fixed cost, cold, on a step with next to no work
        t = tiny.detach().requires_grad_()
        torch.autograd.grad((t * 2).sum(), t)

    cases = {"eager step": eager_step, "kwb step (autograd)": kwb_step, "kwb forward + backward ops": kwb_ops,
             "autograd alone, 16 floats": autograd_alone}
    print(f"linear_gelu erf {args.dtype} {m}x{k}->{n}, cold caches, median us of {args.reps}")
    for _ in range(3):
        times = {name: [] for name in cases}
        faults = dict.fromkeys(cases, 0)  # minor page faults a call: memory the allocator got back from the OS
        for _ in range(args.reps):
            for name, fn in cases.items():
                flush.add_(1)
                faults0 = resource.getrusage(resource.RUSAGE_SELF).ru_minflt
                t0 = time.perf_counter()
                fn()
                times[name].append(time.perf_counter() - t0)
                faults[name] += resource.getrusage(resource.RUSAGE_SELF).ru_minflt - faults0
        print(" | ".join(f"{name} {sorted(v)[len(v) // 2] * 1e6:.0f} us, {faults[name] / len(v):.0f} faults"
                         for name, v in times.items()))


if __name__ == "__main__":
    main()
