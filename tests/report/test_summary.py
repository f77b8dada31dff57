"""report.summary: rows that count every counted trial, timed-out ones included."""

from __future__ import annotations

import math
from pathlib import Path

from helpers import LOAD, make_db

from backburner import report

IDLE = ("bfq", "none", "-")
OFTEN = ("bfq", LOAD, "default")      # 4 of 10 time out
MOSTLY = ("bfq", LOAD, "background")  # 8 of 10 time out


def _timeouts_db(path: Path) -> report.ReportData:
    """Loaded cells as fast as idle whenever they finish, but timing out at 12 s (40x idle)."""
    make_db(path, medians={IDLE: 0.3, OFTEN: 0.3, MOSTLY: 0.3},
            special={**{(*OFTEN, r): "timeout" for r in (2, 5, 7, 9)},
                     **{(*MOSTLY, r): "timeout" for r in range(1, 9)}})
    return report.load(str(path))


def test_timeouts_are_no_evidence_of_a_fast_start(tmp_path: Path) -> None:
    """The reviewer's case: dropping the timeouts made a cell that times out 4 times in 10
    'indistinguishable from idle'. Counted at their limit they leave the interval open above:
    inconclusive; reaching the median they make it a lower bound, and slower."""
    data = _timeouts_db(tmp_path / "t.db")
    rows = {(r.cell.scheduler, r.cell.load, r.cell.policy): r
            for r in report.summary_rows(data)}
    often, mostly = rows[OFTEN], rows[MOSTLY]
    assert (often.n, often.timeouts) == (6, 4)
    assert often.verdict_kind == "inconclusive" and "--timeout" in often.verdict
    assert often.median_ci[1] == math.inf and not often.median_lower_bound
    assert "open above" in next(w.message for w in often.warnings if w.code == "timeouts")
    assert mostly.verdict_kind == "slower" and mostly.median_lower_bound
    assert mostly.median == 12.0 and mostly.verdict.startswith("\u2265")
    text = report.render_text(data, width=250)
    assert "\u226512.0" in text and "\u221e" in text and "lower bound" in text
