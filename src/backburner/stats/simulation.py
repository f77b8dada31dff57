"""Simulated studies with a known truth, to measure what the stopping rule's intervals and
verdicts are worth: how often the interval a run ends with covers the true ratio, and how
often its call is wrong.

Each study is one loaded cell against its baseline, both lognormal (start-up times are
positive and right-skewed), the loaded median ``ratio`` times the baseline's, with the same
spread or, to check that pairing needs no equal shapes, a wider one for the loaded cell. As
`bench` does, the two cells get one trial each per round; after every round the rule
(`stopping.decision`, the one the runner calls) says whether to go on. The study ends
decided, out of reach or on its budget, and its last interval and verdict are scored. Pure: a seeded
``numpy.random.Generator`` in, counts out; the suite runs a small one, `benchmarks/` a
large one.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from .paired import Pairs
from .stopping import Rule, Stop, decision
from .verdicts import Verdict, VerdictKind, paired_verdict, verdict


@dataclass(frozen=True)
class Outcome:
    """How many of ``studies`` ended each way, at a true ``ratio``."""

    ratio: float
    studies: int
    covered: int                 # the last interval holds the true ratio
    calls: dict[str, int] = field(default_factory=dict)  # verdict kind -> studies
    wrong: int = 0               # a decided verdict the truth contradicts
    budget: int = 0              # ended undecided at max_runs
    out_of_reach: int = 0        # ended undecided early: max_runs could not decide it
    given_up_decidable: int = 0  # of those, the ones max_runs trials would have decided
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
    return paired_verdict(_pairs(loaded, base), tolerance=rule.tolerance,
                          confidence=rule.confidence)


def _pairs(loaded: np.ndarray, base: np.ndarray) -> Pairs:
    """Round i's trials pair up; no timeouts (what `paired.pair_rounds` makes of them)."""
    none = np.zeros(loaded.size, dtype=bool)
    return Pairs(np.log(loaded) - np.log(base), none, none)


def _decided_later(rule: Rule, loaded: np.ndarray, base: np.ndarray, n: int) -> bool:
    """Whether a study given up at n would have been decided by max_runs after all."""
    return any(_judge(rule, loaded[:m], base[:m], False).kind != VerdictKind.INCONCLUSIVE
               for m in range(n + 1, rule.max_runs + 1))


def _study(rule: Rule, ratio: float, sigma: float, loaded_sigma: float,
           rng: np.random.Generator, peeking: bool) -> tuple[Verdict, int, Stop, bool]:
    """One study: its last verdict, trials per cell, why it stopped, and (given up out of
    reach) whether the budget would have decided it."""
    base = rng.lognormal(0.0, sigma, rule.max_runs)
    loaded = rng.lognormal(np.log(ratio), loaded_sigma, rule.max_runs)
    n = rule.min_runs
    while True:
        if peeking:
            v = _judge(rule, loaded[:n], base[:n], True)
            stop = (Stop.DECIDED if v.kind != VerdictKind.INCONCLUSIVE
                    else Stop.BUDGET if n >= rule.max_runs else Stop.CONTINUE)
        else:
            stop = decision(rule, _pairs(loaded[:n], base[:n]), n)
        if stop != Stop.CONTINUE:
            lost = stop == Stop.OUT_OF_REACH and _decided_later(rule, loaded, base, n)
            return _judge(rule, loaded[:n], base[:n], peeking), n, stop, lost
        n += 1


def simulate(rule: Rule, ratio: float, *, sigma: float = 0.25,
             loaded_sigma: float | None = None, studies: int = 200, seed: int = 0,
             peeking: bool = False) -> Outcome:
    """``studies`` simulated studies at a true ``ratio`` under ``rule`` (``loaded_sigma``:
    the loaded cell's own spread, default ``sigma``; ``peeking``: the fixed-n bootstrap
    verdict stopped on instead, to show what the sequence prevents)."""
    rng = np.random.default_rng(seed)
    covered = wrong = budget = reach = lost = total = 0
    calls: dict[str, int] = {}
    for _ in range(studies):
        spread = sigma if loaded_sigma is None else loaded_sigma
        v, n, stop, decidable = _study(rule, ratio, sigma, spread, rng, peeking)
        covered += v.ratio.lo <= ratio <= v.ratio.hi
        calls[v.kind] = calls.get(v.kind, 0) + 1
        wrong += wrong_call(v.kind, ratio, rule.tolerance)
        budget += stop == Stop.BUDGET
        reach += stop == Stop.OUT_OF_REACH
        lost += decidable
        total += n
    return Outcome(ratio, studies, covered, calls, wrong, budget, reach, lost, total / studies)
