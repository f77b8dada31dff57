"""The page cache of a file: what of it is there (cachestat, mincore) and asking for more
(readahead(2)).

cachestat (Linux 6.5) counts a range's cached pages without a mapping; mincore(2) tells
page by page, over a shared read-only mapping of the file (mapping reads nothing).
Layouts are from include/uapi/linux/mman.h: ``struct cachestat_range`` {off, len} and
``struct cachestat``, five u64 counters, in the host's byte order.
"""

from __future__ import annotations

import ctypes
import logging
import os
import struct
from dataclasses import dataclass

from ..base.errors import UnavailableError
from . import syscalls

log = logging.getLogger(__name__)

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
_RANGE = struct.Struct("=QQ")
_CACHESTAT = struct.Struct("=5Q")
_PROT_READ = 0x1
_MAP_SHARED = 0x1
_MAP_FAILED = ctypes.c_void_p(-1).value

_mmap = syscalls.function("mmap", ctypes.c_void_p,
                          [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                           ctypes.c_int, ctypes.c_long])
_munmap = syscalls.function("munmap", ctypes.c_int, [ctypes.c_void_p, ctypes.c_size_t])
_mincore = syscalls.function("mincore", ctypes.c_int,
                             [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p])
_sync_file_range = syscalls.function("sync_file_range", ctypes.c_int,
                                     [ctypes.c_int, ctypes.c_int64, ctypes.c_int64,
                                      ctypes.c_uint])
#: sync_file_range(2): start writing the range's dirty pages, without waiting for them
SYNC_FILE_RANGE_WRITE = 2
_readahead = syscalls.function("readahead", ctypes.c_ssize_t,
                               [ctypes.c_int, ctypes.c_int64, ctypes.c_size_t])


@dataclass(frozen=True)
class CacheStat:
    cached: int  # pages
    dirty: int
    writeback: int
    evicted: int
    recently_evicted: int


def cachestat(fd: int, offset: int = 0, length: int = 0) -> CacheStat | None:
    """Page-cache counters of a file range (length 0: to the end); None where the kernel
    has no cachestat (before 6.5), its number is not known here, or it refuses it for
    this file."""
    rng = _RANGE.pack(offset, length)
    out = ctypes.create_string_buffer(_CACHESTAT.size)
    try:
        syscalls.syscall("cachestat", ctypes.c_long(fd), rng, out, ctypes.c_uint(0))
    except (OSError, UnavailableError) as err:
        log.debug("cachestat: %s", err)
        return None
    return CacheStat(*_CACHESTAT.unpack(out.raw))


def mincore_vector(fd: int, offset: int, length: int) -> bytes:
    """mincore(2) over a shared read-only mapping of the file: one byte per page, bit 0 set
    where the page is in the page cache."""
    if length <= 0:
        return b""
    addr = _mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
    if addr in (None, _MAP_FAILED):
        raise syscalls.error("mmap")
    try:
        pages = -(-length // PAGE_SIZE)
        vec = (ctypes.c_ubyte * pages)()
        if _mincore(ctypes.c_void_p(addr), length, vec) != 0:
            raise syscalls.error("mincore")
        return bytes(vec)
    finally:
        _munmap(ctypes.c_void_p(addr), length)


def readahead(fd: int, offset: int, length: int) -> None:
    """readahead(2): queue reads of the range into the page cache, without copying it."""
    if _readahead(fd, offset, length) < 0:
        raise syscalls.error("readahead")


def start_writeback(fd: int) -> None:
    """Start writing back the whole file's dirty pages now, from the calling thread, and
    return without waiting for them. The requests are this thread's (its IO class), unlike
    the kernel flusher's later writeback of the same pages, or fsync's, which waits."""
    if _sync_file_range(fd, 0, 0, SYNC_FILE_RANGE_WRITE) != 0:
        raise syscalls.error("sync_file_range")
