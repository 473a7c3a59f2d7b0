"""The correctness harness (wb.check): it passes right kernels and catches planted faults, on
real C++ ops (tests/fixtures/planted_faults) and on Python functions."""
from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch
from workbench.spec import DEFAULT_TOLERANCES, Tolerance, randn

import workbench as wb
from workbench.harness.compare import compare

FAULTS = Path(__file__).parent / "fixtures" / "planted_faults"


@pytest.fixture(scope="module")
def faults():
    return wb.load(FAULTS, device="cpu")


def _check(kernel, op, dtype="float32", **kw):
    return wb.check(kernel, ops=[op], dtypes=[dtype], seed=kw.pop("seed", 7), **kw)


def test_a_right_kernel_passes_on_every_awkward_shape(faults):
    report = wb.check(faults, ops=["correct"], seed=3)
    assert report.passed, str(report)
    shapes = {c.shape for c in report.cases}
    assert {(0,), (1,), (37,), (199,), (760,), (1128,)} <= shapes
    assert {c.dtype for c in report.cases} == {torch.float32, torch.float64}


def test_an_unwritten_element_fails_through_the_poisoned_output(faults):
    report = _check(faults, "skip_last")
    assert not report.passed
    failed = {c.shape for c in report.failures}
    assert (37,) in failed and (0,) not in failed  # an empty output has nothing to forget
    case = next(c for c in report.failures if c.shape == (37,))
    [cmp] = case.comparisons
    assert cmp.mismatched == 1 and math.isinf(cmp.max_abs)
    assert cmp.first_mismatches[0].index == (36,) and math.isnan(cmp.first_mismatches[0].out)
    assert "[36]: got nan" in str(report)


def test_poisoning_restores_the_callers_settings_even_when_the_op_raises():
    from workbench.harness.cases import poisoned_outputs

    torch.use_deterministic_algorithms(False)
    before = torch.utils.deterministic.fill_uninitialized_memory
    with pytest.raises(RuntimeError, match="boom"), poisoned_outputs():
        assert torch.are_deterministic_algorithms_enabled() and torch.empty(4).isnan().all()
        raise RuntimeError("boom")
    assert not torch.are_deterministic_algorithms_enabled()
    assert torch.utils.deterministic.fill_uninitialized_memory == before
    torch.use_deterministic_algorithms(True, warn_only=True)  # a caller's own setting survives too
    try:
        with poisoned_outputs():
            pass
        assert torch.are_deterministic_algorithms_enabled() and torch.is_deterministic_algorithms_warn_only_enabled()
    finally:
        torch.use_deterministic_algorithms(False)


def test_an_off_by_one_on_odd_sizes_fails_only_there(faults):
    report = _check(faults, "odd_tail", seed=11)
    failed = {c.shape for c in report.failures}
    assert failed and all(math.prod(s) % 2 == 1 and math.prod(s) > 1 for s in failed), failed
    assert (37,) in failed and (760,) not in failed and (1128,) not in failed
    case = next(c for c in report.failures if c.shape == (199,))
    assert case.comparisons[0].first_mismatches[0].index == (198,)


def test_the_tolerance_is_the_dtypes_own(faults):
    # bf16-level accuracy in a float32 op fails float32's tolerance ...
    report = _check(faults, "bf16_inside")
    assert not report.passed
    assert any(c.comparisons and c.comparisons[0].max_rel > 1e-4 for c in report.failures)
    # ... and would pass bf16's: the verdict is the tolerance, not the comparison.
    loose = wb.check(faults.bf16_inside, lambda x: x * 2, inputs=lambda s, d, dev, g: (randn(s, d, dev, g),),
                     dtypes=["float32"], device="cpu", tolerance=DEFAULT_TOLERANCES[torch.bfloat16], seed=7)
    assert loose.passed, str(loose)


def test_a_spec_that_cannot_make_a_case_fails_that_case_not_the_check(faults, monkeypatch):
    spec = faults.spec.SPEC
    op = spec.op("correct")
    monkeypatch.setattr(op, "tolerances", {torch.float64: Tolerance(1e-12, 1e-12)})
    report = wb.check(faults, ops=["correct"], seed=1)
    failed = {c.dtype for c in report.failures}
    assert failed == {torch.float32}  # float64 still checked, and passing
    assert "spec: KeyError: \"op 'correct' has no tolerance for float32 (its spec gives float64)" in report.failures[0].error


def test_a_nan_in_the_output_fails(faults):
    report = _check(faults, "nan_at_middle")
    case = next(c for c in report.cases if c.shape == (760,))
    assert not case.passed
    assert case.comparisons[0].first_mismatches[0].index == (380,)
    assert "NaN or Inf where the reference has a different value" in case.comparisons[0].reason


def test_relative_error_is_relative_and_the_l2_rule_respects_atol():
    tol = DEFAULT_TOLERANCES[torch.float32]  # atol 1e-6, rtol 1e-6, rel_l2 1e-6
    ref = torch.full((1000,), 0.01, dtype=torch.float64)
    cmp = compare((ref * (1 + 5e-7)).float(), ref, tol)
    assert cmp.max_rel == pytest.approx(5e-7, rel=0.1)  # not 5e-9: the error divided by |ref|
    # every element is within atol, so the tensor passes even though its relative L2 is large
    tiny = torch.full((1000,), 1e-3, dtype=torch.float64)
    assert compare((tiny + 9e-7).float(), tiny, tol).passed
    assert compare(torch.full((8,), 1e-7), torch.zeros(8, dtype=torch.float64), tol).passed  # a zero reference
    # a small bias on every element passes each one's rtol but not the whole tensor's
    big = torch.randn(10_000, dtype=torch.float64) + 10
    biased = compare(big * (1 + 1.5e-6), big, Tolerance(1e-6, 1e-5, 1e-6))
    assert not biased.passed and "relative L2 error 1.5" in biased.reason


def test_an_inf_where_the_reference_is_finite_fails():
    out = torch.tensor([1.0, float("inf")])
    cmp = compare(out, torch.tensor([1.0, 2.0], dtype=torch.float64), DEFAULT_TOLERANCES[torch.float32])
    assert not cmp.passed and cmp.first_mismatches[0].index == (1,) and math.isinf(cmp.max_abs)


def test_every_output_of_a_multi_output_op_is_compared():
    def mean_and_std(x):
        return x.mean(-1), x.std(-1)

    def wrong_std(x):
        return x.mean(-1), x.std(-1) * 1.01

    inputs = [(torch.randn(4, 33),)]
    assert wb.check(mean_and_std, mean_and_std, inputs=inputs, seed=0).passed
    bad = wb.check(wrong_std, mean_and_std, inputs=inputs, seed=0)
    [case] = bad.failures
    assert [(c.what, c.passed) for c in case.comparisons] == [("output[0]", True), ("output[1]", False)]


def test_nan_where_the_reference_has_nan_passes():
    out = torch.tensor([1.0, float("nan"), float("inf"), -float("inf")])
    assert compare(out, out.double(), DEFAULT_TOLERANCES[torch.float32]).passed
    assert not compare(out, torch.tensor([1.0, float("nan"), -float("inf"), -float("inf")], dtype=torch.float64),
                       DEFAULT_TOLERANCES[torch.float32]).passed


def test_a_wrong_output_dtype_fails(faults):
    report = _check(faults, "wrong_dtype")
    assert not report.passed
    assert "dtype torch.float64, expected torch.float32" in report.failures[0].comparisons[0].reason


def test_the_seed_reproduces_the_inputs_and_is_printed(faults):
    a = _check(faults, "bf16_inside", seed=123)
    b = _check(faults, "bf16_inside", seed=123)
    c = _check(faults, "bf16_inside", seed=124)
    errs = lambda r: [x.comparisons[0].max_abs for x in r.cases if x.comparisons]
    assert errs(a) == errs(b) and errs(a) != errs(c)
    assert "seed 123" in str(a) and "seed=123" in str(a)
    assert wb.check(faults, ops=["correct"]).seed != wb.check(faults, ops=["correct"]).seed  # fresh by default


def test_rows_are_the_table_and_histograms_count_every_element(faults):
    report = _check(faults, "odd_tail", seed=5)
    rows = report.rows()
    assert {"op", "dtype", "shape", "max_abs", "max_rel", "rel_l2", "atol", "rtol", "passed", "detail"} <= set(rows[0])
    bad = [r for r in rows if not r["passed"]]
    assert bad and all("first: [" in r["detail"] for r in bad)
    hist = report.error_histograms()  # elements with |ref| >= atol: all but a handful of randn values
    total = sum(r["numel"] for r in rows)
    assert 0.999 * total <= sum(h["count"] for h in hist) <= total


def test_gradients_are_checked_against_autograd_of_the_reference():
    class WrongGrad(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * 2

        @staticmethod
        def backward(ctx, g):
            return g * 3  # should be 2

    inputs = lambda s, d, dev, g: (randn(s, d, dev, g),)
    bad = wb.check(WrongGrad.apply, lambda x: x * 2, inputs=inputs, grad_inputs=(0,), device="cpu", dtypes=["float64"], seed=1)
    assert not bad.passed
    whats = {(c.what, c.passed) for case in bad.cases for c in case.comparisons}
    assert ("output", True) in whats and ("grad x", False) in whats
    good = wb.check(lambda x: x * 2, lambda x: x * 2, inputs=inputs, grad_inputs=(0,), device="cpu", seed=1)
    assert good.passed, str(good)


def test_kernel_gradients_run_through_the_registered_autograd():
    k = wb.load("relu_scale", device="cpu")
    report = wb.check(k, ops=["relu_scale"], dtypes=["float64"], seed=2)
    assert report.passed, str(report)
    assert any(c.what == "grad x" for case in report.cases for c in case.comparisons)


def test_a_python_function_that_leaves_an_element_unwritten_is_caught():
    def leaky(x):
        y = torch.empty_like(x)
        y[:-1] = x[:-1] * 2
        return y

    report = wb.check(leaky, lambda x: x * 2, inputs=[(torch.randn(5),), (torch.randn(64),)], seed=0)
    assert not report.passed and len(report.failures) == 2
    assert report.failures[0].comparisons[0].first_mismatches[0].index == (4,)


def test_given_inputs_of_zeros_get_a_note():
    report = wb.check(lambda x: x * 2, lambda x: x * 2, inputs=(torch.zeros(8),), seed=0)
    assert report.passed and any("all zeros" in n for n in report.notes)


def test_an_op_that_raises_is_a_failure_with_its_message(faults):
    report = wb.check(lambda x: faults.correct(x.half()), lambda x: x * 2, inputs=(torch.randn(4),), seed=0)
    assert not report.passed and "Half" in report.failures[0].error


@pytest.mark.parametrize("call,error,message", [
    (lambda k: wb.check(k, ops=["nope"]), ValueError, "ops: planted_faults has no op 'nope'.*its ops: correct"),
    (lambda k: wb.check(k, dtypes=["bf16"], device="cpu"), ValueError, "dtypes: planted_faults on cpu supports float32, float64; bfloat16"),
    (lambda k: wb.check(k, dtypes=["int8"]), ValueError, "dtype 'int8' is not one of"),
    (lambda k: wb.check(lambda x: x, lambda x: x), ValueError, "inputs: checking a function needs inputs="),
    (lambda k: wb.check(k, inputs=(torch.ones(1),)), ValueError, "are for checking a function"),
    (lambda k: wb.check(lambda x: x, lambda x: x, inputs=[1, 2]), ValueError, "inputs: give a tuple of arguments"),
])
def test_bad_arguments_are_named(faults, call, error, message):
    with pytest.raises(error, match=message):
        call(faults)


def test_a_kernel_without_a_spec_says_what_to_write(tmp_path):
    from conftest import write_tiny_kernel

    k = wb.load(write_tiny_kernel(tmp_path / "nospec"), device="cpu")
    with pytest.raises(wb.KwbError, match="has no spec.py with a SPEC"):
        wb.check(k)


def test_markdown_and_text_forms_show_the_verdict(faults):
    report = _check(faults, "skip_last")
    md = report._repr_markdown_()
    assert "| op | checked | dtype |" in md and "FAIL" in md and "Failures:" in md
    assert "FAIL planted_faults.skip_last output, float32, shape [37]" in str(report)


def test_a_norm_only_tolerance_forgives_one_outlier_but_not_a_nan():
    ref = torch.ones(10000, dtype=torch.float64)
    out = ref.clone()
    out[7] = 1.5  # one element far outside 1e-3, the norm barely moves
    strict, norm_only = Tolerance(1e-3, 1e-3, 1e-2), Tolerance(1e-3, 1e-3, 1e-2, elementwise=False)
    assert not compare(out, ref, strict).passed
    assert compare(out, ref, norm_only).passed
    out[8] = float("nan")
    assert not compare(out, ref, norm_only).passed
    out = ref * 1.1  # every element off by 10%: the norm catches it
    assert not compare(out, ref, norm_only).passed


def test_gradients_are_reported_with_the_tolerance_they_were_judged_by():
    k = wb.load("bias_gelu", device="cpu")
    report = wb.check(k, device="cpu", ops=["bias_gelu_tanh"], dtypes=["float32"], shapes=[(3, 37)], seed=0)
    assert report.passed, str(report)
    op = k.spec.SPEC.op("bias_gelu_tanh")
    by_what = {r["what"]: r for r in report.rows()}
    assert by_what["output"]["atol"] == op.tolerance(torch.float32).atol == 1e-6
    assert by_what["grad x"]["atol"] == by_what["grad bias"]["atol"] == op.tolerance(torch.float32, grad=True).atol == 1e-4
