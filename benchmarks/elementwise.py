"""Speed of the foundation's elementwise kernels (relu_scale, vector_add) on the GPU, side by
side with eager PyTorch and torch.compile of the same reference, in one run.

Method (DESIGN.md "Measuring"): triton.testing.do_bench (CUDA events, L2 flushed between
samples, warm-up first), median with p20/p80; every provider is checked against the
reference before it is timed. GB/s counts each input read once and each output written once;
% is that over the device-to-device copy ceiling measured at the start of this run.

    python benchmarks/elementwise.py [--out DIR]      # needs a CUDA GPU and triton
"""
from __future__ import annotations

import argparse
import datetime
import json
import subprocess
from pathlib import Path

import torch
from triton.testing import do_bench

import workbench as wb

SIZES = [1 << 20, 1 << 24, 1 << 26]
DTYPES = [torch.float32, torch.bfloat16]


def bench(fn) -> tuple[float, float, float]:
    """(median, p20, p80) in microseconds."""
    ms = do_bench(fn, warmup=25, rep=200, quantiles=[0.5, 0.2, 0.8])
    return tuple(t * 1e3 for t in ms)


def copy_ceiling_gbs() -> float:
    """Device-to-device copy of 1 GiB, counting bytes read plus bytes written."""
    src = torch.empty(1 << 28, device="cuda", dtype=torch.float32).normal_()
    dst = torch.empty_like(src)
    us = bench(lambda: dst.copy_(src))[0]
    return 2 * src.numel() * 4 / (us * 1e-6) / 1e9


def cases(rs, va):
    alpha = 1.5
    yield ("relu_scale", lambda x: rs.relu_scale(x, alpha), lambda x: torch.clamp_min(x, 0) * alpha, 1, 2)
    yield ("vector_add", lambda a, b: va.vector_add(a, b), lambda a, b: a + b, 2, 3)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=None, help="write elementwise.json and elementwise.md here")
    args = ap.parse_args()
    rs, va = wb.load("relu_scale", device="cuda"), wb.load("vector_add", device="cuda")
    ceiling = copy_ceiling_gbs()
    rows = []
    for name, kwb_fn, ref_fn, n_in, n_tensors in cases(rs, va):
        compiled = torch.compile(ref_fn)
        for dtype in DTYPES:
            for n in SIZES:
                gen = torch.Generator(device="cuda").manual_seed(n)
                inputs = [torch.randn(n, device="cuda", dtype=dtype, generator=gen) for _ in range(n_in)]
                expected = ref_fn(*[t.double() for t in inputs]).to(dtype)
                nbytes = n_tensors * n * inputs[0].element_size()
                for provider, fn in (("kwb", kwb_fn), ("eager", ref_fn), ("torch.compile", compiled)):
                    torch.testing.assert_close(fn(*inputs), expected)  # validated before timed
                    med, p20, p80 = bench(lambda: fn(*inputs))
                    gbs = nbytes / (med * 1e-6) / 1e9
                    rows.append(dict(op=name, dtype=str(dtype).removeprefix("torch."), n=n, provider=provider,
                                     median_us=round(med, 2), p20_us=round(p20, 2), p80_us=round(p80, 2),
                                     gbs=round(gbs, 1), pct_ceiling=round(100 * gbs / ceiling, 1)))
    meta = dict(device=torch.cuda.get_device_name(), torch=torch.__version__, cuda=torch.version.cuda,
                date=datetime.date.today().isoformat(), copy_ceiling_gbs=round(ceiling, 1),
                kwb=subprocess.run(["git", "describe", "--always", "--dirty"], capture_output=True, text=True).stdout.strip())
    lines = [f"{meta['device']}, torch {meta['torch']}, CUDA {meta['cuda']}, {meta['date']}, copy ceiling {meta['copy_ceiling_gbs']} GB/s",
             "", "| op | dtype | n | provider | median us (p20-p80) | GB/s | % of copy ceiling |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['op']} | {r['dtype']} | 2^{r['n'].bit_length() - 1} | {r['provider']} | {r['median_us']} ({r['p20_us']}-{r['p80_us']}) | {r['gbs']} | {r['pct_ceiling']}% |")
    table = "\n".join(lines)
    print(table)
    if args.out:
        args.out.mkdir(parents=True, exist_ok=True)
        (args.out / "elementwise.json").write_text(json.dumps(dict(meta=meta, rows=rows), indent=1))
        (args.out / "elementwise.md").write_text(table + "\n")


if __name__ == "__main__":
    main()
