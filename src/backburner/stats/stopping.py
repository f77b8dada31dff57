"""The stopping rule `bench` runs: a cell gets trials until its verdict is decided, its
budget is spent, or a decision is out of the budget's reach.

Decided means the verdict read off the paired rounds' confidence sequence (`paired`) is
slower, faster or indistinguishable; because that interval is valid at every number of
rounds at once, stopping on it leaves the interval and the verdict as valid as at a fixed n
(`simulation` checks it). The budget in trials is here; a budget in time is the runner's,
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

from .estimates import MAD_NORMAL_SCALE, check_confidence
from .paired import Pairs
from .sequential import accepted_counts
from .verdicts import VerdictKind, paired_verdict

#: Confidence of the range the out-of-reach guard takes its best centre from.
GUARD_CONFIDENCE = 0.95
#: How far beyond ``max_runs`` the best case's count must lie for a cell to be given up.
GUARD_FACTOR = 1.5
#: No estimate beyond this many trials: "more than anyone will run".
NEEDED_LIMIT = 100_000


class Stop(StrEnum):
    """Whether a cell needs more trials, and if not, why not."""

    CONTINUE = "continue"        # undecided, budget left
    DECIDED = "decided"          # its verdict is one of slower, faster, indistinguishable
    BUDGET = "budget"            # undecided, but max_runs trials are spent
    OUT_OF_REACH = "out-of-reach"  # undecided, and max_runs could not decide it


@dataclass(frozen=True)
class Rule:
    """The stopping rule: at least ``min_runs`` trials, at most ``max_runs``, until the
    verdict at ``tolerance`` and ``confidence`` is decided or out of reach."""

    min_runs: int
    max_runs: int
    tolerance: float = 0.10
    confidence: float = 0.95

    def __post_init__(self) -> None:
        if not 1 <= self.min_runs <= self.max_runs:
            raise ValueError(f"need 1 <= min_runs <= max_runs, got {self.min_runs}, "
                             f"{self.max_runs}")
        if not 0.0 <= self.tolerance < 1.0:
            raise ValueError(f"tolerance must be in [0, 1), got {self.tolerance}")
        check_confidence(self.confidence)


def decision(rule: Rule, pairs: Pairs, trials: int) -> Stop:
    """Whether a loaded cell needs more trials, from its rounds paired with its baseline's
    and its own count of trials (failed ones included): decided once it has ``min_runs``
    trials and its verdict is not inconclusive; out of reach once it has ``min_runs`` and
    `out_of_reach` says so; out of budget at ``max_runs``."""
    if trials >= rule.min_runs and pairs.n:
        v = paired_verdict(pairs, tolerance=rule.tolerance, confidence=rule.confidence)
        if v.kind != VerdictKind.INCONCLUSIVE:
            return Stop.DECIDED
        if trials < rule.max_runs and out_of_reach(rule, pairs):
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


def _edges(tolerance: float) -> tuple[float, float]:
    return math.log(1.0 - tolerance), math.log(1.0 + tolerance)


def _spread(d: np.ndarray) -> float:
    return MAD_NORMAL_SCALE * float(np.median(np.abs(d - np.median(d))))


def _decides(lo: float, hi: float, edges: tuple[float, float]) -> bool:
    """Whether an interval (log units) is wholly beyond, below or inside the band."""
    low, high = edges
    return lo > high or hi < low or (low <= lo and hi <= high)


def trials_needed(pairs: Pairs, tolerance: float, confidence: float) -> int | None:
    """About how many pairs the sequence needs to decide the cell if further rounds keep the
    distribution seen: at each count m the sequence's outer kept order statistics stand at
    their expected quantiles (Blom's) of the per-round log ratios seen, interpolated, and
    the count is the first whose interval decides. Distribution-free like the sequence
    itself: an outlier seen keeps the estimate up until the kept order statistics pass it.
    None with fewer than 3 pairs, or when no count up to `NEEDED_LIMIT` decides (a centre
    on an edge of the band)."""
    if pairs.n < 3:
        return None
    d = np.sort(pairs.d)
    edges = _edges(tolerance)

    def fits(m: int) -> bool:
        counts = accepted_counts(m, confidence)
        if counts is None or counts[0] == 0:
            return False
        first, last = counts
        levels = [(first - 0.375) / (m + 0.25), (last + 1 - 0.375) / (m + 0.25)]
        # Blom's plotting positions: at m = n these are the order statistics themselves
        lo, hi = np.quantile(d, levels, method="normal_unbiased")
        return _decides(float(lo), float(hi), edges)

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


def out_of_reach(rule: Rule, pairs: Pairs) -> bool:
    """Whether even the best case the data allow needs more than `GUARD_FACTOR` times
    ``max_runs`` pairs: the centre anywhere in its 95% range (median +/- 1.96 standard
    errors of a normal median, 1.2533 spread / sqrt n), at its most decidable point (the
    band's middle if the range holds it, else the end farther from the nearer edge), with
    the spread seen. The factor leaves room for a spread that was seen too wide: on
    simulated cells it gives up on at most a few in a hundred that the budget would have
    decided (`tests/stats/test_simulation.py`)."""
    n = pairs.n
    if n < 4:
        return False
    spread = _spread(pairs.d)
    centre = float(np.median(pairs.d))
    reach = _z(0.5 + GUARD_CONFIDENCE / 2) * 1.2533 * spread / math.sqrt(n)
    edges = _edges(rule.tolerance)
    middle = sum(edges) / 2
    lo, hi = centre - reach, centre + reach
    candidates = [lo, hi, *([middle] if lo <= middle <= hi else [])]
    margin = max(min(abs(c - e) for e in edges) for c in candidates)
    needed = pairs_for(spread, margin, rule.confidence, start=n)
    return needed is None or needed > GUARD_FACTOR * rule.max_runs
