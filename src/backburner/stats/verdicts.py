"""What a cell's numbers say: a verdict against its baseline, and caveats about its data.

Kinds, codes and numbers only. The sentences a person reads (and the advice in them) are
`report.words`'s; a JSON reader gets the codes and numbers as they are, so nothing has to
parse English, and a new renderer cannot say a verdict differently from the others.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from .band import check_tolerance
from .comparisons import RatioCI, ratio_of_medians
from .estimates import (
    Summary,
    as_samples,
    censored_median,
    check_confidence,
    min_trials,
    tukey_outliers,
)
from .paired import Pairs, median_reached_by_timeouts, paired_ratio_cs
from .sequential import ratio_cs

#: Bimodality-coefficient threshold: 5/9, the value for a uniform distribution.
BIMODAL_THRESHOLD = 0.555
BIMODAL_MIN_N = 10
#: A cold median within this fraction of the warm median is no cold start.
NOT_COLD_FRACTION = 0.10
#: More than this fraction of a cell's trials outside Tukey's fences is worth a warning.
OUTLIER_WARN_FRACTION = 0.10
#: Round number of trials we recommend even when fewer would technically do.
RECOMMENDED_TRIALS = 10

#: A caveat's parameter: a count, a measured value, a flag, or a code (never a sentence).
Param = int | float | bool | str


# --------------------------------------------------------------------------- verdict


class VerdictKind(StrEnum):
    """What the ratio's interval says against the band 1 +/- tolerance. Every kind but
    `UNDECIDED` is a decided answer, and a run that stops once decided stops on any of them.

    The question a user asks of a protected start is one-sided -- "is it at most this much
    slower than unloaded?" -- and `AT_MOST` answers it as soon as the interval's upper end is
    inside the band, whatever its lower end: a valid interval decides that early where
    "within the band both ways" may need hundreds of trials for a ratio near an edge.
    `INDISTINGUISHABLE` is the stronger, two-sided claim, kept for when both ends are in."""

    SLOWER = "slower"                        # lower end above 1 + tolerance
    FASTER = "faster"                        # upper end below 1 - tolerance
    INDISTINGUISHABLE = "indistinguishable"  # both ends within 1 +/- tolerance
    AT_MOST = "at-most"                      # upper end within 1 + tolerance, lower below the band
    UNDECIDED = "undecided"                  # upper end above 1 + tolerance, lower end not


#: The kinds that answer the question (all but undecided).
DECIDED = frozenset({VerdictKind.SLOWER, VerdictKind.FASTER, VerdictKind.INDISTINGUISHABLE,
                     VerdictKind.AT_MOST})


@dataclass(frozen=True)
class Verdict:
    """The kind, the ratio behind it and the band it was judged against."""

    kind: VerdictKind
    ratio: RatioCI
    tolerance: float
    #: timeouts reach the loaded median, so the ratio is only a lower bound
    lower_bound: bool = False

    @property
    def open_above(self) -> bool:
        """Timeouts leave the interval without an upper end: a longer limit would close it,
        more trials would not."""
        return math.isinf(self.ratio.hi)

    @property
    def decided(self) -> bool:
        return self.kind in DECIDED


def verdict(
    loaded: ArrayLike,
    baseline: ArrayLike,
    *,
    tolerance: float = 0.10,
    confidence: float = 0.95,
    seed: int = 0,
    resamples: int = 10_000,
    loaded_censored: ArrayLike = (),
    baseline_censored: ArrayLike = (),
) -> Verdict:
    """What the ratio of ``loaded``'s median to ``baseline``'s (unloaded) says against the
    band 1 +/- tolerance (`classify`), on a fixed-count percentile bootstrap interval.

    A wide interval is never read as "no effect": "indistinguishable" needs the whole
    interval inside the band, "at most" its upper end inside. Timed-out trials
    (``*_censored``, at their limit) widen the interval as far as they could reach, so they
    can make a verdict "slower" or "undecided", never falsely reassuring; a ratio whose
    loaded median they reach is marked as a lower bound.
    """
    check_tolerance(tolerance)
    r = ratio_of_medians(loaded, baseline, confidence=confidence, resamples=resamples, seed=seed,
                         a_censored=loaded_censored, b_censored=baseline_censored)
    return Verdict(classify(r, tolerance), r, tolerance,
                   censored_median(loaded, loaded_censored)[1])


def sequential_verdict(
    loaded: ArrayLike,
    baseline: ArrayLike,
    *,
    tolerance: float = 0.10,
    confidence: float = 0.95,
    loaded_censored: ArrayLike = (),
    baseline_censored: ArrayLike = (),
) -> Verdict:
    """`verdict` on the ratio's confidence sequence (`sequential.ratio_cs`) instead of its
    bootstrap interval: the verdict of a run that stopped once it was decided."""
    check_tolerance(tolerance)
    r = ratio_cs(loaded, baseline, confidence=confidence, a_censored=loaded_censored,
                 b_censored=baseline_censored)
    return Verdict(classify(r, tolerance), r, tolerance,
                   censored_median(loaded, loaded_censored)[1])


def paired_verdict(pairs: Pairs, *, tolerance: float = 0.10,
                   confidence: float = 0.95) -> Verdict:
    """`verdict` on the paired rounds' confidence sequence (`paired.paired_ratio_cs`): the
    verdict of a run that stopped once decided, where the trials pair by round."""
    check_tolerance(tolerance)
    r = paired_ratio_cs(pairs, confidence)
    return Verdict(classify(r, tolerance), r, tolerance, median_reached_by_timeouts(pairs))


def classify(r: RatioCI, tolerance: float) -> VerdictKind:
    """Where the interval lies against the band 1 +/- tolerance: slower when its lower end
    is above the band; undecided while its upper end is above the band and its lower end is
    not; otherwise decided by its upper end being inside the band -- faster when even that
    is below the band, indistinguishable when the lower end is inside too, else "at most"
    (the upper end)."""
    if r.lo > 1.0 + tolerance:
        return VerdictKind.SLOWER
    if not r.hi <= 1.0 + tolerance:  # (an open or NaN upper end decides nothing)
        return VerdictKind.UNDECIDED
    if r.hi < 1.0 - tolerance:
        return VerdictKind.FASTER
    if r.lo >= 1.0 - tolerance:
        return VerdictKind.INDISTINGUISHABLE
    return VerdictKind.AT_MOST


# --------------------------------------------------------------------------- caveats


class CaveatCode(StrEnum):
    """What can be wrong with one cell's samples, as far as the samples themselves show."""

    TOO_FEW_TRIALS = "too-few-trials"  # trials, confidence, advised
    TIMEOUTS = "timeouts"              # count, reach (a TimeoutReach)
    BIMODAL = "bimodal"                # coefficient, threshold
    NOT_COLD = "not-cold"              # evidence "time": median, warm_median, fraction
    OUTLIERS = "outliers"              # count, trials


class TimeoutReach(StrEnum):
    """How much of a cell's summary its timeouts leave unknown."""

    EVERYTHING = "everything"  # no trial completed: only a lower bound of the time
    MEDIAN = "median"          # the median is a lower bound, its interval open above
    INTERVAL = "interval"      # the median's interval is open above
    NOTHING = "nothing"        # neither the median nor its interval


@dataclass(frozen=True)
class Caveat:
    """A problem with a cell's data (or a whole report's): a code and the numbers behind it.
    ``code`` is a `CaveatCode`, or one of the report's own codes for what only it can see
    (failed trials, a missing baseline)."""

    code: str
    params: dict[str, Param] = field(default_factory=dict)


def bimodality_coefficient(samples: ArrayLike) -> float:
    """Sarle's BC = (g1^2 + 1) / (g2 + 3(n-1)^2 / ((n-2)(n-3))), bias-corrected g1, g2.

    Above 5/9 (a uniform's value) suggests two modes, e.g. some trials hit a cache and some
    did not, in which case a single median misdescribes the cell. NaN if n < 4 or constant.
    """
    x = as_samples(samples)
    n = x.size
    d = x - x.mean()
    m2 = float(np.mean(d**2))
    if n < 4 or m2 == 0.0:
        return math.nan
    g1 = float(np.mean(d**3)) / m2**1.5
    g2 = float(np.mean(d**4)) / m2**2 - 3.0
    skew = g1 * math.sqrt(n * (n - 1)) / (n - 2)
    kurt = ((n + 1) * g2 + 6.0) * (n - 1) / ((n - 2) * (n - 3))
    return (skew**2 + 1.0) / (kurt + 3.0 * (n - 1) ** 2 / ((n - 2) * (n - 3)))


def _too_few_trials(n: int, confidence: float, timeouts: int = 0) -> Caveat | None:
    """Too few *run* trials. When timeouts make up the shortfall, more trials would not help
    (they would time out too): the timeouts caveat covers it."""
    if n >= min_trials(confidence) or (timeouts and n + timeouts >= min_trials(confidence)):
        return None
    advised = max(RECOMMENDED_TRIALS, min_trials(confidence))
    return Caveat(CaveatCode.TOO_FEW_TRIALS,
                  {"trials": n, "confidence": confidence, "advised": advised})


def timeout_reach(summary: Summary | None) -> TimeoutReach:
    """What timeouts leave unknown of a cell summarised as ``summary`` (None: no trial
    completed)."""
    if summary is None:
        return TimeoutReach.EVERYTHING
    if summary.median_lower_bound:
        return TimeoutReach.MEDIAN
    if summary.median_ci is not None and math.isinf(summary.median_ci[1]):
        return TimeoutReach.INTERVAL
    return TimeoutReach.NOTHING


def _timeouts(timeouts: int, summary: Summary | None) -> Caveat | None:
    if timeouts <= 0:
        return None
    return Caveat(CaveatCode.TIMEOUTS, {"count": timeouts, "reach": timeout_reach(summary)})


def _bimodal(x: np.ndarray) -> Caveat | None:
    if x.size < BIMODAL_MIN_N:
        return None
    bc = bimodality_coefficient(x)
    if not bc > BIMODAL_THRESHOLD:
        return None
    return Caveat(CaveatCode.BIMODAL, {"coefficient": bc, "threshold": BIMODAL_THRESHOLD})


def _not_cold(median: float, warm_median: float | None) -> Caveat | None:
    if warm_median is None or abs(median - warm_median) > NOT_COLD_FRACTION * abs(warm_median):
        return None
    return Caveat(CaveatCode.NOT_COLD, {"evidence": "time", "median": median,
                                        "warm_median": warm_median,
                                        "fraction": NOT_COLD_FRACTION})


def _outliers(x: np.ndarray) -> Caveat | None:
    k = len(tukey_outliers(x))
    if k <= OUTLIER_WARN_FRACTION * x.size:
        return None
    return Caveat(CaveatCode.OUTLIERS, {"count": k, "trials": int(x.size)})


def warnings_for(
    samples: ArrayLike,
    *,
    timeouts: int = 0,
    warm_median: float | None = None,
    confidence: float = 0.95,
    summary: Summary | None = None,
) -> list[Caveat]:
    """Every caveat about one cell, in a stable order (`CaveatCode`'s); empty ``samples``
    is allowed here. ``summary`` (of the samples and the timeouts) says what the timeouts
    leave unknown."""
    check_confidence(confidence)
    raw = np.asarray(samples, dtype=float)
    found = [_too_few_trials(int(raw.size), confidence, timeouts), _timeouts(timeouts, summary)]
    if raw.size:
        x = as_samples(raw)
        found += [_bimodal(x), _not_cold(float(np.median(x)), warm_median), _outliers(x)]
    return [w for w in found if w is not None]
