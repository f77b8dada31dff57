"""Intervals and verdicts that stay valid when a run stops as soon as they decide.

Looking at a fixed-n interval after every trial and stopping once it excludes 1 ("optional
stopping") makes its error rate grow with every look. A *confidence sequence* is a sequence
of intervals that covers the truth at every sample size at once, with the confidence asked
for, so any rule for when to stop -- even one that looks at the data after every trial --
leaves the interval at the stopping time valid.

Why this one (the beta-binomial confidence sequence for a quantile, Howard & Ramdas,
"Sequential estimation of quantiles with applications to A/B-testing and best-arm
identification", Bernoulli 28(3), 2022):

* It is distribution-free, like the fixed-n order-statistic interval of `estimates`:
  start-up times under load are skewed, heavy-tailed and sometimes bimodal. Of n samples of
  a continuous distribution, the number B_n below the true median is Binomial(n, 1/2) at
  every n, and M_n = E_p[(2p)^B_n (2(1-p))^(n-B_n)], p ~ Beta(a, a), is a nonnegative
  martingale with M_0 = 1. Ville's inequality bounds the chance it EVER reaches 1/alpha by
  alpha, so the medians m whose count below them keeps M_n under 1/alpha form a confidence
  sequence; at each n it is an interval between two order statistics.
* It needs no horizon and no schedule of looks, unlike a group-sequential design with an
  alpha-spending function (which needs the maximum sample size and the looks fixed ahead):
  a run may be resumed, given more time, or have its baseline cell go on measuring for
  other cells after one cell is decided, and every interval it shows stays valid.
* A ratio of two medians gets its interval from the two medians' *joint* sequence: the
  product of their two martingales is a martingale too (the samples are independent, and
  each trial adds to one of them), so the pairs of medians that keep the product under
  1/alpha hold the true pair at every pair of sample sizes at once -- a baseline shared by
  several cells has as many trials as the longest of them needs. Taking the two medians'
  sequences at 1 - alpha/2 each (Bonferroni) instead lets both reach their extremes at
  once; with lognormal times at 20 to 60 trials a cell, the joint region's ratio interval
  is 20-25% narrower (`ratio_cs` says how it is read).
* Right-censored values (timeouts) are taken as `estimates` takes them: at their limit for
  the lower end, unbounded for the upper end. Both ends are monotone in every value, so the
  coverage still holds.

The price of validity at every n is width: at n = 20 the 97.5% sequence of a median spans
the 3rd to the 18th order statistic where the fixed-n interval spans the 5th to the 16th,
and the joint ratio interval is about twice as wide as a fixed-n one at the same counts.
The mixture's Beta(1/2, 1/2) (Jeffreys) spends its width evenly over the trial counts a
bench cell uses (tens of trials); `MIXTURE_A` is it.

The verdict is read off the interval against the band 1 +/- tolerance exactly as the fixed-n
verdict is, so a wrong call ("slower" or "faster" when the truth lies inside the band,
"equivalent" when it lies outside) needs the interval to miss the truth: the call error is
at most the non-coverage, alpha. `stopping` is the rule `bench` runs on it, and
`simulation` checks both rates for that rule.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from numpy.typing import ArrayLike

from .comparisons import RatioCI
from .estimates import as_censored, as_samples, bounds, check_confidence

#: The Beta(a, a) mixing distribution of the beta-binomial martingale: Jeffreys' prior.
MIXTURE_A = 0.5
#: What `RatioCI.method` says of an interval made here.
METHOD = "confidence-sequence"


@lru_cache(maxsize=4096)
def accepted_counts(n: int, confidence: float) -> tuple[int, int] | None:
    """The counts j (of n samples below a candidate median) the sequence keeps at n: the
    first and the last j with M_n(j) < 1/(1 - confidence). None when n is 0.

    log M_n(j) = log B(a + j, a + n - j) - log B(a, a) + n log 2 is convex in j and
    symmetric about n/2, so the kept counts are one run of integers around n/2."""
    if n <= 0:
        return None
    log_m = _log_martingale(n)
    kept = np.flatnonzero(log_m < -math.log(1.0 - confidence))
    return int(kept[0]), int(kept[-1])


def median_cs(samples: ArrayLike, confidence: float = 0.95, *,
              censored: ArrayLike = ()) -> tuple[float, float]:
    """The confidence sequence of the median at the samples' n: [x_(lo), x_(hi+1)] for the
    kept counts lo..hi (x_(0) = -inf, x_(n+1) = +inf: too few samples leave an end open).

    A candidate m is kept when the number of samples below it is a kept count; that number
    is j for m in (x_(j), x_(j+1)]. Censored values count in n, at their limit for the lower
    end and unbounded for the upper one."""
    low, high = bounds(as_samples(samples), as_censored(censored))
    check_confidence(confidence)
    counts = accepted_counts(int(low.size), confidence)
    assert counts is not None  # as_samples refused an empty sample
    first, last = counts
    lo = -math.inf if first == 0 else float(np.sort(low)[first - 1])
    hi = math.inf if last >= high.size else float(np.sort(high)[last])
    return lo, hi


@lru_cache(maxsize=1024)
def _log_martingale(n: int) -> np.ndarray:
    """log M_n(j) for j = 0..n: the beta-binomial martingale at n samples, j of them below
    the candidate median (convex in j, symmetric about n/2, least at n/2). Read-only."""
    from scipy.special import betaln

    j = np.arange(n + 1)
    return betaln(MIXTURE_A + j, MIXTURE_A + n - j) - betaln(MIXTURE_A, MIXTURE_A) \
        + n * math.log(2.0)


def _kept_range(log_m: np.ndarray, room: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For each allowance in ``room``: the first and last count j with log_m[j] < room (the
    run of counts around n/2 that the convex, symmetric log_m keeps), or first > last when
    none is kept."""
    n = log_m.size - 1
    half = log_m[: n // 2 + 1]  # non-increasing towards the middle
    # first j in 0..n//2 with half[j] < room: searchsorted on the reversed, increasing half
    first = (half.size - np.searchsorted(half[::-1], room, side="left")).astype(int)
    last = n - first
    return first, last


def _sorted_median(v: np.ndarray) -> float:
    mid = v.size // 2
    return float(v[mid]) if v.size % 2 else float((v[mid - 1] + v[mid]) / 2.0)


def ratio_cs(a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95,
             a_censored: ArrayLike = (), b_censored: ArrayLike = ()) -> RatioCI:
    """median(a) / median(b) (positive times) with the interval of the two medians' joint
    confidence sequence: the pairs (m_a, m_b) where M^a(m_a) * M^b(m_b) < 1/alpha.

    The two samples are independent, and a trial adds to one of them (whichever the run
    chooses from what it has seen), so the product of the two martingales at the true
    medians is itself a nonnegative martingale starting at 1: Ville's inequality keeps the
    true pair inside the region at every pair of sample sizes at once with 1 - alpha. The
    ratio's interval is the region's extent in m_a / m_b: [min x_(j) / y_(k+1),
    max x_(j+1) / y_(k)] over the kept counts (j, k). It is narrower than the box of the two
    medians' sequences at 1 - alpha/2 each (their Bonferroni combination), which lets each
    median reach its 1 - alpha/2 extreme while the other does too: the joint region spends
    one alpha on the pair. An open end where no kept pair bounds it."""
    check_confidence(confidence)
    lo_a_vals, hi_a_vals = (np.sort(v) for v in bounds(as_samples(a), as_censored(a_censored)))
    lo_b_vals, hi_b_vals = (np.sort(v) for v in bounds(as_samples(b), as_censored(b_censored)))
    med_a, med_b = _sorted_median(lo_a_vals), _sorted_median(lo_b_vals)
    if med_b <= 0.0:
        raise ValueError("median of b is not positive, so the ratio of medians is undefined")
    n_a, n_b = lo_a_vals.size, lo_b_vals.size
    log_a, log_b = _log_martingale(n_a), _log_martingale(n_b)
    limit = -math.log(1.0 - confidence)
    j = np.flatnonzero(log_a < limit - log_b.min())  # counts of a that some k keeps
    k_first, k_last = _kept_range(log_b, limit - log_a[j])
    ok = k_first <= k_last
    j, k_first, k_last = j[ok], k_first[ok], k_last[ok]
    # x_(j) (j >= 1; x_(0) = -inf), y_(k+1) (k < n_b; y_(n_b+1) = +inf), as 1-based
    # order statistics of the lower and upper bounds of the values
    x_low = np.concatenate([[-math.inf], lo_a_vals])[j]
    y_high = np.concatenate([hi_b_vals, [math.inf]])[k_last]
    x_high = np.concatenate([hi_a_vals, [math.inf]])[j]
    y_low = np.concatenate([[-math.inf], lo_b_vals])[k_first]
    with np.errstate(divide="ignore", invalid="ignore"):
        lows = np.where((x_low <= 0.0) | np.isinf(y_high), 0.0, x_low / y_high)
        highs = np.where((y_low <= 0.0) | np.isinf(x_high), math.inf, x_high / y_low)
    lo = float(lows.min()) if lows.size else 0.0
    hi = float(highs.max()) if highs.size else math.inf
    return RatioCI(med_a / med_b, lo, hi, confidence, METHOD)
