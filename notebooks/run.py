"""Execute the walkthrough notebooks top to bottom (nbclient), on whatever device is here.

    python notebooks/run.py                      # every notebook, outputs written back in place
    python notebooks/run.py relu_scale 08 soft   # some: a name, its number, or the start of its name
    python notebooks/run.py --out /tmp/nb        # executed copies elsewhere; the originals stay

The committed notebooks carry the outputs of a run on the H100 (notebooks/README.md says
which); run this on a GPU machine to regenerate them. On a machine without a GPU the notebooks
run their CPU paths and say that their timings are CPU timings. Exit status 1 when a cell
raised, timed out or the kernel died: the notebook, the cell and the error are printed, the
other notebooks still run, and the failed run is written beside the notebook as
NAME.failed.ipynb (in place) so the committed outputs are never replaced by a broken run.
"""
from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent


def notebooks(names: list[str]) -> list[Path]:
    every = sorted(p for p in HERE.glob("*.ipynb") if not p.stem.endswith(".failed"))
    if not names:
        return every
    chosen = []
    for name in names:
        # "08_softmax": "08_softmax", "08", "softmax" and "soft" all name it
        hits = [p for p in every if name in (p.stem, p.stem.split("_", 1)[0]) or p.stem.split("_", 1)[-1].startswith(name)]
        if not hits:
            raise SystemExit(f"run.py: no notebook named {name!r}; there are: {', '.join(p.stem for p in every)}")
        chosen += [p for p in hits if p not in chosen]
    return chosen


def _failures():
    from nbclient.exceptions import (
        CellExecutionError,
        CellTimeoutError,
        DeadKernelError,
    )

    return CellExecutionError, CellTimeoutError, DeadKernelError


def execute(path: Path, out: Path, failed_out: Path, timeout: int) -> float:
    """Run one notebook with its folder as the working directory; write it to `out`. Returns
    the seconds it took. On a failed cell, a timeout or a dead kernel, writes what ran to
    `failed_out` and raises."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    client = NotebookClient(nb, timeout=timeout, kernel_name="python3", resources={"metadata": {"path": str(HERE)}})
    start = time.perf_counter()
    try:
        # no frontend draws widgets here: kwb's live displays would be saved as a bare
        # "Output()", so its kernels print plain lines (workbench.jit.feedback.live)
        client.execute(env={**os.environ, "KWB_LIVE": "0"})
    except _failures():
        nbformat.write(nb, failed_out)
        raise
    nbformat.write(nb, out)
    return time.perf_counter() - start


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*", help="notebooks to run (default: all)")
    ap.add_argument("--out", type=Path, help="write executed copies here instead of in place")
    ap.add_argument("--timeout", type=int, default=900, help="seconds a cell may take (default 900)")
    args = ap.parse_args(argv)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
    failed = []
    for path in notebooks(args.names):
        out = (args.out / path.name) if args.out else path
        failed_out = out if args.out else path.with_suffix(".failed.ipynb")
        print(f"{path.name}: running ...", flush=True)
        try:
            seconds = execute(path, out, failed_out, args.timeout)
        except _failures() as e:
            print(f"{path.name}: FAILED (what ran is in {failed_out})\n{e}", file=sys.stderr, flush=True)
            failed.append(path.name)
            continue
        print(f"{path.name}: ok in {seconds:.1f} s -> {out}", flush=True)
    if failed:
        print(f"failed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
