"""Flush-behind around a job (`policy.flush_behind`): a thread that watches filesystems for
files closed after writing (fanotify's FAN_CLOSE_WRITE) and, for those the job's
processes wrote, starts their writeback at once from itself, at the job's IO class
(sync_file_range: the requests are the caller's, and it does not wait for them). The
kernel's flusher later finds those pages clean or already under writeback, so the job's
buffered writes reach the disk at its class, not at the flusher's default one.

Only the job's files: a file closed by any other process is left to the kernel. A process
is told to be the job's by the fork events of the job's tree (`JobTree`), so a file closed
by a process that ended before its event was read still counts. The thread keeps the
default CPU policy, not the job's: at SCHED_IDLE beside a flatpak installer using both CPUs
it fell so far behind that the closers of 1,635 of 3,156 files had ended, unseen, before it
read their events, and the kernel's flusher wrote those 100 MB into the next start at the
default class (docs/measurements/startup.md, "The slow starts traced"). Its work is a
system call per file. It drains what is queued before it ends.

A thread, not a helper process: it holds nothing that outlives the job, and ends with it.
It is started with the signals `run` forwards blocked, so that those still reach the
thread that waits for them.
"""

from __future__ import annotations

import logging
import os
import select
import signal
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

from ..base import quantities
from ..base.errors import BackburnerError, SystemStateError
from ..kernel import block, fanotify, pagecache, priorities, proc_events, procfs
from ..policy import grammar

log = logging.getLogger(__name__)

#: how long the thread waits for events before looking whether it should stop
POLL_S = 0.2
#: one read(2) of events: about 5,000 of them
READ_BYTES = 1 << 17
#: at most this many reads of what is still queued when asked to stop: a stop is never
#: held up by a writer that goes on (govern's processes outlive the daemon)
DRAIN_READS = 16
#: at most this many fork events taken from the connector in one drain
DRAIN_FORKS = 4096
#: what the thread never takes: the signals a job's runner waits for or forwards
HELD = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGQUIT, signal.SIGCHLD)


def require() -> None:
    """This process may watch filesystems with fanotify (CAP_SYS_ADMIN, a kernel with it):
    checked before anything is started (one line, not a failure half-way)."""
    os.close(fanotify.fanotify_init(fanotify.FAN_CLOEXEC | fanotify.FAN_CLASS_NOTIF,
                                    os.O_RDONLY))


def block_filesystems() -> list[str]:
    """One mount point of each filesystem on a block device: where a job's files can be
    written back (a tmpfs's or a network filesystem's cannot, or not to a local disk)."""
    seen: dict[int, str] = {}
    for m in procfs.mounts():
        if m.devno not in seen and (m.fstype == "btrfs" or block.sysfs_dir(m.devno)):
            seen[m.devno] = m.mountpoint
    return list(seen.values())


@dataclass
class FlushBehind:
    """The thread around one job's run; `stop` says what it wrote back."""

    mountpoints: Sequence[str]  # the filesystems (any of their mount points) to watch
    policy: grammar.Policy  # the job's: the thread takes its IO class
    ours: Callable[[int], bool]  # whether a file closed by this (living) PID is the job's
    files: int = 0
    bytes: int = 0
    left: int = 0  # files closed by others, or by a process gone before we read the event
    tid: int = 0  # the thread's, once it runs
    problems: list[str] = field(default_factory=list)
    _fd: int = -1
    _done: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None

    def start(self) -> None:
        try:
            self._start()
        except BaseException:
            if self._fd >= 0:
                os.close(self._fd)
                self._fd = -1
            if isinstance(self.ours, JobTree):
                self.ours.close()
            raise

    def _start(self) -> None:
        self._fd = fanotify.fanotify_init(
            fanotify.FAN_CLOEXEC | fanotify.FAN_NONBLOCK | fanotify.FAN_CLASS_NOTIF
            | fanotify.FAN_UNLIMITED_QUEUE, os.O_RDONLY | os.O_LARGEFILE | os.O_CLOEXEC)
        marked = 0
        for path in self.mountpoints:
            try:
                fanotify.fanotify_mark(self._fd, fanotify.FAN_MARK_ADD
                                       | fanotify.FAN_MARK_FILESYSTEM,
                                       fanotify.FAN_CLOSE_WRITE, path)
                marked += 1
            except OSError as err:
                self._problem(f"flush-behind cannot watch {path}: {err.strerror}")
        if not marked:
            raise SystemStateError(self.problems[0] if self.problems
                                   else "flush-behind has no filesystem to watch")
        self._thread = threading.Thread(target=self._run, name="flush-behind", daemon=True)
        old = signal.pthread_sigmask(signal.SIG_BLOCK, HELD)  # the thread inherits the mask
        try:
            self._thread.start()
        finally:
            signal.pthread_sigmask(signal.SIG_SETMASK, old)

    def _run(self) -> None:
        self.tid = tid = threading.get_native_id()
        try:  # the thread's own class: its writeback requests are made at it
            if self.policy.io is not None:
                priorities.ioprio_set(tid, self.policy.io)
        except OSError as err:
            self._problem(f"flush-behind could not take the job's IO class: {err}")
            return
        forks = self.ours.fileno() if isinstance(self.ours, JobTree) else None
        watched = [self._fd] if forks is None else [self._fd, forks]
        while not self._done.is_set():
            ready, _, _ = select.select(watched, [], [], POLL_S)
            if forks is not None and forks in ready:
                self.ours.read_forks()  # type: ignore[union-attr]
            if self._fd in ready:
                self._read()
        for _ in range(DRAIN_READS):  # what the job closed last, queued as it ended
            if not self._read():
                break

    def _read(self) -> bool:
        """One read of events, acted on; False when none was queued."""
        try:
            events = fanotify.parse_events(os.read(self._fd, READ_BYTES))
        except BlockingIOError:
            return False
        except (OSError, BackburnerError) as err:
            self._problem(str(err))
            return False
        for event in events:
            if event.fd < 0:
                continue
            try:
                if self.ours(event.pid):
                    pagecache.start_writeback(event.fd)
                    self.files += 1
                    self.bytes += os.fstat(event.fd).st_size
                else:
                    self.left += 1
            except OSError as err:
                self._problem(str(err))
            finally:
                os.close(event.fd)
        return bool(events)

    def _problem(self, text: str) -> None:
        if len(self.problems) < 5:
            self.problems.append(text)

    def summary(self) -> dict[str, Any]:
        """What it has written back so far (read while it runs: govern's status)."""
        out: dict[str, Any] = {"flushed_files": self.files, "flushed_bytes": self.bytes,
                               "flush_left_files": self.left}
        if self.problems:
            out["flush_problems"] = list(self.problems)
        return out

    def stop(self) -> dict[str, Any]:
        """The thread ended and the watch closed (and a `JobTree`'s events); what it wrote
        back."""
        self._done.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1
        if isinstance(self.ours, JobTree):
            self.ours.close()
        return self.summary()


class JobTree:
    """Whether a PID is `root`'s descendant (or `root`, with include_root), also once it
    has exited: a file closed by a process that ends right after (`cp`, `head` under a
    shell's `>`, every short-lived writer) is queued with the PID of a process /proc no
    longer knows. The process connector's fork events, subscribed before the tree is read
    from /proc (so that no fork falls between), name every process the tree makes; the
    thread reads them as they come (`fileno`, `read_forks`), so the socket never fills,
    and the kernel sends a fork's event before the child can run, so a parent's comes
    before its children's. A fork of a PID that is not a member's is a PID reused by
    another process: it stops being a member. Without the connector (not root, a
    container), or once it lost events to an overflow, a living process's /proc ancestry
    tells the PIDs the events do not."""

    def __init__(self, root: int, include_root: bool = True) -> None:
        self.root, self.include_root = root, include_root
        self.events: proc_events.Connector | None = None
        self.lost = False
        try:
            self.events = proc_events.Connector()
            self.events.narrow(proc_events.FORK)
        except (BackburnerError, OSError) as err:
            log.debug("flush-behind tells the job's processes by /proc alone: %s", err)
            self.close()
        self.members = {root, *procfs.descendants_of(root)}

    def fileno(self) -> int | None:
        return self.events.fileno() if self.events is not None else None

    def __call__(self, pid: int) -> bool:
        if self.events is not None:
            self.read_forks()
        if pid in self.members:
            return self.include_root or pid != self.root
        if self.events is not None and not self.lost:
            return False  # every fork of the tree was seen: not one of its processes
        return self.root in procfs.ancestors_of(pid)

    def read_forks(self) -> None:
        """What the connector has queued (non-blocking)."""
        assert self.events is not None
        members = self.members
        while True:
            batch = self.events.drain(limit=DRAIN_FORKS)
            for ev in batch.events:
                if ev.what != proc_events.FORK or ev.is_thread:
                    continue
                if ev.ptgid in members:
                    members.add(ev.tgid)
                else:
                    members.discard(ev.tgid)  # a member's PID reused elsewhere
            if batch.incomplete:  # lost forks: what lives below root is in /proc
                self.lost = True
                members.update(procfs.descendants_of(self.root))
            if len(batch.events) < DRAIN_FORKS and not batch.overflow:
                return

    def close(self) -> None:
        if self.events is not None:
            self.events.close()
            self.events = None


def tree_of(root: int, include_root: bool = True) -> JobTree:
    """`JobTree(root, include_root)`: made before the job's processes start, or with them
    running (those are read from /proc)."""
    return JobTree(root, include_root)


@contextmanager
def around_children(policy: grammar.Policy,
                    report: Callable[[str], None] = lambda _: None) -> Iterator[FlushBehind]:
    """Flush-behind for every process this one starts in the block (`run`'s job), on every
    filesystem on a block device; this process's own files are not the job's. At the end
    `report` (run -v) hears what it wrote back; what it could not do is a warning line."""
    watch = FlushBehind(block_filesystems(), policy, tree_of(os.getpid(), include_root=False))
    watch.start()
    try:
        yield watch
    finally:
        done = watch.stop()
        log.debug("flush-behind: %s", done)
        report(f"flush-behind: {quantities.plural(done['flushed_files'], 'file')} "
               f"({quantities.fmt_bytes(done['flushed_bytes'])}) written back as the job "
               "closed them")
        for problem in done.get("flush_problems", []):
            log.warning("warning: flush-behind: %s", problem)
