"""Simulated studies with a known truth, to measure what the stopping rule's intervals and
verdicts are worth: how often the interval a run ends with covers the true ratio, and how
often its call is wrong.

Each study is one loaded cell against its baseline, both lognormal (start-up times are
positive and right-skewed): the baseline's median ``start_s`` seconds, the loaded median
``ratio`` times it, with the same spread or, to check that pairing needs no equal shapes, a
wider one for the loaded cell. The start's length matters because it sizes the band a person
notices (`band.noticeable`: ±25% for a 0.2 s start, ±10% for a 9 s one); as `bench` does,
the band is sized from the baseline's median seen so far, and the calls are scored against
the band of the true median. The two cells get one trial each per round; after every round
the rule (`stopping.decision`, the one the runner calls) says whether to go on. The study
ends decided, out of reach or on its budget, and its last interval and verdict are scored.

The negative control (``peeking``) is what the sequence exists to prevent: an unadjusted
fixed-n interval of the same paired log ratios (Student's t, valid at one fixed n), looked at
after every round and stopped on as soon as the same rule calls it decided. Pure: a seeded
``numpy.random.Generator`` in, counts out; the suite runs a small one, `benchmarks/` a
large one.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from .comparisons import RatioCI
from .paired import Pairs
from .stopping import Rule, Stop, decision
from .verdicts import Verdict, VerdictKind, classify, paired_verdict

#: What `RatioCI.method` says of the negative control's interval.
UNADJUSTED = "unadjusted-t"


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
    tolerance: float = math.nan  # the band of the true baseline median

    @property
    def coverage(self) -> float:
        return self.covered / self.studies

    @property
    def wrong_rate(self) -> float:
        return self.wrong / self.studies

    @property
    def decided(self) -> int:
        return self.studies - self.calls.get(VerdictKind.UNDECIDED, 0)


def wrong_call(kind: str, ratio: float, tolerance: float, hi: float = math.inf) -> bool:
    """Whether a decided verdict contradicts a true ratio: "slower" (or "faster") with the
    truth not beyond the band, "indistinguishable" with it outside the band, "at most" with
    it above the bound the verdict states (the interval's upper end ``hi``, itself within
    the band)."""
    if kind == VerdictKind.SLOWER:
        return ratio <= 1.0 + tolerance
    if kind == VerdictKind.FASTER:
        return ratio >= 1.0 - tolerance
    if kind == VerdictKind.INDISTINGUISHABLE:
        return not 1.0 - tolerance <= ratio <= 1.0 + tolerance
    if kind == VerdictKind.AT_MOST:
        return ratio > min(hi, 1.0 + tolerance)
    return False


def unadjusted_verdict(pairs: Pairs, tolerance: float, confidence: float) -> Verdict:
    """The negative control: Student's t interval of the mean paired log ratio, valid at one
    fixed n only, read against the band as the sequence is."""
    from scipy.stats import t

    d = pairs.d
    centre = float(np.mean(d))
    if d.size < 2:
        r = RatioCI(math.exp(centre), 0.0, math.inf, confidence, UNADJUSTED)
    else:
        half = float(t.ppf(0.5 + confidence / 2, d.size - 1)) * float(np.std(d, ddof=1)) \
            / math.sqrt(d.size)
        r = RatioCI(math.exp(centre), math.exp(centre - half), math.exp(centre + half),
                    confidence, UNADJUSTED)
    return Verdict(classify(r, tolerance), r, tolerance)


def _pairs(loaded: np.ndarray, base: np.ndarray) -> Pairs:
    """Round i's trials pair up; no timeouts (what `paired.pair_rounds` makes of them)."""
    none = np.zeros(loaded.size, dtype=bool)
    return Pairs(np.log(loaded) - np.log(base), none, none)


def _judge(rule: Rule, loaded: np.ndarray, base: np.ndarray, peeking: bool) -> Verdict:
    tolerance = rule.band(float(np.median(base))).tolerance
    pairs = _pairs(loaded, base)
    if peeking:
        return unadjusted_verdict(pairs, tolerance, rule.confidence)
    return paired_verdict(pairs, tolerance=tolerance, confidence=rule.confidence)


def _decided_later(rule: Rule, loaded: np.ndarray, base: np.ndarray, n: int) -> bool:
    """Whether a study given up at n would have been decided by max_runs after all."""
    return any(_judge(rule, loaded[:m], base[:m], False).decided
               for m in range(n + 1, rule.max_runs + 1))


def _study(rule: Rule, ratio: float, start_s: float, sigma: float, loaded_sigma: float,
           rng: np.random.Generator, peeking: bool) -> tuple[Verdict, int, Stop, bool]:
    """One study: its last verdict, trials per cell, why it stopped, and (given up out of
    reach) whether the budget would have decided it."""
    base = rng.lognormal(math.log(start_s), sigma, rule.max_runs)
    loaded = rng.lognormal(math.log(start_s * ratio), loaded_sigma, rule.max_runs)
    n = rule.min_runs
    while True:
        if peeking:
            v = _judge(rule, loaded[:n], base[:n], True)
            stop = (Stop.DECIDED if v.decided
                    else Stop.BUDGET if n >= rule.max_runs else Stop.CONTINUE)
        else:
            stop = decision(rule, _pairs(loaded[:n], base[:n]), n,
                            float(np.median(base[:n])))
        if stop != Stop.CONTINUE:
            lost = stop == Stop.OUT_OF_REACH and _decided_later(rule, loaded, base, n)
            return _judge(rule, loaded[:n], base[:n], peeking), n, stop, lost
        n += 1


def simulate(rule: Rule, ratio: float, *, start_s: float = 1.0, sigma: float = 0.25,
             loaded_sigma: float | None = None, studies: int = 200, seed: int = 0,
             peeking: bool = False) -> Outcome:
    """``studies`` simulated studies at a true ``ratio`` under ``rule``, the baseline's
    median ``start_s`` seconds (``loaded_sigma``: the loaded cell's own spread, default
    ``sigma``; ``peeking``: the unadjusted interval stopped on instead, the negative
    control)."""
    rng = np.random.default_rng(seed)
    tolerance = rule.band(start_s).tolerance
    covered = wrong = budget = reach = lost = total = 0
    calls: dict[str, int] = {}
    spread = sigma if loaded_sigma is None else loaded_sigma
    for _ in range(studies):
        v, n, stop, decidable = _study(rule, ratio, start_s, sigma, spread, rng, peeking)
        covered += v.ratio.lo <= ratio <= v.ratio.hi
        calls[v.kind] = calls.get(v.kind, 0) + 1
        wrong += wrong_call(v.kind, ratio, tolerance, v.ratio.hi)
        budget += stop == Stop.BUDGET
        reach += stop == Stop.OUT_OF_REACH
        lost += decidable
        total += n
    return Outcome(ratio, studies, covered, calls, wrong, budget, reach, lost, total / studies,
                   tolerance)
