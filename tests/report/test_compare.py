"""report.compare: cells matched on every dimension but the device label, and the gate."""

from __future__ import annotations

import math
from pathlib import Path

import pytest
from helpers import LOAD, PREPARED, bb, make_db

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


DEAD = ("mq-deadline", LOAD, "default")


@pytest.mark.parametrize("status", ["timeout", "failed", "aborted"])
@pytest.mark.parametrize("gate", [{"slower_than": 0.1}, {"changed": True}])
def test_a_b_that_completes_no_trial_fails_the_gate(tmp_path: Path, status: str,
                                                    gate: dict) -> None:
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    make_db(a, trials=6)
    make_db(b, trials=6, special={(*DEAD, r): status for r in range(1, 7)})
    result = report.compare_reports(report.load(a), report.load(b))
    (row,) = [r for r in result.rows if (r.cell.scheduler, r.cell.load, r.cell.policy) == DEAD]
    assert (row.n_b, row.kind) == (0, "no-data")
    (failing,) = report.gate(result, **gate)
    assert "mq-deadline" in failing and "no completed trial" in failing
    assert report.gate(result) == []  # no gate asked for, none fails


def test_more_lost_trials_in_b_fail_the_gate(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    make_db(a, trials=8, special={(*DEAD, 2): "timeout"})
    make_db(b, trials=8, special={(*DEAD, r): "timeout" for r in (1, 4, 6)})
    result = report.compare_reports(report.load(a), report.load(b))
    (failing,) = report.gate(result, slower_than=5.0)
    assert "B lost 3 of 8 trials" in failing and "A 1 of 8" in failing
    # the other way round (B lost fewer) passes
    back = report.compare_reports(report.load(b), report.load(a))
    assert report.gate(back, slower_than=5.0) == []


def test_the_cli_gate_fails_for_a_b_that_always_times_out(tmp_path: Path) -> None:
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    make_db(a, trials=6)
    make_db(b, trials=6, special={(*DEAD, r): "timeout" for r in range(1, 7)})
    r = bb("compare", a, b, "--fail-if-slower", "10")
    assert r.returncode == 1 and "fail the gate" in r.err and "mq-deadline" in r.err


def test_timeouts_in_b_count_at_their_limit(tmp_path: Path) -> None:
    """B as fast as A whenever it finishes, but 4 of 10 trials time out: not 'equivalent';
    6 of 10: slower, its median a lower bound."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    cells = {("bfq", "none", "-"): 0.3, DEAD: 0.3, ("bfq", LOAD, "default"): 0.3}
    make_db(a, medians=cells)
    make_db(b, medians=cells, seed=2,
            special={**{(*DEAD, r): "timeout" for r in (2, 4, 6, 8)},
                     **{("bfq", LOAD, "default", r): "timeout" for r in range(1, 9)}})
    rows = {r.cell.scheduler: r for r in
            report.compare_reports(report.load(a), report.load(b)).rows if r.cell.load == LOAD}
    assert rows["mq-deadline"].kind == "inconclusive" and rows["mq-deadline"].ratio.hi == math.inf
    assert rows["bfq"].kind == "slower" and rows["bfq"].lower_bound_b
    assert rows["bfq"].median_b == 12.0


def test_b_faster_than_an_a_that_times_out_or_takes_no_time(tmp_path: Path) -> None:
    """B/A's interval reaches 0 where A's timeouts leave its median unbounded, and B/A is
    0 where B took no time: B is faster, by up to infinitely much, and the comparison says
    so."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    cells = {("bfq", "none", "-"): 0.3, ("bfq", LOAD, "default"): 0.3}
    make_db(a, medians=cells, special={("bfq", LOAD, "default", r): "timeout"
                                       for r in (2, 5, 7, 9)})
    make_db(b, medians={("bfq", "none", "-"): 0.0, ("bfq", LOAD, "default"): 0.1}, seed=2)
    result = report.compare_reports(report.load(a), report.load(b))
    idle, loaded = result.rows
    assert (idle.kind, idle.ratio.ratio) == ("faster", 0.0)
    assert (loaded.kind, loaded.ratio.lo) == ("faster", 0.0)
    text = report.render_compare(result, width=250)
    assert "changed: B \u221e\u00d7 faster" in text and "changed: B 3.0" in text
    assert len(report.gate(result, changed=True)) == 2


def test_a_run_that_stopped_once_decided_is_compared_by_its_sequence(tmp_path: Path) -> None:
    a, b, c = tmp_path / "a.db", tmp_path / "b.db", tmp_path / "c.db"
    make_db(a, trials=20)
    make_db(b, trials=20, seed=2, settings={"max_runs": 20})
    make_db(c, trials=20, seed=2)
    seq = report.compare_reports(report.load(str(a)), report.load(str(b)))
    fixed = report.compare_reports(report.load(str(a)), report.load(str(c)))
    assert {r.params["method"] for r in seq.rows} == {"confidence-sequence"}
    assert {r.ratio.method for r in fixed.rows} == {"bootstrap"}
    assert all(s.ratio.hi - s.ratio.lo > f.ratio.hi - f.ratio.lo
               for s, f in zip(seq.rows, fixed.rows, strict=True))


def test_a_gate_with_no_cell_in_common_fails_with_its_own_status(tmp_path: Path) -> None:
    """A CI gate that compared nothing must not pass: not 0, and not the gate's 1 either."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    make_db(a, trials=6)
    make_db(b, trials=6, probe="another --version")
    for gate in (["--fail-if-slower", "10"], ["--fail-if-changed"]):
        r = bb("compare", a, b, *gate)
        assert r.returncode == 65, r.err
        assert "no cells in common" in r.out and "compared nothing" in r.err
    assert bb("compare", a, b).returncode == 0  # no gate asked for: a listing, as before


def test_compare_shows_whether_the_protection_changed(tmp_path: Path) -> None:
    """Both starts slower in B, but only the loaded one's ratio to its own unloaded run
    moved: 'worse' for it, and the column shows both ratios."""
    a, b = str(tmp_path / "a.db"), str(tmp_path / "b.db")
    base = {("bfq", "none", "-"): 0.3, ("bfq", LOAD, "default"): 0.33}
    make_db(a, medians=base, trials=10)
    make_db(b, medians={("bfq", "none", "-"): 0.45, ("bfq", LOAD, "default"): 1.5},
            trials=10, seed=2)
    result = report.compare_reports(report.load(a), report.load(b))
    (row,) = [r for r in result.rows if r.cell.load == LOAD]
    assert row.protection == "worse"
    assert row.protection_a is not None and row.protection_b is not None
    assert row.protection_a.ratio == pytest.approx(1.1, rel=0.1)
    assert row.protection_b.ratio == pytest.approx(1.5 / 0.45, rel=0.1)
    text = report.render_compare(result, width=250)
    assert "Unloaded\u00d7 A\u2192B" in text and "worse" in text
    # the same database on both sides: the protection did not move
    same = report.compare_reports(report.load(a), report.load(a))
    assert {r.protection for r in same.rows} == {"unclear", "none"}
    narrow = report.render_compare(result, width=90)
    assert "worse" in narrow
