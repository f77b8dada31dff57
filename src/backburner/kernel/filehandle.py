"""open_by_handle_at(2): a file opened by its inode, with no path looked up.

`readahead replay` opens a pack's files by inode so that starting them reads no directory.
The handle layout is ``struct file_handle`` {handle_bytes u32, handle_type s32,
f_handle[]} (include/linux/fs.h), its type from include/linux/exportfs.h.
"""

from __future__ import annotations

import ctypes
import errno
import os
import struct

from . import syscalls

#: A 32-bit inode number and generation (ext2/3/4's own handles).
FILEID_INO32_GEN = 1
_FILE_HANDLE = struct.Struct("=IiII")  # handle_bytes, handle_type, f_handle: ino, gen
_open_by_handle_at = syscalls.function("open_by_handle_at", ctypes.c_int,
                                       [ctypes.c_int, ctypes.c_char_p, ctypes.c_int])


def open_by_inode(mount_fd: int, inode: int) -> int:
    """open_by_handle_at(2) of inode `inode` of the filesystem `mount_fd` is on, read-only,
    with no path looked up (no directory read). Generation 0: ext4 then checks none
    (``ext4_nfs_get_inode``); a filesystem that wants one refuses (ESTALE). Needs
    CAP_DAC_READ_SEARCH. Raises OSError."""
    if inode >= 1 << 32:
        raise OSError(errno.EOVERFLOW, "inode number beyond a 32-bit file handle")
    handle = _FILE_HANDLE.pack(8, FILEID_INO32_GEN, inode, 0)
    flags = os.O_RDONLY | os.O_CLOEXEC | os.O_NONBLOCK | os.O_NOCTTY
    fd = _open_by_handle_at(mount_fd, handle, flags | os.O_NOATIME)
    if fd < 0 and ctypes.get_errno() == errno.EPERM:
        fd = _open_by_handle_at(mount_fd, handle, flags)
    if fd < 0:
        raise syscalls.error("open_by_handle_at")
    return int(fd)
