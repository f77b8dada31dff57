"""The ratio to idle from trials paired by round: one confidence sequence instead of two.

`bench` runs every cell once per round, so a loaded cell's trial and its baseline's trial of
the same round form a pair, and each round's pair is independent of every other round's.
The per-round log ratio d = log(loaded) - log(baseline) then has a median, and its
confidence sequence (the beta-binomial one of `sequential`, on the d's) is valid at every
number of rounds at once, exactly as a median's is.

Why pair, when `sequential.ratio_cs` already has an interval for the ratio of medians:

* Width. The unpaired interval is a box of two medians' sequences at 97.5% each, so its
  width in log units is the sum of the two widths. The d's spread is the two spreads added
  in quadrature (sqrt 2 times one spread, not 2 times), and their one sequence runs at 95%:
  on lognormal times the paired interval is about two thirds as wide, and a cell is decided
  in about half the trials (`benchmarks/sequential_width.py`).
* Drift. A machine that is slower for a while (another job, a warm host) slows both trials
  of a round; their ratio does not see it.
* The estimand. The median of per-round ratios equals the ratio of the medians whenever the
  log times of the two cells are symmetric about their medians (lognormal times, however
  different their spreads); otherwise it is its own well-defined number: the ratio a typical
  round shows. The report names the method of every interval.

Timeouts: a loaded trial at its limit L makes d at least log L - log b (unbounded above);
a baseline trial at its limit makes d at most log a - log L (unbounded below). Both ends
of the sequence are monotone in every d, so, as in `estimates`, the interval takes its lower
end with each d at its known bound and its upper end with each open side unbounded.
A round where either trial failed (no time at all) has no pair.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from .comparisons import RatioCI
from .estimates import check_confidence
from .sequential import accepted_counts

#: What `RatioCI.method` says of an interval made here.
METHOD = "paired-confidence-sequence"

#: One trial's time, and whether it is only a lower bound (a timeout at its limit).
Timed = tuple[float, bool]


@dataclass(frozen=True)
class Pairs:
    """Per-round log ratios: ``low`` with every timeout at its limit (a lower bound of the
    true d for a loaded timeout, an upper bound for a baseline one), and the two ends that
    stay open (``open_above``: a loaded timeout; ``open_below``: a baseline one)."""

    d: np.ndarray
    open_above: np.ndarray
    open_below: np.ndarray

    @property
    def n(self) -> int:
        return int(self.d.size)

    def lower(self) -> np.ndarray:
        """The d's for the interval's lower end: a baseline timeout's d could be anything
        below its bound."""
        return np.where(self.open_below, -np.inf, self.d)

    def upper(self) -> np.ndarray:
        """The d's for the interval's upper end: a loaded timeout's d could be anything
        above its bound."""
        return np.where(self.open_above, np.inf, self.d)


def pair_rounds(loaded: Mapping[object, Timed], baseline: Mapping[object, Timed]) -> Pairs:
    """The pairs of the rounds both cells have a time for, in round order. Keys name a
    round (a run's round number, or (run, round) when several runs are pooled)."""
    rounds = sorted(set(loaded) & set(baseline), key=repr)
    d, above, below = [], [], []
    for r in rounds:
        (a, a_open), (b, b_open) = loaded[r], baseline[r]
        if not (a > 0 and b > 0 and math.isfinite(a) and math.isfinite(b)):
            raise ValueError(f"times must be positive and finite, got {a} and {b}")
        d.append(math.log(a) - math.log(b))
        above.append(a_open)
        below.append(b_open)
    return Pairs(np.asarray(d, dtype=float), np.asarray(above, dtype=bool),
                 np.asarray(below, dtype=bool))


def paired_ratio_cs(pairs: Pairs, confidence: float = 0.95) -> RatioCI:
    """The median per-round ratio, exp(median d), with the confidence sequence of the
    median of the d's at the pairs' n: [exp d_(lo), exp d_(hi+1)] for the kept counts
    lo..hi, an end open where too few pairs or timeouts leave it so. No pairs: 0-inf."""
    check_confidence(confidence)
    if pairs.n == 0:
        return RatioCI(math.nan, 0.0, math.inf, confidence, METHOD)
    counts = accepted_counts(pairs.n, confidence)
    assert counts is not None
    first, last = counts
    lo = -math.inf if first == 0 else float(np.sort(pairs.lower())[first - 1])
    hi = math.inf if last >= pairs.n else float(np.sort(pairs.upper())[last])
    return RatioCI(math.exp(float(np.median(pairs.d))), math.exp(lo), math.exp(hi),
                   confidence, METHOD)


def median_reached_by_timeouts(pairs: Pairs) -> bool:
    """Whether loaded timeouts reach the median per-round ratio, which is then only a lower
    bound (as `estimates.censored_median` says of a cell's median)."""
    if pairs.n == 0 or not pairs.open_above.any():
        return False
    return bool(np.median(pairs.upper()) > np.median(pairs.d))
