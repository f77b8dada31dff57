"""The result schema, versioned, with its migrations, for both backends.

Version 1 (backburner 0.1): runs, cells, trials. Version 2 adds what results from many
machines need: a globally unique id per run (`uuid`, so a run copied between databases is
recognised), the machine it ran on (`machine_id`, a stable hash of /etc/machine-id, and
`hostname`), and the cell's preparation step (`prepare`, a matrix dimension).

A database is migrated when it is opened for writing (additive changes only: nothing a
reader of an older version relies on is removed); a read-only open of an older version
reads it as it is, with the newer columns at their defaults.
"""

from __future__ import annotations

VERSION = 2

#: Columns added after version 1, with the value an older row has.
DEFAULTS = {"runs": {"uuid": None, "machine_id": "", "hostname": ""},
            "cells": {"prepare": "none"}}

_TABLES = """
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE runs (
    id {id},
    uuid TEXT NOT NULL UNIQUE,    -- global identity: the same run in any database
    machine_id TEXT NOT NULL,     -- stable per machine (a hash of /etc/machine-id)
    hostname TEXT NOT NULL,
    started_at {real} NOT NULL,
    finished_at {real},
    command TEXT NOT NULL,        -- the exact command line that produced the data
    config TEXT NOT NULL,         -- JSON: the full bench configuration (matrix, trials, ...)
    seed {int} NOT NULL,
    environment TEXT NOT NULL,    -- JSON: kernel, CPU, governor, memory, device, tool version
    tool_version TEXT NOT NULL
);
CREATE TABLE cells (
    id {id},
    run_id {int} NOT NULL REFERENCES runs(id),
    key TEXT NOT NULL,            -- identity across databases (see backburner.store.cell)
    probe TEXT NOT NULL,
    device TEXT NOT NULL,
    scheduler TEXT NOT NULL,
    load TEXT NOT NULL,
    policy TEXT NOT NULL,
    prepare TEXT NOT NULL DEFAULT 'none',
    UNIQUE (run_id, key)
);
CREATE TABLE trials (
    id {id},
    run_id {int} NOT NULL REFERENCES runs(id),
    cell_id {int} NOT NULL REFERENCES cells(id),
    round {int} NOT NULL,         -- 0 is the warm-up round
    warmup {int} NOT NULL,        -- 1: not counted in statistics
    status TEXT NOT NULL,         -- ok | failed | timeout | aborted
    cold {int} NOT NULL,          -- 1: caches were dropped before this trial
    wall_s {real},                -- probe start-up time (to exit, or to ready)
    user_s {real}, sys_s {real}, max_rss_kb {int},
    in_blocks {int}, out_blocks {int},
    exit_code {int}, signal {int},
    load_read_bps {real},         -- background bytes/s read while the probe ran (not the probe's)
    load_write_bps {real},
    started_at {real} NOT NULL, ended_at {real} NOT NULL,
    extra TEXT NOT NULL DEFAULT '{{}}',
    UNIQUE (run_id, cell_id, round)
);
CREATE INDEX trials_by_cell ON trials (cell_id);
CREATE INDEX cells_by_run ON cells (run_id);
"""

_TYPES = {
    "sqlite": {"id": "INTEGER PRIMARY KEY", "int": "INTEGER", "real": "REAL"},
    "postgres": {"id": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY", "int": "BIGINT",
                 "real": "DOUBLE PRECISION"},
}


def create_statements(dialect: str) -> list[str]:
    sql = _TABLES.format(**_TYPES[dialect])
    return [s.strip() for s in sql.split(";") if s.strip()]


def initial_statements(dialect: str) -> list[tuple[str, tuple[str, ...]]]:
    """A new database: its tables, and the `meta` rows that say it is ours (with ``?``
    placeholders)."""
    meta = "INSERT INTO meta VALUES (?, ?)"
    return [*((s, ()) for s in create_statements(dialect)),
            (meta, ("schema_version", str(VERSION))), (meta, ("application", "backburner"))]


def migrations(dialect: str) -> dict[int, list[str]]:
    """Statements that take a database from version N-1 to N (keyed by N)."""
    uuid = ("lower(hex(randomblob(16)))" if dialect == "sqlite"
            else "md5(random()::text || clock_timestamp()::text)")
    return {2: [
        "ALTER TABLE runs ADD COLUMN uuid TEXT",
        f"UPDATE runs SET uuid = {uuid} WHERE uuid IS NULL",
        "CREATE UNIQUE INDEX runs_uuid ON runs (uuid)",
        "ALTER TABLE runs ADD COLUMN machine_id TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE runs ADD COLUMN hostname TEXT NOT NULL DEFAULT ''",
        "ALTER TABLE cells ADD COLUMN prepare TEXT NOT NULL DEFAULT 'none'",
        "CREATE INDEX IF NOT EXISTS trials_by_cell ON trials (cell_id)",
        "CREATE INDEX IF NOT EXISTS cells_by_run ON cells (run_id)",
    ]}
