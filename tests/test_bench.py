"""The timing harness (wb.bench) on the CPU: rows per provider, arithmetic of GB/s, % of the
ceiling and speedups, a wrong kernel refused before it is timed, and clear argument errors.
Nothing here asserts how fast anything is."""
from __future__ import annotations

from pathlib import Path

import pytest
import torch

import workbench as wb
from workbench.harness import benchmark, results

FAULTS = Path(__file__).parent / "fixtures" / "planted_faults"


@pytest.fixture(scope="module")
def session():
    return benchmark.new_session("cpu")


def _speedup(row: dict, base: dict):
    """What row's speedup over base must be: their ratio, or None where either timing is not
    trusted (this machine was busy while it was taken: timing.distrust)."""
    if row["trust"] or base["trust"]:
        return None
    return pytest.approx(base["median_us"] / row["median_us"])


def test_each_provider_gets_a_row_with_consistent_arithmetic(session):
    report = wb.bench("relu_scale", device="cpu", ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,), (1000,)],
                      session=session, seed=1)
    assert report.ok, report.rows
    got = {(r["provider"], r["numel"]) for r in report.rows}
    assert got == {(p, n) for p in ("kwb", "eager", "torch.compile") for n in (4096, 1000)}
    for r in report.rows:
        assert r["method"] == "perf_counter" and r["samples"] >= 5
        assert r["p20_us"] <= r["median_us"] <= r["p80_us"]
        nbytes = 2 * r["numel"] * 4  # relu_scale's bytes model: read x, write y
        assert r["gbps"] == pytest.approx(nbytes / (r["median_us"] * 1e-6) / 1e9)
        assert r["pct_of_ceiling"] == pytest.approx(100 * r["gbps"] / (session.ceiling / 1e9))
        assert r["device"] == "cpu" and r["torch"] == torch.__version__ and r["kwb_version"]
    for n in (4096, 1000):
        by = {r["provider"]: r for r in report.rows if r["numel"] == n}
        assert by["kwb"]["speedup_vs_eager"] == _speedup(by["kwb"], by["eager"])
        assert by["kwb"]["speedup_vs_compile"] == _speedup(by["kwb"], by["torch.compile"])
        assert by["eager"]["speedup_vs_eager"] == _speedup(by["eager"], by["eager"])
        for column in ("speedup_vs_eager", "speedup_vs_compile"):  # kwb's speedups carry their 95% interval
            k = by["kwb"]
            if k[column] is not None:
                assert k[f"{column}_lo"] <= k[column] <= k[f"{column}_hi"]
            assert by["eager"].get(f"{column}_lo") is None


def test_a_wrong_kernel_is_refused_before_it_is_timed(session):
    k = wb.load(FAULTS, device="cpu")
    report = wb.bench(k, ops=["odd_tail", "correct"], dtypes=["float32"], sizes=[(1001,)], baselines="none", session=session)
    by = {r["op"]: r for r in report.rows}
    assert by["odd_tail"]["status"].startswith("wrong result, not timed: 1 of 1001 elements")
    assert by["odd_tail"]["median_us"] is None
    assert by["correct"]["status"] == "ok" and by["correct"]["median_us"] > 0
    assert not report.ok


def test_a_function_of_your_own_is_timed_beside_its_reference(session):
    x = torch.randn(10_000)
    report = wb.bench(lambda t: t * 2, lambda t: t + t, inputs=(x,), name="double", session=session)
    assert {r["provider"] for r in report.rows} == {"kwb", "eager", "torch.compile"}
    kwb_row = next(r for r in report.rows if r["provider"] == "kwb")
    assert kwb_row["kernel"] == "double" and kwb_row["shape"] == "10000"
    assert kwb_row["gbps"] == pytest.approx(2 * 40_000 / (kwb_row["median_us"] * 1e-6) / 1e9)  # read x, write the output


def test_the_kernels_validation_run_is_poisoned(session):
    # An element the kernel never writes must not pass by luck in bench either (torch 2.11's
    # allocator handed skip_last the block the reference had just freed, right values inside).
    first_alloc_was_nan = []

    def kernel(x):
        y = torch.empty_like(x)
        first_alloc_was_nan.append(bool(y.isnan().all()))
        return y.copy_(x * 2)

    wb.bench(kernel, lambda x: x * 2, inputs=(torch.randn(100),), baselines="none", session=session)
    assert first_alloc_was_nan[0] is True
    assert not torch.are_deterministic_algorithms_enabled()  # and the timed runs are not poisoned


def test_every_output_is_validated_and_a_tolerance_pair_is_accepted(session):
    x = torch.randn(64, 33)

    def mean_std(t):
        return t.mean(-1), t.std(-1)

    def wrong_second(t):
        return t.mean(-1), t.std(-1) + 1

    report = wb.bench(wrong_second, mean_std, inputs=(x,), tolerance=(1e-5, 1e-5), baselines="eager", session=session)
    by = {r["provider"]: r for r in report.rows}
    assert by["kwb"]["status"].startswith("wrong result, not timed: output[1]")
    assert by["eager"]["status"] == "ok" and report.failures == [by["kwb"]]


def test_a_spec_that_cannot_set_up_a_size_fails_those_rows_only(session, monkeypatch):
    k = wb.load("relu_scale", device="cpu")
    op = k.spec.SPEC.op("relu_scale")
    real = op.make_inputs
    monkeypatch.setattr(op, "make_inputs", lambda shape, *a: real(shape, *a) if shape != (999,) else 1 / 0)
    report = wb.bench(k, ops=["relu_scale"], dtypes=["float32"], sizes=[(999,), (1000,)], baselines="eager", session=session)
    statuses = {(r["numel"], r["provider"]): r["status"] for r in report.rows}
    assert statuses[(999, "kwb")] == "error: spec: ZeroDivisionError: division by zero"
    assert statuses[(1000, "kwb")] == "ok" and statuses[(1000, "eager")] == "ok"


def test_a_vendor_route_and_a_flops_model_get_their_columns(session, monkeypatch):
    k = wb.load("relu_scale", device="cpu")
    op = k.spec.SPEC.op("relu_scale")
    monkeypatch.setattr(op, "vendor", lambda x, a: torch.nn.functional.relu(x) * a)
    monkeypatch.setattr(op, "vendor_name", "F.relu")
    monkeypatch.setattr(op, "flops", lambda shape, dtype: 2 * shape[0])  # a compare and a multiply
    report = wb.bench(k, ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)], baselines="eager,vendor", session=session)
    by = {r["provider"]: r for r in report.rows}
    assert set(by) == {"kwb", "eager", "F.relu"} and report.ok
    assert by["kwb"]["speedup_vs_vendor"] == _speedup(by["kwb"], by["F.relu"])
    assert by["kwb"]["tflops"] == pytest.approx(2 * 4096 / (by["kwb"]["median_us"] * 1e-6) / 1e12)
    # the column shows where any row has a speedup over the vendor route (a timing taken on busy
    # cores has none: timing.distrust)
    assert ("× vendor" in report._repr_markdown_()) == any(r["speedup_vs_vendor"] is not None for r in report.rows)


def test_a_vendor_route_of_another_device_is_not_timed(session, monkeypatch):
    """linear_gelu's cuBLASLt route is CUDA-only (on the CPU, _addmm_activation is another GELU)."""
    k = wb.load("relu_scale", device="cpu")
    op = k.spec.SPEC.op("relu_scale")
    monkeypatch.setattr(op, "vendor", lambda x, a: torch.nn.functional.relu(x) * a)
    monkeypatch.setattr(op, "vendor_name", "F.relu")
    monkeypatch.setattr(op, "vendor_device", "cuda")
    report = wb.bench(k, ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)], baselines="eager,vendor", session=session)
    assert {r["provider"] for r in report.rows} == {"kwb", "eager"} and report.ok
    assert benchmark.count_measurements(k, "cpu", ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)],
                                           baselines="eager,vendor") == 2
    monkeypatch.setattr(op, "vendor_device", "cpu")
    report = wb.bench(k, ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)], baselines="eager,vendor", session=session)
    assert {r["provider"] for r in report.rows} == {"kwb", "eager", "F.relu"}


@pytest.mark.parametrize("in_turns", [None, True, False])
def test_providers_are_timed_in_turns_unless_asked_one_after_another(in_turns, monkeypatch):
    """On the CPU kwb and its baselines are timed in turns by default (timing.measure_interleaved);
    in_turns=False times them one after the other (timing.measure), with the same rows."""
    session = benchmark.new_session("cpu", in_turns=in_turns)  # its copy ceiling is measured alone, before counting
    assert session.in_turns is (in_turns is not False)
    calls = {"interleaved": 0, "alone": 0}
    real_interleaved, real_measure = benchmark.timing.measure_interleaved, benchmark.timing.measure

    def interleaved(fns, *args, **kwargs):
        calls["interleaved"] += 1
        return real_interleaved(fns, *args, **kwargs)

    def alone(fn, *args, **kwargs):
        calls["alone"] += 1
        return real_measure(fn, *args, **kwargs)

    monkeypatch.setattr(benchmark.timing, "measure_interleaved", interleaved)
    monkeypatch.setattr(benchmark.timing, "measure", alone)
    x = torch.randn(513)
    report = wb.bench(lambda t: t * 2, lambda t: t + t, inputs=(x,), baselines="eager", session=session)
    assert report.ok and {r["provider"] for r in report.rows} == {"kwb", "eager"}
    if in_turns is False:
        assert calls["interleaved"] == 0 and calls["alone"] >= 2
    else:
        assert calls["interleaved"] >= 1 and calls["alone"] == 0


def test_spec_modules_are_importable_by_name_for_torch_compile():
    # torch.compile, inlining a spec's reference, finds the reference's globals (torch) through
    # sys.modules[fn.__module__]; without it every compile baseline failed on torch 2.11.
    import sys

    k = wb.load("relu_scale", device="cpu")
    reference = k.spec.SPEC.op("relu_scale").reference
    assert sys.modules[reference.__module__] is k.spec


def test_rows_save_to_the_devices_bench_csv(tmp_path, session):
    report = wb.bench("vector_add", device="cpu", dtypes=["float64"], sizes=[(512,)], baselines="eager", session=session)
    path = report.save(tmp_path)
    assert path == tmp_path / session.env.slug / "bench.csv"
    assert [r["provider"] for r in results.read(path)] == ["kwb", "eager"]
    assert "| op | dtype | size | provider |" in report._repr_markdown_()


@pytest.mark.parametrize("kwargs,message", [
    ({"baselines": "eager,numpy"}, "baselines: numpy is not one of eager, compile, vendor"),
    ({"dtypes": ["float16"]}, "dtypes: relu_scale on cpu supports float32, float64"),
    ({"ops": ["relu"]}, "ops: relu_scale has no op 'relu'"),
])
def test_bad_arguments_are_named(kwargs, message, session):
    with pytest.raises(ValueError, match=message):
        wb.bench("relu_scale", device="cpu", session=session, **kwargs)


def test_a_step_row_gets_bandwidth_from_the_specs_step_bytes_and_the_forward_keeps_its_own(session):
    report = wb.bench("polynomial_activation", device="cpu", ops=["polynomial_activation"], dtypes=["float32"],
                      sizes=[(5000,)], session=session, seed=4, backward=True, baselines="eager")
    assert report.ok, report.rows
    for r in report.rows:
        tensors = 5 if r["op"].endswith(" fwd+bwd") else 2  # step: x -> y, grad and x -> grad_x
        nbytes = tensors * 5000 * 4
        assert r["gbps"] == pytest.approx(nbytes / (r["median_us"] * 1e-6) / 1e9)
        assert r["pct_of_ceiling"] == pytest.approx(100 * r["gbps"] / (session.ceiling / 1e9))
    assert {r["op"] for r in report.rows} == {"polynomial_activation", "polynomial_activation fwd+bwd"}


def test_timing_a_function_needs_inputs():
    with pytest.raises(ValueError, match="inputs: timing a function needs inputs="):
        wb.bench(lambda x: x, lambda x: x)


def test_training_steps_get_rows_of_their_own_beside_both_baselines(session):
    report = wb.bench("relu_scale", device="cpu", ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)],
                      session=session, seed=3, backward=True)
    assert report.ok, report.rows
    steps = {r["provider"]: r for r in report.rows if r["op"] == "relu_scale fwd+bwd"}
    assert set(steps) == {"kwb", "eager", "torch.compile"}
    for r in steps.values():
        # relu_scale's spec has no step_bytes (its steps move different bytes past 2^22): no GB/s
        assert r["median_us"] > 0 and r["gbps"] is None and r["pct_of_ceiling"] is None
    assert steps["kwb"]["speedup_vs_compile"] == _speedup(steps["kwb"], steps["torch.compile"])
    plain = wb.bench("relu_scale", device="cpu", ops=["relu_scale"], dtypes=["float32"], sizes=[(4096,)],
                     session=session, seed=3, baselines="none")
    assert {r["op"] for r in plain.rows} == {"relu_scale"}  # backward=False: forward rows only


def test_a_training_step_with_a_wrong_gradient_is_refused(session, monkeypatch):
    # (x + |x|) / 2 is relu exactly, but its gradient at 0 is 1/2 where the kernel's (torch.relu's)
    # is 0; the spec's inputs hold exact zeros, so the step's gradient must disagree while the
    # forward agrees
    import dataclasses
    import types

    k = wb.load("relu_scale", device="cpu")
    op = dataclasses.replace(k.spec.SPEC.op("relu_scale"), reference=lambda x, alpha: (x + x.abs()) / 2 * alpha)
    monkeypatch.setattr(k, "_spec", types.SimpleNamespace(SPEC=wb.spec.KernelSpec(ops=[op])))
    report = wb.bench(k, device="cpu", dtypes=["float32"], sizes=[(5000,)], baselines="none", session=session,
                      seed=1, backward=True)
    by = {r["op"]: r for r in report.rows}
    assert by["relu_scale"]["status"] == "ok"
    assert by["relu_scale fwd+bwd"]["status"].startswith("wrong result, not timed: output[1]")  # the gradient
    assert by["relu_scale fwd+bwd"]["median_us"] is None


def test_count_measurements_counts_training_steps():
    k = wb.load("relu_scale", device="cpu")
    fwd = benchmark.count_measurements(k, "cpu", dtypes=[torch.float32], sizes=[(10,)])
    both = benchmark.count_measurements(k, "cpu", dtypes=[torch.float32], sizes=[(10,)], backward=True)
    assert (fwd, both) == (6, 9)  # relu_scale and relu_scale_backward x 3 providers, + relu_scale's step x 3


class _CallTimer:
    """Each sample is the function's return value: a replay of k calls returns k times a call's seconds."""

    method = "synthetic"
    flush_warmup = False

    def samples(self, fn, n, flush=True):
        return [fn() for _ in range(n)]


@pytest.mark.parametrize("in_turns", [True, False])
def test_graph_replays_are_timed_in_turns_a_call_at_a_time_and_a_failing_replay_fails_its_row_only(in_turns):
    s = benchmark.Session("cpu", env=results.environment("cpu"), ceiling=1e9, in_turns=in_turns)
    s.timer = _CallTimer()

    def broken():
        raise RuntimeError("replay failed")

    replays = {"kwb": (lambda: 100 * 2e-6, 100), "eager": (lambda: 50 * 3e-6, 50)}
    stats = benchmark._replay_stats(replays, s)
    assert stats["kwb"].median == pytest.approx(2e-6) and stats["eager"].median == pytest.approx(3e-6)
    assert bool(stats["kwb"].rounds) == in_turns  # paired by round only when timed in turns
    if in_turns:
        assert set(stats["eager"].rounds) <= set(stats["kwb"].rounds)
    stats = benchmark._replay_stats({**replays, "torch.compile": (broken, 10)}, s)
    assert stats["torch.compile"] == "RuntimeError: replay failed"
    assert stats["kwb"].median == pytest.approx(2e-6) and stats["eager"].median == pytest.approx(3e-6)
