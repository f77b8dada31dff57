"""The stopping rule `bench` runs: a cell gets trials until its verdict is decided, its
budget is spent, or a decision is out of the budget's reach.

Decided means the verdict read off the paired rounds' confidence sequence (`paired`) is
any but undecided (`verdicts.VerdictKind`): slower (the interval's lower end above the band),
or its upper end inside the band -- at most that much slower, indistinguishable, or faster.
Because that interval is valid at every number of rounds at once, stopping on it leaves the
interval and the verdict as valid as at a fixed n (`simulation` checks it). The band is the
rule's `tolerance` when given by hand, else the one a person notices for the cell's unloaded
start (`band.noticeable`). The budget in trials is here; a budget in time is the runner's,
which stops every cell alike and so cannot bias one against another.

Out of reach: a cell whose verdict would need well over ``max_runs`` trials even if its true
ratio were the likeliest-to-decide value its data allow is stopped early, undecided, so the
budget goes to cells that can be decided. Stopping early never costs validity (no claim is
made of such a cell); the guard only decides where the trials go. `trials_needed` is the
point estimate a report gives for any undecided cell: about how many trials a decision
would take at the spread and ratio seen.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from enum import StrEnum
from functools import lru_cache

import numpy as np

from .band import Band, band_for, check_tolerance
from .estimates import MAD_NORMAL_SCALE, check_confidence
from .paired import Pairs
from .sequential import accepted_counts
from .verdicts import paired_verdict

#: Confidence of the range the out-of-reach guard takes its best centre from.
GUARD_CONFIDENCE = 0.95
#: How far beyond ``max_runs`` the best case's count must lie for a cell to be given up.
GUARD_FACTOR = 1.5
#: No estimate beyond this many trials: "more than anyone will run".
NEEDED_LIMIT = 100_000


class Stop(StrEnum):
    """Whether a cell needs more trials, and if not, why not."""

    CONTINUE = "continue"        # undecided, budget left
    DECIDED = "decided"          # its verdict is decided (any but undecided)
    BUDGET = "budget"            # undecided, but max_runs trials are spent
    OUT_OF_REACH = "out-of-reach"  # undecided, and max_runs could not decide it


@dataclass(frozen=True)
class Rule:
    """The stopping rule: at least ``min_runs`` trials, at most ``max_runs``, until the
    verdict at ``confidence`` is decided or out of reach, against the band 1 +/-
    ``tolerance`` -- or, with none given, the band a person notices (`band`)."""

    min_runs: int
    max_runs: int
    tolerance: float | None = None
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.max_runs:
            raise ValueError(f"need 1 <= min_runs <= max_runs, got {self.min_runs}, "
                             f"{self.max_runs}")
        if self.tolerance is not None:
            check_tolerance(self.tolerance)
        check_confidence(self.confidence)

    def band(self, reference_s: float | None) -> Band:
        """The band for a cell whose unloaded start's median is ``reference_s``."""
        return band_for(reference_s, self.tolerance)


def decision(rule: Rule, pairs: Pairs, trials: int, reference_s: float | None = None) -> Stop:
    """Whether a loaded cell needs more trials, from its rounds paired with its baseline's,
    its own count of trials (failed ones included) and its baseline's median
    (``reference_s``, which sizes the band): decided once it has ``min_runs`` trials and its
    verdict is decided; out of reach once it has ``min_runs`` and `out_of_reach` says so;
    out of budget at ``max_runs``."""
    if trials >= rule.min_runs and pairs.n:
        tolerance = rule.band(reference_s).tolerance
        v = paired_verdict(pairs, tolerance=tolerance, confidence=rule.confidence)
        if v.decided:
            return Stop.DECIDED
        if trials < rule.max_runs and out_of_reach(rule, pairs, tolerance):
            return Stop.OUT_OF_REACH
    return Stop.BUDGET if trials >= rule.max_runs else Stop.CONTINUE


# --------------------------------------------------------------------------- how far


def _z(p: float) -> float:
    from scipy.special import ndtri

    return float(ndtri(p))


@lru_cache(maxsize=8192)
def half_width(n: int, confidence: float) -> float:
    """The paired sequence's half-width at n pairs, in units of the d's spread, for normal
    d's: its outer kept order statistic's expected place (Blom's approximation); inf while
    the sequence is still open."""
    counts = accepted_counts(n, confidence)
    if counts is None or counts[0] == 0:
        return math.inf
    first, last = counts
    return max(_z((last + 1 - 0.375) / (n + 0.25)), -_z((first - 0.375) / (n + 0.25)))


#: Up to this many pairs `pairs_for` looks at every count (the half-width saw-tooths as the
#: kept order statistics step); beyond, it bisects the trend.
SCAN_LIMIT = 2_000


def pairs_for(spread: float, margin: float, confidence: float, start: int = 1) -> int | None:
    """The fewest pairs (from ``start``) whose expected half-width is under ``margin``, for
    normal d's of that spread; None when the margin is nil or more than `NEEDED_LIMIT` pairs
    are needed."""
    if margin <= 0.0:
        return None
    if spread <= 0.0:
        return start
    return _first_count(lambda n: spread * half_width(n, confidence) < margin, start)


def _edge(tolerance: float) -> float:
    """The band's upper edge in log units: every decided verdict has one end of its
    interval on one side of it (slower: the lower end above; the others: the upper end
    within)."""
    return math.log(1.0 + tolerance)


def _spread(d: np.ndarray) -> float:
    return MAD_NORMAL_SCALE * float(np.median(np.abs(d - np.median(d))))


def _decides(lo: float, hi: float, edge: float) -> bool:
    """Whether an interval (log units) decides: its lower end above the band's upper edge,
    or its upper end within it (`verdicts.classify`)."""
    return lo > edge or hi <= edge


def trials_needed(pairs: Pairs, tolerance: float, confidence: float) -> int | None:
    """About how many pairs the sequence needs to decide the cell if further rounds keep the
    distribution seen: at each count m the sequence's outer kept order statistics stand at
    their expected quantiles (Blom's) of the per-round log ratios seen, interpolated, and
    the count is the first whose interval decides. Distribution-free like the sequence
    itself: an outlier seen keeps the estimate up until the kept order statistics pass it.
    None with fewer than 3 pairs, or when no count up to `NEEDED_LIMIT` decides (a centre
    on the band's upper edge)."""
    if pairs.n < 3:
        return None
    d = np.sort(pairs.d)
    edge = _edge(tolerance)

    def fits(m: int) -> bool:
        counts = accepted_counts(m, confidence)
        if counts is None or counts[0] == 0:
            return False
        first, last = counts
        levels = [(first - 0.375) / (m + 0.25), (last + 1 - 0.375) / (m + 0.25)]
        # Blom's plotting positions: at m = n these are the order statistics themselves
        lo, hi = np.quantile(d, levels, method="normal_unbiased")
        return _decides(float(lo), float(hi), edge)

    return _first_count(fits)


def _first_count(fits: Callable[[int], bool], start: int = 1) -> int | None:
    """The first count from ``start`` that fits: every count up to `SCAN_LIMIT` (the
    sequence's width saw-tooths as its kept order statistics step), beyond it by bisecting
    the trend; None past `NEEDED_LIMIT`."""
    for n in range(start, SCAN_LIMIT + 1):
        if fits(n):
            return n
    lo, hi = max(start, SCAN_LIMIT), 2 * max(start, SCAN_LIMIT)
    while not fits(hi):
        if hi >= NEEDED_LIMIT:
            return None
        lo, hi = hi, min(2 * hi, NEEDED_LIMIT)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if fits(mid) else (mid, hi)
    return hi


def out_of_reach(rule: Rule, pairs: Pairs, tolerance: float) -> bool:
    """Whether even the best case the data allow needs more than `GUARD_FACTOR` times
    ``max_runs`` pairs to decide against the band 1 +/- ``tolerance``: the centre anywhere
    in its 95% range (median +/- 1.96 standard errors of a normal median, 1.2533 spread /
    sqrt n), at its most decidable point (the end of the range farther from the band's
    upper edge, which every decision is made against), with the spread seen. The factor
    leaves room for a spread that was seen too wide: on simulated cells it gives up on at
    most a few in a hundred that the budget would have decided
    (`tests/stats/test_simulation.py`)."""
    n = pairs.n
    if n < 4:
        return False
    spread = _spread(pairs.d)
    centre = float(np.median(pairs.d))
    reach = _z(0.5 + GUARD_CONFIDENCE / 2) * 1.2533 * spread / math.sqrt(n)
    edge = _edge(tolerance)
    margin = max(abs(centre - reach - edge), abs(centre + reach - edge))
    needed = pairs_for(spread, margin, rule.confidence, start=n)
    return needed is None or needed > GUARD_FACTOR * rule.max_runs
