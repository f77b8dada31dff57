"""The ratio to idle of a run whose horizon is known: a group-sequential interval of the
rounds' paired log ratios, narrower within that horizon than a confidence sequence.

A run that stops a cell once decided takes at most ``max_runs`` trials a cell, so it can
only ever stop at one of finitely many counts. An interval needs to hold at those counts
only, not at every count there could ever be (what `sequential`'s confidence sequence
pays for), and the error rate alpha can be spent over them:

* The looks are every `LOOK_EVERY` pairs from ``min_runs``, and ``max_runs``: K looks.
  Looking at every round instead would spend alpha over three or four times as many looks
  for decisions that come a round or two earlier, and on this project's cells that costs
  more than it gains (docs/bench.md has the figures). Between looks the interval is the
  last look's, of the pairs up to it in round order: a run stopped between looks (by
  ``--max-time``, or a failed trial) gets an interval as valid as at a look.
* Each look gets alpha / K (Bonferroni): the chance that the interval misses the truth at
  ANY look is at most the sum, alpha, so whichever look a run stops at -- on its verdict,
  its budget or its clock -- its interval covers with at least the confidence asked for.
  No boundary is computed numerically, so nothing about its validity rests on a
  quadrature; the price is some conservatism (looks that are correlated are counted as if
  they were not).
* At a look of L pairs the interval is Student's t interval of the mean per-round log
  ratio d = log(loaded) - log(idle), at level alpha / K, L - 1 degrees of freedom. It is
  exact when the d's are normal -- lognormal start-up times, however different the two
  cells' spreads -- and its centre is then the log of the ratio of the two medians, the
  estimand of `paired` as well. Unlike the order-statistic interval it uses every pair's
  value, not only its rank: at 8 to 24 pairs and alpha / K it is markedly narrower, and
  that is the whole gain. The price is that assumption: d's far from normal (a bimodal
  loaded cell) are outside the proof, and the report names the method of every interval.
* A timeout leaves its d only a bound, and a t interval is not monotone in every value (a
  larger d widens it too), so no bound can stand in for it. A share `CENSORED_SHARE` of
  each look's alpha therefore goes to the distribution-free order-statistic interval of
  the median d (timeouts at their bound for one end, unbounded for the other, as in
  `paired`), and a look whose pairs hold a timeout uses that one. Both intervals hold
  with their shares at once, so the look holds with alpha / K; the median and the mean of
  normal d's are one number.

Where no horizon is known (several runs pooled into one report), `paired`'s confidence
sequence remains the method.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import lru_cache

import numpy as np

from .comparisons import RatioCI
from .estimates import check_confidence
from .paired import Pairs

#: What `RatioCI.method` says of an interval made here.
METHOD = "paired-group-sequential"
#: Pairs between looks.
LOOK_EVERY = 4
#: Of each look's alpha, the share of the order-statistic interval used when a timeout
#: censors a pair; the t interval of uncensored pairs gets the rest.
CENSORED_SHARE = 0.1


@dataclass(frozen=True)
class Design:
    """The looks of a run of ``min_runs`` to ``max_runs`` pairs, and each one's alpha."""

    min_runs: int
    max_runs: int
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.max_runs:
            raise ValueError(f"need 1 <= min_runs <= max_runs, got {self.min_runs}, "
                             f"{self.max_runs}")
        check_confidence(self.confidence)

    @property
    def looks(self) -> tuple[int, ...]:
        every = range(self.min_runs, self.max_runs + 1, LOOK_EVERY)
        return tuple(sorted({*every, self.max_runs}))

    @property
    def alpha(self) -> float:
        """Each look's share of the error rate."""
        return (1.0 - self.confidence) / len(self.looks)

    def look(self, n: int) -> int | None:
        """The last look at or before n pairs; None before the first."""
        done = [k for k in self.looks if k <= n]
        return done[-1] if done else None


@lru_cache(maxsize=8192)
def t_factor(pairs: int, alpha: float) -> float:
    """The t interval's half-width in units of the standard error: Student's two-sided
    quantile at ``alpha``, ``pairs - 1`` degrees of freedom; inf under two pairs."""
    from scipy.stats import t

    return math.inf if pairs < 2 else float(t.ppf(1.0 - alpha / 2.0, pairs - 1))


@lru_cache(maxsize=8192)
def order_rank(pairs: int, alpha: float) -> int:
    """The k of the order-statistic interval [d_(k), d_(n+1-k)] of the median at level
    ``alpha`` (at most alpha/2 below each end, by the binomial tail); 0 when not even the
    extremes hold it."""
    from scipy.stats import binom

    k = 0
    while k < pairs // 2 and binom.cdf(k, pairs, 0.5) <= alpha / 2.0:
        k += 1
    return k


def half_width(n: int, design: Design) -> float:
    """The t interval's expected half-width at n pairs (the last look's), in units of the
    d's spread: what `stopping` plans with; inf before a look of two pairs."""
    look = design.look(n)
    if look is None:
        return math.inf
    return t_factor(look, design.alpha * (1.0 - CENSORED_SHARE)) / math.sqrt(look)


def paired_ratio_gs(pairs: Pairs, design: Design) -> RatioCI:
    """The ratio to idle at the last look of ``design``, of the pairs up to it: exp(mean d)
    with the t interval, or with a timeout among them exp(median d) with the
    order-statistic interval. Before the first look: nan, 0 to inf."""
    look = design.look(pairs.n)
    if look is None:
        return RatioCI(math.nan, 0.0, math.inf, design.confidence, METHOD)
    seen = Pairs(pairs.d[:look], pairs.open_above[:look], pairs.open_below[:look])
    if seen.open_above.any() or seen.open_below.any():
        k = order_rank(look, design.alpha * CENSORED_SHARE)
        lo = -math.inf if k == 0 else float(np.sort(seen.lower())[k - 1])
        hi = math.inf if k == 0 else float(np.sort(seen.upper())[look - k])
        centre = float(np.median(seen.d))
    else:
        centre = float(np.mean(seen.d))
        reach = t_factor(look, design.alpha * (1.0 - CENSORED_SHARE)) \
            * float(np.std(seen.d, ddof=1)) / math.sqrt(look) if look > 1 else math.inf
        lo, hi = centre - reach, centre + reach
    return RatioCI(math.exp(centre), math.exp(lo), math.exp(hi), design.confidence, METHOD)
