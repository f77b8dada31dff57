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
* A ratio of two medians gets its interval from the two medians' sequences at
  1 - alpha/2 each (Bonferroni): both hold at all sample sizes at once with 1 - alpha, so
  the ratio's interval holds for whatever pair of sample sizes the run ends with -- a
  baseline shared by several cells has as many trials as the longest of them needs.
* Right-censored values (timeouts) are taken as `estimates` takes them: at their limit for
  the lower end, unbounded for the upper end. Both ends are monotone in every value, so the
  coverage still holds.

The price of validity at every n is width: at n = 20 the 97.5% sequence of a median spans
the 3rd to the 18th order statistic where the fixed-n interval spans the 5th to the 16th.
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
    from scipy.special import betaln

    if n <= 0:
        return None
    j = np.arange(n + 1)
    log_m = betaln(MIXTURE_A + j, MIXTURE_A + n - j) - betaln(MIXTURE_A, MIXTURE_A) \
        + n * math.log(2.0)
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


def ratio_cs(a: ArrayLike, b: ArrayLike, *, confidence: float = 0.95,
             a_censored: ArrayLike = (), b_censored: ArrayLike = ()) -> RatioCI:
    """median(a) / median(b) (positive times) with the interval of the two medians'
    sequences at 1 - alpha/2 each: [lo_a / hi_b, hi_a / lo_b], an open end where a
    sequence is open."""
    check_confidence(confidence)
    each = 1.0 - (1.0 - confidence) / 2.0
    lo_a, hi_a = median_cs(a, each, censored=a_censored)
    lo_b, hi_b = median_cs(b, each, censored=b_censored)
    med_a = float(np.median(bounds(as_samples(a), as_censored(a_censored))[0]))
    med_b = float(np.median(bounds(as_samples(b), as_censored(b_censored))[0]))
    if med_b <= 0.0:
        raise ValueError("median of b is not positive, so the ratio of medians is undefined")
    lo = 0.0 if lo_a <= 0.0 or math.isinf(hi_b) else lo_a / hi_b
    hi = math.inf if lo_b <= 0.0 or math.isinf(hi_a) else hi_a / lo_b
    return RatioCI(med_a / med_b, lo, hi, confidence, METHOD)
