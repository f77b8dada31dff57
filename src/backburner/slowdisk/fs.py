"""The slowdisk file system: ``/disk.img`` served with modelled, seek-aware timing, and
``/stats.json``, its live counters (mfusepy's operations; `daemon` mounts it).

How a request is timed. On entry the handler reads the monotonic clock (``arrival``), takes
the model lock, asks :meth:`Disk.service` for the request's (start, finish) on the virtual
clock (start = max(arrival, finish of the previous request): one actuator, arrival order) and
releases the lock. It then does the real IO on the backing image and sleeps until ``finish``.
Because the lock is held only for the arithmetic, concurrent requests (libfuse runs a thread
per outstanding request, up to 32) are queued on the virtual clock immediately and each
thread sleeps until its own finish time; the real IO overlaps the modelled time. For a drive
that takes one command at a time (``dvd``) the handler waits in the host queue instead
(`hostqueue`).

Compensation. A reader also pays the FUSE round trip outside the handler (request delivery,
reply, wake-ups: ~0.1-0.3 ms in a VM) and the handler's sleeps wake up late by tens of
microseconds. So the handler aims to return ``roundtrip + wake`` before ``finish``: ``wake``
is an EWMA of the measured sleep overshoot and ``roundtrip`` the median of a few reads of
stats.json through the mount at start-up, by a process of its own (`roundtrip`), or
``--roundtrip-us``. This only moves each
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
roundtrip_compensation_s, calibrating (the round trip still being measured),
wake_compensation_s, backing_io_s, errors, inflight, max_inflight. Counters cover disk.img
requests only.

requests.log: every command the drive served (the last `model.LOG_COMMANDS`), a line
each: ``SEQ ARRIVAL START FINISH OFFSET LENGTH KIND CARRIED SEEK_S``: its number (the
count of commands before it: stats.json's ``requests`` taken before a start is the
number of the start's first), its arrival, start and finish in seconds since the daemon
started (the model's clock), the bytes it read or wrote, how the drive served it
(sequential, cache, skip, random: a seek; flat), how many requests the host merged into
it, and its seek time. A fresh snapshot per open, as stats.json's.

Read-only: ``--read-only``, or a profile whose medium is read-only (``dvd``), mounts with
``ro``, opens disk.img 0400 and refuses writes and opening for write with EROFS. The image
keeps its size: truncation is refused (EPERM), writes past the end get ENOSPC.
"""

from __future__ import annotations

import errno
import json
import os
import stat
import subprocess
import threading
import time
from collections.abc import Callable
from typing import Any

from .. import spawn
from ..base.errors import BackburnerError
from .drive import FlatProfile, Profile
from .hostqueue import HOST_QUEUE_DEPTH, HostQueue
from .image import ImageFile
from .model import Disk, Waiting

IMAGE_NAME = "disk.img"
STATS_NAME = "stats.json"
REQUESTS_NAME = "requests.log"
STATS_VERSION = 1
_IMAGE = "/" + IMAGE_NAME
_STATS = "/" + STATS_NAME
_REQUESTS = "/" + REQUESTS_NAME
#: A request returning this much later than its modelled finish counts as "late".
LATE_THRESHOLD_S = 1e-3
#: FUSE round trip assumed until the start-up probe has measured it.
DEFAULT_ROUNDTRIP_S = 100e-6
MAX_WAKE_COMPENSATION_S = 1e-3
WAKE_EWMA_WEIGHT = 0.125


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
        # held for a drive without command queueing, under the same lock as the model
        self._queue = HostQueue(disk, threading.Condition(self._lock), clock,
                                lambda: self._roundtrip_s + self._wake_s)
        self._snapshots: dict[int, bytes] = {}
        self._log_text: tuple[tuple[int, int], bytes] = ((-1, 0), b"")
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
        self._calibrating = False
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
            self._calibrating = True
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
        if path in (_STATS, _REQUESTS):
            now = time.time_ns()
            data = self.stats_bytes() if path == _STATS else self.requests_bytes()
            return {**base, "st_mode": stat.S_IFREG | 0o444, "st_nlink": 1,
                    "st_size": len(data), "st_mtime": now, "st_ctime": now}
        raise _oserror(errno.ENOENT)

    def readdir(self, path: str, fh: int) -> list[str]:
        if path != "/":
            raise _oserror(errno.ENOTDIR)
        return [".", "..", IMAGE_NAME, STATS_NAME, REQUESTS_NAME]

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
        if path in (_STATS, _REQUESTS):
            if write:
                raise _oserror(errno.EACCES)
            data = self.stats_bytes() if path == _STATS else self.requests_bytes()
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
        if path in (_STATS, _REQUESTS):
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
        if path in (_STATS, _REQUESTS):
            with self._lock:
                data = self._snapshots.get(fh)
            if data is None:
                data = self.stats_bytes() if path == _STATS else self.requests_bytes()
            return data[offset:offset + size]
        raise _oserror(errno.ENOENT)

    def write(self, path: str, data: bytes, offset: int, fh: int) -> int:
        if path != _IMAGE:
            raise _oserror(errno.EACCES if path in (_STATS, _REQUESTS) else errno.ENOENT)
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
            if self.disk.profile.command_queueing or self._queue.broken:
                return self.disk.service(offset, size, is_write, arrival)[1], 0.0
            me = Waiting(offset, size, is_write, arrival)
            done = self._queue.add(me)
            if done is None:
                return self.disk.service(offset, size, is_write, arrival)[1], 0.0
        t0 = self.clock()
        done.wait()
        assert me.finish is not None
        return me.finish, self.clock() - t0

    def _calibrate(self) -> None:
        """The round trip, measured by a process of our own (`roundtrip`: never by a thread
        of ours, which a SIGKILL would leave waiting on our own mount for good)."""
        try:
            self._measure_roundtrip()
        finally:
            self._calibrating = False

    def _measure_roundtrip(self) -> None:
        assert self.mountpoint is not None
        r, w = os.pipe()
        try:
            out = spawn.run_helper(spawn.python_module(
                "backburner.slowdisk.roundtrip", os.path.join(self.mountpoint, STATS_NAME)),
                stdout=w, stderr=subprocess.DEVNULL)
            os.close(w)
            w = -1
            text = os.read(r, 100).decode(errors="replace").strip()
        except (OSError, BackburnerError):  # never a thread traceback on stderr
            return
        finally:
            os.close(r)
            if w >= 0:
                os.close(w)
        try:
            rt = float(text) if out.ok else None
        except ValueError:
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
            "calibrating": self._calibrating,
            "wake_compensation_s": self._wake_s,
            "backing_io_s": backing,
            "errors": errors,
            "inflight": inflight,
            "max_inflight": max_inflight,
        }

    def requests_bytes(self) -> bytes:
        """requests.log (see the module docstring), made again only when a command was
        served since (a listing asks for its size often)."""
        with self._lock:
            key = (self.disk.counters.requests, self.disk.counters.merged)
            if key == self._log_text[0]:
                return self._log_text[1]
            served = list(self.disk.served)
        t0 = self._started
        text = "".join(
            f"{seq} {b.arrival - t0:.6f} {b.start - t0:.6f} {b.finish - t0:.6f} {b.offset} "
            f"{b.length} {b.kind} {carried} {b.seek_s:.6f}\n" for seq, b, carried in served
        ).encode()
        with self._lock:
            self._log_text = (key, text)
        return text

    def stats_bytes(self) -> bytes:
        return (json.dumps(self.stats(), indent=1, sort_keys=True) + "\n").encode()
