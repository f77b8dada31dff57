"""The store interface, the same on both backends (SQLite and a real PostgreSQL server):
round trips, append-only, per-trial commits, resume keys, filters, and several writers at
once."""

from __future__ import annotations

import multiprocessing
from pathlib import Path

import pytest
from helpers import STORE_CONFIG, STORE_ENV, store_trial

from backburner.base.errors import DataError
from backburner.store import TRIAL_FIELDS, Filter, Store
from backburner.store.cell import Cell


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.root)])
def target(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    if request.param == "sqlite":
        return str(tmp_path / "r.db")
    return request.getfixturevalue("pg_url")


@pytest.mark.parametrize("reopen", [False, True])
def test_round_trip(target: str, reopen: bool) -> None:
    s = Store.create(target)
    run_id = s.add_run("backburner bench --probe true", STORE_CONFIG, 5, STORE_ENV, "0.1.0")
    idle = Cell("/bin/true", "testbed:1G", "bfq", "none", "-")
    loaded = Cell("/bin/true", "testbed:1G", "bfq", "readers:1:seq", "background", "replay")
    c1 = s.add_cell(run_id, idle)
    c2 = s.add_cell(run_id, loaded)
    assert c1 != c2 and s.add_cell(run_id, idle) == c1  # idempotent
    trials = [store_trial(i) for i in range(3)]
    for t in trials:
        s.add_trial(run_id, c2, **t)
    s.add_trial(run_id, c1, round=0, warmup=1, status="aborted", cold=0, started_at=1.0,
                ended_at=2.0)  # an aborted slot: most fields absent
    s.update_environment(run_id, {"device": {"name": "loop7"}})
    s.update_environment(run_id, {"extra": 1})
    s.finish_run(run_id)
    if reopen:
        s.close()
        s = Store.open(target, readonly=True)
    (run,) = s.runs()
    assert (run.id, run.command, run.config, run.seed, run.tool_version) == (
        run_id, "backburner bench --probe true", STORE_CONFIG, 5, "0.1.0")
    assert run.environment == {**STORE_ENV, "device": {"name": "loop7"}, "extra": 1}
    assert run.finished_at is not None and run.finished_at >= run.started_at
    assert len(run.uuid) == 32 and len(run.machine_id) == 32 and run.hostname
    assert s.run(run_id) == run and s.run_by_uuid(run.uuid) == run
    cells = s.cells(run_id)
    assert [(c.id, c.run_id, c.cell) for c in cells] == [(c1, run_id, idle), (c2, run_id, loaded)]
    assert cells[1].key == "/bin/true|testbed:1G|bfq|readers:1:seq|background|prepare=replay"
    got = s.trials(c2, include_warmup=True)
    assert len(got) == 3
    for want, have in zip(trials, got, strict=True):
        assert {k: have[k] for k in TRIAL_FIELDS} == want
        assert (have["run_id"], have["cell_id"]) == (run_id, c2)
    assert [t["round"] for t in s.trials(c2)] == [1, 2]  # warm-up left out by default
    (aborted,) = s.trials(c1, include_warmup=True)
    assert aborted["status"] == "aborted" and aborted["wall_s"] is None
    assert aborted["extra"] == {}
    every = s.trials(include_warmup=True)  # in the order they were stored
    assert [(t["cell_id"], t["round"]) for t in every] == [(c2, 0), (c2, 1), (c2, 2), (c1, 0)]
    with pytest.raises(DataError):
        s.run(run_id + 1)
    s.close()


def test_append_only(target: str) -> None:
    s = Store.create(target)
    run_id = s.add_run("c", {}, 0, {}, "v")
    cell = s.add_cell(run_id, Cell("p", "d", "s", "none", "-"))
    with pytest.raises(ValueError, match="bogus"):
        s.add_trial(run_id, cell, bogus=1, **store_trial(1))
    s.add_trial(run_id, cell, **store_trial(1))
    with pytest.raises(DataError, match="append-only"):  # one trial per (cell, round)
        s.add_trial(run_id, cell, **store_trial(1))
    assert len(s.trials(include_warmup=True)) == 1
    s.close()


def test_a_trial_is_visible_to_a_reader_at_once(target: str) -> None:
    """Committed when add_trial returns: a SIGKILL of the writer right after loses nothing."""
    s = Store.create(target)
    run_id = s.add_run("c", {}, 0, {}, "v")
    cell = s.add_cell(run_id, Cell("p", "d", "s", "none", "-"))
    s.add_trial(run_id, cell, **store_trial(1))
    other = Store.open(target, readonly=True)
    assert len(other.trials()) == 1
    other.close()
    s.close()


def test_done_keys(target: str) -> None:
    s = Store.create(target)
    r1 = s.add_run("c", {}, 0, {}, "v")
    r2 = s.add_run("c", {}, 0, {}, "v")
    ka, kb = Cell("p", "d", "s", "none", "-"), Cell("p", "d", "s", "copy", "default")
    a, b, other = s.add_cell(r1, ka), s.add_cell(r1, kb), s.add_cell(r2, ka)
    assert s.done_keys(r1) == set()
    for cell, rnd in [(a, 0), (a, 1), (b, 0), (other, 5)]:
        s.add_trial(r1 if cell != other else r2, cell, **{**store_trial(1), "round": rnd})
    assert s.done_keys(r1) == {(ka.key, 0), (ka.key, 1), (kb.key, 0)}
    assert s.done_keys(r2) == {(ka.key, 5)}
    assert [t["cell_id"] for t in s.trials(include_warmup=True, run_ids=[r2])] == [other]
    assert s.trials(include_warmup=True, run_ids=[]) == []
    s.close()


def test_filters(target: str) -> None:
    s = Store.create(target)
    a = s.add_run("c", {}, 0, {"kernel": "6.1"}, "v", hostname="hdd-laptop-3",
                  started_at=1_790_000_000.0)
    b = s.add_run("c", {}, 0, {"kernel": "6.18"}, "v", hostname="ssd-desktop",
                  machine="f" * 32, started_at=1_800_000_000.0)
    ids = lambda f: [r.id for r in s.runs(f)]  # noqa: E731
    assert ids(None) == [a, b]
    assert ids(Filter(run=b)) == [b]
    assert ids(Filter(machine="hdd-laptop-3")) == [a]
    assert ids(Filter(machine="ffffff")) == [b]  # a machine-id prefix of 6 or more
    assert ids(Filter(machine="fff")) == []
    assert ids(Filter(since=1_795_000_000.0)) == [b]
    s.close()


def _writer(target: str, n: int, trials: int) -> None:
    s = Store.open(target) if "://" in target else None
    assert s is not None
    run = s.add_run(f"writer {n}", {}, n, {}, "v")
    cell = s.add_cell(run, Cell("p", f"machine-{n}", "bfq", "none", "-"))
    for i in range(trials):
        s.add_trial(run, cell, **{**store_trial(1), "round": i})
    s.finish_run(run)
    s.close()


@pytest.mark.root
def test_several_writers_at_once_into_postgres(pg_url: str) -> None:
    """Machines inserting concurrently: every trial present exactly once, nothing lost."""
    Store.create(pg_url).close()
    ctx = multiprocessing.get_context("spawn")
    procs = [ctx.Process(target=_writer, args=(pg_url, n, 60)) for n in range(6)]
    for p in procs:
        p.start()
    for p in procs:
        p.join(120)
        assert p.exitcode == 0
    s = Store.open(pg_url, readonly=True)
    runs = s.runs()
    assert len(runs) == 6 and len({r.uuid for r in runs}) == 6
    trials = s.trials(include_warmup=True)
    assert len(trials) == 6 * 60
    assert len({(t["run_id"], t["round"]) for t in trials}) == 6 * 60
    s.close()
