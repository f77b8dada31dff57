"""stats.comparisons: two cells compared, against scipy and brute force; the ratio's
interval checked by simulation, and with timeouts (censored values) never narrower than the
truth's."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats as ss

from backburner import stats as bs

# --------------------------------------------------------------------------- ratio of medians


def test_ratio_of_medians_point_and_interval() -> None:
    rng = np.random.default_rng(12)
    a = rng.lognormal(np.log(300), 0.1, size=40)
    b = rng.lognormal(np.log(100), 0.1, size=30)
    r = bs.ratio_of_medians(a, b)
    assert r.ratio == pytest.approx(np.median(a) / np.median(b), rel=1e-12)
    assert r.lo <= r.ratio <= r.hi
    assert 2.5 < r.lo < r.hi < 3.5
    assert bs.ratio_of_medians(a, b) == r
    assert bs.ratio_of_medians(a, b, seed=1) != r


def test_ratio_of_medians_scales_exactly() -> None:
    # Same seed -> same resample indices, so scaling a by 2 scales every bootstrap ratio by 2.
    rng = np.random.default_rng(13)
    a, b = rng.normal(50, 5, size=20), rng.normal(40, 5, size=25)
    r1 = bs.ratio_of_medians(a, b, resamples=2000)
    r2 = bs.ratio_of_medians(2 * a, b, resamples=2000)
    assert (r2.ratio, r2.lo, r2.hi) == pytest.approx((2 * r1.ratio, 2 * r1.lo, 2 * r1.hi))


def test_ratio_of_medians_coverage_near_nominal() -> None:
    # lognormal groups with true medians 2 and 1 -> true ratio 2.
    rng = np.random.default_rng(14)
    hits = 0
    for i in range(200):
        a = rng.lognormal(np.log(2.0), 0.3, size=30)
        b = rng.lognormal(0.0, 0.3, size=30)
        r = bs.ratio_of_medians(a, b, resamples=1000, seed=i)
        hits += r.lo <= 2.0 <= r.hi
    assert 0.89 <= hits / 200 <= 0.99


def test_ratio_of_medians_zero_baseline() -> None:
    with pytest.raises(ValueError, match="zero"):
        bs.ratio_of_medians([1.0, 2.0], [0.0, 0.0, 1.0])


def test_the_ratio_interval_covers_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    sims, hits = 400, 0
    for i in range(sims):
        a, b = rng.lognormal(0.0, 0.6, 10), rng.lognormal(0.0, 0.6, 10)
        r = bs.ratio_of_medians(a, b, resamples=500, seed=i)
        hits += r.lo <= 1.0 <= r.hi
    assert hits / sims >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / sims)


# --------------------------------------------------------------------------- Mann-Whitney


def _datasets() -> list[tuple[str, np.ndarray, np.ndarray]]:
    rng = np.random.default_rng(15)
    return [
        ("small-no-ties", rng.normal(size=5), rng.normal(0.8, size=7)),
        ("one-small", rng.normal(size=4), rng.normal(0.5, size=30)),
        ("both-9", rng.normal(size=9), rng.normal(1.0, size=9)),
        ("medium", rng.normal(size=12), rng.normal(0.7, size=15)),
        ("large", rng.normal(size=40), rng.normal(0.3, size=35)),
        ("small-ties", np.round(rng.normal(size=6)), np.round(rng.normal(1, size=6))),
        ("medium-ties", np.round(rng.normal(size=15)), np.round(rng.normal(0.5, size=20))),
        ("heavy-ties", rng.integers(0, 3, size=25) * 1.0, rng.integers(1, 4, size=30) * 1.0),
        ("all-equal", np.ones(5), np.ones(4)),
        ("half-integer-u", np.array([1.0, 2.0, 3.0]), np.array([2.0, 4.0, 5.0])),  # U2 = 7.5
        ("separated", np.arange(1.0, 6.0), np.arange(10.0, 18.0)),
    ]


@pytest.mark.parametrize("method", ["auto", "exact", "asymptotic"])
@pytest.mark.parametrize(("name", "a", "b"), _datasets(), ids=[d[0] for d in _datasets()])
def test_mann_whitney_matches_scipy(method: str, name: str, a: np.ndarray, b: np.ndarray) -> None:
    ours = bs.mann_whitney(a, b, method=method)
    ref = ss.mannwhitneyu(a, b, alternative="two-sided", method=method)
    assert ours.u == pytest.approx(float(ref.statistic), abs=1e-9)
    assert ours.p == pytest.approx(float(ref.pvalue), rel=1e-9, abs=1e-15)
    assert ours.method == f"scipy {method}"  # which test was used, said with the result


def test_mann_whitney_bad_method() -> None:
    with pytest.raises(ValueError, match="method"):
        bs.mann_whitney([1.0], [2.0], method="permutation")


# --------------------------------------------------------------------------- Cliff's delta


def _cliffs_brute(a: list[float], b: list[float]) -> float:
    gt = lt = 0
    for x in a:
        for y in b:
            gt += x > y
            lt += x < y
    return (gt - lt) / (len(a) * len(b))


def test_cliffs_delta_hand_worked() -> None:
    # a = [1, 2, 3], b = [2, 4]: pairs (1,2)< (1,4)< (2,2)= (2,4)< (3,2)> (3,4)<
    # -> 1 greater, 4 less: delta = (1 - 4) / 6 = -0.5, |delta| >= 0.474 -> large.
    assert bs.cliffs_delta([1, 2, 3], [2, 4]) == bs.CliffsDelta(-0.5, "large")
    # Complete separation: every a above every b -> +1.
    assert bs.cliffs_delta([5, 6], [1, 2, 3]).delta == 1.0
    # Identical samples -> 0, negligible.
    assert bs.cliffs_delta([1, 2, 3], [1, 2, 3]) == bs.CliffsDelta(0.0, "negligible")


@pytest.mark.parametrize("seed", range(5))
def test_cliffs_delta_against_brute_force_and_u(seed: int) -> None:
    rng = np.random.default_rng(seed)
    a = np.round(rng.normal(0.3, 1, size=23), 1)  # rounding makes ties
    b = np.round(rng.normal(0.0, 1, size=17), 1)
    got = bs.cliffs_delta(a, b)
    assert got.delta == pytest.approx(_cliffs_brute(list(a), list(b)), abs=1e-12)
    # Identity with scipy's U (ties count 1/2): delta = 2U/(mn) - 1.
    u = ss.mannwhitneyu(a, b).statistic
    assert got.delta == pytest.approx(2 * u / (a.size * b.size) - 1, abs=1e-12)
    assert bs.cliffs_delta(b, a).delta == pytest.approx(-got.delta, abs=1e-12)


@pytest.mark.parametrize(
    ("delta", "label"),
    [
        (0.0, "negligible"),
        (0.146, "negligible"),
        (0.147, "small"),
        (-0.329, "small"),
        (0.33, "medium"),
        (-0.473, "medium"),
        (0.474, "large"),
        (-1.0, "large"),
    ],
)
def test_cliffs_magnitude_thresholds(delta: float, label: str) -> None:
    assert bs.cliffs_magnitude(delta) == label


# --------------------------------------------------------------------------- compare


def test_compare_bundles_the_parts() -> None:
    rng = np.random.default_rng(17)
    a, b = rng.normal(12, 1, size=20), rng.normal(10, 1, size=20)
    c = bs.compare(a, b, resamples=1000, seed=3)
    assert c.ratio == bs.ratio_of_medians(a, b, resamples=1000, seed=3)
    assert c.mann_whitney == bs.mann_whitney(a, b)
    assert c.cliffs_delta == bs.cliffs_delta(a, b)
    json.dumps(dataclasses.asdict(c))


# --------------------------------------------------------------------------- timeouts (censored)


def _censor(x: np.ndarray, limit: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """What a bench with this timeout records of true times x: the completed ones, and a
    limit for each that ran past it; and the true times in that order (completed first, as
    the censored values are passed), so a bootstrap with the same seed draws the same
    trials of both."""
    done = x[x < limit]
    return done, np.full(x.size - done.size, limit), np.concatenate([done, x[x >= limit]])


def test_censored_intervals_hold_the_uncensored_ones() -> None:
    """Seeded random truth, censored at a random limit: whatever the timed-out trials would
    have taken, the intervals hold those of the true times, so the coverage promised holds;
    the median is the true one unless marked a lower bound."""
    rng = np.random.default_rng(77)
    for i in range(300):
        a, b = rng.lognormal(0.5, 0.8, 12), rng.lognormal(0.0, 0.3, 10)
        limit = float(np.quantile(a, rng.uniform(0.3, 1.0)))
        done, cens, a = _censor(a, limit)
        if not done.size:
            continue
        s = bs.summarize(done, censored=cens, resamples=200, seed=i)
        true = bs.summarize(a, resamples=200, seed=i)
        assert s.median <= true.median
        assert s.median_lower_bound or s.median == true.median
        lo, hi = s.median_ci
        assert lo <= true.median_ci[0] and hi >= true.median_ci[1]
        lo, hi = s.median_ci_bootstrap
        assert lo <= true.median_ci_bootstrap[0] and hi >= true.median_ci_bootstrap[1]
        r = bs.ratio_of_medians(done, b, resamples=300, seed=i, a_censored=cens)
        t = bs.ratio_of_medians(a, b, resamples=300, seed=i)
        assert r.ratio <= t.ratio and r.lo <= t.lo and r.hi >= t.hi
        bd, bc, b = _censor(b, float(np.quantile(b, 0.8)))  # a baseline that timed out too
        r = bs.ratio_of_medians(done, bd, resamples=300, seed=i, a_censored=cens, b_censored=bc)
        t = bs.ratio_of_medians(a, b, resamples=300, seed=i)
        assert r.lo <= t.lo and r.hi >= t.hi


def test_no_censored_values_change_nothing() -> None:
    rng = np.random.default_rng(5)
    a, b = rng.lognormal(0, 0.3, 10), rng.lognormal(0, 0.3, 9)
    assert bs.ratio_of_medians(a, b, a_censored=[], b_censored=()) == bs.ratio_of_medians(a, b)
    assert bs.summarize(a, censored=[]) == bs.summarize(a)
