"""Where a small kwb op's time goes on the CPU when its caches are cold, as `kwb bench` times it:
eager `a + b` beside vector_add called four ways (the kernel alone below autograd, the
dispatcher op, the public ops.py function). Median of N calls, a 64 MiB write before each.

    python benchmarks/cpu_call_overhead.py [--numel 65536] [--calls 60]
"""
import argparse
import time

import torch

import workbench as wb


def cold_median(fn, flush: torch.Tensor, calls: int) -> float:
    times = []
    for _ in range(calls):
        flush.fill_(1)  # evicts the last-level cache: data, and the interpreter's own
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return sorted(times)[calls // 2] * 1e6


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--numel", type=int, default=65536)
    parser.add_argument("--calls", type=int, default=60)
    args = parser.parse_args()
    k = wb.load("vector_add", device="cpu")
    op = k.op("vector_add").default
    a, b = torch.randn(args.numel), torch.randn(args.numel)
    flush = torch.empty(64 << 20, dtype=torch.uint8)

    def below_autograd():
        with torch._C._AutoDispatchBelowAutograd():
            return op(a, b)

    for label, fn in (("eager a + b", lambda: a + b), ("kwb kernel, below autograd", below_autograd),
                      ("kwb dispatcher op", lambda: op(a, b)), ("kwb public function", lambda: k.vector_add(a, b))):
        print(f"{label:28s} {cold_median(fn, flush, args.calls):8.1f} us")


if __name__ == "__main__":
    main()
