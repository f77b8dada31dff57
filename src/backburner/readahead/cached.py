"""What of a file or block device is in the page cache now, as a pack's byte ranges:
the kernel's answers (`kernel.pagecache`: cachestat, mincore) composed with the pack's
ranges, and how a pack's file is opened to look at or read its pages."""

from __future__ import annotations

import os

from ..kernel.pagecache import PAGE_SIZE, cachestat, mincore_vector
from .ranges import Ranges, merge_ranges, ranges_from_pages

MINCORE_CHUNK = 1 << 30  # map at most 1 GiB of a file at a time


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
