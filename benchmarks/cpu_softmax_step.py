"""softmax's CPU training step timed directly, beside eager's: the step through autograd and the
two ops (forward, backward) called without it, each of the four once a round in a new random
order, a 64 MiB write before each call (cold caches, as the harness times), median and p20-p80
of ROUNDS. For a harness row that sits below eager: whether the gap is the code's or the run's.

    python benchmarks/cpu_softmax_step.py [--shape 1024x4096] [--dtype float32] [--rounds 30]
"""
import argparse
import random
import time

import torch

import workbench as wb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="1024x4096", help="ROWSxCOLS")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--rounds", type=int, default=30)
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    dtype = getattr(torch, args.dtype)
    k = wb.load("softmax", device="cpu")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=gen, dtype=dtype)
    g = torch.randn(rows, cols, generator=gen, dtype=dtype)
    flush = torch.empty(64 << 20, dtype=torch.uint8)

    def step(f):
        def run():
            with torch.enable_grad():
                leaf = x.detach().requires_grad_(True)
                return torch.autograd.grad([f(leaf)], [leaf], [g])
        return run

    cases = {
        "kwb step": step(k.softmax),
        "eager step": step(lambda t: torch.softmax(t, -1)),
        "kwb ops": lambda: k.softmax_backward(g, k.softmax(x)),
        "eager ops": lambda: torch._softmax_backward_data(g, torch.softmax(x, -1), -1, dtype),
    }
    times = {name: [] for name in cases}
    for _ in range(args.rounds):
        order = list(cases)
        random.shuffle(order)
        for name in order:
            flush.add_(1)
            t0 = time.perf_counter()
            cases[name]()
            times[name].append(time.perf_counter() - t0)
    print(f"softmax {args.dtype} {rows}x{cols}, {torch.get_num_threads()} threads, cold caches, us over {args.rounds} rounds")
    for name, v in times.items():
        v.sort()
        n = len(v)
        print(f"{name:12s} median {v[n // 2] * 1e6:8.0f}  p20-p80 {v[n // 5] * 1e6:.0f}-{v[4 * n // 5] * 1e6:.0f}")


if __name__ == "__main__":
    main()
