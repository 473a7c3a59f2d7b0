"""One output against its reference: the errors, the verdict, and where it went wrong.

Errors are computed in float64 on the output's device:
    max_abs   max |out - ref| (inf where out has NaN/Inf and ref does not)
    max_rel   max |out - ref| / |ref| over the elements with |ref| >= atol (below that, the
              absolute tolerance governs and a ratio would only measure how close to 0 ref is)
    rel_l2    ||out - ref|| / max(||ref||, atol * sqrt(n))
An output passes when every element is within atol + rtol * |ref|, the whole tensor within
||out - ref|| <= rel_l2 * ||ref|| + atol * sqrt(n) (so a reference of zeros is judged by atol),
and it has NaN or Inf exactly where the reference has them. compare_with_eager also passes an
output no worse than eager PyTorch's own at the same dtype (eager_scaled).
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import torch

from .spec import Tolerance

# log10 bins of the relative error (elements with |ref| >= atol) for the error-distribution
# plot: 1e-16 .. 1e0 in quarter decades; the first bin also holds exact matches, the last
# everything from 1 up.
HIST_LO, HIST_HI, HIST_BINS = -16.0, 0.0, 64
MAX_SHOWN = 5  # mismatching elements listed in a failure


@dataclass
class Mismatch:
    index: tuple[int, ...]
    out: float
    ref: float

    def __str__(self) -> str:
        return f"[{', '.join(map(str, self.index))}]: got {self.out:.7g}, expected {self.ref:.7g}"


@dataclass
class Comparison:
    what: str  # "output", "output[1]", "grad x"
    passed: bool
    reason: str = ""  # why it failed, in one line; "" when passed
    max_abs: float = 0.0
    max_rel: float = 0.0
    rel_l2: float = 0.0
    mismatched: int = 0  # elements outside the tolerance (NaN/Inf mismatches included)
    numel: int = 0
    first_mismatches: list[Mismatch] = field(default_factory=list)
    histogram: list[int] = field(default_factory=list)  # counts per HIST bin
    tolerance: Tolerance | None = None  # what it was judged by (gradients may have their own)
    within_eager: str = ""  # passed by the eager rule (compare_with_eager): eager's error, in words


def histogram_edges() -> list[float]:
    step = (HIST_HI - HIST_LO) / HIST_BINS
    return [HIST_LO + i * step for i in range(HIST_BINS + 1)]


def _flat_index(i: int, shape: torch.Size) -> tuple[int, ...]:
    index = []
    for size in reversed(shape):
        index.append(i % size)
        i //= size
    return tuple(reversed(index)) if shape else ()


def compare(out, ref, tol: Tolerance, what: str = "output", expected_dtype: torch.dtype | None = None) -> Comparison:
    """Compare `out` (the kernel's) with `ref` (computed in higher precision)."""
    if not isinstance(out, torch.Tensor):
        if isinstance(ref, torch.Tensor):
            return Comparison(what, False, f"expected a tensor, got {type(out).__name__}")
        same = out == ref
        return Comparison(what, bool(same), "" if same else f"got {out!r}, expected {ref!r}")
    if not isinstance(ref, torch.Tensor):
        return Comparison(what, False, f"expected {type(ref).__name__}, got a tensor")
    if tuple(out.shape) != tuple(ref.shape):
        return Comparison(what, False, f"shape {list(out.shape)}, expected {list(ref.shape)}", numel=out.numel())
    if expected_dtype is not None and out.dtype != expected_dtype:
        return Comparison(what, False, f"dtype {out.dtype}, expected {expected_dtype}", numel=out.numel())
    n = out.numel()
    if n == 0:
        return Comparison(what, True, numel=0, tolerance=tol, histogram=[0] * HIST_BINS)

    o = out.detach().to(device=ref.device, dtype=torch.float64)
    r = ref.detach().to(torch.float64)
    finite_o, finite_r = torch.isfinite(o), torch.isfinite(r)
    both_finite = finite_o & finite_r
    # Non-finite values must agree exactly: NaN with NaN, +Inf with +Inf.
    same_nonfinite = (~finite_o & ~finite_r) & ((o == r) | (torch.isnan(o) & torch.isnan(r)))
    diff = torch.where(both_finite, (o - r).abs(), torch.zeros_like(o))
    relative = both_finite & (r.abs() >= max(tol.atol, 1e-300))
    rel = torch.where(relative, diff / r.abs().clamp_min(1e-300), torch.zeros_like(diff))
    within = both_finite & (diff <= tol.atol + tol.rtol * r.abs()) if tol.elementwise else both_finite
    bad = ~(within | same_nonfinite)
    mismatched = int(bad.sum())

    r_fin = torch.where(both_finite, r, torch.zeros_like(r))
    norm_ref = float(torch.linalg.vector_norm(r_fin))
    norm_diff = float(torch.linalg.vector_norm(diff))
    # relative to max(||ref||, atol * sqrt(n)): a reference of zeros (a gradient that vanishes on
    # a 3 x 1 LayerNorm) is measured in units of atol, as it is judged, not as 2e8 of nothing
    scale = max(norm_ref, tol.atol * math.sqrt(n))
    rel_l2 = norm_diff / scale if scale > 0 else (0.0 if norm_diff == 0 else math.inf)

    log_rel = torch.log10(rel[relative].clamp(min=10 ** HIST_LO, max=10 ** HIST_HI - 1e-12)).float()
    hist = torch.histc(log_rel, bins=HIST_BINS, min=HIST_LO, max=HIST_HI).long().tolist() if log_rel.numel() else [0] * HIST_BINS

    result = Comparison(
        what, True, numel=n, tolerance=tol, mismatched=mismatched, histogram=hist,
        max_abs=float(diff.max()), max_rel=float(rel.max()), rel_l2=rel_l2,
    )
    if mismatched:
        idx = torch.nonzero(bad.reshape(-1), as_tuple=False)[:MAX_SHOWN, 0].tolist()
        of, rf = o.reshape(-1), r.reshape(-1)
        result.first_mismatches = [Mismatch(_flat_index(i, out.shape), float(of[i]), float(rf[i])) for i in idx]
        nonfinite = int((~both_finite & ~same_nonfinite).sum())
        what_bad = f"{mismatched} of {n} elements outside {tol}"
        if nonfinite:  # a NaN where a number belongs is an unbounded error, not none
            result.max_abs = result.max_rel = result.rel_l2 = math.inf
            what_bad += f" ({nonfinite} of them NaN or Inf where the reference has a different value)"
        result.passed, result.reason = False, what_bad
    elif tol.rel_l2 is not None and norm_diff > tol.rel_l2 * norm_ref + tol.atol * math.sqrt(n):
        result.passed, result.reason = False, f"relative L2 error {rel_l2:.2e} above {tol.rel_l2:.0e}"
    return result


# A kernel's output that misses its spec's tolerance still passes when it is no worse than
# eager PyTorch's own output at the same dtype, both against the float64 reference: its
# elements within eager's worst error (plus rtol * |ref|) and its relative L2 error within
# eager's. linear_gelu's bf16 training step at 8192x4096 -> 16384: 25 of 67M grad_W elements
# outside atol 0.5, and eager's own grad_W as far out (docs: "Tolerances").
def eager_scaled(tol: Tolerance, eager: Comparison) -> Tolerance:
    """tol widened to eager PyTorch's own error against the same reference."""
    rel_l2 = None if tol.rel_l2 is None else max(tol.rel_l2, eager.rel_l2)
    return Tolerance(max(tol.atol, eager.max_abs), tol.rtol, rel_l2, tol.elementwise)


def compare_with_eager(out, eager_out, ref, tol: Tolerance, what: str = "output",
                       expected_dtype: torch.dtype | None = None, yardstick: str = "eager PyTorch") -> Comparison:
    """compare(out, ref, tol); where that fails, the verdict against eager_scaled(tol, eager's
    own comparison), its reason naming eager's error when it still fails. yardstick names
    eager_out where it is another library's output (a vendor's fused op)."""
    verdict = compare(out, ref, tol, what, expected_dtype)
    if verdict.passed or eager_out is None or verdict.reason.startswith(("shape", "dtype", "expected")):
        return verdict
    eager = compare(eager_out, ref, tol, what)
    if not math.isfinite(eager.max_abs) or eager.passed:
        return verdict  # eager meets the tolerance (or is broken itself): the kernel must too
    scaled = compare(out, ref, eager_scaled(tol, eager), what, expected_dtype)
    if scaled.passed:
        scaled.reason = ""
        owner = "eager's" if yardstick == "eager PyTorch" else f"{yardstick}'s"
        scaled.within_eager = f"within {owner} own error (max |err| {eager.max_abs:.3g}, rel L2 {eager.rel_l2:.2e})"
        return scaled
    verdict.reason += f"; {yardstick}'s own error: max |err| {eager.max_abs:.3g}, rel L2 {eager.rel_l2:.2e}"
    return verdict
