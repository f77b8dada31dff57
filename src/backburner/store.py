"""Results in SQLite: append-only, one transaction per finished trial.

A trial is committed the moment it ends, so Ctrl-C, a crash or a SIGKILL lose at most the
trial in flight, and `bench --resume` continues from what is stored. WAL mode lets
`report` read a database that `bench` is still writing.
"""

from __future__ import annotations

import json
import os
import sqlite3
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .errors import DataError, ExistsError, NotFoundError

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


@dataclass(frozen=True)
class Cell:
    id: int
    run_id: int
    key: str
    probe: str
    device: str
    scheduler: str
    load: str
    policy: str


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
    if os.path.exists(path):
        raise ExistsError(
            f"{path} already exists: a result database is never overwritten",
            "use --resume to continue it, or choose another --output",
        )


class Store:
    """A result database. `create` refuses to overwrite; `open` checks it is ours."""

    def __init__(self, conn: sqlite3.Connection, path: str) -> None:
        self.conn = conn
        self.path = path

    @classmethod
    def create(cls, path: str) -> Store:
        refuse_existing(path)
        conn = sqlite3.connect(path)
        conn.executescript(SCHEMA)
        conn.execute("INSERT INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
        conn.execute("INSERT INTO meta VALUES ('application', 'backburner')")
        conn.commit()
        conn.execute("PRAGMA journal_mode=WAL")
        return cls(conn, path)

    @classmethod
    def open(cls, path: str, *, readonly: bool = False) -> Store:
        if not os.path.exists(path):
            raise NotFoundError(f"{path}: no such result database")
        # quoted: a '?', '#' or '%' in the file name must not be read as URI syntax
        uri = f"file:{quote(str(Path(path).resolve()))}?mode={'ro' if readonly else 'rw'}"
        try:
            conn = sqlite3.connect(uri, uri=True)
            meta = dict(conn.execute("SELECT key, value FROM meta").fetchall())
        except sqlite3.DatabaseError:
            raise DataError(f"{path} is not a backburner result database",
                            "give a file written by `backburner bench --output`") from None
        if meta.get("application") != "backburner":
            raise DataError(f"{path} is not a backburner result database")
        version = int(meta.get("schema_version", "0"))
        if version > SCHEMA_VERSION:
            raise DataError(
                f"{path} has schema version {version}, newer than this backburner "
                f"understands ({SCHEMA_VERSION})", "upgrade backburner")
        conn.row_factory = sqlite3.Row
        return cls(conn, path)

    # --- writing ------------------------------------------------------------------------

    def add_run(self, command: str, config: dict[str, Any], seed: int,
                environment: dict[str, Any], tool_version: str) -> int:
        cur = self.conn.execute(
            "INSERT INTO runs (started_at, command, config, seed, environment, tool_version)"
            " VALUES (?, ?, ?, ?, ?, ?)",
            (time.time(), command, json.dumps(config), seed, json.dumps(environment),
             tool_version))
        self.conn.commit()
        return int(cur.lastrowid or 0)

    def add_cell(self, run_id: int, key: str, probe: str, device: str, scheduler: str,
                 load: str, policy: str) -> int:
        row = self.conn.execute("SELECT id FROM cells WHERE run_id=? AND key=?",
                                (run_id, key)).fetchone()
        if row:
            return int(row[0])
        cur = self.conn.execute(
            "INSERT INTO cells (run_id, key, probe, device, scheduler, load, policy)"
            " VALUES (?, ?, ?, ?, ?, ?, ?)", (run_id, key, probe, device, scheduler, load, policy))
        self.conn.commit()
        return int(cur.lastrowid or 0)

    def add_trial(self, run_id: int, cell_id: int, **fields: Any) -> None:
        """Committed at once: this is the durability point of a trial."""
        unknown = set(fields) - set(TRIAL_FIELDS)
        if unknown:
            raise ValueError(f"unknown trial fields {unknown}")
        fields.setdefault("extra", {})
        fields["extra"] = json.dumps(fields["extra"])
        cols = ", ".join(["run_id", "cell_id", *fields])
        marks = ", ".join("?" * (len(fields) + 2))
        self.conn.execute(f"INSERT INTO trials ({cols}) VALUES ({marks})",
                          (run_id, cell_id, *fields.values()))
        self.conn.commit()

    def finish_run(self, run_id: int) -> None:
        self.conn.execute("UPDATE runs SET finished_at=? WHERE id=?", (time.time(), run_id))
        self.conn.commit()

    def update_environment(self, run_id: int, environment: dict[str, Any]) -> None:
        """Device facts are only known once the testbed exists; merged, never replaced."""
        run = self.run(run_id)
        merged = {**run.environment, **environment}
        self.conn.execute("UPDATE runs SET environment=? WHERE id=?",
                          (json.dumps(merged), run_id))
        self.conn.commit()

    # --- reading ------------------------------------------------------------------------

    def runs(self) -> list[Run]:
        rows = self.conn.execute("SELECT * FROM runs ORDER BY id").fetchall()
        return [Run(r[0], r[1], r[2], r[3], json.loads(r[4]), r[5], json.loads(r[6]), r[7])
                for r in rows]

    def run(self, run_id: int) -> Run:
        for r in self.runs():
            if r.id == run_id:
                return r
        raise DataError(f"{self.path} has no run {run_id}")

    def cells(self, run_id: int | None = None) -> list[Cell]:
        sql = "SELECT id, run_id, key, probe, device, scheduler, load, policy FROM cells"
        rows = self.conn.execute(sql + (" WHERE run_id=?" if run_id else "") + " ORDER BY id",
                                 (run_id,) if run_id else ()).fetchall()
        return [Cell(*r) for r in rows]

    def trials(self, cell_id: int | None = None, *, include_warmup: bool = False
               ) -> list[dict[str, Any]]:
        sql = "SELECT * FROM trials WHERE 1=1"
        args: list[Any] = []
        if cell_id is not None:
            sql += " AND cell_id=?"
            args.append(cell_id)
        if not include_warmup:
            sql += " AND warmup=0"
        cur = self.conn.execute(sql + " ORDER BY id", args)
        names = [d[0] for d in cur.description]
        out = []
        for row in cur.fetchall():
            trial = dict(zip(names, row, strict=True))
            trial["extra"] = json.loads(trial["extra"] or "{}")
            out.append(trial)
        return out

    def done_keys(self, run_id: int) -> set[tuple[str, int]]:
        """(cell key, round) pairs already stored, for --resume."""
        rows = self.conn.execute(
            "SELECT c.key, t.round FROM trials t JOIN cells c ON c.id = t.cell_id"
            " WHERE t.run_id=?", (run_id,)).fetchall()
        return {(k, r) for k, r in rows}

    def iter_trials_with_cells(self) -> Iterator[tuple[Cell, dict[str, Any]]]:
        cells = {c.id: c for c in self.cells()}
        for t in self.trials(include_warmup=True):
            yield cells[t["cell_id"]], t

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
