"""store: the append-only SQLite result database (round trips, refusals, resume keys)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import pytest

from backburner import store as store_mod
from backburner.cell import Cell
from backburner.errors import DataError, ExistsError, NotFoundError
from backburner.store import TRIAL_FIELDS, Store

CONFIG = {"probe": "/bin/true", "loads": ["none", "readers:1:seq"], "trials": 2, "seed": 5}
ENV = {"kernel": "6.18", "cpus": 2}


def _trial(i: int) -> dict:
    return {
        "round": i, "warmup": int(i == 0), "status": ["ok", "failed", "timeout"][i % 3],
        "cold": 1, "wall_s": 0.125 + i, "user_s": 0.01 * i, "sys_s": 0.02, "max_rss_kb": 1000 + i,
        "in_blocks": 8 * i, "out_blocks": 0, "exit_code": i % 2, "signal": None if i else 9,
        "load_read_bps": 1.5e8, "load_write_bps": 0.0, "started_at": 1000.5 + i,
        "ended_at": 1001.25 + i, "extra": {"limit_s": 60.0, "nested": [1, "two"]},
    }


def test_trial_fields_cover_the_schema(tmp_path: Path) -> None:
    s = Store.create(str(tmp_path / "r.db"))
    cols = [r[1] for r in s.conn.execute("PRAGMA table_info(trials)")]
    assert set(cols) - set(TRIAL_FIELDS) == {"id", "run_id", "cell_id"}
    assert set(TRIAL_FIELDS) <= set(cols)
    assert set(_trial(1)) == set(TRIAL_FIELDS)


@pytest.mark.parametrize("reopen", [False, True])
def test_round_trip(tmp_path: Path, reopen: bool) -> None:
    path = str(tmp_path / "r.db")
    s = Store.create(path)
    run_id = s.add_run("backburner bench --probe true", CONFIG, 5, ENV, "0.1.0")
    idle = Cell("/bin/true", "testbed:1G", "bfq", "none", "-")
    loaded = Cell("/bin/true", "testbed:1G", "bfq", "readers:1:seq", "background")
    c1 = s.add_cell(run_id, idle)
    c2 = s.add_cell(run_id, loaded)
    assert c1 != c2 and s.add_cell(run_id, idle) == c1  # idempotent
    trials = [_trial(i) for i in range(3)]
    for t in trials:
        s.add_trial(run_id, c2, **t)
    s.add_trial(run_id, c1, round=0, warmup=1, status="aborted", cold=0, started_at=1.0,
                ended_at=2.0)  # an aborted slot: most fields absent
    s.update_environment(run_id, {"device": {"name": "loop7"}})
    s.update_environment(run_id, {"extra": 1})
    s.finish_run(run_id)
    if reopen:
        s.close()
        s = Store.open(path, readonly=True)

    (run,) = s.runs()
    assert (run.id, run.command, run.config, run.seed, run.tool_version) == (
        run_id, "backburner bench --probe true", CONFIG, 5, "0.1.0")
    assert run.environment == {**ENV, "device": {"name": "loop7"}, "extra": 1}
    assert run.finished_at is not None and run.finished_at >= run.started_at
    assert s.run(run_id) == run
    cells = s.cells(run_id)
    assert [(c.id, c.run_id, c.cell) for c in cells] == [(c1, run_id, idle), (c2, run_id, loaded)]
    assert [c.key for c in cells] == ["/bin/true|testbed:1G|bfq|none|-",
                                      "/bin/true|testbed:1G|bfq|readers:1:seq|background"]
    got = s.trials(c2, include_warmup=True)
    assert len(got) == 3
    for want, have in zip(trials, got, strict=True):
        assert {k: have[k] for k in TRIAL_FIELDS} == want
        assert (have["run_id"], have["cell_id"]) == (run_id, c2)
    assert [t["round"] for t in s.trials(c2)] == [1, 2]  # warm-up left out by default
    (aborted,) = s.trials(c1, include_warmup=True)
    assert aborted["status"] == "aborted" and aborted["wall_s"] is None
    assert aborted["extra"] == {}
    pairs = list(s.iter_trials_with_cells())
    assert [(c.id, t["round"]) for c, t in pairs] == [(c2, 0), (c2, 1), (c2, 2), (c1, 0)]
    with pytest.raises(DataError):
        s.run(run_id + 1)


def test_add_trial_rejects_unknown_fields_and_duplicates(tmp_path: Path) -> None:
    s = Store.create(str(tmp_path / "r.db"))
    run_id = s.add_run("c", {}, 0, {}, "v")
    cell = s.add_cell(run_id, Cell("p", "d", "s", "none", "-"))
    with pytest.raises(ValueError, match="bogus"):
        s.add_trial(run_id, cell, bogus=1, **_trial(1))
    s.add_trial(run_id, cell, **_trial(1))
    with pytest.raises(DataError, match="append-only"):  # one trial per (cell, round)
        s.add_trial(run_id, cell, **_trial(1))
    assert len(s.trials(include_warmup=True)) == 1


def test_trial_is_committed_at_once(tmp_path: Path) -> None:
    """A reader sees the trial without the writer closing: it survives a SIGKILL."""
    path = str(tmp_path / "r.db")
    s = Store.create(path)
    run_id = s.add_run("c", {}, 0, {}, "v")
    cell = s.add_cell(run_id, Cell("p", "d", "s", "none", "-"))
    s.add_trial(run_id, cell, **_trial(1))
    other = Store.open(path, readonly=True)
    assert len(other.trials()) == 1
    assert s.conn.execute("PRAGMA journal_mode").fetchone()[0] == "wal"


def test_create_refuses_an_existing_file(tmp_path: Path) -> None:
    path = tmp_path / "r.db"
    path.write_bytes(b"precious")
    with pytest.raises(ExistsError) as exc:
        Store.create(str(path))
    assert exc.value.exit_status == 73 and "\n" not in str(exc.value)
    assert path.read_bytes() == b"precious"
    Store.create(str(tmp_path / "new.db")).close()
    with pytest.raises(ExistsError):
        Store.create(str(tmp_path / "new.db"))


def test_open_missing(tmp_path: Path) -> None:
    with pytest.raises(NotFoundError):
        Store.open(str(tmp_path / "missing.db"))


def test_open_a_file_that_is_not_a_database(tmp_path: Path) -> None:
    path = tmp_path / "notes.db"
    path.write_text("these are not the results you are looking for\n" * 100)
    for readonly in (False, True):
        with pytest.raises(DataError) as exc:
            Store.open(str(path), readonly=readonly)
        assert exc.value.exit_status == 65 and "not a backburner result database" in str(exc.value)


def test_open_a_foreign_sqlite_database(tmp_path: Path) -> None:
    path = tmp_path / "other.db"
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE t (x)")
    conn.commit()
    conn.close()
    with pytest.raises(DataError):
        Store.open(str(path))
    # a meta table that is not ours
    conn = sqlite3.connect(path)
    conn.execute("CREATE TABLE meta (key TEXT, value TEXT)")
    conn.execute("INSERT INTO meta VALUES ('application', 'somebody-else')")
    conn.commit()
    conn.close()
    with pytest.raises(DataError):
        Store.open(str(path))


def test_open_a_newer_schema(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    Store.create(path).close()
    Store.open(path).close()  # the current version opens
    conn = sqlite3.connect(path)
    conn.execute("UPDATE meta SET value=? WHERE key='schema_version'",
                 (str(store_mod.SCHEMA_VERSION + 1),))
    conn.commit()
    conn.close()
    with pytest.raises(DataError) as exc:
        Store.open(path)
    assert "schema version" in str(exc.value) and "\n" not in str(exc.value)


@pytest.mark.parametrize("name", ["with space.db", "hash#1.db", "what?.db", "100%.db", "%41.db"])
def test_open_odd_file_names(tmp_path: Path, name: str) -> None:
    path = str(tmp_path / name)
    s = Store.create(path)
    s.add_run("c", {}, 0, {}, "v")
    s.close()
    assert len(Store.open(path, readonly=True).runs()) == 1


def test_done_keys(tmp_path: Path) -> None:
    s = Store.create(str(tmp_path / "r.db"))
    r1 = s.add_run("c", {}, 0, {}, "v")
    r2 = s.add_run("c", {}, 0, {}, "v")
    ka, kb = Cell("p", "d", "s", "none", "-"), Cell("p", "d", "s", "copy", "default")
    a = s.add_cell(r1, ka)
    b = s.add_cell(r1, kb)
    other = s.add_cell(r2, ka)
    assert s.done_keys(r1) == set()
    for cell, rnd in [(a, 0), (a, 1), (b, 0), (other, 5)]:
        s.add_trial(r1 if cell != other else r2, cell, **{**_trial(1), "round": rnd})
    assert s.done_keys(r1) == {(ka.key, 0), (ka.key, 1), (kb.key, 0)}
    assert s.done_keys(r2) == {(ka.key, 5)}
    s.close()
    s = Store.open(str(tmp_path / "r.db"))  # sqlite3.Row rows after open
    assert s.done_keys(r1) == {(ka.key, 0), (ka.key, 1), (kb.key, 0)}


def test_a_closed_writer_leaves_one_file(tmp_path: Path) -> None:
    """WAL lets report read while bench writes; after the run the database is one file
    again (no -wal/-shm next to it), also after a read-only reader has opened it."""
    db = tmp_path / "one.db"
    store = Store.create(str(db))
    store.add_run("cmd", {}, 1, {}, "v")
    reader = Store.open(str(db), readonly=True)
    assert reader.runs()[0].command == "cmd"
    reader.close()
    store.close()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["one.db"]
