"""The host queue of a drive that takes one command at a time (``dvd``).

A request's handler adds it to the queue and waits (on an event of its own, outside the
lock) until the dispatcher thread has picked the command that carries it, when the drive is
free (model.py, "Host queue"; up to HOST_QUEUE_DEPTH requests, so that many libfuse
threads and a few more). A pick waits up to GATHER_S for requests still on their way; behind a busy
drive that can make a short command (a cache hit) reply up to GATHER_S late, which the
``late_requests`` and ``lateness_mean_s`` counters of stats.json show.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from .model import Disk, Waiting

log = logging.getLogger(__name__)

#: Requests the host may queue for a drive that takes one command at a time: the loop
#: device's queue depth (its hw_queue_depth, 128 by default).
HOST_QUEUE_DEPTH = 128
#: How long the host queue waits for requests still on their way before it picks a command
#: (none continues the last one): the daemon's threads deliver a burst the kernel issued in
#: order up to a few milliseconds apart, in another order (measured: 2.5 ms on 2 vCPUs).
GATHER_S = 3e-3


class HostQueue:
    """Requests held for the drive, and the one thread that dispatches them. It shares the
    file system's lock (`cond`), which also guards the disk model."""

    def __init__(self, disk: Disk, cond: threading.Condition, clock: Callable[[], float],
                 early: Callable[[], float]) -> None:
        self.disk = disk
        self._cond = cond
        self.clock = clock
        self.early = early  # how long before its modelled finish a reply is aimed at
        self._waiting: list[Waiting] = []
        self._done: dict[int, threading.Event] = {}  # id(waiting) -> set once dispatched
        self._dispatcher: threading.Thread | None = None
        self.broken = False  # the queue failed: arrival order from then on

    def add(self, me: Waiting) -> threading.Event | None:
        """Queue a request (under the lock): the event set once it is dispatched (its
        `finish` is then set); None if no dispatcher could be started."""
        done = threading.Event()
        self._waiting.append(me)
        self._done[id(me)] = done
        if self._dispatcher is None and not self._start_dispatcher():
            self._waiting.remove(me)
            del self._done[id(me)]
            return None
        self._cond.notify()
        return done

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
            self.broken = True
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
                self.broken = True
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
            gather = min(gather, cost - self.early())
        return max(free, first.arrival) + gather - now
