"""The embedded backend: one SQLite file, WAL while written, one file again when closed.

A writer holds an exclusive flock on the file for as long as it is open, so two runs never
append to one database (flock locks are independent of SQLite's own fcntl locks on Linux:
readers are never kept out). SQLite's exceptions become ours here: damage is a `DataError`
(65), a full or unwritable file an `IOFailure` (74) naming it.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from .. import infile
from ..errors import BusyError, DataError, ExistsError, IOFailure


class SqliteBackend:
    dialect = "sqlite"
    placeholder = "?"
    lock_error = "database is locked"

    def __init__(self, path: str) -> None:
        self.path = path
        self.target = path
        self._lock_fd: int | None = None

    # --- opening ---------------------------------------------------------------------------

    def create(self) -> sqlite3.Connection:
        refuse_existing(self.path)
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                         | os.O_CLOEXEC, 0o644)
        except FileExistsError:
            refuse_existing(self.path)
            raise
        except OSError as err:
            raise IOFailure(f"{self.path}: {err.strerror}") from None
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file only we know of: never busy
        self._lock_fd = fd
        with self.errors(writing=True):
            return sqlite3.connect(self.path)

    def open(self, readonly: bool) -> sqlite3.Connection:
        infile.check(self.path, "result database")  # SQLite would wait on a FIFO forever
        if not readonly:
            self._lock_fd = _lock(self.path)
        # quoted: a '?', '#' or '%' in the file name must not be read as URI syntax
        uri = f"file:{quote(str(Path(self.path).resolve()))}?mode={'ro' if readonly else 'rw'}"
        try:
            with self.errors():
                return sqlite3.connect(uri, uri=True)
        except BaseException:
            self.release()
            raise

    def after_create(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")

    @contextlib.contextmanager
    def schema_change(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction for the whole creation or migration: Python's sqlite3
        runs DDL outside any transaction unless one is begun, so a crash half-way would
        leave a half-made schema that the next migration trips over. (Two writers never
        meet here: the file lock, or O_EXCL for a new file, keeps the second out.)"""
        conn.execute("BEGIN IMMEDIATE")
        try:
            yield
            conn.commit()
        except BaseException:
            conn.rollback()
            raise

    # --- statements ------------------------------------------------------------------------

    def insert(self, conn: sqlite3.Connection, sql: str, params: tuple[Any, ...]) -> int:
        return int(conn.execute(sql, params).lastrowid or 0)

    @contextlib.contextmanager
    def snapshot(self, conn: sqlite3.Connection) -> Iterator[None]:
        with self.errors():
            conn.execute("BEGIN")
        try:
            yield
        finally:
            conn.rollback()

    def columns(self, conn: sqlite3.Connection, table: str) -> set[str]:
        return {r[1] for r in conn.execute(f"PRAGMA table_info({table})")}

    @contextlib.contextmanager
    def errors(self, writing: bool = False) -> Iterator[None]:
        """SQLite's exceptions as ours, where their meaning is known: damage or a bad file."""
        try:
            yield
        except sqlite3.IntegrityError as err:
            raise DataError(f"{self.path}: {err}",
                            "results are append-only: a trial is stored once") from None
        except sqlite3.OperationalError as err:
            text = str(err)
            if any(s in text for s in ("disk is full", "readonly", "unable to open",
                                       "disk I/O error")) or writing:
                raise IOFailure(f"{self.path}: {text}") from None
            raise DataError(f"{self.path} is damaged or not a backburner result database: "
                            f"{text}") from None
        except sqlite3.DatabaseError as err:
            raise DataError(f"{self.path} is damaged or not a backburner result database: "
                            f"{err}") from None

    # --- closing ---------------------------------------------------------------------------

    def close(self, conn: sqlite3.Connection) -> None:
        """A writer leaves a single file behind: WAL (for readers during the run) is folded
        back and switched off; if another process still reads, it stays as it is."""
        try:
            if not conn.execute("PRAGMA query_only").fetchone()[0]:
                conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
                conn.execute("PRAGMA journal_mode=DELETE")
        except sqlite3.Error:
            pass
        conn.close()
        self.release()

    def release(self) -> None:
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    def lock_run(self, conn: sqlite3.Connection, run_id: int) -> None:
        """The file lock already keeps a second writer out of the whole database."""

    def discard(self) -> None:
        """Remove a database that holds nothing (a run that failed before its first trial)."""
        for suffix in ("", "-wal", "-shm"):
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self.path + suffix)


def refuse_existing(path: str) -> None:
    """ExistsError if `path` exists: a result database is never overwritten."""
    if os.path.lexists(path):
        raise ExistsError(
            f"{path} already exists: a result database is never overwritten",
            "use --resume to continue it, or choose another --output",
        )


def _lock(path: str) -> int:
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
