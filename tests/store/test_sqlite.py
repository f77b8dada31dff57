"""The SQLite backend: files never overwritten, foreign and damaged files refused, odd
names, one file after the writer closes, one writer at a time, and an old version migrated."""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path

import pytest
from helpers import store_trial

from backburner import store as store_mod
from backburner.base.errors import BackburnerError, BusyError, DataError, ExistsError, NotFoundError
from backburner.store import TRIAL_FIELDS, Store
from backburner.store.cell import Cell


def test_trial_fields_cover_the_schema(tmp_path: Path) -> None:
    s = Store.create(str(tmp_path / "r.db"))
    cols = [r[1] for r in s.conn.execute("PRAGMA table_info(trials)")]
    assert set(cols) - set(TRIAL_FIELDS) == {"id", "run_id", "cell_id"}
    assert set(TRIAL_FIELDS) <= set(cols)
    assert set(store_trial(1)) == set(TRIAL_FIELDS)


def test_trial_is_committed_at_once(tmp_path: Path) -> None:
    """A reader sees the trial without the writer closing: it survives a SIGKILL."""
    path = str(tmp_path / "r.db")
    s = Store.create(path)
    run_id = s.add_run("c", {}, 0, {}, "v")
    cell = s.add_cell(run_id, Cell("p", "d", "s", "none", "-"))
    s.add_trial(run_id, cell, **store_trial(1))
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


V1_SCHEMA = '''
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id INTEGER PRIMARY KEY,
    started_at REAL NOT NULL,
    finished_at REAL,
    command TEXT NOT NULL,        -- the exact command line that produced the data
    config TEXT NOT NULL,         -- JSON: the full bench configuration (matrix, trials, ...)
    seed INTEGER NOT NULL,
    environment TEXT NOT NULL,    -- JSON: kernel, CPU, governor, memory, device, tool version
    tool_version TEXT NOT NULL
);
CREATE TABLE cells (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,            -- identity across databases: probe|device|sched|load|policy
    probe TEXT NOT NULL,
    device TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    load TEXT NOT NULL,
    policy TEXT NOT NULL,
    UNIQUE (run_id, key)
);
CREATE TABLE trials (
    id INTEGER PRIMARY KEY,
    run_id INTEGER NOT NULL REFERENCES runs(id),
    cell_id INTEGER NOT NULL REFERENCES cells(id),
    round INTEGER NOT NULL,       -- 0 is the warm-up round
    warmup INTEGER NOT NULL,      -- 1: not counted in statistics
    status TEXT NOT NULL,         -- ok | failed | timeout | aborted
    cold INTEGER NOT NULL,        -- 1: caches were dropped before this trial
    wall_s REAL,                  -- probe start-up time (to exit, or to ready)
    user_s REAL, sys_s REAL, max_rss_kb INTEGER,
    in_blocks INTEGER, out_blocks INTEGER,
    exit_code INTEGER, signal INTEGER,
    load_read_bps REAL,           -- device throughput while the probe ran (device counters)
    load_write_bps REAL,
    started_at REAL NOT NULL, ended_at REAL NOT NULL,
    extra TEXT NOT NULL DEFAULT '{}',
    UNIQUE (run_id, cell_id, round)
);
'''


def _v1_database(path: Path) -> None:
    """A database as backburner 0.1 wrote it (schema version 1)."""
    conn = sqlite3.connect(path)
    conn.executescript(V1_SCHEMA)
    conn.execute("INSERT INTO meta VALUES ('schema_version', '1')")
    conn.execute("INSERT INTO meta VALUES ('application', 'backburner')")
    conn.execute("INSERT INTO runs (started_at, command, config, seed, environment, "
                 "tool_version) VALUES (1700000000, 'old', '{}', 3, '{}', '0.1.0')")
    conn.execute("INSERT INTO cells (run_id, key, probe, device, scheduler, load, policy) "
                 "VALUES (1, 'p|d|bfq|none|-', 'p', 'd', 'bfq', 'none', '-')")
    conn.execute("INSERT INTO trials (run_id, cell_id, round, warmup, status, cold, wall_s, "
                 "started_at, ended_at) VALUES (1, 1, 1, 0, 'ok', 1, 0.5, 1700000001, "
                 "1700000002)")
    conn.commit()
    conn.close()


def test_an_old_database_is_read_as_it_is_and_migrated_when_written(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    _v1_database(path)
    before = path.read_bytes()
    s = Store.open(str(path), readonly=True)
    (run,) = s.runs()
    assert s.schema_version == 1 and run.uuid == "local-1" and run.hostname == ""
    assert s.cells()[0].cell.prepare == "none" and len(s.trials()) == 1
    s.close()
    assert path.read_bytes() == before  # a reader changes nothing
    s = Store.open(str(path))  # a writer (bench --resume) migrates, additively
    assert s.schema_version == store_mod.SCHEMA_VERSION == 2
    (run,) = s.runs()
    assert len(run.uuid) == 32 and run.command == "old"
    assert [c.key for c in s.cells()] == ["p|d|bfq|none|-"] and len(s.trials()) == 1
    s.close()
    conn = sqlite3.connect(path)
    assert conn.execute("SELECT value FROM meta WHERE key='schema_version'").fetchone() == ("2",)


def test_one_writer_at_a_time(tmp_path: Path) -> None:
    path = str(tmp_path / "r.db")
    writer = Store.create(path)
    with pytest.raises(BusyError) as err:
        Store.open(path)
    assert err.value.exit_status == 75
    Store.open(path, readonly=True).close()  # readers are never kept out
    writer.close()
    Store.open(path).close()


def test_a_migration_that_fails_half_way_leaves_the_old_version(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Schema changes are one transaction: a migration cut short (here by a statement that
    fails after the first columns were added) leaves version 1 as it was, and the next
    writer migrates it cleanly (not "duplicate column name")."""
    from backburner.store import schema

    path = tmp_path / "old.db"
    _v1_database(path)
    before = dict(schema.migrations("sqlite"))
    broken = {2: [*before[2], "INSERT INTO no_such_table VALUES (1)"]}
    monkeypatch.setattr(schema, "migrations", lambda dialect: broken)
    with pytest.raises(BackburnerError):
        Store.open(str(path))
    monkeypatch.setattr(schema, "migrations", lambda dialect: before)
    s = Store.open(str(path), readonly=True)
    assert s.schema_version == 1 and s.runs()[0].uuid == "local-1"  # no column was added
    s.close()
    s = Store.open(str(path))
    assert s.schema_version == 2 and len(s.runs()[0].uuid) == 32
    s.close()


def _create_at_once(path: str, barrier: object, results: object) -> None:
    try:
        barrier.wait(60)  # type: ignore[attr-defined]
        s = Store.create(path)
        s.add_run("c", {}, 0, {}, "v")
        s.close()
        results.put("ok")  # type: ignore[attr-defined]
    except BaseException as err:  # noqa: BLE001 - the parent checks what went wrong
        results.put(f"{type(err).__name__} {getattr(err, 'exit_status', '')}")  # type: ignore


def test_processes_creating_one_file_at_once(tmp_path: Path) -> None:
    """Exactly one creates it (a link that fails if the name exists, the file lock taken
    before); the others are told it exists (73), never handed a half-made database."""
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    barrier, results = ctx.Barrier(6), ctx.Queue()
    path = str(tmp_path / "r.db")
    procs = [ctx.Process(target=_create_at_once, args=(path, barrier, results))
             for _ in range(6)]
    for p in procs:
        p.start()
    said = sorted(results.get(timeout=120) for _ in procs)
    for p in procs:
        p.join(60)
    assert said == ["ExistsError 73"] * 5 + ["ok"]
    s = Store.open(path, readonly=True)
    assert len(s.runs()) == 1
    s.close()


def test_without_o_tmpfile_a_hidden_name_is_used_and_removed(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A file system without unnamed files (EOPNOTSUPP, as vfat or an old NFS answer) gets
    the new database under a hidden temporary name, linked into place and then removed."""
    import errno
    import os

    real_open = os.open

    def no_tmpfile(path, flags, *args, **kw):  # noqa: ANN001, ANN202
        if flags & os.O_TMPFILE == os.O_TMPFILE:
            raise OSError(errno.EOPNOTSUPP, os.strerror(errno.EOPNOTSUPP))
        return real_open(path, flags, *args, **kw)

    monkeypatch.setattr(os, "open", no_tmpfile)
    path = tmp_path / "r.db"
    s = Store.create(str(path))
    s.add_run("c", {}, 0, {}, "v")
    s.close()
    assert os.listdir(tmp_path) == ["r.db"]
    assert len(Store.open(str(path), readonly=True).runs()) == 1


@pytest.mark.parametrize("planted", ["file", "symlink"])
def test_a_name_taken_while_the_database_is_built_is_never_replaced(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch, planted: str) -> None:
    """Another process (or user) takes the name between the check and the link: 73, and
    what it put there is left as it is, with nothing else beside it."""
    import os

    from backburner.store import sqlite as sqlite_mod

    path, target = tmp_path / "r.db", tmp_path / "precious"
    target.write_bytes(b"precious")
    build = sqlite_mod._image

    def build_then_plant(statements):  # noqa: ANN001, ANN202
        image = build(statements)
        if planted == "file":
            path.write_bytes(b"theirs")
        else:
            path.symlink_to(target)
        return image

    monkeypatch.setattr(sqlite_mod, "_image", build_then_plant)
    with pytest.raises(ExistsError) as err:
        Store.create(str(path))
    assert err.value.exit_status == 73
    assert sorted(os.listdir(tmp_path)) == ["precious", "r.db"]
    assert path.read_bytes() == (b"theirs" if planted == "file" else b"precious")
    assert target.read_bytes() == b"precious"


def test_a_name_that_is_not_utf8_is_a_name_like_any(tmp_path: Path) -> None:
    """Any bytes are a file name: `report $'bad\\xff\\xfe.db'` was a traceback."""
    name = os.fsdecode(os.fsencode(tmp_path) + b"/bad\xff\xfe.db")
    s = Store.create(name)
    s.add_run("c", {}, 0, {}, "v")
    s.close()
    assert len(Store.open(name, readonly=True).runs()) == 1
    Path(name + "x").write_text("not a database\n" * 50)
    with pytest.raises(DataError):
        Store.open(name + "x", readonly=True)
