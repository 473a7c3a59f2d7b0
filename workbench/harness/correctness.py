"""wb.check(): is my kernel right? Every op, every dtype, awkward shapes, against a reference
computed in float64, with the outputs poisoned so an element the kernel never writes fails.

    report = wb.check("relu_scale")                     # a kernel and its spec.py
    report = wb.check(k.square, lambda x: x * x,        # any function against a reference
                      inputs=lambda shape, dtype, device, gen: (wb.spec.randn(shape, dtype, device, gen),))
    report.passed, report.failures, report.rows()

How each case runs:
  1. fresh random inputs from the spec's make_inputs, seeded by the report's seed (printed,
     so `seed=` reproduces a failure), on the device under test;
  2. the op runs with torch's deterministic fill on, so every tensor allocated with
     at::empty inside it starts as NaN: an unwritten element cannot pass as a lucky 0;
  3. the reference runs on float64 copies of the inputs; each output is compared
     (workbench.harness.compare), and its dtype must be what the plain PyTorch op returns;
  4. where the op has gradients, a random output gradient is pushed back through both and
     the input gradients are compared the same way.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import torch

from ..jit import device as devices
from .cases import (
    Case,
    as_list,
    case_seed,
    draw_inputs,
    dtype_name,
    error_text,
    first_tensor,
    generator_for,
    input_sets,
    kernel_and_device,
    new_seed,
    output_label,
    parse_dtypes,
    poisoned_outputs,
    select_dtypes,
    select_ops,
    spec_of,
    tolerance_for,
)
from .compare import Comparison, compare, compare_with_eager, histogram_edges
from .spec import AWKWARD_SIZES, KernelSpec, OpSpec, Tolerance, upcast
from .views import Rendered


def _tolerance_columns(tol: Tolerance | None) -> dict:
    return {"atol": tol.atol if tol else "", "rtol": tol.rtol if tol else "",
            "rel_l2_tol": tol.rel_l2 if tol and tol.rel_l2 is not None else ""}


@dataclass
class CaseResult:
    """One op at one dtype and shape: its output(s) and gradients against the reference."""

    kernel: str
    op: str
    dtype: torch.dtype
    shape: tuple
    seed: int
    tolerance: Tolerance | None
    comparisons: list[Comparison] = field(default_factory=list)
    error: str = ""  # the op (or the reference) raised this

    @property
    def passed(self) -> bool:
        return not self.error and all(c.passed for c in self.comparisons)

    @property
    def shape_text(self) -> str:
        return "x".join(map(str, self.shape)) if self.shape else "scalar"


@dataclass
class CheckReport(Rendered):
    """What wb.check found: a CaseResult per case. print() it for a table (workbench.report
    renders it); rows() and error_histograms() are what check.csv and check_errors.csv hold."""

    target: str
    device: str
    seed: int
    cases: list[CaseResult] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def passed(self) -> bool:
        return bool(self.cases) and all(c.passed for c in self.cases)

    @property
    def failures(self) -> list[CaseResult]:
        return [c for c in self.cases if not c.passed]

    def rows(self) -> list[dict]:
        """One row per compared tensor: the table behind the report, and check.csv's rows."""
        rows = []
        for case in self.cases:
            base = {"kernel": case.kernel, "op": case.op, "dtype": dtype_name(case.dtype), "shape": case.shape_text,
                    "seed": case.seed, "device": self.device}
            tol_cols = _tolerance_columns(case.tolerance)
            if case.error:
                rows.append({**base, "what": "output", **tol_cols, "max_abs": "", "max_rel": "", "rel_l2": "",
                             "mismatched": "", "numel": "", "passed": False, "detail": case.error})
                continue
            for c in case.comparisons:
                detail = c.reason
                if c.first_mismatches:
                    detail += "; first: " + "; ".join(str(m) for m in c.first_mismatches)
                # a gradient is judged by its own tolerance where the spec gives one
                judged_by = _tolerance_columns(c.tolerance) if c.tolerance is not None else tol_cols
                rows.append({**base, "what": c.what, **judged_by, "max_abs": c.max_abs, "max_rel": c.max_rel,
                             "rel_l2": c.rel_l2, "mismatched": c.mismatched, "numel": c.numel,
                             "passed": c.passed, "detail": detail})
        return rows

    def error_histograms(self) -> list[dict]:
        """Relative-error counts per (kernel, op, what, dtype) over all shapes, in the log10 bins
        of workbench.harness.compare: what the error-distribution plot draws."""
        edges = histogram_edges()
        sums: dict[tuple, list[int]] = {}
        tols: dict[tuple, Tolerance | None] = {}
        for case in self.cases:
            for c in case.comparisons:
                if not c.histogram:
                    continue
                key = (case.kernel, case.op, c.what, dtype_name(case.dtype))
                acc = sums.setdefault(key, [0] * len(c.histogram))
                sums[key] = [a + b for a, b in zip(acc, c.histogram)]
                tols[key] = c.tolerance or case.tolerance
        rows = []
        for (kernel, op, what, dtype), counts in sums.items():
            tol = tols[(kernel, op, what, dtype)]
            for i, count in enumerate(counts):
                if count:
                    rows.append({"kernel": kernel, "op": op, "what": what, "dtype": dtype, "log10_lo": edges[i], "log10_hi": edges[i + 1],
                                 "count": count, "rtol": tol.rtol if tol else "", "device": self.device})
        return rows


# ---- one case ---------------------------------------------------------------------------


def _detached(args, dtype_fn=None, grad_inputs=()) -> list:
    """The arguments detached (cast by dtype_fn), those at grad_inputs fresh leaves needing grad."""
    out = []
    for a in args:
        if isinstance(a, torch.Tensor):
            a = a.detach()
            if dtype_fn is not None:
                a = dtype_fn(a)
        out.append(a)
    for i in grad_inputs:
        out[i] = out[i].clone().requires_grad_(True)
    return out


def run_case(case: Case) -> CaseResult:
    """Run the case's fn and reference on its arguments and compare everything they return."""
    result = CaseResult(case.kernel, case.op, case.dtype, tuple(case.shape), case.seed, case.tolerance)
    grad_inputs = case.grad_inputs
    try:
        with torch.no_grad():  # what the plain PyTorch op returns: the dtypes to expect
            expected = [t.dtype if isinstance(t, torch.Tensor) else None for t in as_list(case.reference(*case.args))]
    except Exception:  # noqa: BLE001 - e.g. a CPU op without half support: then dtypes are not checked
        expected = None

    leaves = _detached(case.args, grad_inputs=grad_inputs)
    try:
        with poisoned_outputs(), torch.enable_grad() if grad_inputs else torch.no_grad():
            outs = as_list(case.fn(*leaves))
            grads = None
            if grad_inputs:
                diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
                if not diff:
                    raise RuntimeError(f"none of its outputs requires grad, though arguments {list(grad_inputs)} do: is autograd registered?")
                gen = generator_for(diff[0].device, case.seed ^ 0x5EED)
                g_out = [torch.randn(o.shape, generator=gen, dtype=torch.float64, device=o.device).to(o.dtype) for o in diff]
                grads = torch.autograd.grad(diff, [leaves[i] for i in grad_inputs], g_out, allow_unused=True)
    except Exception as e:  # noqa: BLE001 - the kernel's op may raise anything: the case records it
        result.error = error_text(e)
        return result

    up = _detached(case.args, dtype_fn=upcast, grad_inputs=grad_inputs)
    try:
        with torch.enable_grad() if grad_inputs else torch.no_grad():
            refs = as_list(case.reference(*up))
            ref_grads = None
            if grad_inputs:
                ref_diff = [r for r, o in zip(refs, outs) if isinstance(o, torch.Tensor) and o.requires_grad]
                ref_grads = torch.autograd.grad(ref_diff, [up[i] for i in grad_inputs], [g.double() for g in g_out], allow_unused=True)
    except Exception as e:  # noqa: BLE001 - the reference is the spec's code: the case records what it raised
        result.error = f"the reference raised {error_text(e)}"
        return result

    if len(outs) != len(refs):
        result.error = f"returned {len(outs)} outputs, the reference {len(refs)}"
        return result
    eager: list = []  # eager PyTorch's outputs and gradients at the case's dtype, made when first needed

    def judged(got, ref, tol, what, want, k):
        verdict = compare(got, ref, tol, what, want)
        if verdict.passed:
            return verdict
        if not eager:
            eager.append(_eager_run(case, g_out if grads is not None else None))
        mine = eager[0][k] if eager[0] is not None and k < len(eager[0]) else None
        return compare_with_eager(got, mine, ref, tol, what, want)

    for i, (o, r) in enumerate(zip(outs, refs)):
        want = expected[i] if expected is not None and i < len(expected) else None
        result.comparisons.append(judged(o, r, case.tolerance, output_label(i, len(outs)), want, i))
    if grads is not None:
        for j, (g, rg) in enumerate(zip(grads, ref_grads)):
            name = case.grad_names[j] if j < len(case.grad_names) else f"arg{grad_inputs[j]}"
            if g is None or rg is None:
                if (g is None) != (rg is None):
                    result.comparisons.append(Comparison(f"grad {name}", False, "no gradient" if g is None else "a gradient where the reference has none"))
                continue
            result.comparisons.append(judged(g, rg, case.grad_tolerance or case.tolerance, f"grad {name}",
                                             leaves[grad_inputs[j]].dtype, len(outs) + j))
    return result


def _eager_run(case: Case, g_out) -> list | None:
    """The reference run as written, at the case's own dtype (eager PyTorch): its outputs, then
    its gradients of g_out; None where it cannot run so (a CPU op without half support)."""
    leaves = _detached(case.args, grad_inputs=case.grad_inputs)
    try:
        with torch.enable_grad() if g_out is not None else torch.no_grad():
            outs = as_list(case.reference(*leaves))
            if g_out is None:
                return outs
            diff = [o for o in outs if isinstance(o, torch.Tensor) and o.requires_grad]
            grads = torch.autograd.grad(diff, [leaves[i] for i in case.grad_inputs], [g.to(d.dtype) for g, d in zip(g_out, diff)],
                                        allow_unused=True)
    except Exception:  # noqa: BLE001 - the reference is the spec's code: no reference for this dtype then
        return None
    return outs + list(grads)


# ---- kernels with a spec ---------------------------------------------------------------------


def _grad_names(kernel, op: OpSpec) -> list[str]:
    fn = getattr(kernel, op.kernel_op)
    try:
        if hasattr(fn, "default"):  # a dispatcher op: its schema's argument names
            names = [a.name for a in fn.default._schema.arguments]
        else:  # a public Python function of the kernel's ops.py
            names = list(inspect.signature(fn).parameters)
        return [names[i] for i in op.grad_inputs]
    except Exception:  # noqa: BLE001 - only names for messages: fall back to positions
        return [f"arg{i}" for i in op.grad_inputs]


def _check_kernel(kernel, device: str, ops, dtypes, shapes, seed: int, backward: bool, progress) -> CheckReport:
    spec = spec_of(kernel)
    report = CheckReport(kernel.name, device, seed)
    chosen_ops = select_ops(spec, ops, kernel.name)
    chosen_dtypes = select_dtypes(spec, dtypes, device, kernel.name)
    chosen_shapes = [tuple(s) for s in (shapes or spec.shapes)]
    for op in chosen_ops:
        fn = getattr(kernel, op.kernel_op)
        grad_inputs = op.grad_inputs if backward else ()
        names = tuple(_grad_names(kernel, op))
        for dtype in chosen_dtypes:
            for shape in chosen_shapes:
                s = case_seed(seed, op.name, dtype_name(dtype), shape)
                try:  # a spec that cannot make this case (no tolerance, a bad generator) fails it, not the run
                    case = Case(kernel.name, op.name, fn, op.reference,
                                draw_inputs(op.make_inputs, shape, dtype, device, s), dtype,
                                tuple(shape), s, op.tolerance(dtype), grad_inputs,
                                op.tolerance(dtype, grad=True) if grad_inputs else None, names)
                except Exception as e:  # noqa: BLE001 - the spec's code may raise anything
                    report.cases.append(CaseResult(kernel.name, op.name, dtype, tuple(shape), s, None, error=f"spec: {error_text(e)}"))
                else:
                    report.cases.append(run_case(case))
                if progress:
                    progress()
    missing = [n for n in AWKWARD_SIZES if not any(shape and shape[-1] == n for shape in chosen_shapes)]
    if missing:
        report.notes.append(f"the shapes checked have no last dimension of {', '.join(map(str, missing))}: "
                            "add them (empty, 1 and odd sizes catch most indexing bugs)")
    return report


# ---- a function of your own ----------------------------------------------------------------


def _check_function(fn: Callable, reference: Callable, inputs, device, dtypes, shapes, seed: int, tolerance,
                    grad_inputs, name: str | None) -> CheckReport:
    name = name or getattr(fn, "__name__", None) or "function"
    try:
        params = list(inspect.signature(reference).parameters)
    except (TypeError, ValueError):
        params = []
    grad_names = tuple(params[i] if i < len(params) else f"arg{i}" for i in grad_inputs)
    if callable(inputs):
        dev = devices.choose(device, purpose="run", what=name)
        report = CheckReport(name, dev, seed)
        chosen_dtypes = parse_dtypes(dtypes) or ([torch.float32, torch.bfloat16] if dev == devices.CUDA else [torch.float32, torch.float64])
        chosen_shapes = [tuple(s) for s in (shapes or KernelSpec(ops=[]).shapes)]
        for dtype in chosen_dtypes:
            tol = tolerance_for(tolerance, dtype)
            for shape in chosen_shapes:
                s = case_seed(seed, name, dtype_name(dtype), shape)
                args = draw_inputs(inputs, shape, dtype, dev, s)
                report.cases.append(run_case(Case(name, name, fn, reference, args, dtype, shape, s, tol, grad_inputs,
                                                  None, grad_names)))
        return report
    sets = input_sets(inputs)
    first = first_tensor(sets[0])
    report = CheckReport(name, str(first.device.type) if first is not None else devices.CPU, seed)
    for k, args in enumerate(sets):
        t = first_tensor(args)
        dtype = t.dtype if t is not None else torch.float32
        report.cases.append(run_case(Case(name, name, fn, reference, tuple(args), dtype, tuple(t.shape) if t is not None else (),
                                          case_seed(seed, name, k), tolerance_for(tolerance, dtype), grad_inputs, None,
                                          grad_names)))
        if t is not None and all(isinstance(a, torch.Tensor) and a.is_floating_point() and a.numel() and not a.any()
                                 for a in args if isinstance(a, torch.Tensor)):
            report.notes.append(f"inputs #{k} are all zeros: an unwritten or mis-indexed output can pass on zeros; use random values")
    return report


def check(target, reference: Callable | None = None, *, inputs=None, device=None, ops=None, dtypes=None, shapes=None,
          seed: int | None = None, backward: bool = True, tolerance=None, grad_inputs: Sequence[int] = (),
          name: str | None = None, progress: Callable[[], None] | None = None) -> CheckReport:
    """Check a kernel (or a function) against its reference; returns a CheckReport.

    target: a kernel name or folder, a loaded Kernel, or a function (then give `reference`
        and `inputs`).
    device: "cpu" or "cuda"; default: the kernel's build device when a GPU is visible.
    ops, dtypes, shapes: subsets of the spec's (dtypes by name, "bf16" or torch.bfloat16).
    seed: the report's seed (printed in the report); every case's inputs derive from it.
    backward: also check gradients where the op has them.
    For a function: inputs is a tuple of arguments, a list of them, or a function
    (shape, dtype, device, generator) -> arguments (preferred: fresh random inputs per run),
    handed a generator on that device (a torch.Generator(device="cuda") for a CUDA check, so
    torch.randn(shape, device=device, generator=generator) works; a function that draws on
    the CPU and moves its result gets a CPU generator);
    tolerance is a Tolerance, a {dtype: Tolerance} dict or (atol, rtol), default per dtype;
    grad_inputs names the argument indices whose gradients to check.
    """
    seed = new_seed() if seed is None else int(seed)
    if callable(target) and reference is not None:
        if inputs is None:
            raise ValueError("inputs: checking a function needs inputs=: a tuple of arguments, a list of them, "
                             "or a function (shape, dtype, device, generator) -> arguments")
        return _check_function(target, reference, inputs, device, dtypes, shapes, seed, tolerance, tuple(grad_inputs), name)
    if reference is not None or inputs is not None:
        raise ValueError("reference= and inputs= are for checking a function; a kernel's come from its spec.py")
    kernel, device = kernel_and_device(target, device)
    return _check_kernel(kernel, device, ops, dtypes, shapes, seed, backward, progress)


def count_cases(kernel, device: str, ops=None, dtypes=None, shapes=None) -> int:
    spec = spec_of(kernel)
    return len(select_ops(spec, ops, kernel.name)) * len(select_dtypes(spec, dtypes, device, kernel.name)) * len(shapes or spec.shapes)
