"""Where a small kwb op's time goes on the CPU when its caches are cold, as `kwb bench` times it:
eager `a + b` beside vector_add called four ways (the kernel alone below autograd; the
dispatcher op from Python, torch.ops, whose Autograd kernel is C++; the public ops.py function,
which calls the build's C++ entry, vector_add_python.cpp; the same with an input that needs a
gradient), and a training step (forward, then backward of a given gradient) eager and kwb.
Each round calls every row once, in a new random order (a fixed order let each call inherit
what the one before it left in the caches), a 64 MiB write before each call; median of N, and
the spread (p20-p80) says how far to trust it.

    python benchmarks/cpu_call_overhead.py [--numel 65536] [--calls 60]
"""
import argparse
import random
import time

import torch

import workbench as wb


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--numel", type=int, default=65536)
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    k = wb.load("vector_add", device="cpu")
    op = k.op("vector_add").default
    a, b, g = torch.randn(args.numel), torch.randn(args.numel), torch.randn(args.numel)
    a_grad, b_grad = a.clone().requires_grad_(), b.clone().requires_grad_()
    flush = torch.empty(64 << 20, dtype=torch.uint8)

    def below_autograd():
        with torch._C._AutoDispatchBelowAutograd():
            return op(a, b)

    def step(add):
        def run():
            a_grad.grad = b_grad.grad = None
            add(a_grad, b_grad).backward(g)
        return run

    rows = {"eager a + b": lambda: a + b, "kwb kernel, below autograd": below_autograd,
            "kwb dispatcher op (torch.ops)": lambda: op(a, b), "kwb public function (C++ entry)": lambda: k.vector_add(a, b),
            "kwb public function, a needs grad": lambda: k.vector_add(a_grad, b),
            "eager training step": step(torch.add), "kwb training step": step(k.vector_add)}
    times = {label: [] for label in rows}
    for fn in rows.values():
        fn()  # first calls: allocator growth, autograd's graph machinery
    order = list(rows)
    shuffle = random.Random(0).shuffle
    for _ in range(args.calls):
        shuffle(order)
        for label in order:
            fn = rows[label]
            flush.fill_(1)  # evicts the last-level cache: data, and the interpreter's own
            start = time.perf_counter()
            fn()
            times[label].append((time.perf_counter() - start) * 1e6)
    print(f"{'':36s} {'median':>8s} {'p20-p80':>15s}   (numel {args.numel}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} threads)")
    for label, t in times.items():
        t, n = sorted(t), len(t)
        print(f"{label:36s} {t[n // 2]:8.1f} {t[n // 5]:7.1f}-{t[4 * n // 5]:<7.1f} us")


if __name__ == "__main__":
    main()
