"""The kernel calls readahead needs that Python does not wrap: fanotify_init/fanotify_mark,
mmap+mincore and cachestat (what is in the page cache), readahead(2), open_by_handle_at(2).

Constants and layouts are from the kernel's UAPI headers: include/uapi/linux/fanotify.h
(``struct fanotify_event_metadata`` is 24 bytes: event_len u32, vers u8, reserved u8,
metadata_len u16, mask u64, fd s32, pid s32) and include/uapi/linux/mman.h
(``struct cachestat_range`` {off, len} and ``struct cachestat``: five u64 counters).
cachestat is syscall 451 on every architecture that has it (Linux 6.5+).
"""

from __future__ import annotations

import ctypes
import errno
import logging
import os
import struct
from dataclasses import dataclass

from ..base.errors import UnavailableError, denied
from .pack import Ranges, merge_ranges, ranges_from_pages

log = logging.getLogger(__name__)

_libc = ctypes.CDLL(None, use_errno=True)

# fanotify_init(2) flags
FAN_CLOEXEC = 0x1
FAN_NONBLOCK = 0x2
FAN_CLASS_NOTIF = 0x0
FAN_UNLIMITED_QUEUE = 0x10
# fanotify_mark(2) flags
FAN_MARK_ADD = 0x1
FAN_MARK_MOUNT = 0x10
FAN_MARK_FILESYSTEM = 0x100
# event mask
FAN_ACCESS = 0x1
FAN_CLOSE_NOWRITE = 0x10
FAN_OPEN = 0x20
FAN_OPEN_EXEC = 0x1000
FAN_Q_OVERFLOW = 0x4000
FANOTIFY_METADATA_VERSION = 3
EVENT = struct.Struct("=IBBHQii")

SYS_CACHESTAT = 451
_CACHESTAT = struct.Struct("=5Q")

_PROT_READ = 0x1
_MAP_SHARED = 0x1
_MAP_FAILED = ctypes.c_void_p(-1).value
MINCORE_CHUNK = 1 << 30  # map at most 1 GiB of a file at a time

_libc.fanotify_mark.argtypes = [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                                ctypes.c_char_p]
_libc.mmap.restype = ctypes.c_void_p
_libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int,
                       ctypes.c_int, ctypes.c_long]
_libc.munmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t]
_libc.mincore.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_void_p]
_libc.readahead.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_size_t]
_libc.readahead.restype = ctypes.c_ssize_t
_libc.syscall.restype = ctypes.c_long

PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")


def _oserror(what: str) -> OSError:
    err = ctypes.get_errno()
    return OSError(err, f"{what}: {os.strerror(err)}")


# --- fanotify --------------------------------------------------------------------------------


def fanotify_init(flags: int, event_f_flags: int) -> int:
    fd = _libc.fanotify_init(flags, event_f_flags)
    if fd < 0:
        err = ctypes.get_errno()
        if err == errno.EPERM:
            raise denied("watching file accesses with fanotify")
        if err in (errno.ENOSYS, errno.EINVAL):
            raise UnavailableError("this kernel has no fanotify (or not these flags)",
                                   "it needs CONFIG_FANOTIFY, Linux 5.1 or newer")
        raise _oserror("fanotify_init")
    return fd


def fanotify_mark(fd: int, flags: int, mask: int, path: str, dirfd: int = -100) -> None:
    """`path` relative to `dirfd` (default AT_FDCWD)."""
    if _libc.fanotify_mark(fd, flags, mask, dirfd, os.fsencode(path)) != 0:
        raise _oserror(f"fanotify_mark {path}")


@dataclass(frozen=True)
class Event:
    mask: int
    fd: int  # an fd on the file, opened for us by the kernel (-1 for an overflow)
    pid: int


def parse_events(buf: bytes) -> list[Event]:
    """The events in one read(2) of a fanotify fd (metadata only: no info records)."""
    out = []
    pos = 0
    while pos + EVENT.size <= len(buf):
        length, vers, _res, _mlen, mask, fd, pid = EVENT.unpack_from(buf, pos)
        if vers != FANOTIFY_METADATA_VERSION or length < EVENT.size:
            raise UnavailableError(f"fanotify metadata version {vers} is not the one known "
                                   f"here ({FANOTIFY_METADATA_VERSION})")
        out.append(Event(mask, fd, pid))
        pos += length
    return out


# --- the page cache --------------------------------------------------------------------------


@dataclass(frozen=True)
class CacheStat:
    cached: int  # pages
    dirty: int
    writeback: int
    evicted: int
    recently_evicted: int


def cachestat(fd: int, offset: int = 0, length: int = 0) -> CacheStat | None:
    """Page-cache counters of a file range (length 0: to the end); None where the kernel
    has no cachestat (before 6.5) or refuses it for this file."""
    rng = struct.pack("=QQ", offset, length)
    out = ctypes.create_string_buffer(_CACHESTAT.size)
    res = _libc.syscall(ctypes.c_long(SYS_CACHESTAT), ctypes.c_long(fd), rng, out,
                        ctypes.c_uint(0))
    if res != 0:
        log.debug("cachestat: %s", os.strerror(ctypes.get_errno()))
        return None
    return CacheStat(*_CACHESTAT.unpack(out.raw))


def mincore_vector(fd: int, offset: int, length: int) -> bytes:
    """mincore(2) over a shared read-only mapping of the file: one byte per page, bit 0 set
    where the page is in the page cache (mapping does not read anything)."""
    if length <= 0:
        return b""
    addr = _libc.mmap(None, length, _PROT_READ, _MAP_SHARED, fd, offset)
    if addr in (None, _MAP_FAILED):
        raise _oserror("mmap")
    try:
        pages = -(-length // PAGE_SIZE)
        vec = (ctypes.c_ubyte * pages)()
        if _libc.mincore(ctypes.c_void_p(addr), length, vec) != 0:
            raise _oserror("mincore")
        return bytes(vec)
    finally:
        _libc.munmap(ctypes.c_void_p(addr), length)


def resident_ranges(fd: int, size: int) -> Ranges:
    """The byte ranges of the file (or block device) that are in the page cache now.

    cachestat answers "none at all" without a mapping, for each GiB; mincore gives the
    page-by-page answer where there is something.
    """
    if size <= 0:
        return ()
    out: list[tuple[int, int]] = []
    for start in range(0, size, MINCORE_CHUNK):
        length = min(MINCORE_CHUNK, size - start)
        stat = cachestat(fd, start, length)
        if stat is not None and stat.cached == 0:
            continue  # most of a block device, and most files the kernel only looked at
        vec = mincore_vector(fd, start, length)
        out += ranges_from_pages(vec, PAGE_SIZE, start // PAGE_SIZE)
    return merge_ranges(out)  # a range may cross a chunk boundary


def cached_ranges(fd: int, size: int) -> Ranges | None:
    """The byte ranges of a block device in its page cache, found with cachestat alone by
    halving: what a filesystem read as metadata (inode tables, directories) lives there in
    folios that mincore does not report (buffer heads read one block at a time leave the
    folio itself not up to date; cachestat counts it). About 2·log2(size/page) calls per
    cached run. None where the kernel has no cachestat."""
    if size <= 0:
        return ()
    if cachestat(fd, 0, 0) is None:
        return None
    pages = -(-size // PAGE_SIZE)
    out: list[tuple[int, int]] = []
    stack = [(0, pages)]
    while stack:
        first, count = stack.pop()
        stat = cachestat(fd, first * PAGE_SIZE, count * PAGE_SIZE)
        if stat is None or stat.cached == 0:
            continue
        if stat.cached >= count or count == 1:
            out.append((first * PAGE_SIZE, count * PAGE_SIZE))
            continue
        half = count // 2
        stack.append((first + half, count - half))
        stack.append((first, half))
    return merge_ranges(out)


def open_file(path: bytes) -> int:
    """A pack's file opened to read its pages: never through a planted symlink, never
    blocking on a FIFO or taking a terminal, without touching its atime where we may
    (O_NOATIME needs ownership or CAP_FOWNER). Raises OSError."""
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    try:
        return os.open(path, flags | os.O_NOATIME)
    except PermissionError:
        return os.open(path, flags)


#: include/linux/exportfs.h: a 32-bit inode number and generation (ext2/3/4's own handles)
FILEID_INO32_GEN = 1
_FILE_HANDLE = struct.Struct("=IiII")  # handle_bytes, handle_type, f_handle: ino, gen
_libc.open_by_handle_at.argtypes = [ctypes.c_int, ctypes.c_char_p, ctypes.c_int]


def open_by_inode(mount_fd: int, inode: int) -> int:
    """open_by_handle_at(2) of inode `inode` of the filesystem `mount_fd` is on, read-only,
    with no path looked up (no directory read). Generation 0: ext4 then checks none
    (``ext4_nfs_get_inode``); a filesystem that wants one refuses (ESTALE). Needs
    CAP_DAC_READ_SEARCH. Raises OSError."""
    if inode >= 1 << 32:
        raise OSError(errno.EOVERFLOW, "inode number beyond a 32-bit file handle")
    handle = _FILE_HANDLE.pack(8, FILEID_INO32_GEN, inode, 0)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    fd = _libc.open_by_handle_at(mount_fd, handle, flags | os.O_NOATIME)
    if fd < 0 and ctypes.get_errno() == errno.EPERM:
        fd = _libc.open_by_handle_at(mount_fd, handle, flags)
    if fd < 0:
        raise _oserror("open_by_handle_at")
    return int(fd)


def readahead(fd: int, offset: int, length: int) -> None:
    """readahead(2): queue reads of the range into the page cache, without copying it."""
    if _libc.readahead(fd, offset, length) < 0:
        raise _oserror("readahead")
