"""In which order a start brought pages into the page cache: the kernel's
``filemap:mm_filemap_add_to_page_cache`` tracepoint, recorded by perf for the watched
filesystems.

The page cache tells which bytes of a file a start read, not in which order: a program
maps its libraries and faults their pages in the order it runs them, all over them,
while the files were opened one after the other before it ran. On a seeking medium that
order is what a layout must follow. The tracepoint fires for every folio the kernel adds
to a file's cache (the start's own reads, its read-ahead, the pages its faults read
around), in the context of the process that asked, with its device, inode and index; a
filesystem's metadata read through its block device (inode tables, directories) shows as
pages of the block device's own inode, whose number is the device's.

What a start *used* of the page cache, whoever brought the pages in (a replay before
it), shows in three more tracepoints (`USE_EVENTS`): a buffered read's pages
(``mm_filemap_get_pages``), the pages a fault maps (``mm_filemap_fault``,
``mm_filemap_map_pages``: with those mapped around it).

`PageOrder` records a window (perf in its own process group, dying with us, its output
on a private tmpfs); `parse` (pure) reads ``perf script`` back.
"""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from .. import system
from ..base.errors import UnavailableError
from . import engines
from .attribution import kernel_dev
from .perfrecord import PerfRecord

log = logging.getLogger(__name__)

EVENT = "filemap:mm_filemap_add_to_page_cache"
USE_EVENTS = ("filemap:mm_filemap_get_pages", "filemap:mm_filemap_fault",
              "filemap:mm_filemap_map_pages")
_LINE = re.compile(r"^\s*(\d+)\s+(\d+\.\d+):\s+dev (\d+):(\d+) ino ([0-9a-f]+) "
                   r"pfn=\S+ ofs=(\d+) order=(\d+)")
_USE = re.compile(r"^\s*(\d+)\s+(\d+\.\d+):\s+dev=(\d+):(\d+) ino=([0-9a-f]+) "
                  r"ofs=(\d+)(?:-(\d+))?")


@dataclass(frozen=True)
class PageIn:
    """Pages added to the cache: `pages` from page `index` of inode `ino` on `dev` (a
    device number as stat gives it); for a block device's own pages (`device`), `dev` is
    that block device and `index` its page."""

    t: float  # CLOCK_MONOTONIC seconds
    pid: int
    dev: int
    ino: int
    index: int
    pages: int
    device: bool = False


@dataclass(frozen=True)
class PageUse:
    """Pages `first` to `last` of inode `ino` on `dev` used by process `pid` (read, or
    mapped by a fault)."""

    t: float
    pid: int
    dev: int
    ino: int
    first: int
    last: int


def parse_uses(lines: Iterable[str], page: int = 4096) -> list[PageUse]:
    """``perf script -F pid,time,trace --ns`` of `USE_EVENTS` -> the pages used."""
    out = []
    for line in lines:
        m = _USE.match(line)
        if not m:
            continue
        first = int(m.group(6)) // page
        last = (int(m.group(7)) // page) if m.group(7) else first
        out.append(PageUse(float(m.group(2)), int(m.group(1)),
                           os.makedev(int(m.group(3)), int(m.group(4))),
                           int(m.group(5), 16), first, last))
    return out


def _user_dev(kdev: int) -> int:
    return os.makedev(kdev >> 20, kdev & 0xFFFFF)


def parse(lines: Iterable[str], page: int = 4096) -> list[PageIn]:
    """``perf script -F pid,time,trace --ns`` of the tracepoint -> the pages, in order. A
    page of a pseudo filesystem's inode (major 0) is a block device's own, its inode
    number the device's kernel number."""
    out = []
    for line in lines:
        m = _LINE.match(line)
        if not m:
            continue
        major, minor, ino = int(m.group(3)), int(m.group(4)), int(m.group(5), 16)
        index, pages = int(m.group(6)) // page, 1 << int(m.group(7))
        t, pid = float(m.group(2)), int(m.group(1))
        if major == 0:
            out.append(PageIn(t, pid, _user_dev(ino), 0, index, pages, device=True))
        else:
            out.append(PageIn(t, pid, os.makedev(major, minor), ino, index, pages))
    return out


def missing() -> str | None:
    """Why the order cannot be recorded here, or None."""
    why = engines.PerfEngine().missing()
    if why:
        return why
    if not system.is_root():
        return "it needs root (a system-wide tracepoint)"
    return None


class PageOrder:
    """The tracepoint for filesystems on the block devices `devs` (st_dev numbers), from
    `start` to `stop`; with `uses`, the `USE_EVENTS` too (`stop` leaves them in
    `self.uses`)."""

    def __init__(self, devs: Sequence[int], uses: bool = False) -> None:
        self.devs = tuple(dict.fromkeys(devs))
        self.want_uses = uses
        self.uses: list[PageUse] = []
        self._perf = PerfRecord("pages-", EVENT)

    def _filter(self) -> str:
        keys = [kernel_dev(os.major(d), os.minor(d)) for d in self.devs]
        return " || ".join(f"s_dev == {k} || i_ino == {k}" for k in keys)

    def _use_filter(self) -> str:
        keys = [kernel_dev(os.major(d), os.minor(d)) for d in self.devs]
        return " || ".join(f"s_dev == {k}" for k in keys)

    def start(self) -> None:
        why = missing()
        if why:
            raise UnavailableError(f"recording the order of reads needs perf: {why}",
                                   "install linux-perf and run as root")
        self._perf.start(self._argv)

    def _argv(self, data: str, ctl: int, ack: int) -> list[str]:
        argv = ["perf", "record", "-q", "-a", "-k", "monotonic", "-D", "-1",
                "--control", f"fd:{ctl},{ack}", "-o", data, "-e", EVENT,
                "--filter", self._filter()]
        if self.want_uses:
            for event in USE_EVENTS:
                argv += ["-e", event, "--filter", self._use_filter()]
        return argv

    def stop(self) -> list[PageIn]:
        """The pages added since `start`, in order."""
        try:
            lines = self._perf.script("pid,time,trace", ["--ns"])
            if self.want_uses:
                self.uses = parse_uses(lines)
            return parse(lines)
        finally:
            self.close()

    def close(self) -> None:
        """Stop perf and undo what `start` set up (idempotent)."""
        self._perf.close()

    def __enter__(self) -> PageOrder:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


__all__ = ["EVENT", "USE_EVENTS", "PageIn", "PageOrder", "PageUse", "missing", "parse",
           "parse_uses"]
