"""The pack from the page cache: for each recorded file, the bytes of it resident now (and
those seen resident earlier), and for each watched filesystem, what its block device's
cache holds (the metadata a start read) as a device entry."""

from __future__ import annotations

import logging
import os
import stat
import time
from collections.abc import Sequence

from ..kernel.pagecache import PAGE_SIZE
from . import cached
from .pack import Entry, FileState, Pack, digest
from .ranges import Ranges, clip, merge_ranges, subtract_ranges
from .watched import Watched

log = logging.getLogger(__name__)


def _fsid(fd: int, cache: dict[int, int], dev: int) -> int:
    if dev not in cache:
        try:
            cache[dev] = int(os.fstatvfs(fd).f_fsid) & ((1 << 64) - 1)
        except (OSError, AttributeError):
            cache[dev] = 0
    return cache[dev]


def _entry(key: tuple[int, int], path: bytes, want_hash: bool, fsids: dict[int, int],
           earlier: Ranges = ()) -> Entry | None:
    """The file as it is now, with its resident ranges (and those seen `earlier`); None
    if it is gone or replaced."""
    try:
        fd = cached.open_file(path)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != key or not stat.S_ISREG(st.st_mode):
            return None
        state = FileState(st.st_dev, _fsid(fd, fsids, st.st_dev), st.st_ino, st.st_size,
                          st.st_mtime_ns)
        ranges = merge_ranges(cached.resident_ranges(fd, st.st_size) + earlier)
        dig = None
        if want_hash:
            dig = digest(os.pread(fd, ln, off) for off, ln in clip(ranges, st.st_size))
        return Entry(path, state, ranges, dig)
    except OSError as err:
        log.debug("%r: %s", path, err)
        return None
    finally:
        os.close(fd)


def device_cache(watched: Sequence[Watched]) -> dict[int, Ranges]:
    """What each filesystem's block device has in its page cache now. Taken just after
    the caches were dropped, it is what a drop cannot evict (the superblock, the journal's
    superblock: buffers the filesystem keeps pinned), which the start did not read."""
    out = {}
    for w in watched:
        e = metadata_entry(w)
        if e is not None:
            out[w.dev] = e.ranges
    return out


def metadata_entry(w: Watched, before: Ranges = ()) -> Entry | None:
    """What the filesystem read through its block device's page cache (inode tables,
    directories, extent blocks), less what was cached `before`, as a device entry; None
    where the device cannot be read or nothing is left. Meaningful after a cold start: the
    cache then holds only what this start read (and what the filesystem keeps pinned,
    which `before` names: on an ext4 mounted with a journal, its superblock is one block
    in the middle of the disk, a seek there and back for every replay)."""
    if not w.device:
        return None
    try:
        fd = os.open(w.device, os.O_RDONLY | os.O_CLOEXEC)
    except OSError as err:
        log.debug("%s: %s", w.device, err)
        return None
    try:
        st = os.fstat(fd)
        if not stat.S_ISBLK(st.st_mode):
            return None
        size = os.lseek(fd, 0, os.SEEK_END)
        ranges = subtract_ranges(cached.cached_ranges(fd, size) or (), before)
        fsid = int(os.statvfs(w.mountpoint).f_fsid) & ((1 << 64) - 1)
    except OSError as err:
        log.debug("%s: %s", w.device, err)
        return None
    finally:
        os.close(fd)
    if not ranges:
        return None
    return Entry(os.fsencode(w.device), FileState(st.st_rdev, fsid, 0, size, 0), ranges,
                 device=True)


def build_pack(files: list[tuple[tuple[int, int], bytes]], note: str, want_hash: bool,
               earlier: dict[tuple[int, int], Ranges] | None = None,
               metadata: Sequence[Entry] = ()) -> tuple[Pack, int]:
    """Entries for the files (in the given order), with the ranges resident now or
    `earlier`, after the `metadata` entries (a start looks names up before it reads);
    and how many files were gone meanwhile."""
    fsids: dict[int, int] = {}
    entries = list(metadata)
    gone = 0
    for key, path in files:
        e = _entry(key, path, want_hash, fsids, (earlier or {}).get(key, ()))
        if e is None:
            gone += 1
        else:
            entries.append(e)
    return Pack(tuple(entries), PAGE_SIZE, time.time_ns(), note), gone
