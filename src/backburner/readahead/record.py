"""Record what a start reads: fanotify for which files, the page cache for which bytes.

While a program runs (or, with ``--system``, for a number of seconds), a fanotify group
marks the filesystems involved (FAN_MARK_FILESYSTEM, or FAN_MARK_MOUNT where a filesystem
refuses that) for FAN_OPEN | FAN_OPEN_EXEC | FAN_CLOSE_NOWRITE (and FAN_ACCESS with
``--system``, where files opened before the recording began are read too). Each event
comes with an fd on the file, from which a reader thread takes its identity and path.
Which process read it is decided at the end: the target's process tree is its PID and
everything forked below it, from the kernel's process connector (fork events arrive even
for children that lived a millisecond, whose /proc entries are long gone), with each new
PID's ancestry read from /proc as a fallback. ``--system`` keeps everything but
backburner's own processes.

Then the page cache says which bytes of those files are resident (cachestat, then mincore
on a mapping), which includes what was read through mmap (shared libraries), where
fanotify sees only the open. For a command it is asked when the command is done, on the
first fd of each file, held until then (the less the reader does while the program runs,
the less it slows it; a page evicted before the end by memory pressure is missed), and the
closes of held files are not asked for; its events are read in batches, half a second
after the first of them, not as each arrives (which process read a file is known from fork
events, whoever is still alive then). With ``--system``, which must not hold files open at
boot, it is asked when a reader closes the file (FAN_CLOSE_NOWRITE, on the event's own fd)
and the pack holds the union; its events are read as they come, since which process is
backburner's own is judged then.

After a cold start (``--drop-caches``, or ``--system`` at boot) the filesystem's metadata
the start read (inode tables, directories) is taken from its block device's page cache
as a device entry (`metadata_entry`); for a command, less what was still cached just
after the drop on a settled filesystem (buffers it keeps pinned, which the start did not
read: `_drop_caches`).

While recording, the devices' read-ahead is lowered through a `system.SysfsValue`
(journaled, put back at the end, even after ^C) so the resident pages are close to what
was really asked for.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import resource
import select
import shlex
import signal
import stat
import struct
import threading
import time
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import outfile, proc_events, procfs, spawn, system
from ..errors import BackburnerError, NotFoundError, UnavailableError, UsageError
from ..extents import device_of
from . import kernel, packfile
from .pack import Entry, FileState, Pack, Ranges, clip, digest, merge_ranges, subtract_ranges
from .replay import CHILD_NAME

log = logging.getLogger(__name__)

#: A command's start: every file it reads it opens while recorded, so opens (and closes,
#: for the resident pages) say which; FAN_ACCESS would add an event, with an fd the kernel
#: opens for us, for every read() of every file: the recording's main cost on a fast disk.
MASK = kernel.FAN_OPEN | kernel.FAN_OPEN_EXEC | kernel.FAN_CLOSE_NOWRITE
#: The whole system (at boot): reads through files opened before the recording began count.
MASK_SYSTEM = MASK | kernel.FAN_ACCESS
DEFAULT_READ_AHEAD_KB = 16
_POLL_S = 0.1
#: A command's events are read this long after the first of them (its tree is known from
#: fork events, not from who is alive when they are read).
BATCH_S = 0.5
_STOP_SIGNALS = {signal.SIGINT, signal.SIGTERM, signal.SIGHUP}


@dataclass(frozen=True)
class RecordOptions:
    output: str
    mounts: tuple[str, ...] = ()  # watch only the filesystems holding these paths
    read_ahead_kb: int | None = DEFAULT_READ_AHEAD_KB  # None: leave read-ahead alone
    drop_caches: bool = False  # start cold, so the pack holds only what this start read
    hash: bool = False  # a digest of each file's recorded bytes


@dataclass(frozen=True)
class Watched:
    """A filesystem we mark, the device it is on (whose page cache holds its metadata), and
    the disk whose read-ahead we lower while recording."""

    mountpoint: str
    dev: int
    disk: str
    device: str = ""

    @property
    def read_ahead_path(self) -> str:
        return f"/sys/block/{os.path.basename(self.disk)}/queue/read_ahead_kb"


@dataclass(frozen=True)
class RecordResult:
    output: str
    pack: Pack
    size: int  # bytes of the pack file
    seconds: float
    watched: tuple[Watched, ...]
    files_seen: int  # by anyone, on the watched filesystems
    gone: int  # read, but deleted or replaced before the end
    overflows: int  # fanotify queue overflows (events lost)
    forks_lost: bool  # the process connector dropped events (the tree may be incomplete)


# --- which filesystems ---------------------------------------------------------------------


def watched_filesystems(paths: Sequence[str] = ()) -> list[Watched]:
    """The filesystems holding `paths`, or every block-device filesystem mounted here."""
    if paths:
        found = []
        for p in paths:
            try:
                st = os.stat(p)
            except FileNotFoundError:
                raise NotFoundError(f"{p}: no such file or directory") from None
            dev = device_of(p, st.st_dev)
            found.append(Watched(dev.mountpoint or p, st.st_dev, dev.disk, dev.path))
        return _unique(found)
    found = []
    for m in procfs.mounts():
        if os.major(m.devno) == 0 and m.fstype != "btrfs":
            continue  # proc, tmpfs, FUSE...: nothing on a block device to prefetch
        try:
            st = os.stat(m.mountpoint)
            dev = device_of(m.mountpoint)
            found.append(Watched(m.mountpoint, st.st_dev, dev.disk, dev.path))
        except (OSError, BackburnerError) as err:
            log.debug("not watching %s: %s", m.mountpoint, err)
    return _unique(found)


def _unique(found: list[Watched]) -> list[Watched]:
    seen: dict[int, Watched] = {}
    for w in found:
        seen.setdefault(w.dev, w)
    return list(seen.values())


def _lower_read_ahead(tx: system.Transaction, watched: Sequence[Watched], kb: int | None
                      ) -> None:
    if kb is None:
        return
    for path in dict.fromkeys(w.read_ahead_path for w in watched):
        if os.path.exists(path):
            tx.apply(system.SysfsValue(path, str(kb)))


# --- fork events -----------------------------------------------------------------------------

class ForkWatch:
    """Who forked whom, from the process connector (needs CAP_NET_ADMIN): child -> parent,
    for processes (not threads), and whether any event was lost meanwhile."""

    def __init__(self, events: proc_events.Connector | None = None) -> None:
        self.parents: dict[int, int] = {}
        self.lost = False
        self.events = events if events is not None else proc_events.Connector()

    def fileno(self) -> int:
        return self.events.fileno()

    def drain(self) -> None:
        """Everything queued (a lost event, by overflow or by a gap in its numbers, only
        sets `lost`: the tree is completed from /proc ancestry)."""
        limit = 4096
        while True:
            batch = self.events.drain(limit=limit)
            for ev in batch.events:
                if ev.what == proc_events.FORK and not ev.is_thread:
                    self.parents[ev.tgid] = ev.ptgid
            self.lost = self.lost or batch.incomplete
            if len(batch.events) < limit and not batch.overflow:
                return

    def close(self) -> None:
        self.events.close()


def tree_of(root: int, parents: dict[int, int], ancestry: dict[int, tuple[int, ...]]
            ) -> set[int]:
    """`root` and every process below it (pure): by fork events, else by recorded ancestry."""
    children: dict[int, list[int]] = defaultdict(list)
    for child, parent in parents.items():
        children[parent].append(child)
    members = {root}
    queue = [root]
    while queue:
        for kid in children.get(queue.pop(), []):
            if kid not in members:
                members.add(kid)
                queue.append(kid)
    changed = True
    while changed:  # ancestry read at the first event (fork events may have been lost)
        changed = False
        for pid, ancestors in ancestry.items():
            if pid not in members and any(a in members for a in ancestors):
                members.add(pid)
                changed = True
    return members


# --- the listener ----------------------------------------------------------------------------


@dataclass
class Seen:
    """What the listener saw: files in first-seen order and who touched each."""

    paths: dict[tuple[int, int], bytes] = field(default_factory=dict)  # (dev, ino) -> path
    touches: dict[tuple[int, int], dict[int, int]] = field(default_factory=dict)  # pid -> seq
    ancestry: dict[int, tuple[int, ...]] = field(default_factory=dict)
    resident: dict[tuple[int, int], Ranges] = field(default_factory=dict)  # at each close
    overflows: int = 0
    seq: int = 0

    def files_of(self, keep: Callable[[int], bool]) -> list[tuple[tuple[int, int], bytes]]:
        """Files touched by a kept PID, in the order those PIDs first touched them."""
        firsts = []
        for key, by_pid in self.touches.items():
            seqs = [s for pid, s in by_pid.items() if keep(pid)]
            if seqs:
                firsts.append((min(seqs), key))
        return [(key, self.paths[key]) for _, key in sorted(firsts)]


class Listener:
    """A fanotify group on the watched filesystems, read by a thread until `stop`."""

    def __init__(self, watched: Sequence[Watched], *, track_ancestry: bool,
                 exclude: Callable[[int], bool] | None = None, mask: int = MASK,
                 hold: bool = False, batch_s: float = 0.0) -> None:
        self.seen = Seen()
        # read what follows the first event `batch_s` later, all at once: a wake-up per
        # event (and its reading, beside the start on a small machine) was most of what
        # recording cost a short start. Not where a process is judged when its event is
        # read (`exclude`): it may be gone by then
        self.batch_s = batch_s
        # hold: keep the first descriptor of each file and look at its name and resident
        # pages once, at the end, instead of at every event while the program runs (a
        # command's recording: bounded; a system recording must not keep files open)
        self.held: dict[tuple[int, int], int] = {}
        soft = resource.getrlimit(resource.RLIMIT_NOFILE)[0]
        self.hold_max = max(0, min(soft if soft > 0 else 1 << 16, 1 << 16) - 512) if hold \
            else 0
        # each event read makes an fd: a read must not make more than the room left (at
        # EMFILE the kernel drops the event), so while files are held reads are small
        self.read_size = 4096 if hold else 1 << 16  # ~170 events at most per read
        self.mask = mask
        # a held file's pages are looked at at the end: its close says nothing, and each
        # event costs the recorded start (its CPU is the loop worker's and the disk's)
        # until the hold is full, when closes are asked for again (`_hold_full`)
        self.marked_mask = mask & ~kernel.FAN_CLOSE_NOWRITE if self.hold_max else mask
        # (an O_PATH fd on the mount point, mark flags): marked again by fd, not by path,
        # which another mount may cover meanwhile
        self.marks: list[tuple[int, int]] = []
        self.track_ancestry = track_ancestry
        self.exclude = exclude
        self._own = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.fd = kernel.fanotify_init(
            kernel.FAN_CLASS_NOTIF | kernel.FAN_CLOEXEC | kernel.FAN_NONBLOCK
            | kernel.FAN_UNLIMITED_QUEUE, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
        self.forks: ForkWatch | None = None
        try:
            for w in watched:
                self._mark(w.mountpoint)
            if track_ancestry:
                try:
                    self.forks = ForkWatch()
                except (OSError, BackburnerError) as err:
                    log.warning("no process connector (%s): children that exit before their "
                                "events are read may be missed", err)
        except BaseException:
            self._close_marks()
            os.close(self.fd)
            raise

    def _mark(self, mountpoint: str) -> None:
        flags = kernel.FAN_MARK_ADD | kernel.FAN_MARK_FILESYSTEM
        try:
            kernel.fanotify_mark(self.fd, flags, self.marked_mask, mountpoint)
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.EXDEV, errno.EOPNOTSUPP, errno.ENODEV):
                raise UnavailableError(f"cannot watch {mountpoint}: {err.strerror}") from None
            flags = kernel.FAN_MARK_ADD | kernel.FAN_MARK_MOUNT
            kernel.fanotify_mark(self.fd, flags, self.marked_mask, mountpoint)
        if self.marked_mask != self.mask:
            self.marks.append((os.open(mountpoint, os.O_PATH | os.O_DIRECTORY | os.O_CLOEXEC),
                               flags))

    def _hold_full(self) -> None:
        """No room to hold more files: from now on a file's pages are looked at when it
        is closed, so the marks ask for closes too (the files already held are not
        affected; a close missed meanwhile is made up for by the pages resident at the
        end, which `build_pack` adds)."""
        if self.marked_mask == self.mask:
            return
        self.marked_mask = self.mask
        for dirfd, flags in self.marks:
            try:
                kernel.fanotify_mark(self.fd, flags, self.mask, ".", dirfd=dirfd)
            except OSError as err:  # unmounted meanwhile: its files' pages are still
                log.warning("cannot watch closes any more: %s", err.strerror)  # taken at the end
        self._close_marks()

    def _close_marks(self) -> None:
        while self.marks:
            os.close(self.marks.pop()[0])

    def __enter__(self) -> Listener:
        # the thread keeps the signals a foreground job forwards blocked: they stay ours
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {*_STOP_SIGNALS, signal.SIGQUIT,
                                                         signal.SIGCHLD})
        try:
            self._thread = threading.Thread(target=self._run, name="fanotify", daemon=True)
            self._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def stop(self) -> Seen:
        """Stop the thread, read what is still queued, close everything."""
        try:
            if self._thread is not None:
                self._stop.set()
                self._thread.join()
                self._thread = None
                if self.error is None:
                    self._drain()
        finally:
            try:
                self._settle_held()
            finally:
                self._close_marks()
                if self.fd >= 0:
                    os.close(self.fd)
                    self.fd = -1
                if self.forks is not None:
                    self.forks.close()  # idempotent; its parents stay readable
        if self.error is not None:
            raise self.error
        return self.seen

    def _settle_held(self) -> None:
        """Name and resident pages of every held file, now that the program is done."""
        seen = self.seen
        while self.held:
            key, fd = self.held.popitem()
            try:
                st = os.fstat(fd)
                if st.st_nlink == 0:  # deleted meanwhile: nothing to read next time
                    raise FileNotFoundError
                seen.paths[key] = os.readlink(f"/proc/self/fd/{fd}".encode())
                now = kernel.resident_ranges(fd, st.st_size)
                seen.resident[key] = merge_ranges(seen.resident.get(key, ()) + now)
            except OSError:
                seen.paths.pop(key, None)
                seen.touches.pop(key, None)
            finally:
                os.close(fd)

    @property
    def forks_lost(self) -> bool:
        return self.forks is not None and self.forks.lost

    def _run(self) -> None:
        watch = [self.fd] + ([self.forks] if self.forks else [])
        try:
            while not self._stop.is_set():
                ready = select.select(watch, [], [], _POLL_S)[0]
                if ready and self.batch_s:
                    self._stop.wait(self.batch_s)
                self._drain()
        except BaseException as err:  # noqa: BLE001 - handed to the caller in stop()
            self.error = err

    def _drain(self) -> None:
        if self.forks is not None:
            self.forks.drain()  # before the file events that the new processes caused
        while True:
            try:
                buf = os.read(self.fd, self.read_size)
            except BlockingIOError:
                return
            for ev in kernel.parse_events(buf):
                self._event(ev)

    def _event(self, ev: kernel.Event) -> None:
        if ev.mask & kernel.FAN_Q_OVERFLOW:
            self.seen.overflows += 1
        if ev.fd < 0:
            return
        kept = False
        try:
            if ev.pid == self._own or (self.exclude and self.exclude(ev.pid)):
                return
            st = os.fstat(ev.fd)
            if not stat.S_ISREG(st.st_mode) or st.st_nlink == 0:
                return  # directories (FAN_ACCESS on readdir), devices, deleted files
            seen = self.seen
            key = (st.st_dev, st.st_ino)
            if key not in seen.paths:
                seen.touches[key] = {}
                if len(self.held) < self.hold_max:
                    self.held[key] = ev.fd
                    kept = True
                    seen.paths[key] = b""  # named in _settle_held
                else:
                    self._hold_full()
                    seen.paths[key] = os.readlink(f"/proc/self/fd/{ev.fd}".encode())
            seen.seq += 1
            seen.touches[key].setdefault(ev.pid, seen.seq)
            if ev.mask & kernel.FAN_CLOSE_NOWRITE and key not in self.held:
                now = kernel.resident_ranges(ev.fd, st.st_size)
                seen.resident[key] = merge_ranges(seen.resident.get(key, ()) + now)
            if self.track_ancestry and ev.pid not in seen.ancestry:
                seen.ancestry[ev.pid] = tuple(procfs.ancestors_of(ev.pid))
        finally:
            if not kept:
                os.close(ev.fd)


def is_backburner(pid: int) -> bool:
    """Another backburner process (a replay running at boot while we record): its reads
    are not part of the start being recorded."""
    if procfs.comm_of(pid) == CHILD_NAME:  # a background replay (a fork of its starter)
        return True
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            argv = f.read().split(b"\0")
    except OSError:
        return False
    return any(a.endswith(b"backburner") for a in argv[:3]) and b"readahead" in argv


# --- the pack --------------------------------------------------------------------------------


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
        fd = kernel.open_file(path)
    except OSError:
        return None
    try:
        st = os.fstat(fd)
        if (st.st_dev, st.st_ino) != key or not stat.S_ISREG(st.st_mode):
            return None
        state = FileState(st.st_dev, _fsid(fd, fsids, st.st_dev), st.st_ino, st.st_size,
                          st.st_mtime_ns)
        ranges = merge_ranges(kernel.resident_ranges(fd, st.st_size) + earlier)
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
        ranges = subtract_ranges(kernel.cached_ranges(fd, size) or (), before)
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
    return Pack(tuple(entries), kernel.PAGE_SIZE, time.time_ns(), note), gone


# --- recording -------------------------------------------------------------------------------


def _check(opts: RecordOptions) -> list[Watched]:
    system.require_root("recording file accesses (fanotify)")
    out = os.path.abspath(opts.output)
    if not os.path.isdir(os.path.dirname(out)):
        raise NotFoundError(f"directory {os.path.dirname(out)} does not exist",
                            "create it first")
    if os.path.isdir(out):
        raise UsageError(f"{opts.output} is a directory", "give a file name for the pack")
    outfile.check_target(out)  # a device, FIFO or socket: refused before the recording
    if opts.read_ahead_kb is not None and opts.read_ahead_kb < 0:
        raise UsageError("--read-ahead-kb must be 0 or more")
    watched = watched_filesystems(opts.mounts)
    if not watched:
        raise UnavailableError("no filesystem on a block device to watch")
    return watched


def record_command(argv: Sequence[str], opts: RecordOptions
                   ) -> tuple[RecordResult, spawn.Outcome]:
    """Run `argv` in the foreground (signals forwarded) and record what its tree read.

    The pack is written whatever the program's exit status: what a failing start read is
    still what the next one will read. The caller mirrors the outcome (`spawn.die_like`).
    """
    if not argv:
        raise UsageError("no command to record", "put it after --")
    watched = _check(opts)
    t0 = time.monotonic()
    with system.Transaction("readahead-record") as tx:
        _lower_read_ahead(tx, watched, opts.read_ahead_kb)
        pinned = _drop_caches(watched) if opts.drop_caches else {}
        listener = Listener(watched, track_ancestry=True, hold=True, batch_s=BATCH_S)
        with listener:
            outcome = spawn.run_foreground(argv)
        seen = listener.stop()
    tree = tree_of(outcome.pid, listener.forks.parents if listener.forks else {},
                   seen.ancestry)
    files = seen.files_of(lambda pid: pid in tree)
    meta = _metadata(watched, {k[0] for k, _ in files}, pinned) if opts.drop_caches else []
    pack, gone = build_pack(files, shlex.join(argv), opts.hash, seen.resident, meta)
    size = packfile.save(opts.output, pack)
    result = RecordResult(opts.output, pack, size, time.monotonic() - t0, tuple(watched),
                          len(seen.paths), gone, seen.overflows, listener.forks_lost)
    return result, outcome


def record_system(seconds: float, opts: RecordOptions,
                  ready: Callable[[Sequence[Watched]], None] = lambda _w: None) -> RecordResult:
    """Record everything read on the watched filesystems for `seconds` (at boot), except by
    backburner itself. SIGTERM or ^C ends the recording early; the pack is still written.
    `ready` is called once the filesystems are marked."""
    if not seconds > 0:
        raise UsageError("--seconds must be above 0")
    watched = _check(opts)
    t0 = time.monotonic()
    with system.Transaction("readahead-record") as tx:
        _lower_read_ahead(tx, watched, opts.read_ahead_kb)
        if opts.drop_caches:  # what is pinned is not looked for: others read meanwhile
            system.drop_caches()
        listener = Listener(watched, track_ancestry=False, exclude=_excluder(),
                            mask=MASK_SYSTEM)
        with listener:
            ready(watched)
            _wait(seconds)
        seen = listener.stop()
    files = seen.files_of(lambda _pid: True)
    meta = _metadata(watched, {k[0] for k, _ in files}, {})
    pack, gone = build_pack(files, f"system, {seconds:g} s", opts.hash, seen.resident, meta)
    size = packfile.save(opts.output, pack)
    return RecordResult(opts.output, pack, size, time.monotonic() - t0, tuple(watched),
                        len(seen.paths), gone, seen.overflows, False)


def _drop_caches(watched: Sequence[Watched]) -> dict[int, Ranges]:
    """Drop the page cache; what the devices of settled filesystems still have cached
    (`device_cache`). Only there is what survives a drop pinned for good: on a writable
    ext4 whose journal was not checkpointed, metadata written since is held by the journal
    and survives the drop too, though a start may read it (and the next boot will not
    find it cached). Elsewhere nothing is left out."""
    settled = [w for w in watched if _settled(w.mountpoint)]
    system.drop_caches()
    return device_cache(settled)


_EXT4_IOC_CHECKPOINT = 0x4004662B  # _IOW('f', 43, __u32); Linux 5.13


def _settled(mountpoint: str) -> bool:
    """Read-only, or a writable ext4 whose journal was just checkpointed (its metadata
    written to where it belongs and let go: like sync, nothing to put back)."""
    try:
        if os.statvfs(mountpoint).f_flag & os.ST_RDONLY:
            return True
        fd = os.open(mountpoint, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    except OSError:
        return False
    try:
        fcntl.ioctl(fd, _EXT4_IOC_CHECKPOINT, struct.pack("I", 0))
        return True
    except OSError as err:  # not ext4 (ENOTTY), no journal (EINVAL), an older kernel
        log.debug("%s: no journal checkpoint (%s)", mountpoint, err.strerror)
        return False
    finally:
        os.close(fd)


def _metadata(watched: Sequence[Watched], devs: set[int], pinned: dict[int, Ranges]
              ) -> list[Entry]:
    """Device entries for the watched filesystems that files were recorded on, without
    what was `pinned` in their caches before the recording began."""
    out = []
    for w in watched:
        if w.dev in devs and (e := metadata_entry(w, pinned.get(w.dev, ()))) is not None:
            out.append(e)
    return out


def _excluder() -> Callable[[int], bool]:
    verdicts: dict[int, bool] = {}

    def exclude(pid: int) -> bool:
        if pid not in verdicts:
            verdicts[pid] = is_backburner(pid)
        return verdicts[pid]

    return exclude


def _wait(seconds: float) -> None:
    """Sleep until `seconds` have passed or a stop signal arrives (taken, not raised)."""
    old = signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)
    try:
        deadline = time.monotonic() + seconds
        while (left := deadline - time.monotonic()) > 0:
            if signal.sigtimedwait(_STOP_SIGNALS, left) is not None:
                log.debug("stop signal: ending the recording early")
                return
    finally:
        signal.pthread_sigmask(signal.SIG_SETMASK, old)
