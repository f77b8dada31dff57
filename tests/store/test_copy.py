"""`store copy`: an offline run pushed into another database, idempotently — a run is
recognised by its uuid, a trial by (cell, round); copying twice adds nothing."""

from __future__ import annotations

from pathlib import Path

import pytest
from helpers import bb, make_db

from backburner.store import Store


def _counts(target: str) -> tuple[int, int]:
    s = Store.open(target, readonly=True)
    try:
        return len(s.runs()), len(s.trials(include_warmup=True))
    finally:
        s.close()


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.root)])
def destination(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "lab.db")
    return request.getfixturevalue("pg_url")


def test_copy_is_idempotent(tmp_path: Path, destination: str) -> None:
    src = str(tmp_path / "offline.db")
    make_db(src, trials=3)
    runs, trials = _counts(src)
    r = bb("store", "copy", src, destination)
    assert r.returncode == 0, r.err
    assert "1 run(s) added" in r.out and f"{trials} trial(s) added" in r.out
    assert _counts(destination) == (runs, trials)
    again = bb("store", "copy", src, destination)
    assert again.returncode == 0, again.err
    assert "already there, nothing to add" in again.out and "0 trial(s) added" in again.out
    assert _counts(destination) == (runs, trials)
    a = Store.open(src, readonly=True)
    b = Store.open(destination, readonly=True)
    (ra,), (rb,) = a.runs(), b.runs()
    assert (ra.uuid, ra.machine_id, ra.hostname, ra.started_at, ra.finished_at, ra.config) == (
        rb.uuid, rb.machine_id, rb.hostname, rb.started_at, rb.finished_at, rb.config)
    strip = lambda ts: sorted(  # noqa: E731
        (t["round"], t["wall_s"], t["status"], t["extra"]["limit_s"]) for t in ts)
    assert strip(a.trials(include_warmup=True)) == strip(b.trials(include_warmup=True))
    a.close()
    b.close()


def test_a_run_copied_unfinished_is_completed_later(tmp_path: Path) -> None:
    src, dst = str(tmp_path / "offline.db"), str(tmp_path / "lab.db")
    store = make_db(src, trials=3, finish=False, close=False, rounds={
        ("mq-deadline", "writers:4:seq", "default"): 1})
    r = bb("store", "copy", src, dst)
    assert r.returncode == 0, r.err
    _, before = _counts(dst)
    run_id = store.runs()[0].id
    cell = next(c for c in store.cells() if c.cell.load == "writers:4:seq"
                and c.cell.policy == "default" and c.cell.scheduler == "mq-deadline")
    for rnd in (2, 3):  # the rest of the run, finished offline
        store.add_trial(run_id, cell.id, round=rnd, warmup=0, status="ok", cold=1, wall_s=3.4,
                        started_at=1.8e9, ended_at=1.8e9 + 4)
    store.finish_run(run_id)
    store.close()
    r = bb("store", "copy", src, dst)
    assert r.returncode == 0, r.err
    assert "1 completed" in r.out and "2 trial(s) added" in r.out
    assert _counts(dst)[1] == before + 2
    assert Store.open(dst, readonly=True).runs()[0].finished_at is not None
