"""report.caveats: every caveat and note code has its sentence, and the sentences say the
numbers.

The expected sentences are written out in full: they are what the terminal, Markdown, HTML
and the JSON export's message fields show.
"""

from __future__ import annotations

import pytest

from backburner import stats
from backburner.report import caveats
from backburner.report.summary import NoteCode, RowCaveat
from backburner.stats import Caveat, CaveatCode, TimeoutReach

#: one example of every warning and note code, with its sentence
CAVEATS: dict[str, tuple[dict, str]] = {
    CaveatCode.TOO_FEW_TRIALS: (
        {"trials": 1, "confidence": 0.99, "advised": 10},
        "only 1 trial: too few for a 99% interval of the median; use --trials 10 or more"),
    CaveatCode.TIMEOUTS: (
        {"count": 1, "reach": "median"},
        "1 trial timed out and is counted in this cell at the limit it hit (the probe took at "
        "least that long), not dropped: so the median is only a lower bound (\u2265) and its "
        "interval is open above; raise --timeout if the probe is merely slow, or treat this "
        "configuration as pathological"),
    CaveatCode.BIMODAL: (
        {"coefficient": 0.6312, "threshold": 0.555},
        "samples look bimodal (bimodality coefficient 0.63 > 0.555); the median may describe "
        "neither mode: look at the strip plot and run more trials"),
    CaveatCode.NOT_COLD: (
        {"evidence": "time", "median": 1.05, "warm_median": 1.0, "fraction": 0.1},
        "the probe's cold time equals its warm time: caches were probably not dropped, or "
        "the probe's files are not on the device under test"),
    CaveatCode.OUTLIERS: (
        {"count": 3, "trials": 13},
        "3 of 13 trials (23%) are outliers by Tukey's rule (flagged, not dropped); stop "
        "other activity on the machine, check the strip plot, or run more trials"),
    RowCaveat.FAILED: (
        {"count": 1},
        "1 trial failed (the probe exited with an error or was killed) and is not in the "
        "samples; the exit codes are in the CSV export"),
    RowCaveat.ABORTED: (
        {"count": 2},
        "2 trials were skipped after repeated timeouts and are not in the samples; raise "
        "--timeout or --abort-factor to measure them"),
    RowCaveat.WARM: (
        {}, "caches were not dropped before these trials (cold=0): they measure warm "
        "start-up, not the cold start the background load affects most"),
    RowCaveat.NO_BASELINE: (
        {"scheduler": "kyber"}, "there is no unloaded cell for scheduler kyber: add load "
        "none to the matrix to get a ratio to unloaded"),
    NoteCode.UNFINISHED_RUN: (
        {"run": 3}, "run 3 has no finish time: bench was interrupted or is still running, "
        "so cells may have fewer trials than planned (`bench --resume` continues it)"),
    NoteCode.POOLED_RUNS: ({"runs": 2}, "2 runs in this database; trials of the same cell "
                           "are pooled"),
    NoteCode.UNEQUAL_TRIALS: ({"fewest": 8, "most": 10}, "cells have unequal numbers of "
                              "counted trials (8\u201310)"),
}


def test_every_code_has_words() -> None:
    """Each caveat and note code has an entry in caveats' table and an example here; a new
    code without a sentence fails."""
    codes = {*CaveatCode, *RowCaveat, *NoteCode}
    assert set(CAVEATS) == codes
    assert set(caveats._CAVEATS) == codes


@pytest.mark.parametrize("code", list(CAVEATS))
def test_warnings_and_notes(code: str) -> None:
    params, want = CAVEATS[code]
    assert caveats.caveat_text(Caveat(code, params)) == want


@pytest.mark.parametrize(("reach", "effect"), [
    (TimeoutReach.EVERYTHING, "no trial completed, so only a lower bound of the time is known"),
    (TimeoutReach.INTERVAL, "so the median's interval is open above (\u221e)"),
    (TimeoutReach.NOTHING, "they do not reach the median or its interval"),
])
def test_what_timeouts_leave_unknown(reach: str, effect: str) -> None:
    text = caveats.caveat_text(Caveat(CaveatCode.TIMEOUTS, {"count": 4, "reach": reach}))
    assert text.startswith("4 trials timed out and are counted in this cell at the limit they "
                           f"hit (the probe took at least that long), not dropped: {effect}; ")


def test_warnings_from_stats_in_words() -> None:
    (few,) = stats.warnings_for([1.0, 2.0, 3.0, 4.0])
    assert caveats.caveat_text(few) == ("only 4 trials: too few for a 95% interval of the "
                                        "median; use --trials 10 or more")
    none, timeouts = stats.warnings_for([], timeouts=3)
    assert caveats.caveat_text(none).startswith("no completed trials: too few")
    assert "3 trials timed out" in caveats.caveat_text(timeouts)
    assert "only a lower bound of the time is known" in caveats.caveat_text(timeouts)
