"""The embedded backend: one SQLite file, WAL while written, one file again when closed.

A writer holds an exclusive flock on the file for as long as it is open, so two runs never
append to one database (flock locks are independent of SQLite's own fcntl locks on Linux:
readers are never kept out). A new file appears with its whole schema or not at all (built
in memory, then linked into place), so a writer killed at any moment leaves nothing that a
rerun or a `report` trips over. SQLite's exceptions become ours here: damage is a `DataError`
(65), a full or unwritable file an `IOFailure` (74) naming it.
"""

from __future__ import annotations

import contextlib
import errno
import fcntl
import os
import secrets
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote

from ..base.errors import BusyError, DataError, ExistsError, IOFailure
from ..files import infile


class SqliteBackend:
    dialect = "sqlite"
    placeholder = "?"
    lock_error = "database is locked"

    def __init__(self, path: str) -> None:
        self.path = path
        self.target = path
        self._lock_fd: int | None = None

    # --- opening ---------------------------------------------------------------------------

    def create(self, statements: list[tuple[str, tuple[Any, ...]]]) -> sqlite3.Connection:
        """A new database that appears whole: built in memory, written to an unnamed file
        in the destination's folder and linked into place only once complete (never over
        anything: the link fails if the name exists). A process killed at any moment
        leaves no file, or one with the whole schema, which `store copy` or `bench
        --resume` continues; never an empty file or a hot journal that a rerun trips on."""
        refuse_existing(self.path)
        with self.errors(writing=True):
            image = _image(statements)
        self._lock_fd = _publish(self.path, image)
        try:
            with self.errors(writing=True):
                return sqlite3.connect(_uri(self.path, "rw"), uri=True)
        except BaseException:
            self.release()
            raise

    def open(self, readonly: bool) -> sqlite3.Connection:
        infile.check(self.path, "result database")  # SQLite would wait on a FIFO forever
        if not readonly:
            self._lock_fd = _lock(self.path)
        try:
            with self.errors():
                return sqlite3.connect(_uri(self.path, "ro" if readonly else "rw"), uri=True)
        except BaseException:
            self.release()
            raise

    def after_create(self, conn: sqlite3.Connection) -> None:
        conn.execute("PRAGMA journal_mode=WAL")

    @contextlib.contextmanager
    def schema_change(self, conn: sqlite3.Connection) -> Iterator[None]:
        """One write transaction for a whole migration: Python's sqlite3 runs DDL outside
        any transaction unless one is begun, so a crash half-way would leave a half-made
        schema that the next migration trips over. (Two writers never meet here: the file
        lock keeps the second out. A new file needs none of this: see `create`.)"""
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
        raise _exists(path)


def _exists(path: str) -> ExistsError:
    return ExistsError(f"{path} already exists: a result database is never overwritten",
                       "use --resume to continue it, or choose another --output")


def _uri(path: str, mode: str) -> str:
    """Quoted: a '?', '#' or '%' in the file name must not be read as URI syntax, and a
    name that is not UTF-8 (any bytes are a file name) is quoted byte by byte."""
    return f"file:{quote(os.fsencode(Path(path).resolve()))}?mode={mode}"


def _image(statements: list[tuple[str, tuple[Any, ...]]]) -> bytes:
    """The bytes of a database holding what `statements` make, built in memory."""
    mem = sqlite3.connect(":memory:")
    try:
        with mem:
            for sql, params in statements:
                mem.execute(sql, params)
        return mem.serialize()
    finally:
        mem.close()


def _publish(path: str, data: bytes) -> int:
    """Make `path` hold `data`, all or nothing and never over an existing file: the bytes go
    to a file with no name (O_TMPFILE) that is given `path` once written and synced. The
    returned descriptor holds the writer's flock (taken before the file had a name, so no
    other writer can come between). A file system without O_TMPFILE gets a hidden
    temporary name instead, removed once linked (a process killed in the milliseconds
    between leaves it, named after the database: ``.NAME.XXXXXXXX.new``)."""
    folder, name = os.path.split(os.path.abspath(path))
    try:
        dfd = os.open(folder, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        raise IOFailure(f"{path}: {err.strerror}") from None
    try:
        return _publish_in(dfd, name, path, data)
    finally:
        os.close(dfd)


def _publish_in(dfd: int, name: str, path: str, data: bytes) -> int:
    """`_publish` in the folder open as `dfd` (the name is resolved once, not per step)."""
    try:
        fd = os.open(".", os.O_TMPFILE | os.O_RDWR | os.O_CLOEXEC, 0o644, dir_fd=dfd)
        temp = None
    except OSError as err:
        if err.errno not in (errno.EOPNOTSUPP, errno.EISDIR, errno.EINVAL):
            raise IOFailure(f"{path}: {err.strerror}") from None
        fd, temp = _named_temporary(dfd, name, path)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)  # a file only we know of: never busy
        _write_all(fd, data)
        os.fsync(fd)
        if temp is None:
            _name_unnamed(fd, dfd, name)
        else:
            os.link(temp, name, src_dir_fd=dfd, dst_dir_fd=dfd, follow_symlinks=False)
        os.fsync(dfd)  # the new name is durable too, not only the bytes it names
    except FileExistsError:
        os.close(fd)
        raise _exists(path) from None
    except OSError as err:
        os.close(fd)
        raise IOFailure(f"{path}: {err.strerror}") from None
    finally:
        if temp is not None:
            with contextlib.suppress(OSError):
                os.unlink(temp, dir_fd=dfd)
    return fd


def _name_unnamed(fd: int, dfd: int, name: str) -> None:
    """Give the O_TMPFILE open as `fd` the name `name` in `dfd`: linkat(AT_SYMLINK_FOLLOW)
    of its /proc/self/fd link (what open(2) documents; AT_EMPTY_PATH would need
    CAP_DAC_READ_SEARCH). It fails with EEXIST if the name is taken, whatever by."""
    os.link(f"/proc/self/fd/{fd}", name, dst_dir_fd=dfd, follow_symlinks=True)


def _named_temporary(dfd: int, name: str, path: str) -> tuple[int, str]:
    """A new hidden file beside `path`, for file systems without O_TMPFILE."""
    for _ in range(100):
        temp = f".{name}.{secrets.token_hex(4)}.new"
        try:
            return os.open(temp, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW
                           | os.O_CLOEXEC, 0o644, dir_fd=dfd), temp
        except FileExistsError:
            continue
        except OSError as err:
            raise IOFailure(f"{path}: {err.strerror}") from None
    raise IOFailure(f"{path}: no free temporary name beside it")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


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
