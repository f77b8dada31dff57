"""Whether a pack's entries are still what was recorded: each file's identity now (same
filesystem, inode, size and mtime), and each device entry matched to the block device its
filesystem is mounted from now.

`replay` reads nothing it has not checked here; `show` and `layout` ask the same question.
Files are looked at in the order of their recorded inodes, so on a cold rotating disk the
checks read the inode tables in one pass.
"""

from __future__ import annotations

import os
import stat
from dataclasses import replace

from ..kernel import block
from .byinode import ByInode, block_mounts
from .pack import MISSING, Entry, FileState, Pack, status


def current_state(path: bytes, fsids: dict[int, int]) -> FileState | None:
    """The identity of the regular file at `path` now (not following a final symlink)."""
    try:
        st = os.lstat(path)
    except OSError:
        return None
    if not stat.S_ISREG(st.st_mode):
        return None
    if st.st_dev not in fsids:
        try:
            fsids[st.st_dev] = int(os.statvfs(path).f_fsid) & ((1 << 64) - 1)
        except OSError:
            fsids[st.st_dev] = 0
    return FileState(st.st_dev, fsids[st.st_dev], st.st_ino, st.st_size, st.st_mtime_ns)


def check_entries(pack: Pack) -> list[tuple[Entry, str, FileState | None]]:
    """(entry, OK/CHANGED/MISSING, its state now) for every entry, in pack order."""
    devices, files = iter(check_devices(pack)), iter(check_files(pack))
    return [next(devices) if e.device else next(files) for e in pack.entries]


def check_files(pack: Pack, by_inode: ByInode | None = None
                ) -> list[tuple[Entry, str, FileState | None]]:
    """The file entries, looked at in the order of their recorded inode numbers: on a cold
    rotating disk that reads the inode tables in one ascending pass. With `by_inode`, by
    inode where it can (no directory read), else by path."""
    fsids: dict[int, int] = {}
    files = [e for e in pack.entries if not e.device]
    states: dict[int, FileState | None] = {}
    for i in sorted(range(len(files)), key=lambda i: (files[i].state.dev,
                                                      files[i].state.inode)):
        now = by_inode.state(files[i]) if by_inode is not None else None
        states[i] = now if now is not None else current_state(files[i].path, fsids)
    return [(e, status(e, states[i]), states[i]) for i, e in enumerate(files)]


def check_devices(pack: Pack) -> list[tuple[Entry, str, FileState | None]]:
    """The device entries, each matched to the device its filesystem is mounted from now
    (by fsid: an image may be attached under another loop device), without touching the
    filesystem itself: its metadata is what they are there to bring in. The entry comes
    back with that device's node as its path."""
    devices = [e for e in pack.entries if e.device]
    if not devices:
        return []
    mounted = {fsid: m.devno for fsid, m in block_mounts().items()}
    return [_device_now(e, mounted.get(e.state.fsid) if e.state.fsid else
                        (e.state.dev if e.state.dev in mounted.values() else None))
            for e in devices]


def _device_now(e: Entry, dev: int | None) -> tuple[Entry, str, FileState | None]:
    if dev is None:
        return e, MISSING, None  # none of its filesystem's files is here as recorded
    node = _sysfs_node(dev)
    try:
        st = os.stat(node) if node else None
    except OSError:
        st = None
    if st is None or not stat.S_ISBLK(st.st_mode) or st.st_rdev != dev:
        return e, MISSING, None
    now = FileState(dev, e.state.fsid, 0, _device_size(dev), 0)
    return replace(e, path=os.fsencode(node)), status(e, now), now


def _sysfs_node(dev: int) -> str | None:
    """/dev/NAME of block device `dev` (from its uevent), or None."""
    return block.node_of(dev)


def _device_size(dev: int) -> int:
    return block.size_bytes(dev)
