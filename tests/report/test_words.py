"""report.words: every kind and code has its sentence, and the sentences say the numbers.

The expected sentences are written out in full: they are what the terminal, Markdown, HTML
and the JSON export's text fields show.
"""

from __future__ import annotations

import math
import re

import numpy as np
import pytest

from backburner import stats
from backburner.report import caveats, words
from backburner.report.compare import CompareKind
from backburner.report.summary import RowKind
from backburner.stats import Caveat, CaveatCode, RatioCI, Verdict, VerdictKind

R = RatioCI(3.2, 2.9, 3.5, 0.95)

#: one example of every kind a row's verdict can have, with its sentence
VERDICTS: dict[str, tuple[dict, RatioCI | None, str]] = {
    VerdictKind.SLOWER: ({"tolerance": 0.1, "lower_bound": True}, R,
                         "\u22653.20\u00d7 slower than unloaded (95% CI 2.90\u20133.50\u00d7; "
                         "band \u00b110%)"),
    VerdictKind.FASTER: ({"tolerance": 0.1, "lower_bound": False}, RatioCI(0.5, 0.4, 0.8, 0.9),
                         "2.00\u00d7 faster than unloaded (90% CI 1.25\u20132.50\u00d7; band "
                         "\u00b110%)"),
    VerdictKind.INDISTINGUISHABLE: (
        {"tolerance": 0.2, "lower_bound": False}, RatioCI(1.01, 0.95, 1.1, 0.95),
        "indistinguishable from unloaded: within \u00b120% both ways (1.01\u00d7, 95% CI "
        "0.95\u20131.10\u00d7)"),
    VerdictKind.AT_MOST: (
        {"tolerance": 0.25, "lower_bound": False, "band": "widest", "band_reference_s": 0.18},
        RatioCI(1.03, 0.71, 1.12, 0.95, stats.PAIRED_METHOD),
        "at most 1.12\u00d7 unloaded (95%): not noticeably slower, within \u00b125% "
        "(1.03\u00d7, 95% paired sequential CI 0.71\u20131.12\u00d7)"),
    VerdictKind.UNDECIDED: (
        {"tolerance": 0.1, "lower_bound": False}, RatioCI(1.05, 0.98, math.inf, 0.95),
        "undecided at \u00b110%: 1.05\u00d7 unloaded (95% CI 0.98\u2013\u221e\u00d7); timeouts "
        "leave it open above: raise --timeout to measure them"),
    RowKind.BASELINE: ({"tolerance": 0.25, "band": "widest", "band_reference_s": 0.18}, None,
                       "unloaded baseline"),
    RowKind.NO_BASELINE: ({"reason": "no-cell", "scheduler": "kyber"}, None,
                          "no unloaded baseline for this scheduler"),
    RowKind.TIMED_OUT: ({"timeouts": 6, "ratio_at_least": 43.9}, None,
                        "all 6 counted trials timed out: \u226543.9\u00d7 slower than "
                        "unloaded"),
    RowKind.NO_DATA: ({"reason": "no-trials"}, None, "no completed trials"),
}


COMPARED: dict[str, tuple[dict, RatioCI | None, str]] = {
    CompareKind.SLOWER: ({"tolerance": 0.1}, R, "changed: B 3.20\u00d7 slower"),
    CompareKind.FASTER: ({"tolerance": 0.1}, RatioCI(0.25, 0.2, 0.3, 0.95),
                         "changed: B 4.00\u00d7 faster"),
    CompareKind.EQUIVALENT: ({"tolerance": 0.05}, R, "equivalent within \u00b15%"),
    CompareKind.INCONCLUSIVE: ({"tolerance": 0.1}, RatioCI(1.1, 0.95, 1.3, 0.95),
                               "inconclusive: B/A 0.95\u20131.30 straddles \u00b110%"),
    CompareKind.NO_DATA: ({"reason": "no-trials", "missing_a": True, "missing_b": True}, None,
                          "no completed trials in A and B"),
}


def test_every_kind_and_code_has_words() -> None:
    """Each kind has an entry in words' tables and an example here; a new kind without
    a sentence fails (the caveat codes: test_caveats)."""
    kinds = {*VerdictKind, *RowKind}
    assert set(VERDICTS) == kinds and set(COMPARED) == {*CompareKind}
    assert set(words._JUDGED) | set(words._UNJUDGED) == kinds
    assert set(words.COMPARED) == {*CompareKind}


@pytest.mark.parametrize("kind", list(VERDICTS))
def test_row_verdicts(kind: str) -> None:
    params, ratio, want = VERDICTS[kind]
    assert words.cell_verdict_text(kind, params, ratio) == want


@pytest.mark.parametrize("kind", list(COMPARED))
def test_compare_verdicts(kind: str) -> None:
    params, ratio, want = COMPARED[kind]
    assert words.compare_verdict_text(kind, params, ratio) == want


@pytest.mark.parametrize(("params", "want"), [
    ({"reason": "no-samples"}, "the unloaded baseline has no completed trials"),
    ({"reason": "zero-baseline"},
     "no verdict: the unloaded median is zero, so there is no ratio to unloaded"),
])
def test_the_other_reasons_for_no_verdict(params: dict, want: str) -> None:
    kind = RowKind.NO_DATA if params["reason"] == "zero-baseline" else RowKind.NO_BASELINE
    assert words.cell_verdict_text(kind, params, None) == want


def test_the_rest_of_compare() -> None:
    assert words.compare_verdict_text("equivalent", {"tolerance": 0.1, "identical": True},
                                      R) == "no change (identical samples)"
    assert words.compare_verdict_text("no-data", {"reason": "zero-median"}, None) == \
        "median of A is zero: no ratio"
    assert words.compare_verdict_text(
        "no-data", {"reason": "no-trials", "missing_a": False, "missing_b": True}, None) == \
        "no completed trials in B"
    assert caveats.caveat_text(Caveat(CaveatCode.NOT_COLD, {
        "evidence": "blocks", "cold_blocks": 0.0, "warm_blocks": 8000.0})) == (
        "the probe's cold trials read 0 blocks from disk (median), no more than warm ones "
        "(8000): caches were probably not dropped, or the probe's files are on a RAM-backed "
        "filesystem")


# --------------------------------------------------------------------------- from stats

_CI_TEXT = r"\(95% CI (\d+\.\d+)\u2013(\d+\.\d+)\u00d7; band \u00b110%\)"


def test_slower_says_the_ratio_and_its_interval() -> None:
    rng = np.random.default_rng(18)
    v = stats.verdict(rng.normal(320, 3, size=40), rng.normal(100, 1, size=40))
    m = re.fullmatch(r"(\d\.\d\d)\u00d7 slower than unloaded " + _CI_TEXT,
                     words.verdict_text(v))
    assert m, words.verdict_text(v)
    assert float(m[1]) == pytest.approx(v.ratio.ratio, abs=0.005)
    assert (float(m[2]), float(m[3])) == pytest.approx((v.ratio.lo, v.ratio.hi), abs=0.005)


def test_faster_says_the_inverse_factor() -> None:
    rng = np.random.default_rng(19)
    v = stats.verdict(rng.normal(50, 0.5, size=40), rng.normal(100, 1, size=40))
    m = re.fullmatch(r"(\d\.\d\d)\u00d7 faster than unloaded " + _CI_TEXT,
                     words.verdict_text(v))
    assert m, words.verdict_text(v)
    assert float(m[1]) == pytest.approx(1 / v.ratio.ratio, abs=0.005)
    assert (float(m[2]), float(m[3])) == pytest.approx((1 / v.ratio.hi, 1 / v.ratio.lo),
                                                       abs=0.005)


def test_a_faster_cell_whose_interval_reaches_zero() -> None:
    """A loaded cell that took no time, or a ratio whose lower end is 0 (the baseline's
    timeouts leave its median unbounded): infinitely faster, said, not a division error."""
    zero = Verdict(VerdictKind.FASTER, RatioCI(0.0, 0.0, 0.0, 0.95), 0.1)
    assert words.verdict_text(zero) == \
        "\u221e\u00d7 faster than unloaded (95% CI \u221e\u2013\u221e\u00d7; band \u00b110%)"
    open_end = Verdict(VerdictKind.FASTER, RatioCI(0.33, 0.0, 0.5, 0.95), 0.1)
    assert words.verdict_text(open_end) == \
        "3.03\u00d7 faster than unloaded (95% CI 2.00\u2013\u221e\u00d7; band \u00b110%)"
    assert words.compare_verdict_text("faster", {"tolerance": 0.1}, zero.ratio) == \
        "changed: B \u221e\u00d7 faster"


def test_undecided_says_what_would_decide_it() -> None:
    rng = np.random.default_rng(3)
    unloaded, fast = rng.lognormal(0.0, 0.02, 10), rng.lognormal(0.0, 0.02, 6)
    open_above = words.verdict_text(stats.verdict(fast, unloaded, loaded_censored=[30.0] * 4))
    assert open_above.startswith("undecided at \u00b110%: ") and "raise --timeout" in open_above
    noisy = words.verdict_text(stats.verdict(rng.normal(100, 30, size=5),
                                             rng.normal(100, 30, size=5)))
    assert re.search(r"\(95% CI (\d+\.\d+)\u2013(\d+\.\d+)\u00d7\)", noisy)
    assert noisy.endswith("; run more trials to decide")
    lower = words.verdict_text(stats.verdict(fast[:2], unloaded, loaded_censored=[30.0] * 8))
    assert lower.startswith("\u2265") and "slower than unloaded" in lower


def test_the_band_is_said() -> None:
    rng = np.random.default_rng(23)
    loaded, unloaded = rng.normal(115, 0.5, size=40), rng.normal(100, 0.5, size=40)
    text = words.verdict_text(stats.verdict(loaded, unloaded, tolerance=0.2))
    assert text.startswith("indistinguishable from unloaded: within \u00b120% both ways "
                           "(1.15\u00d7, 95% CI ")
    text = words.verdict_text(stats.verdict(loaded, unloaded, tolerance=0.1))
    assert text.startswith("1.15\u00d7 slower than unloaded") and text.endswith(
        "; band \u00b110%)")


@pytest.mark.parametrize(("params", "text"), [
    ({"tolerance": 0.25, "band": "widest", "band_reference_s": 0.18},
     "\u00b125%, the widest band: 100 ms would be 56% of a 0.180 s start"),
    ({"tolerance": 0.1 / 0.62, "band": "absolute", "band_reference_s": 0.62},
     "\u00b116.1%: 100 ms of a 0.620 s start"),
    ({"tolerance": 0.1, "band": "relative", "band_reference_s": 7.46},
     "\u00b110%: 10% of a 7.46 s start is more than 100 ms"),
    ({"tolerance": 0.1, "band": "relative"}, "\u00b110%: 10% of the start"),
    ({"tolerance": 0.2, "band": "given"}, "\u00b120%, given with --tolerance"),
])
def test_why_a_band_is_as_wide_as_it_is(params: dict, text: str) -> None:
    assert words.band_reason_text(params) == text


def test_the_band_rule_is_said_with_its_constants() -> None:
    assert words.band_rule_text() == ("the difference a person notices (more than 10% and "
                                      "more than 100 ms of the unloaded start, at most "
                                      "\u00b125%)")
    assert words.band_rule_text(0.3) == "\u00b130%, given with --tolerance"


def test_the_outlier_rule_says_the_fence() -> None:
    assert words.OUTLIER_RULE == ("Tukey fences: x < Q1 - 1.5*IQR or x > Q3 + 1.5*IQR "
                                  "(numpy linear quantiles; flagged, never dropped)")


P = RatioCI(1.04, 0.84, 1.34, 0.95, stats.PAIRED_METHOD)


@pytest.mark.parametrize(("params", "text"), [
    ({"stopped": "max-time", "trials": 17, "decidable": True, "trials_needed": 90},
     "undecided at \u00b110% when --max-time ran out after 17 trials: 1.04\u00d7 unloaded "
     "(95% paired sequential CI 0.84\u20131.34\u00d7); at the spread seen about 90 trials "
     "would decide it: give more --max-time"),
    ({"stopped": "max-runs", "trials": 60, "decidable": False},
     "undecided at \u00b110% when --max-runs ran out after 60 trials: 1.04\u00d7 unloaded "
     "(95% paired sequential CI 0.84\u20131.34\u00d7); at the ratio and spread seen no "
     "practical number of trials decides it at \u00b110%"),
    ({"stopped": "out-of-reach", "trials": 8, "decidable": True, "trials_needed": 240},
     "undecided at \u00b110%, stopped after 8 trials: 1.04\u00d7 unloaded (95% paired "
     "sequential CI 0.84\u20131.34\u00d7); not even --max-runs could decide it (at the spread "
     "seen about 240 trials would decide it)"),
    ({"stopped": "max-runs", "trials": 20},  # a record without the estimate
     "undecided at \u00b110% when --max-runs ran out after 20 trials: 1.04\u00d7 unloaded "
     "(95% paired sequential CI 0.84\u20131.34\u00d7); raise --max-runs to decide"),
])
def test_an_undecided_cell_says_what_stopped_it_and_what_would_decide_it(
        params: dict, text: str) -> None:
    full = {"tolerance": 0.1, "lower_bound": False, "method": P.method, "timeouts": 0,
            **params}
    assert words.cell_verdict_text(VerdictKind.UNDECIDED, full, P) == text
