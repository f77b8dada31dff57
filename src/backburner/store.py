"""Results in SQLite: append-only, one transaction per finished trial.

A trial is committed the moment it ends, so Ctrl-C, a crash or a SIGKILL lose at most the
trial in flight, and `bench --resume` continues from what is stored. WAL mode lets
`report` read a database that `bench` is still writing. A writer holds an exclusive lock
on the file for as long as it is open, so two runs never append to one database.

Every value read back is validated once, here, where it is loaded: a database that was
edited by hand or damaged gives one `DataError` naming the row and the field, never a
traceback further down (and never a negative time reported as a median). SQLite's own
errors are translated here too: damage is a `DataError` (65), a full or unwritable file an
`IOFailure` (74) naming the file.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import math
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .cell import Cell
from .errors import BusyError, DataError, ExistsError, IOFailure, NotFoundError, UsageError

SCHEMA_VERSION = 1

SCHEMA = """
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
"""

TRIAL_FIELDS = (
    "round", "warmup", "status", "cold", "wall_s", "user_s", "sys_s", "max_rss_kb",
    "in_blocks", "out_blocks", "exit_code", "signal", "load_read_bps", "load_write_bps",
    "started_at", "ended_at", "extra",
)
STATUSES = ("ok", "failed", "timeout", "aborted")
#: Wall-clock timestamps outside this range are damage (0 = 1970, 2**33 s = year 2242).
_EPOCH_RANGE = (0.0, float(2**33))
_NON_NEGATIVE = ("wall_s", "user_s", "sys_s", "max_rss_kb", "in_blocks", "out_blocks",
                 "load_read_bps", "load_write_bps")
#: No trial lasts 30 years: a duration beyond this is damage, not a measurement.
_MAX_SECONDS = 1e9
_DURATIONS = ("wall_s", "user_s", "sys_s")


@dataclass(frozen=True)
class StoredCell:
    """A cell as one run stored it: its row id, its run, and the shared cell model."""

    id: int
    run_id: int
    cell: Cell

    @property
    def key(self) -> str:
        return self.cell.key


@dataclass(frozen=True)
class Run:
    id: int
    started_at: float
    finished_at: float | None
    command: str
    config: dict[str, Any]
    seed: int
    environment: dict[str, Any]
    tool_version: str


def refuse_existing(path: str) -> None:
    """ExistsError if `path` exists: a result database is never overwritten."""
    if os.path.lexists(path):
        raise ExistsError(
            f"{path} already exists: a result database is never overwritten",
            "use --resume to continue it, or choose another --output",
        )


def looks_like_url(target: str) -> bool:
    """`postgresql://…` and friends: never to be taken for a file name."""
    head, sep, _ = target.partition("://")
    return bool(sep) and head.replace("+", "").isalnum()


def check_local_path(target: str) -> str:
    """A local database path, or a UsageError for a URL this store cannot serve."""
    if looks_like_url(target):
        scheme = target.split("://", 1)[0]
        raise UsageError(f"{scheme}:// databases are not supported by this store",
                         "give a file name for a SQLite result database")
    return target


@contextlib.contextmanager
def sqlite_errors(path: str, writing: bool = False) -> Iterator[None]:
    """SQLite's exceptions as ours, where their meaning is known: damage or a bad file."""
    try:
        yield
    except sqlite3.IntegrityError as err:
        raise DataError(f"{path}: {err}", "results are append-only: a trial is stored once"
                        ) from None
    except sqlite3.OperationalError as err:
        text = str(err)
        if any(s in text for s in ("disk is full", "readonly", "unable to open",
                                   "disk I/O error")) or writing:
            raise IOFailure(f"{path}: {text}") from None
        raise DataError(f"{path} is damaged or not a backburner result database: {text}"
                        ) from None
    except sqlite3.DatabaseError as err:
        raise DataError(f"{path} is damaged or not a backburner result database: {err}"
                        ) from None


class Store:
    """A result database. `create` refuses to overwrite; `open` checks it is ours."""

    def __init__(self, conn: sqlite3.Connection, path: str, lock_fd: int | None = None) -> None:
        self.conn = conn
        self.path = path
        self._lock_fd = lock_fd

    @classmethod
    def create(cls, path: str) -> Store:
        check_local_path(path)
        refuse_existing(path)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC,
                         0o644)
        except FileExistsError:
            refuse_existing(path)
            raise
        except OSError as err:
            raise IOFailure(f"{path}: {err.strerror}") from None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file only we know of: never busy
        with sqlite_errors(path, writing=True):
            conn = sqlite3.connect(path)
            conn.executescript(SCHEMA)
            conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
            conn.execute("INSERT INTO meta VALUES ('application', 'backburner')")
            conn.commit()
            conn.execute("PRAGMA journal_mode=WAL")
        return cls(conn, path, fd)

    @classmethod
    def open(cls, path: str, *, readonly: bool = False) -> Store:
        check_local_path(path)
        if not os.path.exists(path):
            raise NotFoundError(f"{path}: no such result database")
        if os.path.isdir(path):
            raise DataError(f"{path} is a directory, not a result database")
        lock_fd = None if readonly else _lock(path)
        # quoted: a '?', '#' or '%' in the file name must not be read as URI syntax
        uri = f"file:{quote(str(Path(path).resolve()))}?mode={'ro' if readonly else 'rw'}"
        try:
            with sqlite_errors(path):
                conn = sqlite3.connect(uri, uri=True)
                try:
                    meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
                except sqlite3.DatabaseError:
                    raise DataError(f"{path} is not a backburner result database",
                                    "give a file written by `backburner bench --output`"
                                    ) from None
        except BaseException:
            if lock_fd is not None:
                os.close(lock_fd)
            raise
        store = cls(conn, path, lock_fd)
        try:
            store._check_meta(meta)
        except BaseException:
            store.close()
            raise
        conn.row_factory = sqlite3.Row
        return store

    def _check_meta(self, meta: dict[str, Any]) -> None:
        if meta.get("application") != "backburner":
            raise DataError(f"{self.path} is not a backburner result database")
        version = _int(meta.get("schema_version"))
        if version is None or version < 1:
            raise DataError(f"{self.path}: schema_version {meta.get('schema_version')!r} is "
                            "not a version number", "the file is damaged")
        if version > SCHEMA_VERSION:
            raise DataError(
                f"{self.path} has schema version {version}, newer than this backburner "
                f"understands ({SCHEMA_VERSION})", "upgrade backburner")
        self.schema_version = version

    # --- writing ------------------------------------------------------------------------

    def add_run(self, command: str, config: dict[str, Any], seed: int,
                environment: dict[str, Any], tool_version: str) -> int:
        with sqlite_errors(self.path, writing=True):
            cur = self.conn.execute(
                "INSERT INTO runs (started_at, command, config, seed, environment, tool_version)"
                " VALUES (?, ?, ?, ?, ?, ?)",
                (time.time(), command, json.dumps(config), seed, json.dumps(environment),
                 tool_version))
            self.conn.commit()
        return int(cur.lastrowid or 0)

    def add_cell(self, run_id: int, cell: Cell) -> int:
        """The row id of `cell` in `run_id`, added if it is not stored yet (idempotent)."""
        with sqlite_errors(self.path, writing=True):
            row = self.conn.execute("SELECT id FROM cells WHERE run_id=? AND key=?",
                                    (run_id, cell.key)).fetchone()
            if row:
                return int(row[0])
            cur = self.conn.execute(
                "INSERT INTO cells (run_id, key, probe, device, scheduler, load, policy)"
                " VALUES (?, ?, ?, ?, ?, ?, ?)",
                (run_id, cell.key, cell.probe, cell.device, cell.scheduler, cell.load,
                 cell.policy))
            self.conn.commit()
        return int(cur.lastrowid or 0)

    def add_trial(self, run_id: int, cell_id: int, **fields: Any) -> None:
        """Committed at once: this is the durability point of a trial."""
        unknown = set(fields) - set(TRIAL_FIELDS)
        if unknown:
            raise ValueError(f"unknown trial fields {unknown}")
        fields.setdefault("extra", {})
        fields["extra"] = json.dumps(fields["extra"], allow_nan=False)
        cols = ", ".join(["run_id", "cell_id", *fields])
        marks = ", ".join("?" * (len(fields) + 2))
        with sqlite_errors(self.path, writing=True):
            self.conn.execute(f"INSERT INTO trials ({cols}) VALUES ({marks})",
                              (run_id, cell_id, *fields.values()))
            self.conn.commit()

    def finish_run(self, run_id: int) -> None:
        with sqlite_errors(self.path, writing=True):
            self.conn.execute("UPDATE runs SET finished_at=? WHERE id=?", (time.time(), run_id))
            self.conn.commit()

    def update_environment(self, run_id: int, environment: dict[str, Any]) -> None:
        """Device facts are only known once the testbed exists; merged, never replaced."""
        run = self.run(run_id)
        merged = {**run.environment, **environment}
        with sqlite_errors(self.path, writing=True):
            self.conn.execute("UPDATE runs SET environment=? WHERE id=?",
                              (json.dumps(merged), run_id))
            self.conn.commit()

    # --- reading ------------------------------------------------------------------------

    def runs(self) -> list[Run]:
        with sqlite_errors(self.path):
            rows = self.conn.execute(
                "SELECT id, started_at, finished_at, command, config, seed, environment, "
                "tool_version FROM runs ORDER BY id").fetchall()
        return [self._run(tuple(r)) for r in rows]

    def run(self, run_id: int) -> Run:
        for r in self.runs():
            if r.id == run_id:
                return r
        raise DataError(f"{self.path} has no run {run_id}")

    def cells(self, run_id: int | None = None) -> list[StoredCell]:
        sql = "SELECT id, run_id, key, probe, device, scheduler, load, policy FROM cells"
        with sqlite_errors(self.path):
            rows = self.conn.execute(
                sql + (" WHERE run_id=?" if run_id else "") + " ORDER BY id",
                (run_id,) if run_id else ()).fetchall()
        return [self._cell(tuple(r)) for r in rows]

    def trials(self, cell_id: int | None = None, *, include_warmup: bool = False
               ) -> list[dict[str, Any]]:
        sql = "SELECT id, run_id, cell_id, " + ", ".join(TRIAL_FIELDS) + " FROM trials WHERE 1=1"
        args: list[Any] = []
        if cell_id is not None:
            sql += " AND cell_id=?"
            args.append(cell_id)
        if not include_warmup:
            sql += " AND warmup=0"
        with sqlite_errors(self.path):
            cur = self.conn.execute(sql + " ORDER BY id", args)
            names = [d[0] for d in cur.description]
            rows = cur.fetchall()
        return [self._trial(dict(zip(names, row, strict=True))) for row in rows]

    def done_keys(self, run_id: int) -> set[tuple[str, int]]:
        """(cell key, round) pairs already stored, for --resume."""
        with sqlite_errors(self.path):
            rows = self.conn.execute(
                "SELECT c.key, t.round FROM trials t JOIN cells c ON c.id = t.cell_id"
                " WHERE t.run_id=?", (run_id,)).fetchall()
        return {(k, r) for k, r in rows}

    def iter_trials_with_cells(self) -> Iterator[tuple[StoredCell, dict[str, Any]]]:
        cells = {c.id: c for c in self.cells()}
        for t in self.trials(include_warmup=True):
            yield cells[t["cell_id"]], t

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: a consistent view of a database `bench` is still writing."""
        with sqlite_errors(self.path):
            self.conn.execute("BEGIN")
        try:
            yield
        finally:
            self.conn.rollback()

    def close(self) -> None:
        """A writer leaves a single file behind: WAL (for readers during the run) is folded
        back and switched off; if another process still reads, it stays as it is."""
        try:
            if not self.conn.execute("PRAGMA query_only").fetchone()[0]:
                self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                self.conn.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.Error:
            pass
        self.conn.close()
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- validation of what was read ------------------------------------------------------

    def _bad(self, where: str, name: str, value: Any, want: str) -> DataError:
        shown = repr(value) if len(repr(value)) <= 40 else repr(value)[:37] + "..."
        return DataError(f"{self.path}: {where}: {name} is {shown}, not {want}",
                         "the database is damaged or was edited by hand")

    def _json_object(self, where: str, name: str, text: Any) -> dict[str, Any]:
        try:
            value = json.loads(text) if isinstance(text, str) else None
        except ValueError:
            value = None
        if not isinstance(value, dict):
            raise self._bad(where, name, text, "a JSON object")
        return value

    def _run(self, r: tuple[Any, ...]) -> Run:
        where = f"run {r[0]}"
        started, finished = _float(r[1]), _float(r[2])
        if started is None or not _EPOCH_RANGE[0] <= started <= _EPOCH_RANGE[1]:
            raise self._bad(where, "started_at", r[1], "a time")
        if r[2] is not None and (finished is None
                                 or not _EPOCH_RANGE[0] <= finished <= _EPOCH_RANGE[1]):
            raise self._bad(where, "finished_at", r[2], "a time")
        seed = _int(r[5])
        if seed is None:
            raise self._bad(where, "seed", r[5], "a whole number")
        for i, name in ((3, "command"), (7, "tool_version")):
            if not isinstance(r[i], str):
                raise self._bad(where, name, r[i], "text")
        return Run(int(r[0]), started, finished, r[3], self._json_object(where, "config", r[4]),
                   seed, self._json_object(where, "environment", r[6]), r[7])

    def _cell(self, r: tuple[Any, ...]) -> StoredCell:
        for i, name in enumerate(("key", "probe", "device", "scheduler", "load", "policy"), 2):
            if not isinstance(r[i], str):
                raise self._bad(f"cell {r[0]}", name, r[i], "text")
        return StoredCell(int(r[0]), int(r[1]), Cell(r[3], r[4], r[5], r[6], r[7]))

    def _trial(self, t: dict[str, Any]) -> dict[str, Any]:
        where = f"trial {t['id']}"
        if t["status"] not in STATUSES:
            raise self._bad(where, "status", t["status"], "one of " + ", ".join(STATUSES))
        if not isinstance(t["round"], int) or t["round"] < 0:
            raise self._bad(where, "round", t["round"], "a whole number of 0 or more")
        for name in ("warmup", "cold"):
            if isinstance(t[name], bool) or t[name] not in (0, 1):
                raise self._bad(where, name, t[name], "0 or 1")
        for name in ("started_at", "ended_at"):
            v = _float(t[name])
            if v is None or not _EPOCH_RANGE[0] <= v <= _EPOCH_RANGE[1]:
                raise self._bad(where, name, t[name], "a time")
        for name in ("wall_s", "user_s", "sys_s", "max_rss_kb", "in_blocks", "out_blocks",
                     "exit_code", "signal", "load_read_bps", "load_write_bps"):
            if t[name] is None:
                continue
            v = _float(t[name])
            if v is None or (name in _NON_NEGATIVE and v < 0) or (
                    name in _DURATIONS and v > _MAX_SECONDS):
                want = "a finite number of 0 or more" if name in _NON_NEGATIVE else "a number"
                raise self._bad(where, name, t[name],
                                f"{want} (at most {_MAX_SECONDS:g} s)" if name in _DURATIONS
                                else want)
        t["extra"] = self._json_object(where, "extra", t["extra"])
        return t


def _lock(path: str) -> int:
    """An exclusive lock on the database file for as long as a writer has it open.

    flock(2) locks are independent of SQLite's own fcntl locks on Linux, so this only keeps
    out a second backburner writer (`bench --resume` twice), never a reader.
    """
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC)
    except OSError as err:
        raise IOFailure(f"{path}: {err.strerror}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise BusyError(f"{path} is being written by another backburner process",
                        "wait for it to finish (or stop it), then try again") from None
    return fd


def _float(value: Any) -> float | None:
    """A finite float, or None when `value` is not a finite real number."""
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    return float(value) if math.isfinite(value) else None


def _int(value: Any) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return None
