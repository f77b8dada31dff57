"""Files written for the user (reports, exports, plots, packs): whole or not at all, and a
failure names the file.

The command line's one convention (docs/reference/cli.md): `-o/--output FILE`, a command's product
(a trace, a map, a pack, a sort file), is never replaced unless --force (`check_new`, before
the work); `--export-FORMAT FILE`, a view of results, is replaced, as hyperfine's exports
are. Both are written through `replaced`.

The content goes to a temporary file in the same directory, which replaces the target only
once it is complete: a full disk or an interrupt never leaves half a report where the last
good one was. Any OSError on the way becomes an `IOFailure` (74) naming the target, because
a write() error alone says "No space left on device" without saying where.

Only a regular file (or nothing) is ever replaced: renaming over ``/dev/null`` as root would
put a regular file where the machine needs its device. A target that is a device, a FIFO,
a socket or a directory is refused with `ExistsError` (73) before anything is written.
"""

from __future__ import annotations

import contextlib
import io
import logging
import os
import stat
import sys
import tempfile
from collections.abc import Iterator
from typing import IO

from ..base.errors import ExistsError, IOFailure, UsageError
from .infile import kind_of

#: Reports, plots and exports are for sharing; what lists a user's files (packs, maps,
#: traces) is private unless asked otherwise.
PUBLIC, PRIVATE = 0o644, 0o600

log = logging.getLogger(__name__)


def failure(path: str, err: OSError) -> IOFailure:
    return IOFailure(f"{path}: {err.strerror or err}")


def check_target(path: str) -> None:
    """Refuse an existing `path` that is not a regular file (a symlink itself is replaced,
    never followed: the rename acts on the link)."""
    try:
        st = os.lstat(path)
    except FileNotFoundError:
        return
    except OSError as err:
        raise failure(path, err) from None
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISLNK(st.st_mode)):
        raise ExistsError(f"{path} is {kind_of(st.st_mode)}: output goes to regular files only",
                          "give the path of a regular file (or of none yet)")


def check_new(path: str, force: bool = False) -> None:
    """What `-o FILE` promises, checked before any work is done: a regular file (or none
    yet), not one that exists unless --force, in a folder that exists and can be written.
    The file itself is then written with `replaced` (whole or not at all), whose scratch
    file is made here once to be sure: root's access check says yes to /proc and /sys,
    where no file can be made."""
    if not path:
        raise UsageError("the output file name is empty", "give the path of a file to write")
    check_target(path)
    if os.path.lexists(path) and not force:
        raise ExistsError(f"{path} exists", "choose another name, or add --force to replace it")
    folder = os.path.dirname(os.path.abspath(path))
    if not os.path.isdir(folder) or not os.access(folder, os.W_OK):
        raise IOFailure(f"{path}: cannot write there (no such folder or no permission)")
    try:
        fd, tmp = tempfile.mkstemp(prefix=".~", suffix=".tmp", dir=folder)
    except OSError as err:
        raise IOFailure(f"{path}: cannot write there ({err.strerror})") from None
    os.close(fd)
    _discard(tmp)


@contextlib.contextmanager
def replaced(path: str, mode: str = "w", perms: int = PUBLIC) -> Iterator[IO]:
    """``with replaced("r.html") as f: f.write(...)``: `path` appears complete or unchanged,
    with permissions `perms` whatever the umask."""
    check_target(path)
    directory = os.path.dirname(os.path.abspath(path))
    try:
        fd, tmp = tempfile.mkstemp(prefix=".~", suffix=".tmp", dir=directory)
    except OSError as err:
        raise failure(path, err) from None
    try:
        with os.fdopen(fd, mode, **({"encoding": "utf-8"} if "b" not in mode else {})) as f:
            yield f
            f.flush()
            os.fsync(f.fileno())
        os.chmod(tmp, perms)
        check_target(path)  # again: it may have been swapped for a device meanwhile
        os.replace(tmp, path)
    except OSError as err:
        _discard(tmp)
        raise failure(path, err) from None
    except BaseException:
        _discard(tmp)
        raise
    _sync_directory(directory)


def _sync_directory(directory: str) -> None:
    """Make the rename itself durable: without it a power cut soon after can leave the
    directory naming nothing (or the old file) although the new bytes were synced — a
    boot pack written at shutdown would be lost on the next boot. Best effort: the file
    is written by then, so a directory that cannot be opened (a write-only one) or synced
    (a filesystem without it) does not turn a written file into a failure."""
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError as err:
        log.debug("%s: not synced (%s)", directory, err.strerror)
        return
    try:
        os.fsync(fd)
    except OSError as err:
        log.warning("%s: the directory could not be synced (%s): the new file may not "
                    "survive a power cut", directory, err.strerror)
    finally:
        os.close(fd)


def _discard(tmp: str) -> None:
    with contextlib.suppress(OSError):
        os.unlink(tmp)


def write_bytes(path: str, data: bytes, perms: int = PUBLIC) -> None:
    with replaced(path, "wb", perms) as f:
        f.write(data)


@contextlib.contextmanager
def text_output(path: str | None) -> Iterator[IO[str]]:
    """A file (written whole) or, without a path, standard output (errors named as such)."""
    if path:
        with replaced(path) as f:
            yield f
        return
    buf = io.StringIO()
    yield buf
    try:
        sys.stdout.write(buf.getvalue())
        sys.stdout.flush()
    except BrokenPipeError:
        raise
    except OSError as err:
        raise failure("standard output", err) from None


def make_dirs(path: str) -> None:
    try:
        os.makedirs(path, exist_ok=True)
    except OSError as err:
        raise failure(path, err) from None
