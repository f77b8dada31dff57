"""Files the user gives us to read (packs, traces, maps, rule files, result databases):
regular files only, read with a size bound.

A FIFO given as a pack would block the open or the read forever; ``/dev/zero`` as a trace
would be read until memory runs out; a directory gives a confusing error from deep inside
a parser. Every input is therefore opened without blocking, checked on the open
descriptor (so a path swapped after a check cannot slip past it) to be a regular file,
and read only up to a bound far beyond any real file of its kind.
"""

from __future__ import annotations

import errno
import os
import stat

from ..base.errors import DataError, IOFailure, NotFoundError

_KINDS = ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO"),
          (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device"),
          (stat.S_ISSOCK, "a socket"))


def kind_of(mode: int) -> str:
    """'a FIFO', 'a directory', ... for a file mode that is not a regular file's."""
    return next((name for test, name in _KINDS if test(mode)), "not a regular file")


def not_regular(path: str, what: str, mode: int) -> DataError:
    return DataError(f"{path} is {kind_of(mode)}, not a {what}",
                     f"give the path of a regular file holding the {what}")


def check(path: str | os.PathLike[str], what: str) -> os.stat_result:
    """The status of `path` (symlinks followed: the user's own link is theirs to give) if it
    is a regular file; else one error naming what it is. For readers that open by path
    themselves (SQLite)."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise NotFoundError(f"{name}: no such {what}") from None
    except OSError as err:
        raise IOFailure(f"{name}: {err.strerror}") from None
    if not stat.S_ISREG(st.st_mode):
        raise not_regular(name, what, st.st_mode)
    return st


def read(path: str | os.PathLike[str], what: str, limit: int) -> bytes:
    """The whole content of a regular file of at most `limit` bytes.

    The open does not block (O_NONBLOCK: a FIFO without a writer would), and the type is
    checked on the descriptor before a byte is read."""
    name = os.fspath(path)
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC | os.O_NOCTTY)
    except FileNotFoundError:
        raise NotFoundError(f"{name}: no such {what}") from None
    except OSError as err:
        if err.errno == errno.EISDIR:
            raise DataError(f"{name} is a directory, not a {what}") from None
        raise IOFailure(f"{name}: {err.strerror}") from None
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise not_regular(name, what, st.st_mode)
        if st.st_size > limit:
            raise _too_large(name, what, limit)
        chunks, total = [], 0
        while True:  # the size can grow while we read: the bound holds on what is read
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise _too_large(name, what, limit)
        return b"".join(chunks)
    except OSError as err:
        raise IOFailure(f"{name}: {err.strerror}") from None
    finally:
        os.close(fd)


def read_text(path: str | os.PathLike[str], what: str, limit: int) -> str:
    """`read`, decoded as UTF-8; text that is not UTF-8 is not a file of this kind."""
    data = read(path, what, limit)
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError:
        raise DataError(f"{os.fspath(path)} is not a {what} (not UTF-8 text)") from None


def _too_large(name: str, what: str, limit: int) -> DataError:
    return DataError(f"{name} is larger than any {what} ({_size(limit)})")


def _size(n: int) -> str:
    return f"{n >> 20} MiB" if n >= 1 << 20 else f"{n >> 10} KiB"
