"""What a load read and wrote while it ran, counted continuously: the price of a lever in
bytes, not in finished rounds.

A package manager's round (an install and an uninstall) takes tens of seconds on a slow
disk, so a trial that ends in the middle of one counted nothing for it: a load that worked
the whole time read as "0.0 MB/s". Here the load's process tree is sampled every
`INTERVAL_S` from /proc: each process's read_bytes + write_bytes - cancelled_write_bytes
(`procfs.io_bytes`), which holds its reaped children's too (the kernel adds them to the
parent at reaping). A pass reads parents before their children, so a child reaped during a
pass is missed once (a dip) but never counted twice; the series is kept monotonic, so a
dip is absorbed by the next pass. A process that leaves the tree (orphaned to init) takes
its later bytes with it: a load's own helpers do not, until it is stopped.

From the samples: the bytes of the whole run and of any window (a probe's start), and the
longest stretch without progress in a window (the bulk work's longest pause, whatever made
it: a freezer, the idle class, its own computing). The resolution is the interval.
"""

from __future__ import annotations

import bisect
import threading
import time
from dataclasses import dataclass

from ..kernel import procfs

INTERVAL_S = 0.1


def tree_bytes(pid: int) -> int | None:
    """The bytes of `pid` (with its reaped descendants) and of its live descendants, parents
    before children; None when `pid` is gone."""
    top = procfs.io_bytes(pid)
    if top is None:
        return None
    total = top
    queue = [pid]
    seen = {pid}
    while queue:
        for kid in procfs.children_of(queue.pop(0)):
            if kid in seen:
                continue
            seen.add(kid)
            queue.append(kid)
            total += procfs.io_bytes(kid) or 0
    return total


@dataclass(frozen=True)
class Window:
    """What the load did in one stretch of time."""

    bytes: float
    seconds: float
    longest_stall_s: float

    @property
    def rate(self) -> float:
        return self.bytes / self.seconds if self.seconds > 0 else 0.0

    def as_dict(self) -> dict[str, float]:
        return {"bytes": self.bytes, "seconds": self.seconds,
                "longest_stall_s": self.longest_stall_s}


class Samples:
    """(monotonic time, cumulative bytes) pairs, kept monotonic. Pure: tested with series."""

    def __init__(self) -> None:
        self.times: list[float] = []
        self.values: list[int] = []

    def add(self, t: float, value: int | None) -> None:
        last = self.values[-1] if self.values else 0
        self.times.append(t)
        self.values.append(max(last, value if value is not None else last))

    def at(self, t: float) -> int:
        """The count at time t: that of the last sample at or before it (0 before any)."""
        i = bisect.bisect_right(self.times, t)
        return self.values[i - 1] if i else 0

    def window(self, t0: float, t1: float) -> Window:
        """Bytes between t0 and t1, and the longest stretch in [t0, t1] between two
        samples whose count rose (the window's edges count as such moments)."""
        moved = float(self.at(t1) - self.at(t0))
        marks = [t0]
        for i in range(1, len(self.times)):
            if t0 < self.times[i] < t1 and self.values[i] > self.values[i - 1]:
                marks.append(self.times[i])
        marks.append(t1)
        longest = max((b - a for a, b in zip(marks, marks[1:], strict=False)), default=0.0)
        return Window(moved, max(t1 - t0, 0.0), longest)


class TreeIO:
    """A thread sampling a load's tree from its launch until `stop`: everything the tree
    did since the launch counts (its exec's own reads included), so the series starts at
    0 when made at the launch."""

    def __init__(self, pid: int, interval: float = INTERVAL_S) -> None:
        self.pid = pid
        self.interval = interval
        self.samples = Samples()
        self._lock = threading.Lock()
        self.started = time.monotonic()
        self.samples.add(self.started, 0)
        self.sample()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name=f"load-io-{pid}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.wait(self.interval):
            self.sample()

    def sample(self) -> float:
        """One pass now (also called at a window's edges, for exact edges); its time."""
        value = tree_bytes(self.pid)
        with self._lock:
            now = time.monotonic()
            self.samples.add(now, value)
        return now

    def stop(self) -> Window:
        """The last pass (before the load is stopped: a reaped tree's counts are gone) and
        the whole run."""
        end = self.sample()
        self._stop.set()
        self._thread.join()
        return self.window(self.started, end)

    def window(self, t0: float, t1: float) -> Window:
        with self._lock:
            return self.samples.window(t0, t1)
