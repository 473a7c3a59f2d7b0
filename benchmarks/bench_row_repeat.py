"""Validate and time one kwb bench row again from a run's seed, a few times, to tell a row a
run found wrong from bad luck with its inputs (the same verdict every time, whatever the launch
mode) or from a race (verdicts that change between repeats, or with KWB_PDL=0).

    python benchmarks/bench_row_repeat.py bias_gelu --op bias_gelu_tanh --dtype float32 \\
        --size 8192x8192 --backward --seed 1999399800 --repeat 3

The seed is the one `kwb run` prints ("pass seed=... to repeat these inputs"): with the same op,
dtype and size it draws the same inputs. Prints each repeat's rows (op, verdict, median); exits 1
where any row was not timed (wrong, or an error).
"""
from __future__ import annotations

import argparse
import os
import sys

import workbench as wb


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("kernel", help="a shipped kernel's name or folder")
    ap.add_argument("--op", required=True, help="the op, as the spec names it")
    ap.add_argument("--dtype", required=True, help="one dtype, e.g. float32")
    ap.add_argument("--size", required=True, help="one size, e.g. 8192x8192 or 1048576")
    ap.add_argument("--seed", type=int, required=True, help="the run's seed")
    ap.add_argument("--backward", action="store_true", help="the training-step row too")
    ap.add_argument("--repeat", type=int, default=3, help="how many times (default 3)")
    args = ap.parse_args()
    if args.repeat < 1:
        ap.error(f"--repeat: at least 1, got {args.repeat}")
    size = tuple(int(n) for n in args.size.lower().split("x"))
    print(f"KWB_PDL={os.environ.get('KWB_PDL', '(unset)')}")
    untimed = 0
    for i in range(args.repeat):
        report = wb.bench(args.kernel, ops=[args.op], dtypes=args.dtype, sizes=[size], seed=args.seed,
                          backward=args.backward, baselines="none", graphs=False, launches=False)
        for row in report.rows:
            median = row.get("median_us")
            timing = f"{median:.1f} us" if isinstance(median, float) else "not timed"
            print(f"repeat {i + 1}: {row['op']} {row['dtype']} {row['shape']}: {row.get('status') or 'ok'}, {timing}")
            untimed += not isinstance(median, float)
        for note in report.notes:
            print(f"repeat {i + 1}: note: {note}")
    sys.exit(1 if untimed else 0)


if __name__ == "__main__":
    main()
