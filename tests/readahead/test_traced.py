"""readahead.traced: what strace and the page tracepoint saw, made into a pack's lookups
(each kind and path once, on the watched filesystems only, a missed name's directory)
and steps (runs of pages first brought in, joined when contiguous, lookups at their
times, gaps in microseconds)."""

from __future__ import annotations

import os
from pathlib import Path

from backburner.readahead import traced
from backburner.readahead.pack import LISTED, MISSED, STATTED, Entry, FileState, Step
from backburner.trace.lookups import LIST, MISS, OPEN, STAT, Call
from backburner.trace.pagecache import PageIn


def test_lookups_once_each_on_the_watched_filesystems(tmp_path: Path) -> None:
    (tmp_path / "d/sub").mkdir(parents=True)
    (tmp_path / "d/f").write_text("x")
    base = os.fsencode(tmp_path)
    dev = os.stat(tmp_path).st_dev
    calls = [Call(1.0, 7, LIST, base + b"/d"), Call(1.1, 7, STAT, base + b"/d/f"),
             Call(1.2, 7, STAT, base + b"/d/f"),  # again: once
             Call(1.3, 7, MISS, base + b"/d/nope/deeper"),
             Call(1.4, 7, OPEN, base + b"/d/f"),  # a file opened: the pack's already
             Call(1.5, 7, OPEN, base + b"/d/sub"),  # a directory opened: looked at
             Call(1.6, 8, STAT, base + b"/d"),  # not the start's process
             Call(1.7, 7, STAT, b"/proc/self")]  # not a watched filesystem
    got, times = traced.lookups_of(calls, lambda pid: pid == 7, {dev})
    assert [(lk.kind, lk.path) for lk in got] == [
        (LISTED, base + b"/d"), (STATTED, base + b"/d/f"), (MISSED, base + b"/d/nope/deeper"),
        (STATTED, base + b"/d/sub")]
    assert times == [1.0, 1.1, 1.3, 1.5]
    assert got[2].state.inode == os.stat(tmp_path / "d").st_ino  # the directory searched
    assert got[1].state.inode == os.stat(tmp_path / "d/f").st_ino


def _entry(dev: int, ino: int, device: bool = False) -> Entry:
    return Entry(b"/x%d" % ino, FileState(dev, 0, 0 if device else ino, 1 << 20, 0),
                 device=device)


def test_steps_join_contiguous_runs_and_interleave_lookups() -> None:
    entries = [_entry(5, 11), _entry(5, 12), _entry(9, 0, device=True)]
    pages = [PageIn(10.000, 3, 5, 11, 0, 4), PageIn(10.001, 3, 5, 11, 4, 4),  # joined
             PageIn(10.002, 3, 9, 0, 100, 1, device=True),  # the filesystem's metadata
             PageIn(10.010, 3, 5, 12, 8, 2),
             PageIn(10.011, 4, 5, 12, 20, 2),  # another process
             PageIn(10.020, 3, 5, 11, 2, 8),  # pages 2-7 again (evicted): only 8, 9 new
             PageIn(10.030, 3, 5, 99, 0, 1)]  # not a file of the pack
    steps = traced.steps_of(entries, pages, lambda pid: pid == 3, [10.005])
    assert steps == [Step(0, 0, 8, 0), Step(2, 100, 1, 2000), Step(-1, 0, 0, 3000),
                     Step(1, 8, 2, 5000), Step(0, 8, 2, 10000)]
