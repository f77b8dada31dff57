"""Two cells compared: the ratio of their medians with a bootstrap interval, Mann-Whitney U
and Cliff's delta.

A ratio ("3.2x slower than idle") is what a user wants to read; the rank statistics are
distribution-free and say how often one cell beats the other, which a ratio of medians does
not.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike

from .estimates import (
    as_censored,
    as_samples,
    bootstrap_medians,
    bounds,
    check_confidence,
    check_resamples,
    percentile_interval,
)


@dataclass(frozen=True)
class RatioCI:
    """median(a) / median(b) with an interval, and the method that made it: "bootstrap"
    (percentile bootstrap, for a fixed number of trials) or "confidence-sequence" (valid at
    every number of trials, for runs that stop once decided: `sequential`)."""

    ratio: float
    lo: float
    hi: float
    confidence: float
    method: str = "bootstrap"


@dataclass(frozen=True)
class MannWhitney:
    """Two-sided Mann-Whitney U test; ``u`` is U of the first sample, ``method`` the one used."""

    u: float
    p: float
    method: str


@dataclass(frozen=True)
class CliffsDelta:
    """P(a > b) - P(a < b); positive means the first sample tends to be larger (slower)."""

    delta: float
    magnitude: str


@dataclass(frozen=True)
class Comparison:
    """Everything we say when comparing two cells."""

    ratio: RatioCI
    mann_whitney: MannWhitney
    cliffs_delta: CliffsDelta


def ratio_of_medians(
    a: ArrayLike,
    b: ArrayLike,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    a_censored: ArrayLike = (),
    b_censored: ArrayLike = (),
) -> RatioCI:
    """median(a) / median(b) with a percentile CI from resampling each group independently.

    The groups are independent runs, so each is resampled on its own; the ratio of the two
    bootstrap medians gives the interval. Raises ValueError if median(b) is zero.
    Censored values of either group count at their limit in the ratio; the interval's lower
    end takes a's at their limit and b's unbounded, its upper end the other way round.
    """
    xa, xb = as_samples(a, "a"), as_samples(b, "b")
    ca, cb = as_censored(a_censored), as_censored(b_censored)
    check_confidence(confidence)
    check_resamples(resamples)
    (la, ha), (lb, hb) = bounds(xa, ca), bounds(xb, cb)
    med_b = float(np.median(lb))
    if med_b == 0.0:
        raise ValueError("median of b is zero, so the ratio of medians is undefined")

    def boot(xa: np.ndarray, xb: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        rng = np.random.default_rng(seed)  # the same resamples for every bound
        return bootstrap_medians(xa, resamples, rng), bootstrap_medians(xb, resamples, rng)

    with np.errstate(divide="ignore", invalid="ignore"):
        if ca.size or cb.size:
            (low_a, high_b), (high_a, low_b) = boot(la, hb), boot(ha, lb)
            lo, hi = percentile_interval(low_a / high_b, confidence, high_a / low_b)
        else:
            boot_a, boot_b = boot(xa, xb)
            lo, hi = percentile_interval(boot_a / boot_b, confidence)
    return RatioCI(float(np.median(la)) / med_b, lo, hi, confidence)


def mann_whitney(a: ArrayLike, b: ArrayLike, *, method: str = "auto") -> MannWhitney:
    """Two-sided Mann-Whitney U test: ``scipy.stats.mannwhitneyu`` (its "auto" picks the
    exact null distribution for small samples without ties, else the normal approximation
    with tie and continuity corrections). ``u`` is U of the first sample."""
    from scipy import stats as sps

    xa, xb = as_samples(a, "a"), as_samples(b, "b")
    if method not in {"auto", "exact", "asymptotic"}:
        raise ValueError(f"method must be 'auto', 'exact' or 'asymptotic', got {method!r}")
    res = sps.mannwhitneyu(xa, xb, alternative="two-sided", method=method)
    return MannWhitney(u=float(res.statistic), p=float(res.pvalue), method=f"scipy {method}")


def cliffs_magnitude(delta: float) -> str:
    """Romano et al. (2006) labels for |delta|: 0.147, 0.33, 0.474."""
    d = abs(delta)
    if d < 0.147:
        return "negligible"
    if d < 0.33:
        return "small"
    if d < 0.474:
        return "medium"
    return "large"


def cliffs_delta(a: ArrayLike, b: ArrayLike) -> CliffsDelta:
    """Cliff's delta = (#(a_i > b_j) - #(a_i < b_j)) / (n_a n_b), counted by binary search.

    A scale-free effect size that says how often one cell beats the other, which the p-value
    (which shrinks with n) does not.
    """
    xa, xb = as_samples(a, "a"), as_samples(b, "b")
    sb = np.sort(xb)
    below = np.searchsorted(sb, xa, side="left")  # b_j < a_i
    above = xb.size - np.searchsorted(sb, xa, side="right")  # b_j > a_i
    delta = float(below.sum() - above.sum()) / (xa.size * xb.size)
    return CliffsDelta(delta=delta, magnitude=cliffs_magnitude(delta))


def compare(
    a: ArrayLike,
    b: ArrayLike,
    *,
    confidence: float = 0.95,
    resamples: int = 10_000,
    seed: int = 0,
    method: str = "auto",
) -> Comparison:
    """Ratio of medians with CI, Mann-Whitney U and Cliff's delta of ``a`` against ``b``."""
    return Comparison(
        ratio=ratio_of_medians(a, b, confidence=confidence, resamples=resamples, seed=seed),
        mann_whitney=mann_whitney(a, b, method=method),
        cliffs_delta=cliffs_delta(a, b),
    )
