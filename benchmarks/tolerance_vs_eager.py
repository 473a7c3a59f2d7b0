#!/usr/bin/env python
"""How far is each kernel from the float64 reference, beside eager PyTorch at the same dtype?
The evidence behind the eager rule (workbench.harness.compare.compare_with_eager).

    python benchmarks/tolerance_vs_eager.py [NAMES ...] [--device cuda] [--full] [--out DIR]

For every op of every kernel (default: all), at `kwb run`'s size and dtype (--full: every
bench size and dtype), forward and training step: the kernel's outputs and gradients and eager
PyTorch's, each against the float64 reference of the same inputs: the largest error, the
relative L2 error and the elements outside the spec's tolerance. Writes DIR/tolerance_vs_eager.md
and .json; exits 1 where the kernel is worse than eager on an output that misses its tolerance.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch


def measure(names, device: str, full: bool, seed: int = 0) -> list[dict]:
    import workbench as wb
    from workbench.harness import benchmark as B
    from workbench.harness.cases import as_list, output_label, select_dtypes, spec_of
    from workbench.harness.compare import compare, compare_with_eager
    from workbench.harness.spec import upcast

    rows = []
    for name in names:
        kernel = wb.load(name, device=device)
        spec = spec_of(kernel)
        size, dtype = spec.quick_for(device)
        dtypes = select_dtypes(spec, None, device, name) if full else [dtype]
        sizes = [tuple(s) for s in spec.sizes_for(device)] if full else [tuple(size)]
        for op in spec.ops:
            for dt in dtypes:
                for sz in sizes:
                    for train in ([False, True] if op.grad_inputs else [False]):
                        providers = {B.KWB: getattr(kernel, op.kernel_op), B.EAGER: op.eager_fn}
                        case = B._kernel_case(kernel, op, device, dt, sz, seed, train, providers)
                        with torch.no_grad():
                            refs = as_list(case.reference(*[upcast(a) for a in case.args]))
                            mine = as_list(providers[B.KWB](*case.args))
                            eager = as_list(case.reference(*case.args))
                        for i, (k, e, r) in enumerate(zip(mine, eager, refs)):
                            if not isinstance(r, torch.Tensor):
                                continue
                            ck, ce = compare(k, r, case.tolerance), compare(e, r, case.tolerance)
                            ruled = compare_with_eager(k, e, r, case.tolerance)
                            rows.append({
                                "kernel": name, "op": case.op, "dtype": str(dt).removeprefix("torch."),
                                "size": "x".join(map(str, sz)), "output": output_label(i, len(refs)),
                                "tolerance": str(case.tolerance), "numel": ck.numel,
                                "kwb_max_abs": ck.max_abs, "eager_max_abs": ce.max_abs,
                                "kwb_rel_l2": ck.rel_l2, "eager_rel_l2": ce.rel_l2,
                                "kwb_outside": ck.mismatched, "eager_outside": ce.mismatched,
                                "kwb_passes_spec": ck.passed, "eager_passes_spec": ce.passed,
                                "kwb_passes_eager_rule": ruled.passed,
                            })
                        del case, refs, mine, eager
                        torch.cuda.empty_cache() if device == "cuda" else None
    return rows


def markdown(rows: list[dict], title: str) -> str:
    lines = [title, "",
             ("| kernel | op | dtype | size | output | spec tolerance | kwb max err | eager max err | kwb rel L2 | eager rel L2 "
              "| kwb outside | eager outside |"), "|---|---|---|---|---|---|---:|---:|---:|---:|---:|---:|"]
    for r in rows:
        lines.append(f"| {r['kernel']} | {r['op']} | {r['dtype']} | {r['size']} | {r['output']} | {r['tolerance']} "
                     f"| {r['kwb_max_abs']:.3g} | {r['eager_max_abs']:.3g} | {r['kwb_rel_l2']:.2e} | {r['eager_rel_l2']:.2e} "
                     f"| {r['kwb_outside']} | {r['eager_outside']} |")
    return "\n".join(lines) + "\n"


def main(argv=None) -> int:
    from workbench.harness import results
    from workbench.jit.sources import builtin_names

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("names", nargs="*")
    ap.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    ap.add_argument("--full", action="store_true", help="every bench size and dtype, not kwb run's one")
    ap.add_argument("--out", type=Path, default=Path("."))
    args = ap.parse_args(argv)
    rows = measure(args.names or builtin_names(), args.device, args.full)
    env = results.environment(args.device)
    missed = [r for r in rows if not r["kwb_passes_spec"]]
    worse = [r for r in missed if not r["kwb_passes_eager_rule"]]
    title = (f"# Each kernel and eager PyTorch against the float64 reference\n\n{env.title()}; kwb {env.kwb_version}. "
             f"`python benchmarks/tolerance_vs_eager.py{' --full' if args.full else ''}`: at `kwb run`'s size and dtype, "
             f"forward and training step (a step's outputs, then its gradients). {len(missed)} of {len(rows)} outputs miss "
             f"their spec's tolerance; {len(missed) - len(worse)} of those are no worse than eager's own (the eager rule passes "
             f"them), {len(worse)} are worse.")
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "tolerance_vs_eager.md").write_text(markdown(rows, title))
    (args.out / "tolerance_vs_eager.json").write_text(json.dumps(rows, indent=1) + "\n")
    print(markdown(rows, title))
    return 1 if worse else 0


if __name__ == "__main__":
    sys.exit(main())
