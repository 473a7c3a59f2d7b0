"""The speedup's confidence interval (harness/intervals.py): it brackets the truth on synthetic
timings, pairing by round narrows it where the machine drifts between rounds, too few samples
give none, and measure_interleaved hands it the rounds; the report says which rows are behind."""
from __future__ import annotations

import random

import pytest

from workbench.harness import intervals, timing
from workbench.report import render


def _timed(cost: float, drift: list[float], noise: float, rng: random.Random, paired: bool = True) -> timing.Stats:
    """A sample per round: cost times the round's drift times (1 + noise * N(0, 1))."""
    samples = [cost * d * (1 + noise * rng.gauss(0, 1)) for d in drift]
    return timing.summarize(samples, "synthetic", rounds=range(len(drift)) if paired else ())


@pytest.mark.parametrize("true_speedup", [0.95, 1.0, 1.05])
def test_the_interval_brackets_the_true_speedup_and_the_verdict_follows(true_speedup):
    rng = random.Random(7)
    drift = [1 + 0.2 * rng.random() for _ in range(60)]
    base = _timed(1e-3, drift, 0.01, rng)
    mine = _timed(1e-3 / true_speedup, drift, 0.01, rng)
    lo, hi = intervals.speedup_interval(base, mine)
    assert lo <= base.median / mine.median <= hi
    assert lo <= true_speedup <= hi and hi - lo < 0.04
    assert intervals.verdict((lo, hi)) == {0.95: "behind", 1.0: "level", 1.05: "ahead"}[true_speedup]


def test_pairing_by_round_sees_through_drift_that_unpaired_samples_cannot():
    # the machine's speed moves by up to 30% between rounds; kwb is 2% faster within every round
    rng = random.Random(3)
    drift = [1 + 0.3 * rng.random() for _ in range(40)]
    base, mine = _timed(1e-3, drift, 0.002, rng), _timed(0.98e-3, drift, 0.002, rng)
    paired = intervals.speedup_interval(base, mine)
    unpaired = intervals.speedup_interval(timing.summarize(base.samples, "synthetic"), timing.summarize(mine.samples, "synthetic"))
    assert intervals.verdict(paired) == "ahead"
    assert intervals.verdict(unpaired) == "level"
    assert paired[1] - paired[0] < (unpaired[1] - unpaired[0]) / 3


def test_the_same_samples_give_the_same_interval():
    rng = random.Random(5)
    drift = [1.0] * 20
    base, mine = _timed(1e-3, drift, 0.05, rng), _timed(1e-3, drift, 0.05, rng)
    assert intervals.speedup_interval(base, mine) == intervals.speedup_interval(base, mine)


def test_too_few_samples_or_none_give_no_interval():
    four = timing.summarize([1e-3] * 4, "synthetic", rounds=range(4))
    ten = timing.summarize([1e-3] * 10, "synthetic", rounds=range(10))
    assert intervals.speedup_interval(four, ten) is None
    assert intervals.speedup_interval(timing.Stats(1e-3, 1e-3, 1e-3, 10, "synthetic"), ten) is None
    assert intervals.verdict(None) == ""


def test_rounds_shared_by_too_few_samples_fall_back_to_unpaired():
    # base timed in rounds 0-9, mine in 100-109: nothing to pair, each side drawn on its own
    base = timing.summarize([1e-3 * (1 + 0.01 * i) for i in range(10)], "synthetic", rounds=range(10))
    mine = timing.summarize([1e-3 * (1 + 0.01 * i) for i in range(10)], "synthetic", rounds=range(100, 110))
    lo, hi = intervals.speedup_interval(base, mine)
    assert lo < 1 < hi


class RoundTimer:
    """Each call costs the function's value times the current round's speed; a round is one pass
    over the functions (the test reads timing's own rounds back from the samples)."""

    method = "synthetic"
    flush_warmup = False

    def __init__(self):
        self.calls = 0

    def samples(self, fn, n, flush=True):
        self.calls += n
        return [fn() for _ in range(n)]


def test_measure_interleaved_records_the_round_of_every_sample():
    stats = timing.measure_interleaved({"kwb": lambda: 1e-3, "eager": lambda: 4e-3}, RoundTimer(), budget_s=0.02,
                                       min_samples=5, max_samples=50)
    kwb, eager = stats["kwb"], stats["eager"]
    assert (kwb.n, eager.n) == (20, 5)
    assert len(kwb.rounds) == len(kwb.samples) == 20 and len(eager.rounds) == 5
    assert list(kwb.rounds) == sorted(kwb.rounds) and len(set(kwb.rounds)) == 20  # one kwb sample a round
    assert set(eager.rounds) <= set(kwb.rounds)  # every eager sample shares its round with a kwb one
    assert timing.measure(lambda: 1e-3, RoundTimer(), min_samples=5, max_samples=5).rounds == ()


def _row(op: str, speedup: float, lo: float | None, hi: float | None, method: str = "cuda_events") -> dict:
    return {"kernel": "k", "op": op, "dtype": "float32", "shape": "1048576", "provider": "kwb", "method": method,
            "speedup_vs_compile": speedup, "speedup_vs_compile_lo": lo, "speedup_vs_compile_hi": hi,
            "speedup_vs_eager": 2.0, "speedup_vs_eager_lo": 1.9, "speedup_vs_eager_hi": 2.1}


def test_the_report_counts_rows_by_standing_and_names_those_behind():
    rows = [_row("fast", 1.10, 1.05, 1.15), _row("tied", 0.99, 0.97, 1.01), _row("slow", 0.97, 0.95, 0.99, "cuda_graph"),
            _row("unknown", 0.90, None, None)]
    assert render.speedup_text(rows[1], "speedup_vs_compile") == "0.99 (0.97-1.01)"
    assert render.speedup_text(rows[3], "speedup_vs_compile") == "0.90"
    text = render.standings_markdown(rows)
    assert "| torch.compile | 1 | 1 | 1 |" in text and "| eager | 4 | 0 | 0 |" in text
    assert "- slow float32 2^20, graph: ×0.97 (0.95-0.99)" in text
    assert "tied" not in text and "unknown" not in text
    assert render.standings_line(rows) == ("kwb's rows against torch.compile: 1 ahead, 1 level, 1 behind; against eager: "
                                           "4 ahead, 0 level, 0 behind (95% intervals of the speedups)")
    bare = dict(_row("unknown", 0.9, None, None), speedup_vs_eager_lo=None, speedup_vs_eager_hi=None)
    assert render.standings_markdown([bare]) == "" and render.standings_line([bare]) == ""


def test_a_side_with_fewer_rounds_keeps_every_sample_of_the_other_in_the_draws():
    # kwb timed in 20 rounds, eager in every 4th: eager's 5 rounds are shared, and kwb's other 15
    # samples (all slow here) must still count, as they count in the speedup's median
    rng = random.Random(11)
    kwb = [1e-3 * (1 + 0.01 * rng.random()) if r % 4 == 0 else 1.5e-3 * (1 + 0.01 * rng.random()) for r in range(20)]
    mine = timing.summarize(kwb, "synthetic", rounds=range(20))
    base = timing.summarize([1.2e-3 * (1 + 0.01 * rng.random()) for _ in range(5)], "synthetic", rounds=range(0, 20, 4))
    lo, hi = intervals.speedup_interval(base, mine)
    assert lo <= base.median / mine.median <= hi
    assert hi < 1  # kwb's median is a slow sample: behind, though faster in every shared round
