"""How sure is a speedup? A bootstrap confidence interval for median(baseline) / median(kwb).

A speedup of 0.98 from medians whose p20-p80 spreads are 5% wide says nothing about which is
faster; the interval says whether the data can tell (behind: the interval's top is below 1;
level: it holds 1; ahead: its bottom is above 1).

Samples timed in turns (timing.measure_interleaved) share rounds: what drifted during a round
(other processes on a 2-core CPU, a GPU's clocks) drifted for both, so whole rounds are
resampled, each function's samples of the round together (a block bootstrap, which keeps the
pairing); a side that sat a round out (it takes fewer samples than the other) weighs nothing
there, and a draw of none of its rounds is left out. Samples timed one after the other
(`--one-after-another`) are resampled each on their own. The interval is the percentile
interval of the ratio over RESAMPLES draws; a draw's median is read off the sorted samples,
each weighted by how often its round was drawn, so a draw is a few tensor operations (~20 ms
an interval for 1000 samples a side on the 2-core machine).
"""
from __future__ import annotations

import torch

from .timing import Stats

LEVEL = 0.95
RESAMPLES = 1000
MIN_ROUNDS = 5  # shared rounds below which two in-turns timings are treated as unpaired
MIN_SAMPLES = 5  # fewer samples on either side: no interval
SEED = 0  # the same samples give the same interval


def _weighted_medians(values: torch.Tensor, groups: torch.Tensor, counts: torch.Tensor) -> torch.Tensor:
    """Each draw's median: values sorted ascending, groups[i] the round of values[i], counts a
    [draws, rounds] tensor of how often each round was drawn. The median of the drawn multiset
    (the mean of the two middle values where its size is even, as timing.quantile)."""
    cumulative = counts[:, groups].cumsum(1)
    half = cumulative[:, -1:] / 2
    last = values.numel() - 1
    below = (cumulative < half).sum(1).clamp(max=last)  # the first value whose weight reaches half
    above = (cumulative <= half).sum(1).clamp(max=last)  # the first that passes it
    medians = (values[below] + values[above]) / 2
    return medians.masked_fill(half.squeeze(1) == 0, float("nan"))  # a draw of none of this side's rounds


def _draws(rounds: int, generator: torch.Generator) -> torch.Tensor:
    """[RESAMPLES, rounds] counts: each draw picks `rounds` rounds with replacement."""
    picks = torch.randint(rounds, (RESAMPLES, rounds), generator=generator)
    counts = torch.zeros(RESAMPLES, rounds, dtype=torch.float64)
    return counts.scatter_add_(1, picks, torch.ones_like(picks, dtype=torch.float64))


def _sorted(samples, groups) -> tuple[torch.Tensor, torch.Tensor]:
    values = torch.tensor(samples, dtype=torch.float64)
    order = values.argsort()
    return values[order], torch.tensor(groups, dtype=torch.long)[order]


def speedup_interval(base: Stats, mine: Stats, level: float = LEVEL) -> tuple[float, float] | None:
    """The `level` interval of median(base) / median(mine) (how many times faster mine is);
    None where either side kept fewer than MIN_SAMPLES samples (or none at all)."""
    if len(base.samples) < MIN_SAMPLES or len(mine.samples) < MIN_SAMPLES:
        return None
    generator = torch.Generator().manual_seed(SEED)
    shared = set(base.rounds) & set(mine.rounds)
    if len(shared) >= MIN_ROUNDS and len(base.rounds) == len(base.samples) and len(mine.rounds) == len(mine.samples):
        # every round either side took is drawn (a side with fewer samples sits some rounds out),
        # so each side's draws hold all its samples, as the medians the speedup is made of
        index = {r: i for i, r in enumerate(sorted(set(base.rounds) | set(mine.rounds)))}
        counts = _draws(len(index), generator)
        medians = [_weighted_medians(*_sorted(st.samples, [index[r] for r in st.rounds]), counts) for st in (base, mine)]
    else:  # unpaired: each sample a round of its own, each side drawn apart
        medians = [_weighted_medians(*_sorted(st.samples, range(st.n)), _draws(st.n, generator)) for st in (base, mine)]
    ratios = medians[0] / medians[1]
    tail = (1 - level) / 2
    lo, hi = torch.nanquantile(ratios, torch.tensor([tail, 1 - tail], dtype=torch.float64)).tolist()
    return lo, hi


def verdict(interval: tuple[float, float] | None) -> str:
    """'behind', 'level' or 'ahead' of the baseline; '' where there is no interval."""
    if interval is None:
        return ""
    lo, hi = interval
    return "behind" if hi < 1 else "ahead" if lo > 1 else "level"
