"""The stopping rule `bench` runs: a cell gets trials until its verdict is decided or its
budget is spent.

Decided means the verdict read off the confidence sequence (`sequential`) is slower, faster
or indistinguishable; because that interval is valid at every sample size at once, stopping
on it leaves the interval and the verdict as valid as at a fixed n (`simulation` checks it).
The budget in trials is here; a budget in time is the runner's, which stops every cell
alike and so cannot bias one against another.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

import numpy as np
from numpy.typing import ArrayLike

from .estimates import as_censored, check_confidence
from .verdicts import VerdictKind, sequential_verdict


class Stop(StrEnum):
    """Whether a cell needs more trials, and if not, why not."""

    CONTINUE = "continue"   # undecided, budget left
    DECIDED = "decided"     # its verdict is one of slower, faster, indistinguishable
    BUDGET = "budget"       # undecided, but max_runs trials are spent


@dataclass(frozen=True)
class Rule:
    """The stopping rule: at least ``min_runs`` trials, at most ``max_runs``, until the
    verdict at ``tolerance`` and ``confidence`` is decided."""

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


def decision(rule: Rule, loaded: ArrayLike, baseline: ArrayLike, *,
             loaded_censored: ArrayLike = (), baseline_censored: ArrayLike = ()) -> Stop:
    """Whether a loaded cell needs more trials: decided once it has ``min_runs`` trials and
    its sequence's verdict is not inconclusive; out of budget at ``max_runs`` trials."""
    x, c = np.asarray(loaded, dtype=float), as_censored(loaded_censored)
    n = int(x.size + c.size)
    if n >= rule.min_runs and x.size and np.asarray(baseline, dtype=float).size:
        v = sequential_verdict(x, baseline, tolerance=rule.tolerance,
                               confidence=rule.confidence, loaded_censored=c,
                               baseline_censored=baseline_censored)
        if v.kind != VerdictKind.INCONCLUSIVE:
            return Stop.DECIDED
    return Stop.BUDGET if n >= rule.max_runs else Stop.CONTINUE
