"""report.summary: rows that count every counted trial, timed-out ones included."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import pytest
from helpers import LOAD, key_of, make_db

from backburner import report
from backburner.report import caveats, words

IDLE = ("bfq", "none", "-")
OFTEN = ("bfq", LOAD, "default")      # 4 of 10 time out
MOSTLY = ("bfq", LOAD, "background")  # 8 of 10 time out


def _timeouts_db(path: Path) -> report.ReportData:
    """Loaded cells as fast as unloaded whenever they finish, but timing out at 12 s (40x
    unloaded)."""
    make_db(path, medians={IDLE: 0.3, OFTEN: 0.3, MOSTLY: 0.3},
            special={**{(*OFTEN, r): "timeout" for r in (2, 5, 7, 9)},
                     **{(*MOSTLY, r): "timeout" for r in range(1, 9)}})
    return report.load(str(path))


def test_timeouts_are_no_evidence_of_a_fast_start(tmp_path: Path) -> None:
    """Dropping the timeouts made a cell that times out 4 times in 10 read
    'indistinguishable from idle'. Counted at their limit they leave the interval open above:
    undecided; reaching the median they make it a lower bound, and slower."""
    data = _timeouts_db(tmp_path / "t.db")
    rows = {(r.cell.scheduler, r.cell.load, r.cell.policy): r
            for r in report.summary_rows(data)}
    often, mostly = rows[OFTEN], rows[MOSTLY]
    assert (often.n, often.timeouts) == (6, 4)
    assert often.verdict_kind == "undecided" and "--timeout" in words.row_verdict_text(often)
    assert often.median_ci[1] == math.inf and not often.median_lower_bound
    (timeouts,) = [w for w in often.warnings if w.code == "timeouts"]
    assert timeouts.params == {"count": 4, "reach": "interval"}
    assert "open above" in caveats.caveat_text(timeouts)
    assert mostly.verdict_kind == "slower" and mostly.median_lower_bound
    assert mostly.median == 12.0 and words.row_verdict_text(mostly).startswith("\u2265")
    assert mostly.verdict_params == {**rows[IDLE].verdict_params, "lower_bound": True,
                                     "method": "bootstrap"}
    text = report.render_text(data, width=250)
    assert "\u226512.0" in text and "\u221e" in text and "lower bound" in text


def test_a_cell_faster_than_a_baseline_that_times_out(tmp_path: Path) -> None:
    """The baseline's timeouts leave its median unbounded above, so the ratio's interval
    reaches 0 below: the loaded cell is faster, by up to infinitely much, and says so."""
    path = tmp_path / "f.db"
    make_db(path, medians={IDLE: 0.3, OFTEN: 0.1},
            special={(*IDLE, r): "timeout" for r in (2, 5, 7, 9)})
    (idle, fast) = report.summary_rows(report.load(str(path)))
    assert idle.verdict_kind == "baseline" and fast.verdict_kind == "faster"
    assert fast.ratio.lo == 0.0
    assert words.row_verdict_text(fast).endswith("\u2013\u221e\u00d7; band \u00b125%)")
    assert "faster than unloaded" in report.render_text(report.load(str(path)), width=250)


def test_a_baseline_of_zero_gives_no_ratio(tmp_path: Path) -> None:
    """A baseline median of 0 s (a probe that does nothing): no ratio to unloaded, said in the
    report's words, for a loaded cell with samples and for one whose trials all timed out."""
    path = tmp_path / "z.db"
    make_db(path, medians={IDLE: 0.0, OFTEN: 0.3, MOSTLY: 0.3}, trials=6,
            special={(*MOSTLY, r): "timeout" for r in range(1, 7)})
    rows = report.summary_rows(report.load(str(path)))
    for row in rows[1:]:
        assert (row.verdict_kind, row.verdict_params) == ("no-data", {"reason": "zero-baseline"})
        assert words.row_verdict_text(row) == \
            "no verdict: the unloaded median is zero, so there is no ratio to unloaded"


SLOW, EDGE = ("bfq", LOAD, "default"), ("bfq", LOAD, "background")


def test_a_run_that_stopped_once_decided_is_judged_by_its_sequence(tmp_path: Path) -> None:
    """Its ratios come from the confidence sequence it stopped on (of the rounds' paired
    ratios), and say so; a cell it left undecided on its budget says which budget, after
    how many trials, and about how many would decide it."""
    path = tmp_path / "s.db"
    make_db(path, medians={IDLE: 0.3, SLOW: 0.9, EDGE: 0.375}, trials=20, spread=0.1,
            settings={"min_runs": 6, "max_runs": 20}, rounds={SLOW: 12},
            env={"stopping": {key_of(*IDLE): "max-runs", key_of(*SLOW): "decided",
                              key_of(*EDGE): "max-runs"}})
    data = report.load(str(path))
    rows = {(r.cell.scheduler, r.cell.load, r.cell.policy): r
            for r in report.summary_rows(data)}
    slow, edge = rows[SLOW], rows[EDGE]
    assert slow.verdict_kind == "slower"
    assert slow.ratio.method == "paired-confidence-sequence"
    assert slow.verdict_params == {**rows[IDLE].verdict_params, "lower_bound": False,
                                   "method": "paired-confidence-sequence"}
    assert rows[IDLE].verdict_params["tolerance"] == 0.25  # 100 ms is a third of 0.3 s
    assert "95% paired sequential CI" in words.row_verdict_text(slow)
    assert edge.verdict_kind == "undecided"  # 1.25x: on the band's edge
    assert edge.verdict_params["stopped"] == "max-runs" and edge.verdict_params["trials"] == 20
    text = words.row_verdict_text(edge)
    assert text.startswith("undecided at \u00b125% when --max-runs ran out after 20 trials: 1.")
    needed = edge.verdict_params["trials_needed"]
    assert edge.verdict_params["decidable"] and needed > 20
    assert text.endswith(f"at the spread seen about {needed} trials would decide it: "
                         "raise --max-runs")
    assert report.notes(data) == []  # unequal trial counts are the point of such a run
    few = tmp_path / "few.db"
    make_db(few, medians={IDLE: 0.3, SLOW: 0.9}, trials=4, settings={"max_runs": 4})
    (too_few,) = [w for w in report.summary_rows(report.load(str(few)))[1].warnings
                  if w.code == "too-few-trials"]
    assert caveats.caveat_text(too_few).endswith("use --min-runs 10 or more")


NEAR = ("bfq", LOAD, "background")


@pytest.mark.parametrize(("unloaded", "tolerance", "band", "basis", "kind"), [
    (0.3, None, 0.25, "widest", "indistinguishable"),  # 100 ms is a third of 0.3 s
    (0.5, None, 0.2, "absolute", "indistinguishable"),  # 100 ms of 0.5 s
    (3.0, None, 0.1, "relative", "undecided"),  # 10% of 3 s is more than 100 ms
    (0.3, 0.1, 0.1, "given", "undecided"),      # given by hand
])
def test_the_band_is_what_a_person_notices_for_the_start(
        tmp_path: Path, unloaded: float, tolerance: float | None, band: float, basis: str,
        kind: str) -> None:
    """The same 1.06x on starts of different lengths: a 0.3 s start may be 25% slower before
    a person notices, a 3 s one 10%; the same interval, reaching 1.13x, is decided for the
    short start and not for the long one."""
    path = tmp_path / "b.db"
    make_db(path, medians={IDLE: unloaded, NEAR: unloaded * 1.06}, trials=20, spread=0.08,
            settings={"min_runs": 6, "max_runs": 20})
    base, near = report.summary_rows(report.load(str(path)), tolerance=tolerance)
    assert near.verdict_params["tolerance"] == pytest.approx(band, rel=0.01)
    assert near.verdict_params["band"] == basis
    assert base.verdict_params == {k: near.verdict_params[k] for k in base.verdict_params}
    assert 1.1 < near.ratio.hi < 1.2 and near.ratio.lo > 0.8  # the same interval each time
    assert near.verdict_kind == kind, words.row_verdict_text(near)


def test_a_fixed_count_run_keeps_the_bootstrap(tmp_path: Path) -> None:
    path = tmp_path / "f.db"
    make_db(path, medians={IDLE: 0.3, SLOW: 0.9}, trials=20, spread=0.1)
    (_, slow) = report.summary_rows(report.load(str(path)))
    assert slow.ratio.method == "bootstrap" and "(95% CI " in words.row_verdict_text(slow)


def test_a_bulk_speed_measured_once_gets_no_interval(tmp_path: Path) -> None:
    """A load that lives for a whole cell runs once: its speed against the unprotected
    load's is one number each, and a bootstrap of one number is no interval (it printed
    0.97x [0.97-0.97]). The ratio is shown with its n; with a sample, with its interval."""
    once, often = tmp_path / "once.db", tmp_path / "often.db"
    medians = {IDLE: 0.3, SLOW: 0.9, EDGE: 0.33}
    make_db(once, medians=medians, bulk={SLOW: (100e6, 10), EDGE: (97e6, 10)})
    row = report.summary_rows(report.load(str(once)))[2]
    assert row.cell.policy == "background" and row.bulk.runs == row.bulk.reference_runs == 1
    assert math.isnan(row.bulk.ratio.lo) and math.isnan(row.bulk.ratio.hi)
    assert words.bulk_ratio_text(row) == f"{row.bulk.ratio.ratio:.2f}\u00d7 (n=1)"
    out = io.StringIO()
    report.export_to(report.load(str(once)), "json", out)
    doc = json.loads(out.getvalue())
    (cell,) = [c for c in doc["cells"] if c["policy"] == "background"]
    assert cell["bulk_speed_ratio"]["lo"] is None and cell["bulk_speed_ratio"]["hi"] is None
    make_db(often, medians=medians, bulk={SLOW: (100e6, 1), EDGE: (97e6, 1)})
    row = report.summary_rows(report.load(str(often)))[2]
    text = words.bulk_ratio_text(row)
    assert row.bulk.ratio.lo < row.bulk.ratio.hi and text.endswith("] (n=10)"), text
