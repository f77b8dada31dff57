"""Tests for backburner.stats: each statistic against an independent computation.

scipy is used only here, as the independent reference; hand-worked values are written out
in comments so a reader can check them without running anything.
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
import statistics

import numpy as np
import pytest
from scipy import stats as ss

from backburner import stats as bs

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
    assert "Q1 - 1.5*IQR" in s.outlier_rule and "Q3 + 1.5*IQR" in s.outlier_rule


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


# --------------------------------------------------------------------------- verdict

_CI_TEXT = r"\(95% CI (\d+\.\d+)\u2013(\d+\.\d+)\u00d7\)"


def test_verdict_slower() -> None:
    rng = np.random.default_rng(18)
    v = bs.verdict(rng.normal(320, 3, size=40), rng.normal(100, 1, size=40))
    assert v.kind == "slower"
    m = re.fullmatch(r"(\d\.\d\d)\u00d7 slower than idle " + _CI_TEXT, v.text)
    assert m, v.text
    assert float(m[1]) == pytest.approx(v.ratio.ratio, abs=0.005)
    assert (float(m[2]), float(m[3])) == pytest.approx((v.ratio.lo, v.ratio.hi), abs=0.005)
    assert v.ratio.lo > 1.1


def test_verdict_faster_reports_inverse_factor() -> None:
    rng = np.random.default_rng(19)
    v = bs.verdict(rng.normal(50, 0.5, size=40), rng.normal(100, 1, size=40))
    assert v.kind == "faster"
    m = re.fullmatch(r"(\d\.\d\d)\u00d7 faster than idle " + _CI_TEXT, v.text)
    assert m, v.text
    assert float(m[1]) == pytest.approx(1 / v.ratio.ratio, abs=0.005)
    assert (float(m[2]), float(m[3])) == pytest.approx((1 / v.ratio.hi, 1 / v.ratio.lo), abs=0.005)


def test_verdict_indistinguishable_only_when_ci_inside_band() -> None:
    rng = np.random.default_rng(20)
    v = bs.verdict(rng.normal(100, 1, size=40), rng.normal(100, 1, size=40))
    assert v.kind == "indistinguishable"
    assert v.text.startswith("indistinguishable from idle (within \u00b110%")
    assert v.ratio.lo >= 0.9 and v.ratio.hi <= 1.1


def test_verdict_wide_ci_is_inconclusive_not_indistinguishable() -> None:
    # Median ratio near 1 but only 5 noisy trials: the CI straddles the +/-10% band.
    rng = np.random.default_rng(21)
    v = bs.verdict(rng.normal(100, 30, size=5), rng.normal(100, 30, size=5))
    assert v.kind == "inconclusive"
    assert v.ratio.lo < 0.9 or v.ratio.hi > 1.1
    assert re.search(_CI_TEXT, v.text), v.text


def test_verdict_ci_straddling_upper_edge_is_inconclusive() -> None:
    # Tight CI around 1.10: wholly above 1, but neither inside the band nor above 1.1.
    rng = np.random.default_rng(22)
    v = bs.verdict(rng.normal(110, 0.5, size=60), rng.normal(100, 0.5, size=60))
    assert v.ratio.lo < 1.1 < v.ratio.hi
    assert v.kind == "inconclusive"


def test_verdict_tolerance_parameter() -> None:
    rng = np.random.default_rng(23)
    loaded, idle = rng.normal(115, 0.5, size=40), rng.normal(100, 0.5, size=40)
    assert bs.verdict(loaded, idle).kind == "slower"
    wide = bs.verdict(loaded, idle, tolerance=0.2)
    assert wide.kind == "indistinguishable" and "\u00b120%" in wide.text


# --------------------------------------------------------------------------- warnings


def _codes(ws: list[bs.Warning_]) -> list[str]:
    return [w.code for w in ws]


def test_clean_cell_has_no_warnings() -> None:
    x = np.random.default_rng(24).normal(100, 5, size=30)
    assert bs.warnings_for(x, warm_median=50.0) == []


def test_too_few_trials_threshold() -> None:
    # 95%: 5 trials -> 1 - 2/32 = 0.9375 < 0.95 (warn); 6 -> 0.969 (fine).
    ws = bs.warnings_for([1.0, 2.0, 3.0, 4.0])
    assert _codes(ws) == ["too-few-trials"]
    assert ws[0].message.startswith("only 4 trials: too few for a 95% interval of the median")
    assert "--trials 10" in ws[0].message
    assert "too-few-trials" in _codes(bs.warnings_for(np.arange(5.0)))
    assert "too-few-trials" not in _codes(bs.warnings_for(np.arange(6.0)))
    # 99%: needs 8.
    assert "too-few-trials" in _codes(bs.warnings_for(np.arange(7.0), confidence=0.99))
    assert "too-few-trials" not in _codes(bs.warnings_for(np.arange(8.0), confidence=0.99))


def test_empty_cell_with_timeouts() -> None:
    ws = bs.warnings_for([], timeouts=3)
    assert _codes(ws) == ["too-few-trials", "timeouts"]


def test_timeouts_warning() -> None:
    ws = bs.warnings_for(np.arange(10.0), timeouts=2)
    assert _codes(ws) == ["timeouts"]
    assert "2 trials timed out" in ws[0].message
    assert "counted" in ws[0].message and "--timeout" in ws[0].message
    assert "pathological" in ws[0].message


def test_bimodality_coefficient_against_scipy() -> None:
    x = np.random.default_rng(25).gamma(2.0, size=50)
    n = x.size
    g1 = ss.skew(x, bias=False)
    g2 = ss.kurtosis(x, bias=False)  # excess (Fisher) kurtosis
    expected = (g1**2 + 1) / (g2 + 3 * (n - 1) ** 2 / ((n - 2) * (n - 3)))
    assert bs.bimodality_coefficient(x) == pytest.approx(expected, rel=1e-10)


def test_bimodal_warning() -> None:
    rng = np.random.default_rng(26)
    two_modes = np.concatenate([rng.normal(100, 5, size=30), rng.normal(300, 5, size=30)])
    one_mode = rng.normal(100, 5, size=60)
    ws = bs.warnings_for(two_modes)
    assert _codes(ws) == ["bimodal"]
    assert "strip plot" in ws[0].message and "more trials" in ws[0].message
    assert bs.bimodality_coefficient(one_mode) < 0.555
    assert "bimodal" not in _codes(bs.warnings_for(one_mode))
    # Below 10 trials we do not claim bimodality even for two clean clusters.
    assert "bimodal" not in _codes(bs.warnings_for([1.0] * 4 + [9.0] * 4 + [1.1]))


def test_not_cold_warning() -> None:
    x = np.array([1.00, 1.02, 1.04, 1.05, 1.06, 1.08, 1.10])  # median 1.05
    ws = bs.warnings_for(x, warm_median=1.0)  # within 10% -> warn
    assert _codes(ws) == ["not-cold"]
    assert "caches were probably not dropped" in ws[0].message
    assert "not on the device under test" in ws[0].message
    assert bs.warnings_for(x, warm_median=0.5) == []  # cold is 2.1x warm: genuinely cold
    assert bs.warnings_for(x) == []  # no warm median, no check


def test_outliers_warning_threshold() -> None:
    base = list(np.linspace(10.0, 11.0, 18))
    two = base + [100.0, 101.0]  # 2/20 = 10%: not more than 10%
    three = base[:17] + [100.0, 101.0, 102.0]  # 3/20 = 15%
    assert len(bs.summarize(two, resamples=10).outliers) == 2
    assert "outliers" not in _codes(bs.warnings_for(two))
    ws = bs.warnings_for(three)
    assert "outliers" in _codes(ws)
    msg = next(w.message for w in ws if w.code == "outliers")
    assert "3 of 20" in msg and "not dropped" in msg


def test_timeouts_are_not_reported_as_too_few_trials() -> None:
    """8 trials run, all timed out: asking for more trials would be wrong advice."""
    codes = [w.code for w in bs.warnings_for([], timeouts=8)]
    assert codes == ["timeouts"]
    codes = [w.code for w in bs.warnings_for([1.0, 1.1], timeouts=1)]
    assert codes == ["too-few-trials", "timeouts"]  # 3 < 6: still too few


# --------------------------------------------------------------------------- coverage


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


def test_the_ratio_interval_covers_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    sims, hits = 400, 0
    for i in range(sims):
        a, b = rng.lognormal(0.0, 0.6, 10), rng.lognormal(0.0, 0.6, 10)
        r = bs.ratio_of_medians(a, b, resamples=500, seed=i)
        hits += r.lo <= 1.0 <= r.hi
    assert hits / sims >= 0.95 - 2 * math.sqrt(0.95 * 0.05 / sims)


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


def test_timeouts_make_no_verdict_optimistic() -> None:
    """The reviewer's case: 6 starts at idle speed and 4 timeouts at 30x idle. Without the
    timeouts it reads 'indistinguishable from idle'; with them it is inconclusive and says
    why; enough timeouts to reach the median make it slower, marked as a lower bound."""
    rng = np.random.default_rng(3)
    idle = rng.lognormal(0.0, 0.02, 10)
    fast = rng.lognormal(0.0, 0.02, 6)
    assert bs.verdict(fast, idle).kind == "indistinguishable"
    v = bs.verdict(fast, idle, loaded_censored=[30.0] * 4)
    assert v.kind == "inconclusive" and v.ratio.hi == math.inf
    assert "--timeout" in v.text and "\u221e" in v.text
    v = bs.verdict(fast[:2], idle, loaded_censored=[30.0] * 8)
    assert v.kind == "slower" and v.text.startswith("\u2265")
    # one timeout in ten reaches neither the median nor its interval: still a fair verdict
    assert bs.verdict(rng.lognormal(0.0, 0.02, 9), idle, loaded_censored=[30.0]).kind == \
        "indistinguishable"


def test_timeouts_warning_says_what_they_leave_unknown() -> None:
    def message(done: list[float], cens: list[float]) -> str:
        s = bs.summarize(done, censored=cens, resamples=100)
        (w,) = [w for w in bs.warnings_for(done, timeouts=len(cens), summary=s)
                if w.code == "timeouts"]
        return w.message

    assert "lower bound" in message([1.0, 2.0, 3.0, 4.0], [30.0] * 6)
    assert "open above" in message([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [30.0] * 4)
    assert "do not reach" in message([float(v) for v in range(1, 20)], [30.0])


@pytest.mark.parametrize("x", [[1.0, 2.0, 3.0, 10.0], [5.0, 1.0, 4.0, 4.0, 9.0],
                               [3.0, 1.0, 2.0, 8.0, 6.0, 7.0]])
def test_bootstrap_medians_have_the_exact_bootstrap_distribution(x: list[float]) -> None:
    """Drawn through order statistics of uniforms, never by building resamples: checked
    against every one of the n**n equally likely resamples, enumerated."""
    import itertools
    from collections import Counter

    n = len(x)
    exact = Counter(float(np.median(r)) for r in itertools.product(x, repeat=n))
    draws = bs._bootstrap_medians(np.array(x), 400_000, np.random.default_rng(3))
    seen = Counter(draws.tolist())
    assert set(seen) <= set(exact)
    for value, count in exact.items():
        assert abs(seen[value] / draws.size - count / n**n) < 0.004, (value, x)
