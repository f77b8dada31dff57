"""Timed O_DIRECT reads, shared by the daemon and device tests."""

from __future__ import annotations

import mmap
import os
import time


def timed_reads(path: str | os.PathLike[str], offsets: list[int], size: int) -> list[float]:
    """O_DIRECT reads of ``size`` bytes at each offset; the latency of each.

    The reading thread runs at nice -10 (we are root) so that a busy test machine does not add
    the reader's own wake-up delays to what is meant to be the disk's latency (the daemon
    raises its own priority the same way).
    """
    buf = mmap.mmap(-1, max(size, mmap.PAGESIZE))  # page-aligned, as O_DIRECT needs
    view = memoryview(buf)[:size]
    fd = os.open(path, os.O_RDONLY | os.O_DIRECT)
    nice = os.getpriority(os.PRIO_PROCESS, 0)
    os.setpriority(os.PRIO_PROCESS, 0, min(nice, -10))
    try:
        out = []
        for off in offsets:
            t0 = time.perf_counter()
            assert os.preadv(fd, [view], off) == size
            out.append(time.perf_counter() - t0)
        return out
    finally:
        os.setpriority(os.PRIO_PROCESS, 0, nice)
        view.release()
        os.close(fd)
        buf.close()
