"""The shared backend: a PostgreSQL database many lab machines write into at once.

Why psycopg 3: the maintained PostgreSQL driver for Python (libpq underneath, binary wheels
with no compiler), with conninfo parsing and per-error exception classes we can translate.

Every statement is its own transaction (autocommit), so a trial is durable the moment its
INSERT returns, like SQLite's per-trial commit; runs of different machines never touch the
same rows (each run has its own cells), so writers do not conflict. A run being written or
resumed holds a session advisory lock on it: a second `--resume` of the same run is refused.
The password comes only from libpq's own mechanisms (PGPASSWORD, ~/.pgpass, a service file):
a connection string that holds one is refused, so it never reaches a command line, a
process list or a stored result.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

from ..base.errors import AccessError, BusyError, DataError, IOFailure, UnavailableError, UsageError
from .address import libpq_reason, secrets, shown


class Unreachable(UnavailableError):
    """The database cannot be reached from here (the server, or the driver, is missing): what
    the user can do about it depends on the command, which adds it to the hint."""


def _psycopg() -> Any:
    try:
        import psycopg
    except ImportError:
        raise Unreachable("the PostgreSQL store needs psycopg 3",
                          "apt install python3-psycopg, or pip install 'psycopg[binary]' "
                          "(scripts/setup installs it)"
                          ) from None
    return psycopg


def parse_target(url: str) -> dict[str, str]:
    """The connection parameters of `url`; refused if it holds a password. Neither error
    shows the password: libpq's own message quotes the address back."""
    psycopg = _psycopg()
    try:
        params = psycopg.conninfo.conninfo_to_dict(url)
    except psycopg.ProgrammingError as err:
        raise UsageError(f"database address {shown(url)} does not parse: "
                         f"{libpq_reason(str(err), url)}") from None
    if params.get("password") or params.get("sslpassword"):
        raise UsageError("a password in the database address would show in process lists "
                         "and in the stored command line",
                         "give it with PGPASSWORD, ~/.pgpass or a service file instead")
    if secrets(url):  # libpq ends the user name at a '/': u:pa/ss@h is host u, port pa
        raise UsageError(f"{shown(url)} looks like it holds a password (a ':' before the "
                         "last '@')", "give the password with PGPASSWORD, ~/.pgpass or a "
                         "service file, and write an '@' in a name as %40")
    return {k: str(v) for k, v in params.items()}


class PostgresBackend:
    dialect = "postgres"
    placeholder = "%s"

    def __init__(self, url: str) -> None:
        self.params = parse_target(url)
        self.host = self.params.get("host", "localhost")
        self.url = url
        self.target = shown(url)  # for messages: never with a password
        self._conn: Any = None

    # --- opening ---------------------------------------------------------------------------

    def _connect(self) -> Any:
        psycopg = _psycopg()
        try:
            conn = psycopg.connect(self.url, autocommit=True, connect_timeout=10)
        except psycopg.OperationalError as err:
            raise self._connect_error(err) from None
        self._conn = conn
        return conn

    def _connect_error(self, err: Exception) -> Exception:
        text = " ".join(str(err).split())
        where = f"database on {self.host}"
        if any(s in text for s in ("password authentication failed", "no password supplied",
                                   "permission denied", "role", "pg_hba.conf")):
            return AccessError(f"{where}: access denied ({self._reason(text)})",
                               "check the user name and PGPASSWORD / ~/.pgpass")
        return Unreachable(f"{where} is unreachable ({self._reason(text)})",
                           "check the address and that the server is running")

    def _reason(self, text: str) -> str:
        return libpq_reason(text, self.url)

    def create(self, statements: list[tuple[str, tuple[Any, ...]]]) -> Any:
        """A connection only: the schema is made (or found) under the schema lock, in one
        transaction, by `Store` (a killed creator leaves nothing of it: the server rolls
        the transaction back)."""
        return self._connect()

    def open(self, readonly: bool) -> Any:
        conn = self._connect()
        if readonly:
            conn.execute("SET default_transaction_read_only = on")
        return conn

    def after_create(self, conn: Any) -> None:
        pass

    @contextlib.contextmanager
    def schema_change(self, conn: Any) -> Iterator[None]:
        """One transaction holding the database's schema lock: machines that start at once
        against an empty (or older) database create (or migrate) its schema one at a time,
        and each re-reads what it found once it holds the lock. Released at commit."""
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(%s)", (_SCHEMA_LOCK,))
            yield

    # --- statements ------------------------------------------------------------------------

    def insert(self, conn: Any, sql: str, params: tuple[Any, ...]) -> int:
        return int(conn.execute(sql + " RETURNING id", params).fetchone()[0])

    @contextlib.contextmanager
    def snapshot(self, conn: Any) -> Iterator[None]:
        with self.errors(), conn.transaction():
            conn.execute("SET TRANSACTION ISOLATION LEVEL REPEATABLE READ, READ ONLY")
            yield

    def columns(self, conn: Any, table: str) -> set[str]:
        rows = conn.execute("SELECT column_name FROM information_schema.columns "
                            "WHERE table_name = %s AND table_schema = current_schema()",
                            (table,)).fetchall()
        return {r[0] for r in rows}

    @contextlib.contextmanager
    def errors(self, writing: bool = False) -> Iterator[None]:
        psycopg = _psycopg()
        errors = psycopg.errors
        try:
            yield
        except errors.UniqueViolation as err:
            raise DataError(f"database on {self.host}: {self._reason(str(err))}",
                            "results are append-only: a trial is stored once") from None
        except (errors.UndefinedTable, errors.UndefinedColumn) as err:
            raise DataError(f"database on {self.host} is not a backburner result database "
                            f"({self._reason(str(err))})") from None
        except (errors.DiskFull, errors.ReadOnlySqlTransaction) as err:
            raise IOFailure(f"database on {self.host}: {self._reason(str(err))}") from None
        except errors.InsufficientPrivilege as err:
            raise AccessError(f"database on {self.host}: {self._reason(str(err))}") from None
        except psycopg.OperationalError as err:
            raise self._connect_error(err) from None
        except psycopg.DataError as err:
            raise DataError(f"database on {self.host}: {self._reason(str(err))}") from None

    # --- closing and locking ---------------------------------------------------------------

    def close(self, conn: Any) -> None:
        with contextlib.suppress(Exception):
            conn.close()

    def release(self) -> None:
        if self._conn is not None:
            self.close(self._conn)

    def lock_run(self, conn: Any, run_uuid: str) -> None:
        """A session advisory lock on the run: one writer per run, across all machines."""
        key = int.from_bytes(hashlib.sha256(run_uuid.encode()).digest()[:8], "big", signed=True)
        got = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()[0]
        if not got:
            raise BusyError(f"run {run_uuid} in the database on {self.host} is being written "
                            "by another backburner process", "wait for it to finish")

    def discard(self) -> None:
        """A shared database is never removed; an empty run is left to be seen as such."""


#: The advisory lock key of schema changes (run locks are hashes of run uuids, like this).
_SCHEMA_LOCK = int.from_bytes(hashlib.sha256(b"backburner:schema").digest()[:8], "big",
                              signed=True)

