"""kernel.pagecache: cachestat and mincore agree with what was dropped and read, and
readahead(2) brings a range in."""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from backburner.kernel import pagecache

PAGE = pagecache.PAGE_SIZE


def _file(tmp_path: Path, pages: int) -> int:
    path = tmp_path / "data"
    path.write_bytes(os.urandom(pages * PAGE))
    fd = os.open(path, os.O_RDONLY)
    os.fsync(fd)
    os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    return fd


def test_a_dropped_file_then_one_page_read(tmp_path: Path) -> None:
    fd = _file(tmp_path, 16)
    try:
        assert pagecache.mincore_vector(fd, 0, 16 * PAGE) == bytes(16)
        stat = pagecache.cachestat(fd)
        assert stat is None or stat.cached == 0  # None: a kernel before 6.5
        os.pread(fd, 1, 5 * PAGE)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)  # no read-around next time
        vec = pagecache.mincore_vector(fd, 0, 16 * PAGE)
        assert vec[5] & 1
        stat = pagecache.cachestat(fd, 5 * PAGE, PAGE)
        assert stat is None or stat.cached == 1
        assert pagecache.mincore_vector(fd, 0, 0) == b""
    finally:
        os.close(fd)


def test_readahead_fills_the_range(tmp_path: Path) -> None:
    fd = _file(tmp_path, 32)
    try:
        pagecache.readahead(fd, 8 * PAGE, 8 * PAGE)
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:  # queued reads: done when the pages are there
            vec = pagecache.mincore_vector(fd, 0, 32 * PAGE)
            if all(b & 1 for b in vec[8:16]):
                break
            time.sleep(0.05)
        assert all(b & 1 for b in vec[8:16])
    finally:
        os.close(fd)
    with pytest.raises(OSError):
        pagecache.readahead(-1, 0, PAGE)


def test_cachestat_of_a_descriptor_it_cannot_ask_is_none() -> None:
    assert pagecache.cachestat(-1) is None
