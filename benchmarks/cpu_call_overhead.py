"""Where a small kwb op's time goes on the CPU when its caches are cold, as `kwb bench` times it:
eager `a + b` beside vector_add called five ways (the kernel alone below autograd, the
dispatcher op, which runs register_autograd's Python kernel on every call, the op as ops.py
calls it (past that kernel when no input needs a gradient: kernel.py's _BelowAutogradWhenNoGrad),
the public ops.py function, and the public function with an input that needs a gradient).
Median of N calls, a 64 MiB write before each; the spread (p20-p80) says how far to trust it.

    python benchmarks/cpu_call_overhead.py [--numel 65536] [--calls 60]
"""
import argparse
import sys
import time

import torch

import workbench as wb


def cold_times(fn, flush: torch.Tensor, calls: int) -> list[float]:
    times = []
    for _ in range(calls):
        flush.fill_(1)  # evicts the last-level cache: data, and the interpreter's own
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1e6)
    return sorted(times)


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

    ops_op = sys.modules[k.vector_add.__module__]._ops.vector_add  # what ops.py's functions call
    a_grad = a.clone().requires_grad_()
    print(f"{'':36s} {'median':>8s} {'p20-p80':>15s}   (torch {torch.__version__}, {torch.get_num_threads()} threads)")
    for label, fn in (("eager a + b", lambda: a + b), ("kwb kernel, below autograd", below_autograd),
                      ("kwb dispatcher op (autograd's kernel)", lambda: op(a, b)),
                      ("kwb op as ops.py calls it", lambda: ops_op(a, b)),
                      ("kwb public function", lambda: k.vector_add(a, b)),
                      ("kwb public function, a needs grad", lambda: k.vector_add(a_grad, b))):
        t = cold_times(fn, flush, args.calls)
        n = len(t)
        print(f"{label:36s} {t[n // 2]:8.1f} {t[n // 5]:7.1f}-{t[4 * n // 5]:<7.1f} us")


if __name__ == "__main__":
    main()
