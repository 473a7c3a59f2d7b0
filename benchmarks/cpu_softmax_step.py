"""softmax's CPU training step timed directly, beside eager's: the step through autograd and the
two ops (forward, backward) called without it, timed in turns by the harness's own
timing.measure_interleaved with its CPU timer (caches flushed before each call, as `kwb run`
times), median and p20-p80. For a harness row that sits below eager: whether the gap is the
code's or the run's.

    python benchmarks/cpu_softmax_step.py [--shape 1024x4096] [--dtype float32] [--seconds 1.0]
"""
import argparse

import torch

import workbench as wb
from workbench.harness import timing


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--shape", default="1024x4096", help="ROWSxCOLS")
    parser.add_argument("--dtype", default="float32", choices=["float32", "float64"])
    parser.add_argument("--seconds", type=float, default=1.0, help="each case's sampling budget")
    args = parser.parse_args()
    rows, cols = (int(v) for v in args.shape.split("x"))
    dtype = getattr(torch, args.dtype)
    k = wb.load("softmax", device="cpu")
    gen = torch.Generator().manual_seed(0)
    x = torch.randn(rows, cols, generator=gen, dtype=dtype)
    g = torch.randn(rows, cols, generator=gen, dtype=dtype)

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
    stats = timing.measure_interleaved(cases, timing.CpuTimer(), budget_s=args.seconds)
    busy = max((st.busy or 0.0) for st in stats.values())
    print(f"softmax {args.dtype} {rows}x{cols}, {torch.get_num_threads()} threads, cold caches, in turns, "
          f"other processes {busy:.0%} of the cores")
    for name, st in stats.items():
        print(f"{name:12s} median {st.median * 1e6:8.0f} us  p20-p80 {st.p20 * 1e6:.0f}-{st.p80 * 1e6:.0f}  n={st.n}")


if __name__ == "__main__":
    main()
