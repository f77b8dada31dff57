"""The slowdisk FUSE daemon: one image file served with modelled, seek-aware timing.

The mount contains exactly two files::

    disk.img     the image (size = image size); every read/write goes through the model
    stats.json   live counters, read-only, a fresh JSON snapshot per open

The lead's code puts a loop device (``losetup --direct-io=on``) on ``disk.img``, so the block
layer (IO schedulers, queue limits, ``iostat``) sees a real request queue with the timing of a
spinning disk, a DVD or an SD card.

How a request is timed. On entry the handler reads the monotonic clock (``arrival``), takes
the model lock, asks :meth:`Disk.service` for the request's (start, finish) on the virtual
clock (start = max(arrival, finish of the previous request): one actuator, arrival order) and
releases the lock. It then does the real IO on the backing image and sleeps until ``finish``.
Because the lock is held only for the arithmetic, concurrent requests (libfuse runs a thread
per outstanding request, up to 32) are queued on the virtual clock immediately and each
thread sleeps until its own finish time; the real IO overlaps the modelled time.

For a drive that takes one command at a time (``dvd``) the handler instead adds its request
to the host queue and waits (on an event of its own, outside the lock) until a dispatcher
thread has picked the command that carries it, when the drive is free (model.py, "Host
queue"; up to 128 requests, so up to 136 libfuse threads). A pick waits up to GATHER_S for
requests still on their way; behind a busy drive that can make a short command (a cache
hit) reply up to GATHER_S late, which ``late_requests`` and ``lateness_mean_s`` show.

Compensation. A reader also pays the FUSE round trip outside the handler (request delivery,
reply, wake-ups: ~0.1-0.3 ms in a VM) and the handler's sleeps wake up late by tens of
microseconds. So the handler aims to return ``roundtrip + wake`` before ``finish``: ``wake``
is an EWMA of the measured sleep overshoot and ``roundtrip`` the median of a few reads of
stats.json through the mount at start-up (or ``--roundtrip-us``). This only moves each
reply; the virtual clock (and so throughput under queueing) is unaffected.

stats.json keys: version, pid, profile, flat, image, size_bytes, read_only,
backing_o_direct, started_at (epoch s), uptime_s; model counters requests, reads, writes,
bytes, bytes_read, bytes_written, seeks, sequential, cache_hits, merged (requests the host
queue merged into the command before them), busy_s (modelled busy time),
utilisation (busy_s / uptime_s), queue_s; received (requests that reached the daemon:
``requests`` counts commands, which for ``dvd`` carry merged ones too), modelled_latency_s
(sum of modelled finish - arrival over received requests);
daemon measurements measured_latency_s (sum of return - entry), overhead_mean_s /
overhead_max_s (the daemon's own time per request: return - entry - requested sleep, i.e.
lock, model, real IO, Python and wake-up overshoot), lateness_mean_s (return - modelled
finish, negative by about the round-trip compensation), late_requests (> 1 ms late),
roundtrip_compensation_s, wake_compensation_s, backing_io_s, errors, inflight,
max_inflight. Counters cover disk.img requests only.

No page cache in between: the FUSE file is opened with ``direct_io`` (libfuse config
``direct_io``, i.e. FOPEN_DIRECT_IO), so every read reaches the daemon even for buffered
readers, and the backing image is read with O_DIRECT where the file system allows it (aligned
requests; unaligned ones use a second, buffered descriptor). No ``max_read`` option is passed:
libfuse 3.14 refuses to mount with it ("init() and fuse_session_new() requested different
maximum read size") unless init() also sets conn->max_read; it is not needed, the kernel
already splits requests at max_pages (1 MiB with libfuse 3). ``max_idle_threads`` is passed
because without it libfuse 3.14 prints a spurious "Ignoring invalid max threads value".

Read-only: ``--read-only``, or a profile whose medium is read-only (``dvd``), mounts with
``ro``, opens disk.img 0400 and refuses writes and opening for write with EROFS. The image
keeps its size: truncation is refused (EPERM), writes past the end get ENOSPC.

Why mfusepy: it is a maintained ctypes binding (pure Python: no compiler, no build
dependencies) with libfuse 3 support and the familiar fusepy high-level API. pyfuse3 needs a
compiled extension (Cython + libfuse3 headers) and trio; fusepy has been unmaintained since
2018 and only speaks libfuse 2.

Entry point::

    python -m backburner.slowdisk.daemon --profile NAME --image PATH --mountpoint DIR
                                         [--read-only] [--roundtrip-us US] [--log FILE]

The daemon always runs in the foreground: the process that starts it (backburner's
`system.Daemon`, through `spawn`) owns it, journals its PID and stops it; it never forks
itself away. On SIGTERM/SIGINT/SIGHUP libfuse leaves its loop, in-flight requests complete,
the file system is unmounted and the process exits with status 0. Errors are one line on
stderr and a sysexits-style status.
"""

from __future__ import annotations

import argparse
import ctypes
import errno
import json
import logging
import mmap
import os
import stat
import sys
import threading
import time
from collections.abc import Callable
from typing import Any

from ..errors import (
    BackburnerError,
    NotFoundError,
    SystemStateError,
    UnavailableError,
    UsageError,
)
from .model import Disk, FlatProfile, Profile, Waiting
from .profiles import get_profile, profile_names

log = logging.getLogger(__name__)

IMAGE_NAME = "disk.img"
STATS_NAME = "stats.json"
STATS_VERSION = 1
_IMAGE = "/" + IMAGE_NAME
_STATS = "/" + STATS_NAME
#: A request returning this much later than its modelled finish counts as "late".
LATE_THRESHOLD_S = 1e-3
#: FUSE round trip assumed until the start-up probe has measured it.
DEFAULT_ROUNDTRIP_S = 100e-6
MAX_ROUNDTRIP_COMPENSATION_S = 1e-3
MAX_WAKE_COMPENSATION_S = 1e-3
WAKE_EWMA_WEIGHT = 0.125
PR_SET_TIMERSLACK = 29
#: Requests the host may queue for a drive that takes one command at a time: the loop
#: device's queue depth (its hw_queue_depth, 128 by default).
HOST_QUEUE_DEPTH = 128
#: How long the host queue waits for requests still on their way before it picks a command
#: (none continues the last one): the daemon's threads deliver a burst the kernel issued in
#: order up to a few milliseconds apart, in another order (measured: 2.5 ms on 2 vCPUs).
GATHER_S = 3e-3
#: CPU priority of the daemon when it may raise it (root): -10, like other IO helpers.
DAEMON_NICE = -10


class ImageFile:
    """The backing image: O_DIRECT for aligned requests where possible, buffered otherwise."""

    def __init__(self, path: str, writable: bool, identity: str | None = None) -> None:
        self.path = path
        acc = os.O_RDWR if writable else os.O_RDONLY
        try:
            self.fd = os.open(path, acc | os.O_CLOEXEC | os.O_NOFOLLOW)
        except FileNotFoundError:
            raise NotFoundError(f"image {path!r} does not exist") from None
        except OSError as e:
            raise SystemStateError(f"cannot open image {path!r}: {e.strerror}") from None
        st = os.fstat(self.fd)
        if identity is not None and f"{st.st_dev}:{st.st_ino}" != identity:
            os.close(self.fd)
            raise SystemStateError(f"image {path!r} was replaced after it was checked",
                                   "nothing was served; check who can write its directory")
        self.size = os.lseek(self.fd, 0, os.SEEK_END)
        self.dfd: int | None = None
        self.align = 0
        self._local = threading.local()
        try:
            self.dfd = os.open(path, acc | os.O_CLOEXEC | os.O_DIRECT | os.O_NOFOLLOW)
        except OSError:
            return
        if os.fstat(self.dfd)[1:3] != st[1:3]:  # (ino, dev): the same file as fd
            os.close(self.dfd)
            self.dfd = None
            return
        for align in (512, 4096):
            if self.size < align:
                break
            try:
                with self._aligned(align) as mv:
                    os.preadv(self.dfd, [mv], 0)
            except OSError:
                continue
            self.align = align
            return
        os.close(self.dfd)
        self.dfd = None

    class _View:
        def __init__(self, buf: mmap.mmap, n: int) -> None:
            self.mv = memoryview(buf)[:n]

        def __enter__(self) -> memoryview:
            return self.mv

        def __exit__(self, *exc: object) -> None:
            self.mv.release()

    def _aligned(self, n: int) -> ImageFile._View:
        """A page-aligned per-thread buffer of at least ``n`` bytes."""
        buf = getattr(self._local, "buf", None)
        if buf is None or len(buf) < n:
            if buf is not None:
                buf.close()
            size = max(n, 1 << 20)
            size = (size + mmap.PAGESIZE - 1) // mmap.PAGESIZE * mmap.PAGESIZE
            buf = self._local.buf = mmap.mmap(-1, size)
        return ImageFile._View(buf, n)

    def _direct_ok(self, offset: int, n: int) -> bool:
        return self.dfd is not None and offset % self.align == 0 and n % self.align == 0

    def read(self, offset: int, n: int) -> bytes:
        if self._direct_ok(offset, n):
            assert self.dfd is not None
            with self._aligned(n) as mv:
                got = 0
                while got < n:
                    k = os.preadv(self.dfd, [mv[got:]], offset + got)
                    if k <= 0:
                        break
                    got += k
                return bytes(mv[:got])
        chunks = []
        got = 0
        while got < n:
            chunk = os.pread(self.fd, n - got, offset + got)
            if not chunk:
                break
            chunks.append(chunk)
            got += len(chunk)
        return b"".join(chunks)

    def write(self, offset: int, data: bytes) -> int:
        n = len(data)
        if self._direct_ok(offset, n):
            assert self.dfd is not None
            with self._aligned(n) as mv:
                mv[:] = data
                done = 0
                while done < n:
                    done += os.pwritev(self.dfd, [mv[done:]], offset + done)
            return n
        done = 0
        view = memoryview(data)
        while done < n:
            done += os.pwrite(self.fd, view[done:], offset + done)
        return n

    def fsync(self) -> None:
        os.fsync(self.fd)

    def close(self) -> None:
        for fd in (self.fd, self.dfd):
            if fd is not None:
                try:
                    os.close(fd)
                except OSError:
                    pass
        self.dfd = None


def _oserror(code: int) -> OSError:
    return OSError(code, os.strerror(code))


class SlowDiskFS:
    """mfusepy operations: ``/disk.img`` with modelled timing and ``/stats.json``.

    Deliberately not a subclass of ``mfusepy.Operations`` so that importing this module does
    not load libfuse; mfusepy registers only the callbacks defined here.
    """

    use_ns = True  # timestamps in integer nanoseconds (mfusepy >= 3)

    def __init__(
        self,
        disk: Disk,
        image: ImageFile,
        *,
        read_only: bool,
        mountpoint: str | None = None,
        roundtrip_s: float | None = None,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
        on_ready: Callable[[], None] | None = None,
    ) -> None:
        self.disk = disk
        self.image = image
        self.read_only = read_only
        self.mountpoint = mountpoint
        self.clock = clock
        self.sleep = sleep
        self.on_ready = on_ready
        self.ready = False  # set once libfuse has mounted and called init
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._waiting: list[Waiting] = []  # held for a drive without command queueing
        self._done: dict[int, threading.Event] = {}  # id(waiting) -> set once dispatched
        self._dispatcher: threading.Thread | None = None
        self._broken = False  # the host queue failed: arrival order from then on
        self._snapshots: dict[int, bytes] = {}
        self._next_fh = 1
        self._started = clock()
        self._wall_started = time.time()
        self._inflight = 0
        self._max_inflight = 0
        self._measured_s = 0.0  # sum of (return - entry) in the handler
        self._own_s = 0.0  # sum of (return - entry - requested sleep): the daemon's own time
        self._own_max_s = 0.0
        self._lateness_s = 0.0  # sum of (return - modelled finish)
        self._late = 0
        self._received = 0  # requests that reached the daemon (commands may carry several)
        self._modelled_s = 0.0  # sum of (modelled finish - arrival) per received request
        self._backing_io_s = 0.0
        self._errors = 0
        # Timing compensation: the handler aims to return ``roundtrip`` + ``wake`` before the
        # modelled finish. ``wake`` is an EWMA of how late sleeps wake up (measured in the
        # handler); ``roundtrip`` is the FUSE request/reply path outside the handler, which the
        # reader pays on top (probed at start-up through the mount, or given).
        self._roundtrip_fixed = roundtrip_s is not None
        self._roundtrip_s = roundtrip_s if roundtrip_s is not None else DEFAULT_ROUNDTRIP_S
        self._wake_s = 0.0
        st = os.stat(image.path)
        self._times = {k: getattr(st, k + "_ns") for k in ("st_atime", "st_mtime", "st_ctime")}

    # -- lifecycle ----------------------------------------------------------------------------

    def init_with_config(self, conn: Any, config: Any) -> None:
        """libfuse's init with the connection: a drive without command queueing needs to see
        every request the host holds (its queue is modelled here), not only the 12 the
        kernel lets a FUSE server have in flight by default."""
        if conn is not None and not self.disk.profile.command_queueing:
            conn.max_background = HOST_QUEUE_DEPTH
            conn.congestion_threshold = HOST_QUEUE_DEPTH * 3 // 4
        self.init("/")

    def init(self, path: str) -> None:
        self.ready = True
        self._started = self.clock()
        self._wall_started = time.time()
        if not self._roundtrip_fixed and self.mountpoint is not None:
            # Not here: init runs before the loop serves requests; probing now would deadlock.
            threading.Thread(target=self._calibrate, name="slowdisk-probe", daemon=True).start()
        if self.on_ready is not None:
            self.on_ready()

    # -- metadata -----------------------------------------------------------------------------

    def getattr(self, path: str, fh: int | None = None) -> dict[str, Any]:
        base = {"st_uid": os.getuid(), "st_gid": os.getgid(), **self._times}
        if path == "/":
            return {**base, "st_mode": stat.S_IFDIR | 0o755, "st_nlink": 2}
        if path == _IMAGE:
            mode = 0o400 if self.read_only else 0o600
            return {**base, "st_mode": stat.S_IFREG | mode, "st_nlink": 1,
                    "st_size": self.image.size}
        if path == _STATS:
            now = time.time_ns()
            return {**base, "st_mode": stat.S_IFREG | 0o444, "st_nlink": 1,
                    "st_size": len(self.stats_bytes()), "st_mtime": now, "st_ctime": now}
        raise _oserror(errno.ENOENT)

    def readdir(self, path: str, fh: int) -> list[str]:
        if path != "/":
            raise _oserror(errno.ENOTDIR)
        return [".", "..", IMAGE_NAME, STATS_NAME]

    def statfs(self, path: str) -> dict[str, int]:
        bsize = 4096
        return {"f_bsize": bsize, "f_frsize": bsize, "f_blocks": -(-self.image.size // bsize),
                "f_bfree": 0, "f_bavail": 0, "f_files": 2, "f_ffree": 0, "f_namemax": 255}

    def open(self, path: str, flags: int) -> int:
        write = (flags & os.O_ACCMODE) != os.O_RDONLY
        if path == _IMAGE:
            if write and self.read_only:
                raise _oserror(errno.EROFS)
            return 0
        if path == _STATS:
            if write:
                raise _oserror(errno.EACCES)
            data = self.stats_bytes()
            with self._lock:
                fh = self._next_fh
                self._next_fh += 1
                self._snapshots[fh] = data
            return fh
        raise _oserror(errno.ENOENT)

    def release(self, path: str, fh: int) -> int:
        with self._lock:
            self._snapshots.pop(fh, None)
        return 0

    def truncate(self, path: str, length: int, fh: int | None = None) -> int:
        if path == _IMAGE:
            if self.read_only:
                raise _oserror(errno.EROFS)
            if length == self.image.size:
                return 0
            raise _oserror(errno.EPERM)  # the image has a fixed size
        if path == _STATS:
            raise _oserror(errno.EACCES)
        raise _oserror(errno.ENOENT)

    def flush(self, path: str, fh: int) -> int:
        return 0

    def fsync(self, path: str, datasync: int, fh: int) -> int:
        if path == _IMAGE and not self.read_only:
            self.image.fsync()
        return 0

    # -- data ---------------------------------------------------------------------------------

    def read(self, path: str, size: int, offset: int, fh: int) -> bytes:
        if path == _IMAGE:
            return self._timed(False, offset, size, None)
        if path == _STATS:
            with self._lock:
                data = self._snapshots.get(fh)
            if data is None:
                data = self.stats_bytes()
            return data[offset:offset + size]
        raise _oserror(errno.ENOENT)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if path != _IMAGE:
            raise _oserror(errno.EACCES if path == _STATS else errno.ENOENT)
        if self.read_only:
            raise _oserror(errno.EROFS)
        if offset >= self.image.size:
            raise _oserror(errno.ENOSPC)
        if offset + len(data) > self.image.size:
            data = data[: self.image.size - offset]
        return self._timed(True, offset, len(data), data)

    def _timed(self, is_write: bool, offset: int, size: int, data: bytes | None) -> Any:
        arrival = self.clock()
        if offset >= self.image.size or size <= 0:
            return b""
        size = min(size, self.image.size - offset)
        finish, queued = self._schedule(offset, size, is_write, arrival)
        ok = False
        io_s = 0.0
        slept = 0.0
        try:
            io_start = self.clock()
            if is_write:
                assert data is not None
                result: Any = self.image.write(offset, data)
            else:
                result = self.image.read(offset, size)
            io_s = self.clock() - io_start
            ok = True
        finally:
            target = finish - self._roundtrip_s - self._wake_s
            remaining = target - self.clock()
            if remaining > 0:
                self.sleep(remaining)
                slept = remaining
                overshoot = min(max(self.clock() - target, 0.0), MAX_WAKE_COMPENSATION_S)
                self._wake_s += (overshoot - self._wake_s) * WAKE_EWMA_WEIGHT
            done = self.clock()
            own = done - arrival - slept - queued
            with self._lock:
                self._inflight -= 1
                self._received += 1
                self._modelled_s += finish - arrival
                self._measured_s += done - arrival
                if ok:
                    self._backing_io_s += io_s
                else:
                    self._errors += 1
                self._own_s += own
                self._own_max_s = max(self._own_max_s, own)
                self._lateness_s += done - finish
                if done - finish > LATE_THRESHOLD_S:
                    self._late += 1
        return result

    def _schedule(self, offset: int, size: int, is_write: bool, arrival: float
                  ) -> tuple[float, float]:
        """The request's finish on the virtual clock, and how long it waited in the host
        queue (modelled waiting, like the sleep: not the daemon's own time). A drive that
        queues commands gets it at once, in the order the threads take the lock; one that
        takes a command at a time gets it from the host queue's dispatcher thread when the
        drive is free, as the host's elevator picks (:meth:`Disk.next_command`): in the
        order the kernel sorted and merged, which the threads' race cannot change."""
        with self._lock:
            self._inflight += 1
            self._max_inflight = max(self._max_inflight, self._inflight)
            if self.disk.profile.command_queueing or self._broken:
                return self.disk.service(offset, size, is_write, arrival)[1], 0.0
            me = Waiting(offset, size, is_write, arrival)
            done = threading.Event()
            self._waiting.append(me)
            self._done[id(me)] = done
            if self._dispatcher is None and not self._start_dispatcher():
                self._waiting.remove(me)
                del self._done[id(me)]
                return self.disk.service(offset, size, is_write, arrival)[1], 0.0
            self._cond.notify()
        t0 = self.clock()
        done.wait()
        assert me.finish is not None
        return me.finish, self.clock() - t0

    def _start_dispatcher(self) -> bool:
        """Start the host queue's thread (under the lock); False, and arrival order from
        then on, if no thread can be started (a pids limit with this many FUSE threads)."""
        thread = threading.Thread(target=self._dispatch_loop, name="slowdisk-host-queue",
                                  daemon=True)
        try:
            thread.start()
        except RuntimeError as err:
            log.error("slowdisk host queue not started (%s); serving requests in arrival "
                      "order", err)
            self._broken = True
            return False
        self._dispatcher = thread
        return True

    def _dispatch_loop(self) -> None:
        """The host queue: one thread picks every command (waking only the requests it
        serves), so a pick never waits for a crowd of woken threads to take the lock. Should
        it fail, every request is served in arrival order from then on: a FUSE daemon whose
        requests never return would hang the kernel's IO on the loop device."""
        try:
            self._pick_forever()
        except BaseException:  # noqa: BLE001 - logged; the queue degrades, IO goes on
            log.exception("slowdisk host queue failed; serving requests in arrival order")
            with self._cond:
                self._broken = True
                for w in self._waiting:
                    w.finish = self.disk.service(w.offset, w.length, w.is_write, w.arrival)[1]
                    self._done.pop(id(w)).set()
                self._waiting.clear()

    def _pick_forever(self) -> None:
        with self._cond:
            while True:
                if not self._waiting:
                    self._cond.wait()
                    continue
                wait = self._until_dispatch(self.clock())
                if wait > 0:
                    self._cond.wait(wait)
                    continue
                group = self.disk.next_command(self._waiting, self.clock())
                self.disk.dispatch(group, min(w.arrival for w in group))
                for w in group:
                    self._waiting.remove(w)
                    self._done.pop(id(w)).set()

    def _until_dispatch(self, now: float) -> float:
        """Seconds until the host queue's next command may be picked. The kernel issues
        requests in its order, but the daemon's threads deliver them shuffled by up to a few
        hundred microseconds, so a pick waits GATHER_S after the drive is free (or after the
        first request, if it was idle) for the rest: unless a waiting request continues the
        last command (the elevator takes it whatever comes), and on an idle drive never so
        long that a lone request's reply would be late. A command starts when the drive is
        free or the first of its own requests came, whichever is later."""
        free = self.disk.busy_until
        if now < free:
            return free - now
        end = self.disk.last_end
        if any(w.offset == end for w in self._waiting):
            return 0.0
        first = min(self._waiting, key=lambda w: w.arrival)
        gather = GATHER_S
        if first.arrival >= free:
            cost = self.disk.cost_breakdown(first.offset, first.length, first.is_write,
                                            first.arrival).service_s
            gather = min(gather, cost - self._roundtrip_s - self._wake_s)
        return max(free, first.arrival) + gather - now

    def probe_roundtrip(self, probes: int = 15, gap_s: float = 0.003) -> float | None:
        """Median time of a FUSE round trip (a stats.json read through the mount).

        Run from a thread after the mount is serving. The gap between probes lets the CPUs go
        idle, as they do between disk requests, so wake-up latency is included.
        """
        if self.mountpoint is None:
            return None
        times = []
        try:
            fd = os.open(os.path.join(self.mountpoint, STATS_NAME), os.O_RDONLY | os.O_CLOEXEC)
        except OSError:
            return None
        try:
            for _ in range(probes):
                time.sleep(gap_s)
                t0 = time.perf_counter()
                os.pread(fd, 1, 0)
                times.append(time.perf_counter() - t0)
        except OSError:
            return None
        finally:
            try:
                os.close(fd)
            except OSError:
                pass  # unmounted under us (shutting down): close reports ENOTCONN
        times.sort()
        median = times[len(times) // 2]
        return min(median, MAX_ROUNDTRIP_COMPENSATION_S)

    def _calibrate(self) -> None:
        try:
            rt = self.probe_roundtrip()
        except OSError:  # never a thread traceback on stderr
            return
        if rt is not None and not self._roundtrip_fixed:
            self._roundtrip_s = rt

    # -- stats --------------------------------------------------------------------------------

    def stats(self) -> dict[str, Any]:
        """A consistent snapshot of the counters (see the module docstring for the keys)."""
        p: Profile = self.disk.profile
        with self._lock:
            c = self.disk.counters.as_dict()
            inflight, max_inflight = self._inflight, self._max_inflight
            measured, own, own_max, lateness = (
                self._measured_s, self._own_s, self._own_max_s, self._lateness_s)
            late, backing, errors = self._late, self._backing_io_s, self._errors
            received, modelled = self._received, self._modelled_s
        uptime = max(self.clock() - self._started, 0.0)
        n = c["requests"]
        return {
            "version": STATS_VERSION,
            "pid": os.getpid(),
            "profile": p.name,
            "flat": isinstance(p, FlatProfile),
            "image": self.image.path,
            "size_bytes": self.image.size,
            "read_only": self.read_only,
            "backing_o_direct": self.image.dfd is not None,
            "started_at": self._wall_started,
            "uptime_s": uptime,
            "requests": n,
            "reads": c["reads"],
            "writes": c["writes"],
            "bytes": c["bytes_read"] + c["bytes_written"],
            "bytes_read": c["bytes_read"],
            "bytes_written": c["bytes_written"],
            "seeks": c["seeks"],
            "sequential": c["sequential"],
            "cache_hits": c["cache_hits"],
            "merged": c["merged"],
            "received": received,
            "busy_s": c["busy_s"],
            "utilisation": c["busy_s"] / uptime if uptime > 0 else 0.0,
            "queue_s": c["queue_s"],
            "modelled_latency_s": modelled,
            "measured_latency_s": measured,
            "overhead_mean_s": own / received if received else 0.0,
            "overhead_max_s": own_max,
            "lateness_mean_s": lateness / received if received else 0.0,
            "late_requests": late,
            "roundtrip_compensation_s": self._roundtrip_s,
            "wake_compensation_s": self._wake_s,
            "backing_io_s": backing,
            "errors": errors,
            "inflight": inflight,
            "max_inflight": max_inflight,
        }

    def stats_bytes(self) -> bytes:
        return (json.dumps(self.stats(), indent=1, sort_keys=True) + "\n").encode()


# -- running it -------------------------------------------------------------------------------


def _set_timer_slack(ns: int = 1000) -> None:
    """Tighter sleeps: threads created later (libfuse workers) inherit the timer slack."""
    try:
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(PR_SET_TIMERSLACK, ctypes.c_ulong(ns), ctypes.c_ulong(0),
                   ctypes.c_ulong(0), ctypes.c_ulong(0))
    except (OSError, AttributeError):
        pass


def _raise_priority(nice: int = DAEMON_NICE) -> None:
    """Run the daemon (and the libfuse workers, which inherit it) at a higher CPU priority.

    An emulated disk should not slow down because the machine is busy computing; as root we
    lower our nice value. Best effort: unprivileged, this silently does nothing.
    """
    try:
        if os.getpriority(os.PRIO_PROCESS, 0) > nice:
            os.setpriority(os.PRIO_PROCESS, 0, nice)
    except OSError:
        pass


def fuse_options(read_only: bool, profile: Profile | None = None) -> dict[str, Any]:
    """Options handed to mfusepy.FUSE (besides foreground): a thread per request the
    daemon may hold (the host queue of a drive without command queueing)."""
    host_queue = profile is not None and not profile.command_queueing
    opts: dict[str, Any] = {
        "fsname": "slowdisk",
        "subtype": "slowdisk",
        "direct_io": True,  # libfuse 3: fuse_config.direct_io -> FOPEN_DIRECT_IO on every open
        "default_permissions": True,
        "max_threads": HOST_QUEUE_DEPTH + 8 if host_queue else 32,
        "max_idle_threads": 8,
    }
    if os.geteuid() == 0:
        opts["allow_other"] = True  # so a non-root `slowdisk stats` can read stats.json
    if read_only:
        opts["ro"] = True
    return opts


def _check_environment(image: str, mountpoint: str) -> None:
    if not os.path.exists("/dev/fuse"):
        raise UnavailableError("/dev/fuse does not exist", "load the fuse module: modprobe fuse")
    if not os.path.exists(image):
        raise NotFoundError(f"image {image!r} does not exist")
    st = os.lstat(image)
    if not (stat.S_ISREG(st.st_mode) or stat.S_ISBLK(st.st_mode)):
        raise UsageError(f"image {image!r} is not a regular file")
    if not os.path.isdir(mountpoint):
        raise NotFoundError(f"mount point {mountpoint!r} is not a directory")
    if os.path.ismount(mountpoint):
        raise SystemStateError(f"{mountpoint!r} is already a mount point")


def _load_mfusepy() -> Any:
    """Import mfusepy, pointing it at libfuse 3 directly.

    Without FUSE_LIBRARY_PATH mfusepy asks ctypes.util.find_library for "fuse" then "fuse3",
    which runs gcc/ld (~0.3 s) and would pick libfuse 2 if that is installed too.
    """
    if not os.environ.get("FUSE_LIBRARY_PATH"):
        try:
            ctypes.CDLL("libfuse3.so.3")
            os.environ["FUSE_LIBRARY_PATH"] = "libfuse3.so.3"
        except OSError:
            pass
    import mfusepy

    return mfusepy


def _mount(fs: SlowDiskFS, mountpoint: str, read_only: bool) -> None:
    try:
        mfusepy = _load_mfusepy()
    except (ImportError, OSError) as e:
        raise UnavailableError(f"cannot load mfusepy/libfuse3: {e}",
                               "install the fuse3 package and mfusepy") from None
    logging.getLogger("fuse").setLevel(logging.ERROR)
    logging.getLogger("mfusepy").setLevel(logging.ERROR)
    opts = fuse_options(read_only, fs.disk.profile)
    if (mfusepy.fuse_version_major, mfusepy.fuse_version_minor) < (3, 12):
        opts.pop("max_threads")
    _set_timer_slack()
    _raise_priority()
    try:
        mfusepy.FUSE(fs, mountpoint, foreground=True, **opts)
    except RuntimeError as e:
        # fuse_main_real returns 8 when its loop ended with an error, which in libfuse 3 includes
        # the normal way out: SIGTERM/SIGINT/SIGHUP set the session error to the signal number.
        # After a successful mount that is a clean shutdown (libfuse has already unmounted).
        if fs.ready and str(e) == "8":
            return
        # Otherwise mounting failed (libfuse printed why on stderr): 1-7 in fuse_main_real.
        raise SystemStateError(
            f"FUSE mount on {mountpoint!r} failed (libfuse status {e})"
        ) from None


def serve(profile: Profile, image_path: str, mountpoint: str, *, read_only: bool = False,
          roundtrip_s: float | None = None, image_id: str | None = None) -> int:
    """Mount and serve until unmounted or signalled. Returns the exit status (0)."""
    image_path = os.path.abspath(image_path)
    mountpoint = os.path.abspath(mountpoint)
    read_only = read_only or profile.read_only_medium
    _check_environment(image_path, mountpoint)
    image = ImageFile(image_path, writable=not read_only, identity=image_id)
    if image.size <= 0:
        image.close()
        raise UsageError(f"image {image_path!r} is empty")
    disk = Disk(profile, image.size)
    fs = SlowDiskFS(disk, image, read_only=read_only, mountpoint=mountpoint,
                    roundtrip_s=roundtrip_s)
    try:
        _mount(fs, mountpoint, read_only)
    finally:
        image.close()
    return 0


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


def build_parser() -> argparse.ArgumentParser:
    p = _Parser(
        prog="python -m backburner.slowdisk.daemon",
        description="Serve an image file through FUSE with a seek-aware slow-disk timing model.",
    )
    p.add_argument("--profile", required=True,
                   help="timing profile: " + ", ".join(profile_names()))
    p.add_argument("--image", required=True, help="backing image file (not a symlink)")
    p.add_argument("--image-id", metavar="DEV:INO",
                   help="serve the image only if it is this file (device and inode numbers)")
    p.add_argument("--mountpoint", required=True, help="empty directory to mount on")
    p.add_argument("--read-only", action="store_true", help="refuse writes (EROFS)")
    p.add_argument("--log", metavar="FILE",
                   help="append stdout and stderr to FILE (a daemon started by backburner must "
                   "not hold its parent's terminal or pipes open)")
    p.add_argument("--roundtrip-us", type=float, default=None, metavar="US",
                   help="FUSE round trip to compensate for, in microseconds "
                   "(default: measured through the mount at start-up; 0 = none)")
    return p


def _redirect_output(path: str) -> None:
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND | os.O_CLOEXEC, 0o600)
    except OSError as e:
        raise NotFoundError(f"cannot open log file {path!r}: {e.strerror}") from None
    sys.stdout.flush()
    sys.stderr.flush()
    for target in (1, 2):
        os.dup2(fd, target)
    os.close(fd)


def main(argv: list[str] | None = None) -> int:
    try:
        args = build_parser().parse_args(argv)
        if args.log:
            _redirect_output(args.log)
        profile = get_profile(args.profile)
        roundtrip = None
        if args.roundtrip_us is not None:
            if not 0 <= args.roundtrip_us <= MAX_ROUNDTRIP_COMPENSATION_S * 1e6:
                raise UsageError("--roundtrip-us must be between 0 and 1000")
            roundtrip = args.roundtrip_us / 1e6
        return serve(profile, args.image, args.mountpoint, read_only=args.read_only,
                     roundtrip_s=roundtrip, image_id=args.image_id)
    except BackburnerError as e:
        print(f"slowdisk: {e}", file=sys.stderr)
        return e.exit_status


if __name__ == "__main__":
    sys.exit(main())
