"""Replay a pack: fetch its ranges into the page cache, in the order the device likes.

Two stages: the metadata the start read (device entries: inode tables, directories) from
the device its filesystem is mounted from now, then the files, checked while that
metadata is being read (a check waits for its inode if it has not arrived yet) and queued
right behind it. Every file is checked (same filesystem, inode, size and mtime as
recorded); one that is missing or changed is skipped and counted, never read blindly. As
root (and without --rebase) a file is checked and opened by its inode (`byinode`), which
reads no directory: the first stage then holds only an ext4's inode tables, and its
directory blocks join the files' sweep, so a region where directories and data alternate
(`layout build-ext4`) is read in one pass, not two. What is left is cut to a byte budget
in access order (what the start needs first is kept), then, per device:

- rotational: one ascending sweep in physical order (FIEMAP, the kernel's map of each
  file), at best-effort priority: hundreds of seeks become one pass;
- non-rotational: access order at idle priority, so the replay never stands in the way of
  the start it prepares.

Reads are queued with readahead(2) (posix_fadvise WILLNEED where a filesystem refuses it),
then waited for by reading each piece back (POSIX_FADV_RANDOM on our own descriptors, so
that wait adds no read-ahead of its own). The work runs in a thread that sets its own IO
priority; the caller gets the report at the deadline at the latest, whatever the thread is
blocked in (it stops at its next piece). `start_background` runs a replay as a detached
child (`background`), for a start that should not wait for it; whether each entry is
still what was recorded is `freshness`'s to say.
"""

from __future__ import annotations

import logging
import os
import resource
import stat
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

from ..base.errors import BackburnerError, UsageError
from ..base.quantities import fmt_mbps, fmt_s, human_size, plural
from ..kernel import block, pagecache, priorities
from . import cached
from .byinode import ByInode, inode_tables_apart
from .freshness import check_devices, check_files
from .order import Piece, access_order, chunks, physical_order, within_budget
from .pack import CHANGED, MISSING, OK, Entry, FileState, Pack, rebased
from .ranges import clip

log = logging.getLogger(__name__)

DEFAULT_DEADLINE_S = 30.0
ORDERS = ("auto", "physical", "access")
_READ_BUF = 1 << 20


@dataclass(frozen=True)
class ReplayOptions:
    budget: int | None = None  # bytes; None: half of the memory available now
    deadline_s: float = DEFAULT_DEADLINE_S
    order: str = "auto"  # auto: physical on rotational devices, access order elsewhere
    io: str | None = None  # IO class of the replaying thread; None: as `order` implies
    rebase: tuple[str, str] | None = None  # (recorded directory, where it is now)


@dataclass
class DeviceReplay:
    disk: str
    rotational: bool | None  # None: not a block device (FUSE, tmpfs)
    order: str
    io: str
    files: int = 0
    bytes: int = 0


@dataclass
class ReplayReport:
    entries: int  # files in the pack (device entries are counted apart)
    missing: int = 0
    changed: int = 0
    unreadable: int = 0
    files: int = 0  # files read from (whole or in part)
    bytes: int = 0  # bytes queued and waited for, metadata included
    metadata_bytes: int = 0  # of which read through a device (inode tables, directories)
    metadata_skipped: int = 0  # device entries whose filesystem is not here as recorded
    seconds: float = 0.0
    stopped: str | None = None  # "deadline" or "budget"
    budget: int | None = None
    devices: list[DeviceReplay] = field(default_factory=list)

    @property
    def skipped(self) -> int:
        return self.missing + self.changed + self.unreadable

    @property
    def mb_per_s(self) -> float | None:
        return self.bytes / 1e6 / self.seconds if self.seconds > 0 else None


@dataclass
class _Open:
    entry: Entry
    fd: int
    state: FileState
    ranges: list[tuple[int, int]]


# --- opening ---------------------------------------------------------------------------------


def _open(entry: Entry, now: FileState, by_inode: ByInode | None = None) -> int | None:
    fd = by_inode.take(entry) if by_inode is not None else None
    try:
        if fd is None:
            fd = cached.open_file(entry.path)
    except OSError:
        return None  # a device entry needs root; a file may have become unreadable
    st = os.fstat(fd)
    if entry.device:
        same = stat.S_ISBLK(st.st_mode) and st.st_rdev == now.dev
    else:
        same = (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns) == (
            now.dev, now.inode, now.size, now.mtime_ns)
    if not same:
        os.close(fd)  # replaced between the check and the open
        return None
    return fd


def _allow_open_files(n: int) -> None:
    """A sweep keeps every file of the pack open at once: raise our own soft limit on open
    files towards the hard one (a boot pack holds thousands)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    want = n + 64
    if soft != resource.RLIM_INFINITY and soft < want:
        top = want if hard == resource.RLIM_INFINITY else min(want, hard)
        resource.setrlimit(resource.RLIMIT_NOFILE, (top, hard))


def _memory_budget() -> int | None:
    try:
        for line in Path("/proc/meminfo").read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024 // 2
    except (OSError, ValueError, IndexError):
        pass
    return None


def _usable(checked: list[tuple[Entry, str, FileState | None]], report: ReplayReport
            ) -> list[tuple[Entry, FileState]]:
    usable = []
    for entry, verdict, now in checked:
        if entry.device and verdict != OK:
            report.metadata_skipped += 1
        elif verdict == MISSING:
            report.missing += 1
        elif verdict == CHANGED:
            report.changed += 1
        else:
            assert verdict == OK and now is not None
            usable.append((entry, now))
    return usable


def _open_usable(usable: list[tuple[Entry, FileState]], budget: int | None,
                 report: ReplayReport, by_inode: ByInode | None = None
                 ) -> tuple[list[_Open], int]:
    """Open what is kept within `budget` (in order); returns the files and the bytes kept."""
    kept, cut = within_budget([clip(e.ranges, now.size) for e, now in usable], budget)
    if cut:
        report.stopped = "budget"
    opened = []
    for (entry, now), ranges in zip(usable, kept, strict=True):
        if not ranges:
            continue
        fd = _open(entry, now, by_inode)
        if fd is None:
            if entry.device:
                report.metadata_skipped += 1  # reading a device needs root
            else:
                report.unreadable += 1
            continue
        opened.append(_Open(entry, fd, now, ranges))
    return opened, sum(ln for ranges in kept for _, ln in ranges)


def _open_all(pack: Pack, report: ReplayReport, budget: int | None) -> list[_Open]:
    """Every entry checked and opened, metadata first (for `show` and tests)."""
    opened, used = _open_usable(_usable(check_devices(pack), report), budget, report)
    rest = None if budget is None else max(0, budget - used)
    more, _ = _open_usable(_usable(check_files(pack), report), rest, report)
    return opened + more


def split_inode_tables(meta: list[_Open]) -> tuple[list[_Open], list[_Open]]:
    """Device entries cut in two where their filesystem is an ext4: the inode tables,
    which checking the files by inode needs first, and the rest (directory and extent
    blocks), which then joins the files' sweep (`byinode`); that part reads through a
    duplicate of the descriptor."""
    first, later = [], []
    for f in meta:
        parts = inode_tables_apart(os.fsdecode(f.entry.path), f.ranges)
        if parts is None:
            first.append(f)
            continue
        first.append(replace(f, ranges=parts[0]))
        later.append(replace(f, fd=os.dup(f.fd), ranges=parts[1]))
    return first, later


# --- planning ------------------------------------------------------------------------------


def _rotational(disk: str) -> bool | None:
    return block.rotational(os.path.basename(disk))


def _sysfs_disk(dev: int) -> str | None:
    """The whole disk holding block device `dev` (a partition's parent), from sysfs alone:
    the common case, without loading the extents package (a background replay's own start
    should cost as little as possible)."""
    disk = block.whole_disk(dev)
    return "/dev/" + disk if disk is not None else None


def _device(path: bytes, dev: int) -> tuple[str, bool | None]:
    disk = _sysfs_disk(dev) if os.major(dev) else None
    if disk is None:  # btrfs (anonymous device numbers), FUSE, tmpfs
        from ..extents import device_of

        try:
            disk = device_of(os.fsdecode(path), dev).disk
        except BackburnerError as err:
            log.debug("%r: %s", path, err)
            return f"{os.major(dev)}:{os.minor(dev)}", None
    return disk, _rotational(disk)


def _pieces(i: int, f: _Open, physical: bool) -> list[Piece]:
    if f.entry.device:  # offsets on the device are places already
        return [Piece(i, off, ln, off) for off, ln in f.ranges]
    if not physical:
        return [Piece(i, off, ln) for off, ln in f.ranges]
    from ..extents import fiemap, runs_of, select

    try:
        runs = select(runs_of(fiemap(f.fd, sync=False), f.state.size), f.ranges)
    except (BackburnerError, OSError) as err:
        log.debug("%r: no physical order: %s", f.entry.path, err)
        return [Piece(i, off, ln) for off, ln in f.ranges]
    # unwritten runs read as zeros and unmappable ones (delalloc, inline) are in memory
    # or in the inode: neither needs the device, and neither has a place to sort by
    return [Piece(i, r.logical, r.length, r.physical) for r in runs if r.kind == "data"]


@dataclass
class _Job:
    device: DeviceReplay
    pieces: list[Piece]
    io: priorities.IOPrio


def plan(opened: Sequence[_Open], opts: ReplayOptions) -> list[_Job]:
    """One job per device, in the order the device's first file was accessed."""
    by_dev: dict[int, list[int]] = {}
    for i, f in enumerate(opened):
        by_dev.setdefault(f.state.dev, []).append(i)
    jobs = []
    for dev, members in by_dev.items():
        disk, rotational = _device(opened[members[0]].entry.path, dev)
        physical = opts.order == "physical" or (opts.order == "auto" and bool(rotational))
        io = priorities.IOPrio.parse(opts.io) if opts.io else (
            priorities.IOPrio("be", 4) if physical else priorities.IOPrio("idle"))
        pieces = [p for i in members for p in _pieces(i, opened[i], physical)]
        ordered = physical_order(pieces) if physical else access_order(pieces)
        info = DeviceReplay(disk, rotational, "physical" if physical else "access", str(io),
                            files=len({p.file for p in ordered}),
                            bytes=sum(p.length for p in ordered))
        jobs.append(_Job(info, ordered, io))
    return jobs


# --- running -------------------------------------------------------------------------------


@dataclass
class _Stage:
    opened: list[_Open]
    jobs: list[_Job]


class _Worker:
    """Runs both stages in one thread: the metadata's reads are queued, then the files are
    checked, opened and queued, and only then is every piece waited for. So the files'
    check (a stat of each, which needs its inode) runs while the metadata it needs is being
    read, and their reads queue right behind it: the device never idles between the two,
    even when the check is slow (an idle-priority child beside a busy start)."""

    def __init__(self, meta: list[_Open], files: Callable[[], list[_Open]],
                 opts: ReplayOptions, later: Sequence[_Open] = ()) -> None:
        self.files = files
        self.opts = opts
        # ours to close from here on (`later` comes back from `files`, or is closed here)
        self.done: list[_Stage] = [_Stage(meta, [])]
        self.later = list(later)
        self.stop = threading.Event()
        self.done_bytes = 0
        self.done_metadata = 0
        self.done_files: set[tuple[int, int]] = set()  # (stage, file)
        self.error: BaseException | None = None
        self.thread = threading.Thread(target=self._run, name="replay", daemon=True)

    def _run(self) -> None:
        try:
            self._start(self.done[0])
            if self.stop.is_set():
                return
            files, self.later = self.files(), []
            self.done.append(_Stage(files, []))
            self._start(self.done[1])
            buf = bytearray(_READ_BUF)
            for n, st in enumerate(self.done):
                for job in st.jobs:
                    self._wait(n, st.opened, job, buf)
        except BaseException as err:  # noqa: BLE001 - reported by the caller
            self.error = err
        finally:
            for st in self.done:
                for f in st.opened:
                    os.close(f.fd)
            for f in self.later:
                os.close(f.fd)

    def _start(self, st: _Stage) -> None:
        st.jobs = plan(st.opened, self.opts)
        for job in st.jobs:
            self._queue(st.opened, job)

    def _queue(self, opened: list[_Open], job: _Job) -> None:
        priorities.ioprio_set(threading.get_native_id(), job.io)
        for piece in job.pieces:
            for c in chunks(piece):
                if self.stop.is_set():
                    return
                _queue(opened[c.file].fd, c.logical, c.length)

    def _wait(self, n: int, opened: list[_Open], job: _Job, buf: bytearray) -> None:
        for piece in job.pieces:
            fd = opened[piece.file].fd
            os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_RANDOM)
            for c in chunks(piece, _READ_BUF):
                if self.stop.is_set():
                    return
                view = memoryview(buf)[:c.length]
                got = os.preadv(fd, [view], c.logical)
                self.done_bytes += got
                if opened[piece.file].entry.device:
                    self.done_metadata += got
                else:
                    self.done_files.add((n, piece.file))


def _queue(fd: int, offset: int, length: int) -> None:
    try:
        pagecache.readahead(fd, offset, length)
    except OSError:  # EINVAL: a filesystem without readahead support
        os.posix_fadvise(fd, offset, length, os.POSIX_FADV_WILLNEED)


def replay(pack: Pack, opts: ReplayOptions = ReplayOptions()) -> ReplayReport:
    """Replay `pack` now; return within `opts.deadline_s` whatever happens.

    Two stages: the metadata (device entries) first, so that looking at the files, which
    reads their directories and inodes, finds them cached or on their way; then the files
    (`_Worker` has how the two overlap)."""
    if opts.order not in ORDERS:
        raise UsageError(f"unknown order {opts.order!r}", "use auto, physical or access")
    if not opts.deadline_s > 0:
        raise UsageError("the deadline must be above 0 seconds")
    if opts.io:
        priorities.IOPrio.parse(opts.io)
    if opts.rebase:
        pack = rebased(pack, os.fsencode(opts.rebase[0]), os.fsencode(opts.rebase[1]))
    t0 = time.monotonic()
    deadline = t0 + opts.deadline_s
    report = ReplayReport(sum(1 for e in pack.entries if not e.device))
    budget = opts.budget if opts.budget is not None else _memory_budget()
    report.budget = budget
    _allow_open_files(len(pack.entries))
    opened, used = _open_usable(_usable(check_devices(pack), report), budget, report)
    rest = None if budget is None else max(0, budget - used)
    files_report = ReplayReport(0)  # the worker's: merged once its check is complete
    by_inode = ByInode() if opts.rebase is None and os.geteuid() == 0 else None
    first, later = split_inode_tables(opened) if by_inode is not None else (opened, [])

    def files() -> list[_Open]:
        try:
            return later + _open_usable(_usable(check_files(pack, by_inode), files_report),
                                        rest, files_report, by_inode)[0]
        finally:
            if by_inode is not None:
                by_inode.close()

    worker = _run(first, files, opts, deadline, report, later)
    if len(worker.done) > 1:  # the files' check is complete (else the deadline came first)
        for name in ("missing", "changed", "unreadable", "metadata_skipped"):
            setattr(report, name, getattr(report, name) + getattr(files_report, name))
        report.stopped = report.stopped or files_report.stopped
    report.seconds = time.monotonic() - t0
    return report


def _run(meta: list[_Open], files: Callable[[], list[_Open]], opts: ReplayOptions,
         deadline: float, report: ReplayReport, later: Sequence[_Open] = ()) -> _Worker:
    """Run both stages in a worker thread until done or the deadline; add what was read to
    the report. After a deadline the worker may still be checking or reading (it stops at
    its next piece): it writes only to its own counters. `later`: metadata that `files`
    hands over with the files (closed here if the worker never starts)."""
    worker = _Worker(meta, files, opts, later)
    try:
        worker.thread.start()
    except BaseException:
        for f in [*meta, *later]:
            os.close(f.fd)
        raise
    worker.thread.join(max(0.0, deadline - time.monotonic()))
    if worker.thread.is_alive():
        worker.stop.set()
        report.stopped = "deadline"
    report.bytes += worker.done_bytes
    report.metadata_bytes += worker.done_metadata
    report.files += len(worker.done_files)
    for st in list(worker.done):
        for job in st.jobs:
            same = next((d for d in report.devices if d.disk == job.device.disk
                         and d.order == job.device.order), None)
            if same is None:
                report.devices.append(job.device)
            else:
                same.files += job.device.files
                same.bytes += job.device.bytes
    if worker.error is not None:
        raise worker.error
    return worker


def describe(r: ReplayReport) -> str:
    """What a replay did, in one line: files, MiB, seconds, MB/s, what it skipped."""
    skipped = [f"{n} {what}" for n, what in ((r.changed, "changed"), (r.missing, "missing"),
                                             (r.unreadable, "unreadable")) if n]
    if r.files == 0 and r.entries and r.skipped == r.entries:
        return (f"replay read nothing: all {plural(r.entries, 'file')} of the pack changed or "
                f"went missing since it was recorded ({', '.join(skipped)})")
    how = "; ".join(f"{d.order} order on {d.disk}"
                    + ("" if d.rotational is None else
                       f" ({'rotational' if d.rotational else 'non-rotational'})")
                    + f", IO class {d.io}" for d in r.devices)
    meta = f" (metadata {human_size(r.metadata_bytes)})" if r.metadata_bytes else ""
    line = (f"replayed {plural(r.files, 'file')}, {human_size(r.bytes)}{meta} in "
            f"{fmt_s(r.seconds)} s ({fmt_mbps(r.mb_per_s)} MB/s)" + (f": {how}" if how else ""))
    if skipped:
        line += f"; skipped {', '.join(skipped)}"
    if r.stopped == "deadline":
        line += "; stopped at the deadline"
    elif r.stopped == "budget" and r.budget is not None:
        line += f"; cut at the budget of {human_size(r.budget)}"
    return line
