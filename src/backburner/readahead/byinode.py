"""A replay's files checked and opened by inode, so that looking at them reads no directory.

Looking at a file by its path reads every directory on the path. So a replay that checks
its files by path needs the directories read first (its first stage), and on an image
whose directory blocks lie among the hot data (`layout build-ext4` puts each right before
its first file) it sweeps that region twice: the directories, then the data, each small
skip between directory blocks a seek of its own. Opened by inode (open_by_handle_at), a
file needs only its inode: the first stage reads the inode tables alone, and the
directories join the data in one ascending sweep (`replay`).

Identity is checked as by path: the same filesystem (fsid), inode, size and mtime. What is
not checked is that the recorded path still names that inode: a file replaced under its
name is either gone (the handle is stale, and the path is checked as before) or still
linked elsewhere, and then its pages are read for nothing. Needs CAP_DAC_READ_SEARCH
(root, as at boot); without it, or where a filesystem wants a handle's generation (ext4
does not), each file is checked by its path.
"""

from __future__ import annotations

import errno
import logging
import os
import stat
import struct
from collections.abc import Sequence

from ..kernel import filehandle, procfs
from . import ext4meta
from .pack import Entry, FileState

log = logging.getLogger(__name__)

_GIVE_UP = (errno.EPERM, errno.EACCES, errno.ENOSYS, errno.EOPNOTSUPP)


def block_mounts() -> dict[int, procfs.MountInfo]:
    """fsid -> a mount of each filesystem mounted from a block device (what a pack records
    of a file's filesystem, and where to open it by inode)."""
    out: dict[int, procfs.MountInfo] = {}
    for m in procfs.mounts():
        if os.major(m.devno) == 0:
            continue
        try:
            fsid = int(os.statvfs(m.mountpoint).f_fsid) & ((1 << 64) - 1)
        except OSError:
            continue
        out.setdefault(fsid, m)
    return out


class ByInode:
    """Opens the pack's files by inode, with a mount of each filesystem (found by fsid,
    opened when first needed) as the anchor; keeps each file's descriptor for `take`."""

    def __init__(self) -> None:
        self._paths: dict[int, str] | None = None
        self._anchors: dict[int, int | None] = {}
        self._fds: dict[Entry, int] = {}
        self.usable = True  # False once the kernel refused handles altogether

    def _anchor(self, fsid: int) -> int | None:
        if fsid not in self._anchors:
            if self._paths is None:
                self._paths = {fsid: m.mountpoint for fsid, m in block_mounts().items()}
            path, fd = self._paths.get(fsid), None
            if path is not None:
                try:
                    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
                except OSError as err:
                    log.debug("%s: %s", path, err)
            self._anchors[fsid] = fd
        return self._anchors[fsid]

    def state(self, entry: Entry) -> FileState | None:
        """The file's identity now, looked up by its recorded inode (None: check its path)."""
        if not self.usable or not entry.state.fsid:
            return None
        anchor = self._anchor(entry.state.fsid)
        if anchor is None:
            return None
        try:
            fd = filehandle.open_by_inode(anchor, entry.state.inode)
        except OSError as err:
            if err.errno in _GIVE_UP:
                self.usable = False
            return None
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            os.close(fd)
            return None
        old = self._fds.pop(entry, None)
        if old is not None:
            os.close(old)
        self._fds[entry] = fd
        return FileState(st.st_dev, entry.state.fsid, st.st_ino, st.st_size, st.st_mtime_ns)

    def take(self, entry: Entry) -> int | None:
        """The descriptor `state` opened for this entry, now the caller's to close."""
        return self._fds.pop(entry, None)

    def close(self) -> None:
        for fd in self._fds.values():
            os.close(fd)
        self._fds.clear()
        for anchor in self._anchors.values():
            if anchor is not None:
                os.close(anchor)
        self._anchors.clear()


def inode_tables_apart(device: str, ranges: Sequence[tuple[int, int]]
                       ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]] | None:
    """A device entry's ranges split into those in the ext4's inode tables and the rest;
    None when the device holds no ext4 or one of the two parts is empty."""
    try:
        geo = ext4meta.read(device)
    except (OSError, ValueError, struct.error) as err:
        log.debug("%s: no inode tables: %s", device, err)
        return None
    span = geo.inodes_per_group * geo.inode_size
    tables = [(t * geo.block, t * geo.block + span) for t in sorted(set(geo.tables))]
    inside, outside = cut(ranges, tables)
    return (inside, outside) if inside and outside else None


def cut(ranges: Sequence[tuple[int, int]], spans: Sequence[tuple[int, int]]
        ) -> tuple[list[tuple[int, int]], list[tuple[int, int]]]:
    """(offset, length) ranges split into the parts inside the sorted, disjoint [lo, hi)
    spans and the parts outside them (pure)."""
    inside: list[tuple[int, int]] = []
    outside: list[tuple[int, int]] = []
    for off, ln in ranges:
        pos, end = off, off + ln
        for lo, hi in spans:
            if hi <= pos or lo >= end:
                continue
            if lo > pos:
                outside.append((pos, lo - pos))
            top = min(hi, end)
            inside.append((max(lo, pos), top - max(lo, pos)))
            pos = top
        if pos < end:
            outside.append((pos, end - pos))
    return inside, outside


__all__ = ["ByInode", "cut", "inode_tables_apart"]
