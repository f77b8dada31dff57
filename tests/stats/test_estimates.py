"""stats.estimates: each statistic of one cell against an independent computation.

scipy is used only in the tests, as the independent reference; hand-worked values are
written out in comments so a reader can check them without running anything.
"""

from __future__ import annotations

import dataclasses
import json
import math
import statistics

import numpy as np
import pytest
from scipy import stats as ss

from backburner import stats as bs
from backburner.stats import estimates

# --------------------------------------------------------------------------- summarize


def test_summarize_hand_worked() -> None:
    # x = [100, 2, 1, 4, 3]; sorted 1 2 3 4 100, n = 5.
    # numpy 'linear' quantile at p sits at position (n-1)p of the sorted data:
    #   q1: position 1 -> 2; median: position 2 -> 3; q3: position 3 -> 4; IQR = 2.
    # Fences: 2 - 1.5*2 = -1 and 4 + 1.5*2 = 7, so only 100 (input index 0) is flagged.
    # mean = 110 / 5 = 22.
    # |x - 3| = 97 1 2 1 0 -> sorted 0 1 1 2 97 -> MAD = 1; scaled 1.4826.
    # Deviations from the mean: 78 -20 -21 -18 -19; squares sum to
    #   6084 + 400 + 441 + 324 + 361 = 7610; /(n-1) = 1902.5; stdev = sqrt(1902.5).
    s = bs.summarize([100, 2, 1, 4, 3])
    assert s.n == 5
    assert (s.q1, s.median, s.q3, s.iqr) == (2.0, 3.0, 4.0, 2.0)
    assert (s.min, s.max, s.mean) == (1.0, 100.0, 22.0)
    assert s.stdev == pytest.approx(math.sqrt(1902.5), rel=1e-12)
    assert s.mad == 1.0
    assert s.mad_scaled == pytest.approx(1.4826)
    assert s.outliers == (0,)


def test_summarize_linear_quartiles_hand_worked() -> None:
    # [1, 2, 3, 4]: q1 at position 0.75 -> 1 + 0.75*(2-1) = 1.75;
    # q3 at position 2.25 -> 3 + 0.25*(4-3) = 3.25; median 2.5.
    s = bs.summarize([4, 1, 3, 2], resamples=100)
    assert (s.q1, s.median, s.q3) == (1.75, 2.5, 3.25)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_summarize_against_numpy_scipy_statistics(seed: int) -> None:
    rng = np.random.default_rng(seed)
    x = rng.lognormal(3.0, 0.6, size=37)
    s = bs.summarize(x, resamples=500)
    q1, med, q3 = np.percentile(x, [25, 50, 75])
    assert (s.q1, s.median, s.q3) == pytest.approx((q1, med, q3), rel=1e-12)
    assert s.iqr == pytest.approx(ss.iqr(x), rel=1e-12)
    assert s.mean == pytest.approx(statistics.fmean(x), rel=1e-12)
    assert s.stdev == pytest.approx(statistics.stdev(x), rel=1e-12)
    assert s.mad == pytest.approx(ss.median_abs_deviation(x), rel=1e-12)
    # scipy's 'normal' scale is 1/Phi^-1(0.75) = 1.482602...; we use the rounded 1.4826.
    assert s.mad_scaled == pytest.approx(ss.median_abs_deviation(x, scale="normal"), rel=1e-5)
    fence_lo, fence_hi = q1 - 1.5 * (q3 - q1), q3 + 1.5 * (q3 - q1)
    expected = tuple(i for i, v in enumerate(x) if v < fence_lo or v > fence_hi)
    assert s.outliers == expected


def test_outliers_are_flagged_not_dropped() -> None:
    x = [10.0] * 9 + [11.0] * 9 + [500.0, 1.0]
    s = bs.summarize(x, resamples=200)
    assert s.outliers == (18, 19)
    assert s.n == 20 and s.max == 500.0 and s.min == 1.0
    assert s.mean == pytest.approx(sum(x) / 20)


def test_summarize_single_sample() -> None:
    s = bs.summarize([7.5])
    assert s.n == 1 and s.median == 7.5
    assert s.median_ci_bootstrap == (7.5, 7.5)
    assert s.median_ci is None
    assert math.isnan(s.stdev)
    assert s.outliers == ()


@pytest.mark.parametrize("bad", [[], np.array([])])
def test_summarize_empty_raises(bad: object) -> None:
    with pytest.raises(ValueError, match="empty"):
        bs.summarize(bad)


def test_summarize_rejects_nan_and_2d() -> None:
    with pytest.raises(ValueError, match="NaN"):
        bs.summarize([1.0, float("nan")])
    with pytest.raises(ValueError, match="1-D"):
        bs.summarize([[1.0, 2.0]])


def test_summary_is_json_friendly() -> None:
    s = bs.summarize([1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0], resamples=100)
    d = dataclasses.asdict(s)
    text = json.dumps(d)
    assert json.loads(text)["median"] == 4.0
    for value in d.values():
        assert not isinstance(value, np.generic), value
    with pytest.raises(dataclasses.FrozenInstanceError):
        s.median = 0.0  # type: ignore[misc]


# --------------------------------------------------------------------------- bootstrap CI


def test_bootstrap_ci_contains_median_and_is_deterministic() -> None:
    x = np.random.default_rng(5).gamma(2.0, 10.0, size=40)
    a = bs.summarize(x, seed=11)
    b = bs.summarize(x, seed=11)
    assert a.median_ci_bootstrap == b.median_ci_bootstrap
    # Bootstrap endpoints snap to order statistics, so two seeds may agree; ten should not.
    others = {bs.summarize(x, seed=s, resamples=500).median_ci_bootstrap for s in range(10)}
    assert len(others) > 1
    lo, hi = a.median_ci_bootstrap
    assert lo <= a.median <= hi and lo < hi


def test_bootstrap_ci_narrows_with_n() -> None:
    rng = np.random.default_rng(6)
    small = bs.summarize(rng.normal(size=20)).median_ci_bootstrap
    large = bs.summarize(rng.normal(size=400), resamples=2000).median_ci_bootstrap
    assert (large[1] - large[0]) < 0.4 * (small[1] - small[0])


def test_bootstrap_ci_agrees_with_scipy_bootstrap() -> None:
    # n odd, so every bootstrap median is an order statistic; with 10k resamples the two
    # implementations (different random streams) pick the same or an adjacent one. At n=101
    # a 90% interval would sit two order statistics inside the 95% one, so this catches it.
    x = np.random.default_rng(7).normal(size=101)
    ours = bs.summarize(x).median_ci_bootstrap
    ref = ss.bootstrap(
        (x,), np.median, method="percentile", n_resamples=10_000, rng=1
    ).confidence_interval
    xs = np.sort(x)
    for mine, theirs in zip(ours, (ref.low, ref.high), strict=True):
        assert abs(np.searchsorted(xs, mine) - np.searchsorted(xs, theirs)) <= 1


def test_bootstrap_ci_coverage_near_nominal() -> None:
    # 200 normal samples of 25 with true median 0; percentile bootstrap should cover ~95%.
    # Binomial sd of the coverage estimate is sqrt(.95*.05/200) = 0.015, so [0.89, 0.99]
    # is about 4 sd; a 90% or 99.9% interval would fall outside.
    rng = np.random.default_rng(8)
    hits = 0
    for i in range(200):
        lo, hi = bs.bootstrap_median_ci(rng.normal(size=25), resamples=1000, seed=i)
        hits += lo <= 0.0 <= hi
    assert 0.89 <= hits / 200 <= 0.99


def test_confidence_changes_width() -> None:
    x = np.random.default_rng(9).normal(size=50)
    w80 = np.subtract(*bs.summarize(x, confidence=0.80).median_ci_bootstrap[::-1])
    w99 = np.subtract(*bs.summarize(x, confidence=0.99).median_ci_bootstrap[::-1])
    assert w80 < w99


@pytest.mark.parametrize("x", [[1.0, 2.0, 3.0, 10.0], [5.0, 1.0, 4.0, 4.0, 9.0],
                               [3.0, 1.0, 2.0, 8.0, 6.0, 7.0]])
def test_bootstrap_medians_have_the_exact_bootstrap_distribution(x: list[float]) -> None:
    """Drawn through order statistics of uniforms, never by building resamples: checked
    against every one of the n**n equally likely resamples, enumerated."""
    import itertools
    from collections import Counter

    n = len(x)
    exact = Counter(float(np.median(r)) for r in itertools.product(x, repeat=n))
    draws = estimates.bootstrap_medians(np.array(x), 400_000, np.random.default_rng(3))
    seen = Counter(draws.tolist())
    assert set(seen) <= set(exact)
    for value, count in exact.items():
        assert abs(seen[value] / draws.size - count / n**n) < 0.004, (value, x)


# --------------------------------------------------------------------------- order statistics


def _exact_k_scipy(n: int, confidence: float) -> int | None:
    """Largest k with 1 - 2*BinomCDF(k-1; n, 1/2) >= confidence, by scipy.stats.binom."""
    best = None
    for k in range(1, (n + 1) // 2 + 1):
        if 1 - 2 * ss.binom.cdf(k - 1, n, 0.5) >= confidence - 1e-12:
            best = k
    return best


@pytest.mark.parametrize("confidence", [0.80, 0.95, 0.99])
def test_order_statistic_ci_matches_binomial(confidence: float) -> None:
    rng = np.random.default_rng(10)
    for n in range(1, 60):
        x = rng.normal(size=n)
        k = _exact_k_scipy(n, confidence)
        got = bs.order_statistic_ci(x, confidence)
        if k is None:
            assert got is None, n
        else:
            xs = np.sort(x)
            assert got == (xs[k - 1], xs[n - k]), n


def test_order_statistic_ci_hand_worked() -> None:
    # n=5: [min,max] covers with 1 - 2/32 = 0.9375 < 0.95 -> None.
    # n=6: 1 - 2/64 = 0.969 >= 0.95 -> (min, max); k=2 would give 1 - 2*7/64 = 0.78.
    # n=10: k=2 gives 1 - 2*(1+10)/1024 = 0.9785; k=3 gives 1 - 2*56/1024 = 0.89 -> (x2, x9).
    assert bs.order_statistic_ci([1, 2, 3, 4, 5]) is None
    assert bs.order_statistic_ci([6, 1, 5, 2, 4, 3]) == (1.0, 6.0)
    assert bs.order_statistic_ci(list(range(1, 11))) == (2.0, 9.0)


def test_order_statistic_ci_matches_scipy_quantile_test() -> None:
    rng = np.random.default_rng(11)
    for n in (6, 7, 10, 11, 20, 31, 64):
        x = rng.normal(size=n)
        ci = ss.quantile_test(x, q=0.0, p=0.5).confidence_interval(0.95)
        assert bs.order_statistic_ci(x, 0.95) == (ci.low, ci.high)


def test_summary_reports_exact_ci() -> None:
    x = np.arange(1.0, 11.0)
    assert bs.summarize(x, resamples=100).median_ci == (2.0, 9.0)


def test_min_trials() -> None:
    # 1 - 2*0.5**n >= c: 95% -> 2^n >= 40 -> 6; 99% -> 2^n >= 200 -> 8; 80% -> 2^n >= 10 -> 4.
    assert bs.min_trials(0.95) == 6
    assert bs.min_trials(0.99) == 8
    assert bs.min_trials(0.80) == 4


def test_the_median_interval_shown_covers_at_least_95_percent() -> None:
    """By simulation against known truth (lognormal, true median 1): the exact order-
    statistic interval the report shows covers the median at least as often as promised at
    a cell's small n; the percentile bootstrap it replaced covers less."""
    rng = np.random.default_rng(2024)
    sims = 1500
    for n in (8, 15):
        exact = boot = 0
        for i in range(sims):
            x = rng.lognormal(0.0, 0.6, n)
            lo, hi = bs.order_statistic_ci(x, 0.95)
            exact += lo <= 1.0 <= hi
            blo, bhi = bs.bootstrap_median_ci(x, resamples=400, seed=i)
            boot += blo <= 1.0 <= bhi
        se = math.sqrt(0.95 * 0.05 / sims)
        assert exact / sims >= 0.95 - 2 * se, (n, exact / sims)
        assert boot / sims < exact / sims, (n, boot / sims, exact / sims)


def test_the_order_statistic_interval_for_large_cells() -> None:
    """No overflow at thousands of trials (2**n is no float there), and still exact: the
    interval a binomial quantile gives, checked against scipy's own test of the median."""
    for n in (1001, 5000, 20000):
        x = np.arange(n, dtype=float)
        lo, hi = bs.order_statistic_ci(x, 0.95)
        ref = ss.quantile_test(x, q=np.median(x)).confidence_interval(0.95)
        assert lo <= np.median(x) <= hi
        assert (hi - lo) <= (ref.high - ref.low) + 2  # not wider than scipy's exact one


# --------------------------------------------------------------------------- timeouts (censored)


def test_censored_order_statistic_ci_hand_worked() -> None:
    # n=10 -> (x2, x9); four timeouts at 30 are x7..x10, so x9 is unknown: open above
    assert bs.order_statistic_ci([1, 2, 3, 4, 5, 6], censored=[30] * 4) == (2.0, math.inf)
    # one timeout is x10 only: the interval is that of the values as they are
    assert bs.order_statistic_ci(range(1, 10), censored=[30]) == (2.0, 9.0)
    # a timeout below completed times (limits vary per trial): x2 takes it at its limit
    # (the truth, anywhere from 1 up, gives (5, 12) at 1 and (6, 13) above 13)
    assert bs.order_statistic_ci([5, 6, 7, 8, 9, 10, 11, 12, 13], censored=[1]) == (5.0, 13.0)


def test_censored_summary_marks_a_median_the_timeouts_reach() -> None:
    s = bs.summarize([1, 2, 3, 4, 5, 6], censored=[30] * 4, resamples=200)
    assert (s.n, s.censored, s.median, s.median_lower_bound) == (10, 4, 5.5, False)
    assert s.median_ci == (2.0, math.inf) and s.median_ci_bootstrap[1] == math.inf
    assert s.outliers == ()  # of the completed samples only
    s = bs.summarize([1, 2, 3, 4], censored=[30] * 6, resamples=200)
    assert s.median == 30.0 and s.median_lower_bound
    assert not bs.summarize([1.0, 2.0, 3.0], resamples=200).median_lower_bound
