"""stats.verdicts: kinds and codes from the numbers, with the numbers behind them (the words
are report.words's, tested in tests/report/test_words.py)."""

from __future__ import annotations

import dataclasses
import json
import math

import numpy as np
import pytest
from scipy import stats as ss

from backburner import stats as bs
from backburner.stats import CaveatCode, TimeoutReach, VerdictKind

# --------------------------------------------------------------------------- verdict


def test_verdict_slower() -> None:
    rng = np.random.default_rng(18)
    v = bs.verdict(rng.normal(320, 3, size=40), rng.normal(100, 1, size=40))
    assert v.kind == VerdictKind.SLOWER == "slower"
    assert v.ratio.ratio == pytest.approx(3.2, abs=0.05) and v.ratio.lo > 1.1
    assert (v.tolerance, v.lower_bound, v.open_above) == (0.10, False, False)


def test_verdict_faster() -> None:
    rng = np.random.default_rng(19)
    v = bs.verdict(rng.normal(50, 0.5, size=40), rng.normal(100, 1, size=40))
    assert v.kind == VerdictKind.FASTER
    assert v.ratio.hi < 0.9 and v.ratio.ratio == pytest.approx(0.5, abs=0.01)


def test_verdict_indistinguishable_only_when_ci_inside_band() -> None:
    rng = np.random.default_rng(20)
    v = bs.verdict(rng.normal(100, 1, size=40), rng.normal(100, 1, size=40))
    assert v.kind == VerdictKind.INDISTINGUISHABLE
    assert v.ratio.lo >= 0.9 and v.ratio.hi <= 1.1


def test_verdict_wide_ci_is_undecided_not_indistinguishable() -> None:
    # Median ratio near 1 but only 5 noisy trials: the CI reaches above the +/-10% band.
    rng = np.random.default_rng(21)
    v = bs.verdict(rng.normal(100, 30, size=5), rng.normal(100, 30, size=5))
    assert v.kind == VerdictKind.UNDECIDED == "undecided" and not v.decided
    assert v.ratio.lo < 1.1 < v.ratio.hi
    assert not v.open_above  # more trials would decide: nothing timed out


def test_verdict_ci_straddling_upper_edge_is_undecided() -> None:
    # Tight CI around 1.10: wholly above 1, but neither inside the band nor above 1.1.
    rng = np.random.default_rng(22)
    v = bs.verdict(rng.normal(110, 0.5, size=60), rng.normal(100, 0.5, size=60))
    assert v.ratio.lo < 1.1 < v.ratio.hi
    assert v.kind == VerdictKind.UNDECIDED


def _ci(lo: float, hi: float) -> bs.RatioCI:
    return bs.RatioCI((lo + hi) / 2, lo, hi, 0.95, "test")


@pytest.mark.parametrize(("lo", "hi", "kind"), [
    (1.11, 1.30, VerdictKind.SLOWER),             # lower end above the band
    (1.10, 1.30, VerdictKind.UNDECIDED),          # lower end on the edge: not above it
    (0.95, 1.11, VerdictKind.UNDECIDED),          # upper end above the band, lower not
    (0.50, 1.11, VerdictKind.UNDECIDED),
    (0.50, 1.10, VerdictKind.AT_MOST),            # upper end within, lower below the band
    (0.00, 1.05, VerdictKind.AT_MOST),            # however low the lower end
    (0.90, 1.10, VerdictKind.INDISTINGUISHABLE),  # both ends within: the stronger claim
    (0.95, 1.05, VerdictKind.INDISTINGUISHABLE),
    (0.50, 0.89, VerdictKind.FASTER),             # wholly below the band
    (0.50, 0.90, VerdictKind.AT_MOST),            # upper end on the lower edge: not below
    (0.95, math.inf, VerdictKind.UNDECIDED),      # open above: nothing to bound
    (0.0, math.nan, VerdictKind.UNDECIDED),
])
def test_classify_reads_one_end_of_the_interval_at_a_time(lo: float, hi: float,
                                                           kind: VerdictKind) -> None:
    assert bs.classify(_ci(lo, hi), 0.10) == kind
    assert (kind in bs.DECIDED) == (kind != VerdictKind.UNDECIDED)


def test_at_most_is_decided_where_indistinguishable_is_not() -> None:
    """The one-sided question decides a noisy cell near 1.0 the two-sided one leaves open:
    the same interval, the same band."""
    r = _ci(0.80, 1.08)
    assert bs.classify(r, 0.10) == VerdictKind.AT_MOST
    assert bs.classify(r, 0.25) == VerdictKind.INDISTINGUISHABLE  # a wider band: both in


def test_verdict_tolerance_parameter() -> None:
    rng = np.random.default_rng(23)
    loaded, idle = rng.normal(115, 0.5, size=40), rng.normal(100, 0.5, size=40)
    assert bs.verdict(loaded, idle).kind == VerdictKind.SLOWER
    wide = bs.verdict(loaded, idle, tolerance=0.2)
    assert wide.kind == VerdictKind.INDISTINGUISHABLE and wide.tolerance == 0.2
    with pytest.raises(ValueError, match="tolerance"):
        bs.verdict(loaded, idle, tolerance=1.0)


def test_verdict_is_json_friendly() -> None:
    v = bs.verdict([2.0, 2.1, 2.2, 2.0, 2.1, 2.3], [1.0, 1.1, 1.0, 1.05, 1.0, 1.02],
                   resamples=200)
    d = json.loads(json.dumps(dataclasses.asdict(v)))
    assert d["kind"] == "slower" and d["ratio"]["ratio"] == v.ratio.ratio
    assert d["tolerance"] == 0.1 and d["lower_bound"] is False


def test_timeouts_make_no_verdict_optimistic() -> None:
    """6 starts at idle speed and 4 timeouts at 30x idle: without the timeouts it reads
    'indistinguishable from unloaded'; with them it is undecided and open above (a longer
    limit would decide it, not more trials); enough timeouts to reach the median make it
    slower, marked as a lower bound."""
    rng = np.random.default_rng(3)
    idle = rng.lognormal(0.0, 0.02, 10)
    fast = rng.lognormal(0.0, 0.02, 6)
    assert bs.verdict(fast, idle).kind == VerdictKind.INDISTINGUISHABLE
    v = bs.verdict(fast, idle, loaded_censored=[30.0] * 4)
    assert v.kind == VerdictKind.UNDECIDED and v.ratio.hi == math.inf and v.open_above
    assert not v.lower_bound
    v = bs.verdict(fast[:2], idle, loaded_censored=[30.0] * 8)
    assert v.kind == VerdictKind.SLOWER and v.lower_bound
    # one timeout in ten reaches neither the median nor its interval: still a fair verdict
    assert bs.verdict(rng.lognormal(0.0, 0.02, 9), idle, loaded_censored=[30.0]).kind == \
        VerdictKind.INDISTINGUISHABLE


# --------------------------------------------------------------------------- caveats


def _codes(ws: list[bs.Caveat]) -> list[str]:
    return [w.code for w in ws]


def test_clean_cell_has_no_warnings() -> None:
    x = np.random.default_rng(24).normal(100, 5, size=30)
    assert bs.warnings_for(x, warm_median=50.0) == []


def test_too_few_trials_threshold() -> None:
    # 95%: 5 trials -> 1 - 2/32 = 0.9375 < 0.95 (warn); 6 -> 0.969 (fine).
    ws = bs.warnings_for([1.0, 2.0, 3.0, 4.0])
    assert ws == [bs.Caveat(CaveatCode.TOO_FEW_TRIALS,
                            {"trials": 4, "confidence": 0.95, "advised": 10})]
    assert "too-few-trials" in _codes(bs.warnings_for(np.arange(5.0)))
    assert "too-few-trials" not in _codes(bs.warnings_for(np.arange(6.0)))
    # 99%: needs 8.
    assert "too-few-trials" in _codes(bs.warnings_for(np.arange(7.0), confidence=0.99))
    assert "too-few-trials" not in _codes(bs.warnings_for(np.arange(8.0), confidence=0.99))


def test_empty_cell_with_timeouts() -> None:
    ws = bs.warnings_for([], timeouts=3)
    assert _codes(ws) == ["too-few-trials", "timeouts"]
    assert ws[0].params["trials"] == 0
    assert ws[1].params == {"count": 3, "reach": TimeoutReach.EVERYTHING}


def test_timeouts_warning() -> None:
    ws = bs.warnings_for(np.arange(10.0), timeouts=2)
    assert ws == [bs.Caveat(CaveatCode.TIMEOUTS, {"count": 2, "reach": "everything"})]


def test_timeouts_warning_says_what_they_leave_unknown() -> None:
    def reach(done: list[float], cens: list[float]) -> str:
        s = bs.summarize(done, censored=cens, resamples=100)
        (w,) = [w for w in bs.warnings_for(done, timeouts=len(cens), summary=s)
                if w.code == CaveatCode.TIMEOUTS]
        assert w.params["count"] == len(cens)
        return str(w.params["reach"])

    assert reach([1.0, 2.0, 3.0, 4.0], [30.0] * 6) == TimeoutReach.MEDIAN
    assert reach([1.0, 2.0, 3.0, 4.0, 5.0, 6.0], [30.0] * 4) == TimeoutReach.INTERVAL
    assert reach([float(v) for v in range(1, 20)], [30.0]) == TimeoutReach.NOTHING
    assert bs.timeout_reach(None) == TimeoutReach.EVERYTHING


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
    assert ws[0].params == {"coefficient": pytest.approx(bs.bimodality_coefficient(two_modes)),
                            "threshold": bs.BIMODAL_THRESHOLD}
    assert ws[0].params["coefficient"] > 0.555
    assert bs.bimodality_coefficient(one_mode) < 0.555
    assert "bimodal" not in _codes(bs.warnings_for(one_mode))
    # Below 10 trials we do not claim bimodality even for two clean clusters.
    assert "bimodal" not in _codes(bs.warnings_for([1.0] * 4 + [9.0] * 4 + [1.1]))


def test_not_cold_warning() -> None:
    x = np.array([1.00, 1.02, 1.04, 1.05, 1.06, 1.08, 1.10])  # median 1.05
    ws = bs.warnings_for(x, warm_median=1.0)  # within 10% -> warn
    assert ws == [bs.Caveat(CaveatCode.NOT_COLD, {"evidence": "time", "median": 1.05,
                                                  "warm_median": 1.0, "fraction": 0.10})]
    assert bs.warnings_for(x, warm_median=0.5) == []  # cold is 2.1x warm: genuinely cold
    assert bs.warnings_for(x) == []  # no warm median, no check


def test_outliers_warning_threshold() -> None:
    base = list(np.linspace(10.0, 11.0, 18))
    two = base + [100.0, 101.0]  # 2/20 = 10%: not more than 10%
    three = base[:17] + [100.0, 101.0, 102.0]  # 3/20 = 15%
    assert len(bs.summarize(two, resamples=10).outliers) == 2
    assert "outliers" not in _codes(bs.warnings_for(two))
    ws = bs.warnings_for(three)
    assert bs.Caveat(CaveatCode.OUTLIERS, {"count": 3, "trials": 20}) in ws


def test_timeouts_are_not_reported_as_too_few_trials() -> None:
    """8 trials run, all timed out: asking for more trials would be wrong advice."""
    codes = [w.code for w in bs.warnings_for([], timeouts=8)]
    assert codes == ["timeouts"]
    codes = [w.code for w in bs.warnings_for([1.0, 1.1], timeouts=1)]
    assert codes == ["too-few-trials", "timeouts"]  # 3 < 6: still too few


def test_caveats_are_json_friendly() -> None:
    for w in bs.warnings_for([1.0, 1.0, 1.0, 9.0] * 3, timeouts=2, warm_median=1.0):
        d = json.loads(json.dumps(dataclasses.asdict(w)))
        assert d["code"] == w.code and d["params"] == w.params
