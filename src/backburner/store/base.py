"""One store interface over two backends: append-only, one commit per finished trial.

A trial is committed the moment it ends, so Ctrl-C, a crash or a SIGKILL lose at most the
trial in flight, and `bench --resume` continues from what is stored. The same SQL serves
SQLite and PostgreSQL (written with ``?``, turned into ``%s`` for psycopg); what differs
(connecting, locking, ids of inserted rows, consistent snapshots, error translation) is the
backend's. Every value read back is validated (`validate`).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import socket
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ..base.errors import DataError
from . import schema
from .address import looks_like_url, meant_as_address, shown
from .cell import Cell
from .postgres import PostgresBackend
from .records import TRIAL_FIELDS, Filter, Run, StoredCell
from .sqlite import SqliteBackend
from .validate import Checker, whole

Backend = SqliteBackend | PostgresBackend
_URL_SCHEMES = ("postgresql", "postgres")


def backend_for(target: str) -> Backend:
    """SQLite for a file name, PostgreSQL for a postgresql:// address; anything else that
    looks like an address is refused rather than created as a file of that name, and so is
    "-": a database cannot be read from a pipe nor written to one."""
    if target == "-":
        from ..base.errors import UsageError

        raise UsageError("a result database cannot be standard input or output",
                         "give a file name or a postgresql:// address")
    if meant_as_address(target) and not looks_like_url(target):
        from ..base.errors import UsageError

        raise UsageError(f"{shown(target)} is not a database address",
                         "write postgresql://… (or ./NAME for a file of that name)")
    if looks_like_url(target):
        scheme = target.split("://", 1)[0].lower()
        if scheme not in _URL_SCHEMES:
            from ..base.errors import UsageError

            raise UsageError(f"{scheme}:// databases are not supported",
                             "give a file name (SQLite) or a postgresql:// address")
        return PostgresBackend(target)
    return SqliteBackend(target)


def machine_id() -> str:
    """A stable, app-specific id of this machine: a hash of /etc/machine-id (the raw id is
    a secret of the machine, as systemd's documentation asks), else of the host name."""
    for source in ("/etc/machine-id", "/var/lib/dbus/machine-id"):
        with contextlib.suppress(OSError):
            raw = Path(source).read_text().strip()
            if raw:
                return hashlib.sha256(f"backburner:{raw}".encode()).hexdigest()[:32]
    return hashlib.sha256(f"backburner-host:{socket.gethostname()}".encode()).hexdigest()[:32]


class Store:
    """A result database. `create` makes a new one (never overwrites a file); `open` checks
    it is ours (and migrates an older one when it is opened for writing)."""

    def __init__(self, backend: Backend, conn: Any) -> None:
        self.backend = backend
        self.conn = conn
        self.target = backend.target
        self.check = Checker(backend.target)
        self.schema_version = schema.VERSION
        self._columns: dict[str, set[str]] = {}

    @property
    def path(self) -> str:
        return self.target

    # --- opening ---------------------------------------------------------------------------

    @classmethod
    def create(cls, target: str) -> Store:
        """A new file appears with its whole schema or not at all (the backend builds it
        aside); a shared database gets the schema in one transaction, or is joined."""
        backend = backend_for(target)
        conn = backend.create(schema.initial_statements(backend.dialect))
        store = cls(backend, conn)
        try:
            with backend.errors(writing=True):
                if backend.dialect == "postgres":
                    store._create_or_join()
                backend.after_create(conn)
        except BaseException:
            store.close()
            raise
        return store

    @classmethod
    def open(cls, target: str, *, readonly: bool = False) -> Store:
        backend = backend_for(target)
        conn = backend.open(readonly)
        store = cls(backend, conn)
        try:
            store._check_meta(writing=not readonly)
        except BaseException:
            store.close()
            raise
        return store

    def _create_or_join(self) -> None:
        """A shared database, which lab machines may all start using at the same moment:
        the first to hold the schema lock creates the schema; the others, let in after it
        committed, find it made and join it (a new run in it, migrated if it is older)."""
        if "meta" not in self._tables():
            with self.backend.schema_change(self.conn):
                if "meta" not in self._tables():
                    self._write_schema()
                    return
        self._check_meta(writing=True)

    def _write_schema(self) -> None:
        for stmt, params in schema.initial_statements(self.backend.dialect):
            self._execute(stmt, params)

    def _tables(self) -> set[str]:
        if self.backend.dialect == "sqlite":
            rows = self.conn.execute("SELECT name FROM sqlite_master WHERE type='table'")
        else:
            rows = self.conn.execute("SELECT table_name FROM information_schema.tables "
                                     "WHERE table_schema = current_schema()")
        return {r[0] for r in rows.fetchall()}

    def _check_meta(self, writing: bool) -> None:
        self.schema_version = self._stored_version()
        if writing and self.schema_version < schema.VERSION:
            self._migrate()

    def _stored_version(self) -> int:
        """The schema version in `meta`, once `meta` says the database is ours."""
        not_ours = DataError(f"{self.target} is not a backburner result database",
                             "give a file written by `backburner bench --output`")
        try:
            with self.backend.errors():
                meta = dict(self.conn.execute("SELECT key, value FROM meta").fetchall())
        except DataError:
            raise not_ours from None
        if meta.get("application") != "backburner":
            raise not_ours
        version = whole(meta.get("schema_version"))
        if version is None or version < 1:
            raise DataError(f"{self.target}: schema_version {meta.get('schema_version')!r} "
                            "is not a version number", "the file is damaged")
        if version > schema.VERSION:
            raise DataError(
                f"{self.target} has schema version {version}, newer than this backburner "
                f"understands ({schema.VERSION})", "upgrade backburner")
        return version

    def _migrate(self) -> None:
        """Additive changes, one version after the other, all in one transaction that holds
        the schema lock: the version is read again under it, because another writer of a
        shared database may have migrated it meanwhile."""
        steps = schema.migrations(self.backend.dialect)
        with self.backend.errors(writing=True), self.backend.schema_change(self.conn):
            for v in range(self._stored_version() + 1, schema.VERSION + 1):
                for stmt in steps[v]:
                    self.conn.execute(stmt)
                self._execute("UPDATE meta SET value = ? WHERE key = 'schema_version'",
                              (str(v),))
        self.schema_version = schema.VERSION
        self._columns.clear()

    def _execute(self, sql: str, params: tuple[Any, ...] = ()) -> Any:
        return self.conn.execute(self._sql(sql), params)

    def _sql(self, sql: str) -> str:
        return sql if self.backend.placeholder == "?" else sql.replace("?", "%s")

    def _write(self, sql: str, params: tuple[Any, ...]) -> None:
        with self.backend.errors(writing=True):
            self._execute(sql, params)
            if self.backend.dialect == "sqlite":
                self.conn.commit()

    def _insert(self, sql: str, params: tuple[Any, ...]) -> int:
        with self.backend.errors(writing=True):
            new_id = self.backend.insert(self.conn, self._sql(sql), params)
            if self.backend.dialect == "sqlite":
                self.conn.commit()
        return new_id

    # --- writing ---------------------------------------------------------------------------

    def add_run(self, command: str, config: dict[str, Any], seed: int,
                environment: dict[str, Any], tool_version: str, *,
                run_uuid: str | None = None, machine: str | None = None,
                hostname: str | None = None, started_at: float | None = None) -> int:
        """A new run (the keyword arguments keep a copied run's identity)."""
        run_uuid = run_uuid or uuid.uuid4().hex
        run_id = self._insert(
            "INSERT INTO runs (uuid, machine_id, hostname, started_at, command, config, seed,"
            " environment, tool_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (run_uuid, machine or machine_id(), hostname or socket.gethostname(),
             started_at if started_at is not None else time.time(), command,
             json.dumps(config), seed, json.dumps(environment), tool_version))
        self.backend.lock_run(self.conn, run_uuid)
        return run_id

    def lock_run(self, run: Run) -> None:
        """Be the only writer of `run` (a resume): BusyError if another process is."""
        self.backend.lock_run(self.conn, run.uuid)

    def add_cell(self, run_id: int, cell: Cell) -> int:
        """The row id of `cell` in `run_id`, added if it is not stored yet (idempotent)."""
        with self.backend.errors():
            row = self._execute("SELECT id FROM cells WHERE run_id=? AND key=?",
                                (run_id, cell.key)).fetchone()
        if row:
            return int(row[0])
        return self._insert(
            "INSERT INTO cells (run_id, key, probe, device, scheduler, load, policy, prepare)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (run_id, cell.key, cell.probe, cell.device, cell.scheduler, cell.load, cell.policy,
             cell.prepare))

    def add_trial(self, run_id: int, cell_id: int, **fields: Any) -> None:
        """Committed at once: this is the durability point of a trial."""
        unknown = set(fields) - set(TRIAL_FIELDS)
        if unknown:
            raise ValueError(f"unknown trial fields {unknown}")
        fields.setdefault("extra", {})
        fields["extra"] = json.dumps(fields["extra"], allow_nan=False)
        cols = ", ".join(["run_id", "cell_id", *fields])
        marks = ", ".join("?" * (len(fields) + 2))
        self._write(f"INSERT INTO trials ({cols}) VALUES ({marks})",
                    (run_id, cell_id, *fields.values()))

    def finish_run(self, run_id: int, at: float | None = None) -> None:
        self._write("UPDATE runs SET finished_at=? WHERE id=?",
                    (at if at is not None else time.time(), run_id))

    def update_environment(self, run_id: int, environment: dict[str, Any]) -> None:
        """Device facts are only known once the testbed exists; merged, never replaced."""
        run = self.run(run_id)
        merged = {**run.environment, **environment}
        self._write("UPDATE runs SET environment=? WHERE id=?", (json.dumps(merged), run_id))

    # --- reading ---------------------------------------------------------------------------

    def _select(self, table: str, wanted: tuple[str, ...], where: str = "",
                params: tuple[Any, ...] = ()) -> list[dict[str, Any]]:
        """Rows as dicts; columns a database of an older version lacks get their default."""
        if table not in self._columns:
            with self.backend.errors():
                self._columns[table] = self.backend.columns(self.conn, table)
        if not self._columns[table]:
            raise DataError(f"{self.target} has no table {table}",
                            "the database is damaged or was edited by hand")
        have = [c for c in wanted if c in self._columns[table]]
        missing = {c: schema.DEFAULTS.get(table, {}).get(c) for c in wanted if c not in have}
        if any(c not in schema.DEFAULTS.get(table, {}) for c in missing):
            lost = sorted(c for c in missing if c not in schema.DEFAULTS.get(table, {}))
            raise DataError(f"{self.target}: table {table} has no column {', '.join(lost)}",
                            "the database is damaged or was edited by hand")
        with self.backend.errors():
            cur = self._execute(f"SELECT {', '.join(have)} FROM {table} {where} ORDER BY id",
                                params)
            rows = cur.fetchall()
        return [{**missing, **dict(zip(have, row, strict=True))} for row in rows]

    _RUN_COLUMNS = ("id", "uuid", "machine_id", "hostname", "started_at", "finished_at",
                    "command", "config", "seed", "environment", "tool_version")
    _CELL_COLUMNS = ("id", "run_id", "key", "probe", "device", "scheduler", "load", "policy",
                     "prepare")

    def runs(self, selection: Filter | None = None) -> list[Run]:
        runs = [self.check.run(r) for r in self._select("runs", self._RUN_COLUMNS)]
        return [r for r in runs if selection is None or selection.matches(r)]

    def run(self, run_id: int) -> Run:
        for r in self.runs():
            if r.id == run_id:
                return r
        raise DataError(f"{self.target} has no run {run_id}")

    def run_by_uuid(self, run_uuid: str) -> Run | None:
        return next((r for r in self.runs() if r.uuid == run_uuid), None)

    def cells(self, run_id: int | None = None, run_ids: list[int] | None = None
              ) -> list[StoredCell]:
        where, params = _runs_clause(run_id, run_ids)
        return [self.check.cell(r) for r in self._select("cells", self._CELL_COLUMNS, where,
                                                          params)]

    def trials(self, cell_id: int | None = None, *, include_warmup: bool = False,
               run_ids: list[int] | None = None) -> list[dict[str, Any]]:
        clauses, params = [], []
        if cell_id is not None:
            clauses.append("cell_id=?")
            params.append(cell_id)
        if run_ids is not None:
            where, more = _runs_clause(None, run_ids)
            clauses.append(where.removeprefix("WHERE "))
            params += list(more)
        if not include_warmup:
            clauses.append("warmup=0")
        where = ("WHERE " + " AND ".join(clauses)) if clauses else ""
        rows = self._select("trials", ("id", "run_id", "cell_id", *TRIAL_FIELDS), where,
                            tuple(params))
        return [self.check.trial(t) for t in rows]

    def done_keys(self, run_id: int) -> set[tuple[str, int]]:
        """(cell key, round) pairs already stored, for --resume."""
        with self.backend.errors():
            rows = self._execute(
                "SELECT c.key, t.round FROM trials t JOIN cells c ON c.id = t.cell_id"
                " WHERE t.run_id=?", (run_id,)).fetchall()
        return {(k, r) for k, r in rows}

    @contextlib.contextmanager
    def snapshot(self) -> Iterator[None]:
        """One read transaction: a consistent view of a database `bench` is still writing."""
        with self.backend.snapshot(self.conn):
            yield

    def discard(self) -> None:
        """Close and remove a database that holds nothing (a local file only)."""
        self.close()
        self.backend.discard()

    def close(self) -> None:
        self.backend.close(self.conn)


def _runs_clause(run_id: int | None, run_ids: list[int] | None) -> tuple[str, tuple[Any, ...]]:
    if run_id is not None:
        return "WHERE run_id=?", (run_id,)
    if run_ids is not None:
        if not run_ids:
            return "WHERE 1=0", ()
        return f"WHERE run_id IN ({', '.join('?' * len(run_ids))})", tuple(run_ids)
    return "", ()
