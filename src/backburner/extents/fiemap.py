"""FS_IOC_FIEMAP: where a file's bytes are, straight from the kernel.

The ioctl fills at most ``fm_extent_count`` records per call, so a file with any number of
extents is read page by page, each page starting where the previous one's last extent
ended. FIEMAP_FLAG_SYNC (first page only) writes dirty data back first, so delayed
allocations get their place before we look. Layouts are from include/uapi/linux/fiemap.h:
``struct fiemap`` is 32 bytes, ``struct fiemap_extent`` 56.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import stat
import struct
from collections.abc import Iterator
from contextlib import contextmanager

from ..base.errors import DataError, NotFoundError, UnavailableError, UsageError
from .runs import LAST, Extent

log = logging.getLogger(__name__)

FS_IOC_FIEMAP = 0xC020660B  # _IOWR('f', 11, struct fiemap)
FIEMAP_FLAG_SYNC = 0x1
FIEMAP_MAX_OFFSET = (1 << 64) - 1
_HEADER = struct.Struct("=QQIIII")  # fm_start fm_length fm_flags fm_mapped fm_count reserved
_EXTENT = struct.Struct("=QQQ16xI12x")  # fe_logical fe_physical fe_length (resv) fe_flags
BATCH = 8192  # extents per ioctl: 448 KiB of buffer

_NO_FIEMAP = (errno.EOPNOTSUPP, errno.ENOTTY, errno.ENOSYS)


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISBLK, "a block device"),
                       (stat.S_ISCHR, "a character device"), (stat.S_ISFIFO, "a FIFO"),
                       (stat.S_ISSOCK, "a socket")):
        if test(mode):
            return name
    return "not a regular file"


@contextmanager
def open_regular(path: str | os.PathLike[str]) -> Iterator[int]:
    """An O_RDONLY fd on a regular file; UsageError for anything else, checked before the
    open (a FIFO would block it) and again after (it may have been swapped meanwhile)."""
    name = os.fspath(path)
    try:
        st = os.stat(name)
    except FileNotFoundError:
        raise NotFoundError(f"{name}: no such file") from None
    if not stat.S_ISREG(st.st_mode):
        raise UsageError(f"{name} is {_kind(st.st_mode)}", "extents maps regular files")
    fd = os.open(name, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise UsageError(f"{name} is {_kind(os.fstat(fd).st_mode)}",
                             "extents maps regular files")
        yield fd
    finally:
        os.close(fd)


def fiemap(file: str | os.PathLike[str] | int, *, sync: bool = True, start: int = 0,
           length: int | None = None, batch: int = BATCH) -> list[Extent]:
    """Every extent of ``file`` (a path or an open fd) that overlaps ``[start, start+length)``
    (the whole file by default), in file order, as the filesystem reports them.

    Physical offsets are the filesystem's own: bytes on its block device for ext4 and xfs,
    btrfs's logical address space for btrfs (see `btrfs.translate`).
    """
    if isinstance(file, int):
        return fiemap_fd(file, f"fd {file}", sync=sync, start=start, length=length, batch=batch)
    with open_regular(file) as fd:
        return fiemap_fd(fd, os.fspath(file), sync=sync, start=start, length=length,
                         batch=batch)


def fiemap_fd(fd: int, name: str, *, sync: bool = True, start: int = 0,
              length: int | None = None, batch: int = BATCH) -> list[Extent]:
    """`fiemap` of an open file; ``name`` is what error messages call it."""
    end = FIEMAP_MAX_OFFSET if length is None else min(start + length, FIEMAP_MAX_OFFSET)
    buf = bytearray(_HEADER.size + batch * 56)
    out: list[Extent] = []
    pos, flags = start, FIEMAP_FLAG_SYNC if sync else 0
    while pos < end:
        _HEADER.pack_into(buf, 0, pos, end - pos, flags, 0, batch, 0)
        _ioctl(fd, buf, name)
        mapped = _HEADER.unpack_from(buf, 0)[3]
        page = [Extent(*fields) for fields in
                _EXTENT.iter_unpack(memoryview(buf)[_HEADER.size:_HEADER.size + 56 * mapped])]
        out += page
        if mapped < batch or not page or page[-1].flags & LAST:
            break
        nxt = page[-1].logical + page[-1].length
        if nxt <= pos:
            raise DataError(f"{name}: FIEMAP made no progress at file offset {pos}",
                            "the file changed while it was mapped: try again")
        pos, flags = nxt, 0
    log.debug("%s: %d extents", name, len(out))
    return out


def _ioctl(fd: int, buf: bytearray, name: str) -> None:
    try:
        fcntl.ioctl(fd, FS_IOC_FIEMAP, buf, True)
    except OSError as err:
        if err.errno in _NO_FIEMAP:
            raise UnavailableError(f"{name}: its filesystem does not report extents (FIEMAP)",
                                   "extents works on ext4, xfs, btrfs and other block-device "
                                   "filesystems, not tmpfs or FUSE") from None
        if err.errno == errno.EBADR:
            raise UnavailableError(f"{name}: the filesystem refuses FIEMAP_FLAG_SYNC") from None
        raise
