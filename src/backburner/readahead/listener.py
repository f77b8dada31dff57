"""What a recording listens to: a fanotify group on the watched filesystems, read by a
thread (which files, first touched by whom, their resident pages), and the process
connector's fork events (who forked whom), from which the recorded program's tree is
made at the end.

Each fanotify event comes with an fd on the file, from which the reader takes its identity
and path. For a command the first fd of each file is held until the end, where its name
and resident pages are looked at once (`hold`), and events are read in batches
(`batch_s`); for the whole system at boot nothing is held and a file's pages are looked at
when a reader closes it.
"""

from __future__ import annotations

import errno
import logging
import os
import resource
import select
import signal
import stat
import threading
from collections import defaultdict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from .. import spawn
from ..base.errors import BackburnerError, UnavailableError
from ..kernel import fanotify, proc_events, procfs
from . import cached
from .background import CHILD_NAME
from .ranges import Ranges, merge_ranges
from .watched import Watched

log = logging.getLogger(__name__)

#: A command's start: every file it reads it opens while recorded, so opens (and closes,
#: for the resident pages) say which; FAN_ACCESS would add an event, with an fd the kernel
#: opens for us, for every read() of every file: the recording's main cost on a fast disk.
MASK = fanotify.FAN_OPEN | fanotify.FAN_OPEN_EXEC | fanotify.FAN_CLOSE_NOWRITE
#: The whole system (at boot): reads through files opened before the recording began count.
MASK_SYSTEM = MASK | fanotify.FAN_ACCESS
_POLL_S = 0.1


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
        self.reads = 0  # reads of the event queue that found events (batching, tested)
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
        self.marked_mask = mask & ~fanotify.FAN_CLOSE_NOWRITE if self.hold_max else mask
        # (an O_PATH fd on the mount point, mark flags): marked again by fd, not by path,
        # which another mount may cover meanwhile
        self.marks: list[tuple[int, int]] = []
        self.track_ancestry = track_ancestry
        self.exclude = exclude
        self._own = os.getpid()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.error: BaseException | None = None
        self.fd = fanotify.fanotify_init(
            fanotify.FAN_CLASS_NOTIF | fanotify.FAN_CLOEXEC | fanotify.FAN_NONBLOCK
            | fanotify.FAN_UNLIMITED_QUEUE, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
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
        flags = fanotify.FAN_MARK_ADD | fanotify.FAN_MARK_FILESYSTEM
        try:
            fanotify.fanotify_mark(self.fd, flags, self.marked_mask, mountpoint)
        except OSError as err:
            if err.errno not in (errno.EINVAL, errno.EXDEV, errno.EOPNOTSUPP, errno.ENODEV):
                raise UnavailableError(f"cannot watch {mountpoint}: {err.strerror}") from None
            flags = fanotify.FAN_MARK_ADD | fanotify.FAN_MARK_MOUNT
            fanotify.fanotify_mark(self.fd, flags, self.marked_mask, mountpoint)
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
                fanotify.fanotify_mark(self.fd, flags, self.mask, ".", dirfd=dirfd)
            except OSError as err:  # unmounted meanwhile: its files' pages are still
                log.warning("cannot watch closes any more: %s", err.strerror)  # taken at the end
        self._close_marks()

    def _close_marks(self) -> None:
        while self.marks:
            os.close(self.marks.pop()[0])

    def __enter__(self) -> Listener:
        # the thread keeps the signals a foreground job forwards blocked: they stay ours
        old = signal.pthread_sigmask(signal.SIG_BLOCK, {*spawn.FORWARDED_SIGNALS,
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
                now = cached.resident_ranges(fd, st.st_size)
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
                # a poll that found nothing reads nothing: an event queued just after it
                # is read with its batch, at the next poll, not at once
                if not select.select(watch, [], [], _POLL_S)[0]:
                    continue
                if self.batch_s:
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
            self.reads += 1
            for ev in fanotify.parse_events(buf):
                self._event(ev)

    def _event(self, ev: fanotify.Event) -> None:
        if ev.mask & fanotify.FAN_Q_OVERFLOW:
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
            if ev.mask & fanotify.FAN_CLOSE_NOWRITE and key not in self.held:
                now = cached.resident_ranges(ev.fd, st.st_size)
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
