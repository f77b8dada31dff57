"""Simulated studies with a known truth, to measure what the stopping rule's intervals and
verdicts are worth: how often the interval a run ends with covers the true ratio, and how
often its call is wrong.

Each study is one loaded cell against its baseline, both lognormal (start-up times are
positive and right-skewed) with the same spread, the loaded median ``ratio`` times the
baseline's. As `bench` does, the two cells get one trial each per round; after every round
the rule (`stopping.decision`, the one the runner calls) says whether to go on. The study
ends decided or on its budget, and its last interval and verdict are scored. Pure: a seeded
``numpy.random.Generator`` in, counts out; the suite runs a small one, `benchmarks/` a
large one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .stopping import Rule, Stop, decision
from .verdicts import Verdict, VerdictKind, sequential_verdict, verdict


@dataclass(frozen=True)
class Outcome:
    """How many of ``studies`` ended each way, at a true ``ratio``."""

    ratio: float
    studies: int
    covered: int                 # the last interval holds the true ratio
    calls: dict[str, int] = field(default_factory=dict)  # verdict kind -> studies
    wrong: int = 0               # a decided verdict the truth contradicts
    budget: int = 0              # ended undecided at max_runs
    trials: float = 0.0          # mean trials per cell

    @property
    def coverage(self) -> float:
        return self.covered / self.studies

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.studies


def wrong_call(kind: str, ratio: float, tolerance: float) -> bool:
    """Whether a decided verdict contradicts a true ratio: "slower" (or "faster") with the
    truth not beyond the band, "indistinguishable" with it outside the band."""
    if kind == VerdictKind.SLOWER:
        return ratio <= 1.0 + tolerance
    if kind == VerdictKind.FASTER:
        return ratio >= 1.0 - tolerance
    if kind == VerdictKind.INDISTINGUISHABLE:
        return not 1.0 - tolerance <= ratio <= 1.0 + tolerance
    return False


def _judge(rule: Rule, loaded: np.ndarray, base: np.ndarray, peeking: bool) -> Verdict:
    if peeking:  # the fixed-n bootstrap looked at after every round: what not to do
        return verdict(loaded, base, tolerance=rule.tolerance, confidence=rule.confidence,
                       resamples=1000)
    return sequential_verdict(loaded, base, tolerance=rule.tolerance,
                              confidence=rule.confidence)


def _study(rule: Rule, ratio: float, sigma: float, rng: np.random.Generator,
           peeking: bool) -> tuple[Verdict, int, bool]:
    """One study: (its last verdict, trials per cell, whether it ended on its budget)."""
    base = rng.lognormal(0.0, sigma, rule.max_runs)
    loaded = rng.lognormal(np.log(ratio), sigma, rule.max_runs)
    n = rule.min_runs
    while True:
        if peeking:
            v = _judge(rule, loaded[:n], base[:n], True)
            stop = (Stop.DECIDED if v.kind != VerdictKind.INCONCLUSIVE
                    else Stop.BUDGET if n >= rule.max_runs else Stop.CONTINUE)
        else:
            stop = decision(rule, loaded[:n], base[:n])
        if stop != Stop.CONTINUE:
            v = _judge(rule, loaded[:n], base[:n], peeking)
            return v, n, stop == Stop.BUDGET
        n += 1


def simulate(rule: Rule, ratio: float, *, sigma: float = 0.25, studies: int = 200,
             seed: int = 0, peeking: bool = False) -> Outcome:
    """``studies`` simulated studies at a true ``ratio`` under ``rule`` (``peeking``: the
    fixed-n bootstrap verdict stopped on instead, to show what the sequence prevents)."""
    rng = np.random.default_rng(seed)
    covered = wrong = budget = total = 0
    calls: dict[str, int] = {}
    for _ in range(studies):
        v, n, on_budget = _study(rule, ratio, sigma, rng, peeking)
        covered += v.ratio.lo <= ratio <= v.ratio.hi
        calls[v.kind] = calls.get(v.kind, 0) + 1
        wrong += wrong_call(v.kind, ratio, rule.tolerance)
        budget += on_budget
        total += n
    return Outcome(ratio, studies, covered, calls, wrong, budget, total / studies)
