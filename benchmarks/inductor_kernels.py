"""What torch.compile makes of a kernel's spec reference: Inductor's generated code and, for each
Triton kernel it launched, the config its autotuner chose (XBLOCK/R0_BLOCK, warps, stages) with
the registers and spills Triton reports. The baseline kwb must beat, read rather than guessed.

    python benchmarks/inductor_kernels.py layernorm rmsnorm --shapes 16384x4096,4096x1024 \
        --dtypes float32,bfloat16 [--train] [--out DIR]

Writes DIR/<kernel>-<op>-<dtype>-<shape>[-train].py (the output code, forward and backward
graphs) and prints one line per Triton kernel. Needs a GPU (Inductor autotunes on it).
"""
from __future__ import annotations

import argparse
import gc
import importlib.util
from pathlib import Path

import torch

from workbench.harness.cases import draw_inputs

ROOT = Path(__file__).resolve().parent.parent


def spec_of(kernel: str):
    path = ROOT / "kernels" / kernel / "spec.py"
    module_spec = importlib.util.spec_from_file_location(f"spec_{kernel}", path)
    module = importlib.util.module_from_spec(module_spec)
    module_spec.loader.exec_module(module)
    return module.SPEC


def autotuners() -> list:
    from torch._inductor.runtime.triton_heuristics import CachingAutotuner

    # type(), not isinstance: isinstance asks a weak proxy for its __class__, and dead ones raise
    return [o for o in gc.get_objects() if issubclass(type(o), CachingAutotuner)]


def describe(tuner) -> str:
    """One Triton kernel as launched: its name, the chosen config, registers and spills."""
    name = getattr(tuner, "inductor_meta", {}).get("kernel_name") or getattr(getattr(tuner, "fn", None), "__name__", "?")
    launcher = (getattr(tuner, "launchers", None) or [None])[0]
    config = getattr(launcher, "config", None)
    fields = {"config": getattr(config, "kwargs", None), "num_warps": getattr(config, "num_warps", None),
              "num_stages": getattr(config, "num_stages", None), "n_regs": getattr(launcher, "n_regs", None),
              "n_spills": getattr(launcher, "n_spills", None), "shared": getattr(launcher, "shared", None)}
    return f"{name}: " + ", ".join(f"{k}={v}" for k, v in fields.items())


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("kernels", nargs="+", help="kernel folder names under kernels/")
    parser.add_argument("--shapes", default="16384x4096", help="the op's shapes, AxB[xC], comma-separated")
    parser.add_argument("--dtypes", default="float32", help="comma-separated")
    parser.add_argument("--train", action="store_true", help="the training step (forward, then backward) too")
    parser.add_argument("--out", default="/tmp/inductor_kernels")
    parser.add_argument("--device", default="cuda", help="cuda (Triton kernels, autotuned); cpu shows the C++ Inductor writes")
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    for kernel in args.kernels:
        for op in spec_of(kernel).ops:
            for shape_text in args.shapes.split(","):
                for dtype_name in args.dtypes.split(","):
                    shape = tuple(int(n) for n in shape_text.lower().split("x"))
                    tag = f"{kernel}-{op.name}-{dtype_name}-{shape_text}"
                    show(op, shape, getattr(torch, dtype_name), args.device, args.train, out, tag)


def show(op, shape, dtype, device: str, train: bool, out: Path, tag: str) -> None:
    """Compile op's reference at (shape, dtype), run it (and its training step), write the code and
    print each new Triton kernel's launch."""
    from torch._inductor.utils import run_and_get_code

    inputs = draw_inputs(op.make_inputs, shape, dtype, device, 0)
    for step_too in (False, True) if train else (False,):
        torch._dynamo.reset()
        compiled = torch.compile(op.reference, fullgraph=True, dynamic=False)
        if step_too:
            leaves = [a.detach().requires_grad_() if a.is_floating_point() else a for a in inputs]

            def step(leaves=leaves, compiled=compiled):
                outs = compiled(*leaves)
                floating = [o for o in (outs if isinstance(outs, (tuple, list)) else (outs,)) if o.is_floating_point()]
                torch.autograd.backward(floating, [torch.ones_like(o) for o in floating])
                return outs
        else:
            def step(compiled=compiled):
                return compiled(*inputs)
        before = {id(t) for t in autotuners()}
        _, codes = run_and_get_code(step)
        name = tag + ("-train" if step_too else "")
        (out / f"{name}.py").write_text("\n\n# ---- next graph ----\n\n".join(codes))
        print(f"{name}: {len(codes)} graphs -> {out / (name + '.py')}", flush=True)
        for tuner in autotuners():  # a kernel's tuner appears again, unlaunched, where its code is reloaded
            if id(tuner) not in before and getattr(tuner, "launchers", None):
                print("   ", describe(tuner), flush=True)


if __name__ == "__main__":
    main()
