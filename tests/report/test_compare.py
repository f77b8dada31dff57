"""report.compare: cells matched on every dimension but the device label, and the gate."""

from __future__ import annotations

from pathlib import Path

from helpers import LOAD, PREPARED, make_db

from backburner import report


def test_cells_are_matched_with_their_preparation(tmp_path: Path) -> None:
    """A has cells with and without a prepare step, B only the prepared ones: each B cell
    is judged against the A cell prepared the same way, the rest is listed as only in A."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    make_db(a, medians=PREPARED)
    make_db(b, medians={k: v for k, v in PREPARED.items() if len(k) == 4}, seed=2,
            device="testbed:8G")  # matched without the device label, too
    result = report.compare_reports(report.load(a), report.load(b))
    assert {(r.cell.load, r.cell.prepare) for r in result.rows} == {
        ("none", "replay"), (LOAD, "replay")}
    assert {r.kind for r in result.rows} == {"equivalent"}
    assert sorted(result.only_a) == sorted(
        f"gimp --version · bfq · {ld} · {p}" for ld, p in (("none", "-"), (LOAD, "default")))
    text = report.render_compare(result, width=250)
    assert "Prepare" in text and "replay" in text


def test_no_prepare_column_without_a_prepare_step(tmp_path: Path) -> None:
    a = str(tmp_path / "a.db")
    make_db(a, trials=6)
    data = report.load(a)
    assert "Prepare" not in report.render_compare(report.compare_reports(data, data), width=250)
