"""fanotify(7): the file accesses of a whole mount or filesystem, as the kernel reports them.

`readahead record` watches every open and read on the filesystems a start touches; the
kernel hands it each event with a descriptor on the file, opened for it.

Constants and the event layout are from include/uapi/linux/fanotify.h: ``struct
fanotify_event_metadata`` is 24 bytes (event_len u32, vers u8, reserved u8, metadata_len
u16, mask u64, fd s32, pid s32), in the host's byte order.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct
from dataclasses import dataclass

from ..base.errors import UnavailableError, denied
from . import syscalls

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
FAN_CLOSE_WRITE = 0x8
FAN_CLOSE_NOWRITE = 0x10
FAN_OPEN = 0x20
FAN_OPEN_EXEC = 0x1000
FAN_Q_OVERFLOW = 0x4000
FANOTIFY_METADATA_VERSION = 3
EVENT = struct.Struct("=IBBHQii")
AT_FDCWD = -100

_init = syscalls.function("fanotify_init", ctypes.c_int, [ctypes.c_uint, ctypes.c_uint])
_mark = syscalls.function("fanotify_mark", ctypes.c_int,
                          [ctypes.c_int, ctypes.c_uint, ctypes.c_uint64, ctypes.c_int,
                           ctypes.c_char_p])


def fanotify_init(flags: int, event_f_flags: int) -> int:
    fd = _init(flags, event_f_flags)
    if fd < 0:
        err = ctypes.get_errno()
        if err == errno.EPERM:
            raise denied("watching file accesses with fanotify")
        if err in (errno.ENOSYS, errno.EINVAL):
            raise UnavailableError("this kernel has no fanotify (or not these flags)",
                                   "it needs CONFIG_FANOTIFY, Linux 5.1 or newer")
        raise syscalls.error("fanotify_init")
    return int(fd)


def fanotify_mark(fd: int, flags: int, mask: int, path: str, dirfd: int = AT_FDCWD) -> None:
    """`path` relative to `dirfd` (default AT_FDCWD)."""
    if _mark(fd, flags, mask, dirfd, os.fsencode(path)) != 0:
        raise syscalls.error(f"fanotify_mark {path}")


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
