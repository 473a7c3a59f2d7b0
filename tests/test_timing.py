"""The timing method's statistics on a synthetic timer: warm-up discarded, sample counts from
the budget, quantiles as numpy computes them, more samples when the spread is wide."""
from __future__ import annotations

import itertools
import random

import numpy as np
import pytest

from workbench import timing


class ScriptedTimer:
    """Returns the scripted seconds in order, then `then` forever; records each request."""

    method = "scripted"
    flush_warmup = False

    def __init__(self, script, then):
        self.script = list(script)
        self.then = then
        self.requests: list[int] = []
        self.flushes: list[bool] = []
        self.calls = 0

    def samples(self, fn, n, flush=True):
        self.requests.append(n)
        self.flushes.append(flush)
        out = []
        for _ in range(n):
            fn()
            self.calls += 1
            out.append(self.script.pop(0) if self.script else self.then())
        return out


@pytest.mark.parametrize("n", [1, 2, 5, 10, 11, 100, 999])
def test_quantiles_match_numpy(n):
    rng = random.Random(n)
    xs = [rng.lognormvariate(0, 0.5) for _ in range(n)]
    stats = timing.summarize(xs, "t")
    for q, got in ((50, stats.median), (20, stats.p20), (80, stats.p80)):
        assert got == pytest.approx(np.percentile(xs, q), rel=1e-12)
    assert stats.n == n


def test_warm_up_is_discarded_and_the_budget_sets_the_sample_count():
    # first call 1 s (compilation), warm-up calls 2 ms, then a steady 1 ms with known values
    steady = iter([1e-3 * (1 + i / 1000) for i in range(10_000)])
    timer = ScriptedTimer([1.0] + [2e-3] * 15, lambda: next(steady))
    stats = timing.measure(lambda: None, timer, budget_s=0.1, min_samples=10, max_samples=1000, warmup_s=0.025)
    # the first call alone, 3 probe calls (2 ms each), 25 ms of warm-up at that rate, then
    # the 0.1 s budget at that rate
    assert timer.requests == [1, timing.PROBE_CALLS, 12, 50]
    assert timer.flushes == [False, False, False, True]  # a CPU timer flushes its cache for the kept samples only
    assert stats.n == 50
    assert 1e-3 <= stats.p20 <= stats.median <= stats.p80 < 1.1e-3  # none of the 1 s or 2 ms samples


def test_at_least_min_samples_and_at_most_max():
    slow = ScriptedTimer([], lambda: 1.0)
    assert timing.measure(lambda: None, slow, budget_s=0.1, min_samples=7, max_samples=100, warmup_s=0.0).n == 7
    fast = ScriptedTimer([], lambda: 1e-9)
    assert timing.measure(lambda: None, fast, budget_s=1.0, min_samples=7, max_samples=300, warmup_s=0.0).n == 300


def test_a_wide_spread_asks_for_more_samples_up_to_the_cap():
    rng = random.Random(0)
    noisy = ScriptedTimer([], lambda: rng.choice([1e-3, 2e-3]))  # p20-p80 spread ~100%
    stats = timing.measure(lambda: None, noisy, budget_s=0.02, min_samples=10, max_samples=160, warmup_s=0.0)
    assert stats.n == 160 and len(noisy.requests) > 3


def test_per_call_divides_graph_replays():
    timer = ScriptedTimer([], lambda: 1e-3)
    stats = timing.measure(lambda: None, timer, per_call=100, min_samples=10, warmup_s=0.0, budget_s=0.0)
    assert stats.median == pytest.approx(1e-5)


def test_quantile_of_nothing_is_an_error():
    with pytest.raises(ValueError, match="no samples"):
        timing.summarize([], "t")


def test_the_cpu_timer_calls_the_function_once_per_sample():
    calls = []
    samples = timing.CpuTimer(flush=True).samples(lambda: calls.append(1), 4)
    assert len(samples) == 4 == len(calls) and all(s >= 0 for s in samples)


class SlowHostTimer(ScriptedTimer):
    """Each sample reads 1 us on the device but takes `host_s` of wall time to take."""

    def __init__(self, host_s):
        super().__init__([], lambda: 1e-6)
        self.host_s = host_s

    def samples(self, fn, n, flush=True):
        import time

        time.sleep(self.host_s * n)
        return super().samples(fn, n, flush)


def test_the_wall_budget_caps_samples_whose_host_time_dwarfs_them():
    # 1 us samples would ask for budget_s / 1 us = 1000 (the cap); at 2 ms of host time each,
    # a 0.05 s wall budget holds ~25
    timer = SlowHostTimer(2e-3)
    stats = timing.measure(lambda: None, timer, budget_s=0.2, min_samples=10, max_samples=1000, warmup_s=0.0, wall_s=0.05)
    assert 10 <= stats.n <= 30
    assert timing.measure(lambda: None, SlowHostTimer(2e-3), budget_s=0.2, min_samples=10, max_samples=1000,
                          warmup_s=0.0).n == 1000  # without wall_s: the sample budget alone


def test_widening_a_wide_spread_stops_at_its_wall_budget():
    rng = random.Random(1)
    noisy = SlowHostTimer(1e-3)
    noisy.then = lambda: rng.choice([1e-6, 2e-6])
    stats = timing.measure(lambda: None, noisy, budget_s=0.2, min_samples=10, max_samples=1000, warmup_s=0.0, wall_s=0.02)
    assert stats.n < 1000 and sum(noisy.requests) < 100


class DriftingTimer:
    """A machine that slows down as it is used: each sample takes the function's own cost times
    (1 + drift * samples taken so far), the way another process ramping up on a shared CPU looks."""

    method = "drifting"
    flush_warmup = False

    def __init__(self, drift=0.01):
        self.drift, self.taken, self.order = drift, 0, []

    def samples(self, fn, n, flush=True):
        out = []
        for _ in range(n):
            cost = fn()
            self.order.append(cost)
            out.append(cost * (1 + self.drift * self.taken))
            self.taken += 1
        return out


def test_functions_timed_in_turns_share_the_drift_that_one_after_the_other_hands_the_last():
    def kwb():
        return 1e-3

    def eager():
        return 2e-3  # truly twice kwb's time

    t = DriftingTimer()
    first, second = (timing.measure(f, t, min_samples=20, max_samples=20) for f in (kwb, eager))
    assert second.median / first.median > 2.4  # one after the other: eager pays for kwb's samples too
    timer = DriftingTimer()
    stats = timing.measure_interleaved({"kwb": kwb, "eager": eager}, timer, min_samples=20, max_samples=20)
    assert stats["kwb"].n == stats["eager"].n == 20
    assert abs(stats["eager"].median / stats["kwb"].median - 2) < 0.05
    rounds = [timer.order[-40:][i:i + 2] for i in range(0, 40, 2)]  # one sample of each a round,
    assert rounds == [[1e-3, 2e-3], [2e-3, 1e-3]] * 10  # and each goes first in every other round


class BatchingTimer(DriftingTimer):
    """A GPU-like timer: it records how many calls each samples() request queued in one batch."""

    BATCH = 32
    turn_s = 1e-3

    def __init__(self):
        super().__init__(drift=0.0)
        self.batches = []

    def samples(self, fn, n, flush=True):
        self.batches.append((fn(), n))
        return super().samples(fn, n, flush)


def test_in_turns_each_function_keeps_its_own_count_spread_evenly_and_a_wide_spread_widens_all():
    def fast():
        return 1e-4

    def slow():
        return 1e-2

    timer = DriftingTimer(drift=0.0)
    stats = timing.measure_interleaved({"fast": fast, "slow": slow}, timer, budget_s=0.002, min_samples=5, max_samples=50)
    # the budget gives fast 20 samples and slow 5, as measure() would: one slow sample every 4 rounds
    assert (stats["fast"].n, stats["slow"].n) == (20, 5)
    timed = timer.order[-25:]
    slow_at = [i for i, cost in enumerate(timed) if cost == 1e-2]
    assert len(slow_at) == 5 and all(3 <= b - a <= 6 for a, b in itertools.pairwise(slow_at))
    # where both run in a round they take turns going first, though slow runs every 4th round only
    assert {b - a for a, b in itertools.pairwise(slow_at)} == {4, 6}
    assert stats["slow"].median == pytest.approx(1e-2) and stats["fast"].median == pytest.approx(1e-4)

    # a GPU timer takes a function's share of a round in one batch of up to turn_s: fast 10 calls
    # (1 ms / 0.1 ms), slow 1; five rounds hold slow's 5 samples, so fast's 20 go 4 a round
    gpu = BatchingTimer()
    stats = timing.measure_interleaved({"fast": fast, "slow": slow}, gpu, budget_s=0.002, min_samples=5, max_samples=50)
    assert (stats["fast"].n, stats["slow"].n) == (20, 5)
    assert gpu.batches[-10:] == [(1e-4, 4), (1e-2, 1), (1e-2, 1), (1e-4, 4)] * 2 + [(1e-4, 4), (1e-2, 1)]

    # a wall-clock cap (a GPU's) caps each function's count by its own host seconds a sample
    capped = timing.measure_interleaved({"fast": fast, "slow": slow}, DriftingTimer(drift=0.0), budget_s=1.0,
                                        min_samples=5, max_samples=50, wall_s=1e-9)
    assert capped["fast"].n == capped["slow"].n == 5

    rng = random.Random(0)

    def noisy():
        return rng.choice([1e-3, 3e-3])

    def steady():
        return 1e-3

    wide = timing.measure_interleaved({"noisy": noisy, "steady": steady}, DriftingTimer(drift=0.0), budget_s=0.01,
                                      min_samples=5, max_samples=40)
    assert wide["noisy"].n == wide["steady"].n == 40  # the noisy one's spread widened both, to the cap
    # without a wall-clock cap (the CPU), widening reaches the cap even by fewer than min_samples more
    cpu = timing.measure_interleaved({"noisy": noisy, "steady": steady}, DriftingTimer(drift=0.0), budget_s=0.005,
                                     min_samples=5, max_samples=8)
    assert cpu["noisy"].n == cpu["steady"].n == 8
