"""The stopping rule and the verdicts as shipped, on simulated studies with a known truth: at
a 0.2 s start (the quick preset's, whose band a person notices is ±25%) and a 9 s one (the
office preset's, ±10%), the intervals the runs end with cover the true ratio at least 95% of
the time and their calls -- "slower", "at most X×", "indistinguishable", "faster" -- are
wrong at most 5% of the time, at every true ratio the issue of one-sided verdicts named --
while an unadjusted interval, looked at after every round and stopped on, does not keep its
promise (so this check can fail). The larger simulation is benchmarks/sequential_coverage.py,
its figures in docs/measurements/statistics.md."""

from __future__ import annotations

import math

import pytest

from backburner import stats as bs
from backburner.bench import config
from backburner.stats import VerdictKind
from backburner.stats.simulation import simulate, unadjusted_verdict, wrong_call

#: start length (s) -> (the shipped rule for a start that long, a realistic lognormal spread
#: of one trial: the quick preset's cold 0.2 s starts vary by 10-20%, the office's 9 s
#: window by a few per cent)
STARTS = {0.2: (config.preset("quick").stopping_rule(), 0.15),
          9.0: (config.preset("office-hdd").stopping_rule(), 0.05)}
RATIOS = [1.0, 1.05, 1.1, 1.2, 1.3, 3.0]
#: the negative control's budget: long enough to look many times
PEEKED = bs.Rule(min_runs=6, max_runs=60)


@pytest.mark.parametrize("ratio", RATIOS)
@pytest.mark.parametrize("start_s", sorted(STARTS))
def test_the_shipped_rule_keeps_coverage_and_call_errors(start_s: float, ratio: float) -> None:
    rule, sigma = STARTS[start_s]
    out = simulate(rule, ratio, start_s=start_s, sigma=sigma, studies=150,
                   seed=int(ratio * 100 + start_s * 10))
    assert out.tolerance == (0.25 if start_s < 1 else 0.10)  # the band a person notices
    assert out.coverage >= 0.95
    assert out.wrong_rate <= 0.05
    edge = 1 + out.tolerance
    if math.log(ratio / edge) > 0.5:  # clearly beyond the band: decided slower, early
        assert out.calls.get(VerdictKind.SLOWER, 0) >= 0.9 * out.studies
        assert out.trials < rule.max_runs / 2
    if ratio == 1.0:  # clearly within: "at most" or better, never "slower"
        assert set(out.calls) <= {VerdictKind.AT_MOST, VerdictKind.INDISTINGUISHABLE,
                                  VerdictKind.UNDECIDED}
        if start_s < 1:  # the quick preset's budget decides nearly every such cell
            assert out.decided >= 0.9 * out.studies
    # giving up out of reach costs few decisions the budget would have made
    assert out.given_up_decidable <= 0.05 * out.studies


@pytest.mark.parametrize("ratio", [1.0, 1.1, 1.3])
def test_pairing_needs_no_equal_spreads(ratio: float) -> None:
    """A loaded cell twice as spread as its baseline: the median per-round ratio is still
    the ratio of the medians (lognormal), and the sequence still covers it."""
    rule, _ = STARTS[0.2]
    out = simulate(rule, ratio, start_s=0.2, sigma=0.05, loaded_sigma=0.1, studies=150,
                   seed=7 + int(ratio * 100))
    assert out.coverage >= 0.95 and out.wrong_rate <= 0.05


@pytest.mark.parametrize("start_s", sorted(STARTS))
def test_an_unadjusted_interval_stopped_on_breaks_both_promises(start_s: float) -> None:
    """The negative control: Student's t interval of the same pairs, checked after every
    round, at a true ratio on the band's upper edge (where a wrong "slower" or "at most"
    is one lucky run of rounds away): it covers the truth less than 95% of the time and
    its calls are wrong more than 5% of the time."""
    tolerance = PEEKED.band(start_s).tolerance
    out = simulate(PEEKED, 1 + tolerance, start_s=start_s, sigma=STARTS[start_s][1],
                   studies=100, seed=11, peeking=True)
    assert out.coverage < 0.95 and out.wrong_rate > 0.05
    assert out.calls.get(VerdictKind.SLOWER, 0) > 0


def test_the_unadjusted_interval_is_a_fixed_n_t_interval() -> None:
    pairs = bs.pair_rounds({i: (math.exp(x), False) for i, x in enumerate([0.1, 0.2, 0.3])},
                           {i: (1.0, False) for i in range(3)})
    v = unadjusted_verdict(pairs, 0.10, 0.95)
    half = 4.302653 * 0.1 / math.sqrt(3)  # t(0.975, 2) x sd / sqrt(n)
    assert v.ratio.ratio == pytest.approx(math.exp(0.2))
    assert (v.ratio.lo, v.ratio.hi) == pytest.approx((math.exp(0.2 - half),
                                                      math.exp(0.2 + half)))


@pytest.mark.parametrize(("kind", "ratio", "hi", "wrong"), [
    ("slower", 1.1, math.inf, True), ("slower", 1.11, math.inf, False),
    ("faster", 0.9, 0.85, True), ("faster", 0.8, 0.85, False),
    ("indistinguishable", 1.1, 1.1, False), ("indistinguishable", 1.3, 1.1, True),
    ("at-most", 1.05, 1.08, False), ("at-most", 1.09, 1.08, True),  # above its bound
    ("at-most", 1.2, 1.08, True), ("undecided", 3.0, 3.5, False)])
def test_wrong_call(kind: str, ratio: float, hi: float, wrong: bool) -> None:
    assert wrong_call(kind, ratio, 0.10, hi) is wrong
