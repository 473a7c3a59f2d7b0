"""The eager rule: an output that misses its spec's tolerance passes when it is no worse than
eager PyTorch's own output against the same float64 reference, and only then."""
from __future__ import annotations

import pytest
import torch
from workbench.spec import Tolerance

import workbench as wb
from workbench.harness.compare import compare, compare_with_eager, eager_scaled

TOL = Tolerance(1e-2, 1e-2, 1e-3)


def _ref_and_noise(seed: int, scale: float, n: int = 4099) -> tuple[torch.Tensor, torch.Tensor]:
    g = torch.Generator().manual_seed(seed)
    ref = torch.randn(n, generator=g, dtype=torch.float64)
    return ref, ref + scale * torch.randn(n, generator=g, dtype=torch.float64)


def test_an_output_no_worse_than_eager_passes_and_says_so():
    ref, eager = _ref_and_noise(0, 0.05)
    kernel = ref + 0.5 * (eager - ref)  # half of eager's error, element by element
    assert not compare(kernel, ref, TOL).passed
    verdict = compare_with_eager(kernel, eager, ref, TOL)
    assert verdict.passed and "within eager's own error" in verdict.within_eager
    assert verdict.tolerance.atol == eager_scaled(TOL, compare(eager, ref, TOL)).atol > TOL.atol


def test_an_output_worse_than_eager_fails_naming_eagers_error():
    ref, eager = _ref_and_noise(1, 0.05)
    kernel = ref + 3 * (eager - ref)
    verdict = compare_with_eager(kernel, eager, ref, TOL)
    assert not verdict.passed and "eager PyTorch's own error: max |err|" in verdict.reason


def test_where_eager_meets_the_tolerance_the_kernel_must_too():
    ref, eager = _ref_and_noise(2, 1e-6)
    kernel = ref + 0.05
    verdict = compare_with_eager(kernel, eager, ref, TOL)
    assert not verdict.passed and "eager" not in verdict.reason


def test_wrong_shapes_and_nans_are_never_excused():
    ref, eager = _ref_and_noise(3, 0.05)
    assert not compare_with_eager(ref[:-1], eager, ref, TOL).passed
    broken = ref.clone()
    broken[7] = float("nan")
    assert not compare_with_eager(broken, eager, ref, TOL).passed


def test_check_passes_a_function_as_close_as_eager_at_its_dtype():
    """wb.check on a bf16 function that rounds as eager does (a sum over a long row in bf16)
    with a tolerance tighter than bf16 allows: the rule, not luck, passes it."""
    def summed(x):  # the reference, as eager runs it in bf16
        return x.cumsum(-1)

    def kernel(x):  # the same sum, rounded the same way
        return x.cumsum(-1)

    tight = {torch.bfloat16: Tolerance(1e-4, 1e-4, 1e-5)}
    report = wb.check(kernel, summed, inputs=lambda s, d, dev, g: (torch.randn(s, generator=g, device=dev).to(d),),
                      dtypes=["bfloat16"], shapes=[(3, 4096)], tolerance=tight, device="cpu", seed=0)
    assert report.passed, report
    wrong = wb.check(lambda x: x.cumsum(-1) * 1.05, summed, inputs=lambda s, d, dev, g: (torch.randn(s, generator=g, device=dev).to(d),),
                     dtypes=["bfloat16"], shapes=[(3, 4096)], tolerance=tight, device="cpu", seed=0)
    assert not wrong.passed


def test_a_reference_of_zeros_gives_an_error_in_units_of_atol_not_a_huge_ratio():
    ref = torch.zeros(3, 1, dtype=torch.float64)
    out = torch.full((3, 1), 1e-7, dtype=torch.float32)
    verdict = compare(out, ref, Tolerance(1e-5, 1e-5, 1e-5))
    assert verdict.passed and verdict.rel_l2 == pytest.approx(1e-7 / 1e-5)  # ||d|| / (atol * sqrt(n))


def test_the_check_table_names_the_shape_of_the_worst_error():
    from workbench.report.render import check_groups, check_text

    report = wb.check(lambda x: x * 2 + (x.numel() == 199) * 1e-4, lambda x: x * 2, device="cpu", dtypes=["float32"],
                      shapes=[(37,), (199,), (760,)], tolerance=Tolerance(1e-3, 1e-3, 1e-3), seed=0,
                      inputs=lambda s, d, dev, g: (torch.randn(s, generator=g, device=dev).to(d),))
    (group,) = check_groups(report)
    assert group["worst"] == "199" and "rel L2" in check_text(report) and " at 199" in check_text(report)


def _validation_case(reference, yardsticks=()):
    from workbench.harness.cases import Case

    g = torch.Generator().manual_seed(5)
    x = torch.randn(4099, generator=g, dtype=torch.float32)
    case = Case("k", "op", None, reference, (x,), torch.float32, (4099,), 5, Tolerance(1e-6, 1e-6, 1e-7))
    case.yardsticks = yardsticks
    return case, x


def test_bench_passes_a_kernel_as_far_off_as_the_vendor_op_and_no_further():
    """bench validates kwb against eager's error, then against the vendor's (the fused op kwb may
    call itself): a kernel with the vendor's error is timed; one with 3 times it is not, and the
    reason names the vendor's error."""
    from workbench.harness.benchmark import KWB, _validation_error

    def exact(x):
        return x * 2

    noise = 1e-4 * torch.randn(4099, generator=torch.Generator().manual_seed(6))

    def vendor(x):  # a vendor op with its own rounding, beyond the tolerance
        return x * 2 + noise

    case, _ = _validation_case(exact, (("vendor_op", vendor),))
    refs = [exact(a.double()) for a in case.args]
    wrong, excuse = _validation_error(KWB, vendor, case, refs, [torch.float32])
    assert wrong is None and excuse.startswith("within vendor_op's own error (max |err|")
    wrong, excuse = _validation_error(KWB, lambda x: x * 2 + 3 * noise, case, refs, [torch.float32])
    assert wrong is not None and "vendor_op's own error: max |err|" in wrong and not excuse
    bare, _ = _validation_case(exact)  # no vendor: the same kernel is not excused
    assert _validation_error(KWB, vendor, bare, refs, [torch.float32])[0] is not None


def test_bench_skips_a_yardstick_that_raises_and_names_each_one_missed():
    """A vendor op that cannot run on these inputs excuses nothing and is no error of the kernel's;
    where eager and the vendor both miss, the reason gives both their errors."""
    from workbench.harness.benchmark import KWB, _validation_error

    g = torch.Generator().manual_seed(7)
    eager_noise, vendor_noise = 1e-5 * torch.randn(4099, generator=g), 1e-4 * torch.randn(4099, generator=g)

    def broken(x):
        raise RuntimeError("no kernel image for this device")

    case, _ = _validation_case(lambda x: x * 2 + eager_noise, (("broken_op", broken), ("vendor_op", lambda x: x * 2 + vendor_noise)))
    refs = [a.double() * 2 for a in case.args]
    wrong, excuse = _validation_error(KWB, lambda x: x * 2 + 10 * vendor_noise, case, refs, [torch.float32])
    assert "eager PyTorch's own error" in wrong and "vendor_op's own error" in wrong and "broken_op" not in wrong
    wrong, excuse = _validation_error(KWB, lambda x: x * 2 + vendor_noise, case, refs, [torch.float32])
    assert wrong is None and "vendor_op's own error" in excuse


def test_run_page_lists_the_rows_a_yardstick_excused():
    from workbench.harness import results
    from workbench.report.folder import index_text

    note = "linear_gelu.linear_gelu_tanh float32 8192x4096x16384: kwb's output passed within addmm_activation's own error"
    page = index_text(results.environment("cpu"), "kwb run", "", [], [], [], [], None, notes=[note])
    assert f"- {note}" in page


def test_a_row_a_yardstick_excuses_is_noted_in_the_plan_and_the_report_text():
    """_rejected passes the kernel's output within the vendor op's error and says so in the
    plan's notes, which the bench report carries and prints."""
    from workbench.harness import results
    from workbench.harness.benchmark import KWB, BenchReport, Plan, Session, _rejected
    from workbench.report.render import bench_text

    noise = 1e-4 * torch.randn(4099, generator=torch.Generator().manual_seed(6))

    def exact(x):
        return x * 2

    case, _ = _validation_case(exact, (("vendor_op", lambda x: x * 2 + noise),))
    refs = [exact(a.double()) for a in case.args]
    plan = Plan(Session("cpu", results.environment("cpu"), ceiling=1e10))
    assert _rejected(case, KWB, lambda x: x * 2 + noise, plan, refs, [torch.float32]) is None
    assert len(plan.notes) == 1 and "k.op float32 4099: kwb's output passed within vendor_op's own error" in plan.notes[0]
    assert _rejected(case, KWB, exact, plan, refs, [torch.float32]) is None and len(plan.notes) == 1  # exact: no note
    report = BenchReport(plan.session.env, plan.session.ceiling, [], plan.notes)
    assert f"note: {plan.notes[0]}" in bench_text(report)
