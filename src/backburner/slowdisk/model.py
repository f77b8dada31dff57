"""Seek-aware timing model of a slow disk: pure arithmetic, no I/O, no sleeping.

A :class:`Disk` is one actuator with a virtual clock. Requests are served one at a time in
arrival order (FIFO, no command reordering: the IO scheduler above the loop device does the
ordering), except on a drive that takes one command at a time (``command_queueing=False``,
an ATAPI DVD drive): there the host keeps the requests that wait for the drive and hands it
the next one itself, and :meth:`Disk.next_command` says which (see "Host queue" below). For
each command the model computes a deterministic *expected* service time::

    start   = max(now, busy_until)                       # queue behind earlier requests
    service = command overhead                           # firmware / controller
            + seek(distance from the head position)      # only if not sequential
            + rotational latency (half a revolution)     # only if not sequential
            + length / rate(offset)                      # zoned media transfer
            (+ write overhead, + random-write penalty for writes)
    finish  = start + service

Geometry. The image is mapped onto the whole stroke of the disk: offset 0 is one edge and
the last byte the other, so even a small image shows full-disk seek behaviour. For hard
disks offset 0 is the OUTER edge (LBA 0 is on the outer tracks, fastest zone); for a CAV
optical drive (DVD) the disc is written from the inside out, so offset 0 is the INNER edge
and the rate is highest at the END of the image. ``Profile.outer_at_start`` says which.
The media rate varies linearly with offset between ``rate_outer`` and ``rate_inner``
(a first-order model of zoned recording / CAV, where rate grows with radius).

Optical geometry (``Profile.optical``, the ``dvd`` profile). A burned or pressed disc is
written from the inner radius outwards along a spiral of constant track pitch, so the
radius of byte ``o`` is ``r(o) = sqrt(o / medium * (r_outer^2 - r_inner^2) + r_inner^2)``
and ``medium`` is the capacity of a full disc, not the image: an image smaller than a disc
occupies only the inner rings, as it would on a real burned disc (a 1 GB image ends at
34 mm of 58: its seeks are short and it never reaches the fast outer zone). An image larger
than ``medium`` is spread over the whole radius. The rate grows linearly with the radius
(CAV: constant angular velocity, constant linear density). Seeks are charged by *radial*
distance on a two-regime curve, ``short_s + short_s_per_mm * d`` below ``short_max_mm`` and
``long_s + long_s_per_mm * d`` from there on (the shape Ruemmler & Wilkes describe for
disks; the constants are measured on a real DVD drive, see profiles.py); note that the
measured curve steps *down* at ``short_max_mm`` (the drive switches to its fast long-seek
mode), which is kept as measured. The drive reads whole ECC blocks (``block_bytes``, 32 KiB
on a DVD): a read costs the media time of the blocks it touches, and the head ends at the
end of the last one. There is no read-through of a forward gap: a read ahead of what the
drive has already buffered is a seek (measured: even a one-track jump costs the short-seek
constant).

Rotational latency. A non-sequential access on a rotating disk waits, on average, half a
revolution: ``30 / rpm`` seconds. We charge the expected value (deterministic), not a draw.

Sequential access and the drive cache. The head position is the end of the last request
(plus whatever the drive read ahead). A request starting exactly there is *sequential*: no
seek, no rotational latency. With ``cache_bytes > 0`` the drive keeps the most recently read
``cache_bytes`` in a segment and, while idle after a read, keeps reading ahead at media rate
up to ``cache_bytes`` beyond the end of the last request, where it stops: a reader slower
than the media never has its next data evicted by the read-ahead itself. A read that starts
inside that segment is a *cache hit*: ``cache_hit_overhead + length / interface_rate`` (any
part beyond the segment streams on from the head at media rate). On a rotating disk a
short forward jump is served by letting the platter run past the gap (``gap / rate``) when
that is cheaper than seek + rotational latency; this is counted as sequential ("skip"). An
optical drive does not do this (see "Optical geometry"): its read-ahead while idle is what
serves short forward jumps.

Host queue. A drive without command queueing (ATAPI: no NCQ) holds one command; the host's
IO scheduler keeps the rest and, each time the drive is free, dispatches the request at or
after the end of its last command with the lowest sector (an ascending sweep, as
mq-deadline's sorted dispatch does; when none is left ahead, the oldest waiting request,
as mq-deadline starts again from the earliest expiry), merged with the waiting requests
contiguous with it, up to :data:`MERGE_BYTES` per command: first those that continue it,
then those that end where it starts (the elevator's back and front merges; a request picked
ahead of the head is not merged with one behind it). A request the sweep has
passed goes first once it has waited longer than :data:`EXPIRE_S` (mq-deadline's read
expiry; only a passed-over one, since the daemon sees arrival times shuffled by its
threads), so a stream of requests ahead of the head cannot starve it. The loop device in
front of the daemon does not do this itself, as its queue is 128 deep: it passes
everything on at once, and the daemon's threads would then take the requests in whatever
order they win the lock.

Writes. Write-back caching in the drive is NOT modelled: a write costs what a read at the
same place costs, plus ``write_overhead_s`` (datasheets quote write seeks ~1 ms slower than
read seeks: the head must settle more precisely), at ``write_rate_factor`` times the media
rate, plus ``random_write_penalty_s`` when not sequential (flash: erase-block
read-modify-write in the FTL). A write invalidates the read cache and stops read-ahead.

:class:`FlatProfile` (``flat:MS``) reproduces dm-delay's three-argument table
(``<dev> <offset> <delay>``): every read and write completes ``delay`` after it arrives,
independently of the others (no single actuator, no queueing, no seek awareness). It is there
for comparison with the seek-aware profiles.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import asdict, dataclass

from .drive import FlatProfile, Profile

#: Most bytes the host merges into one command: libata's transfer limit for an ATAPI
#: device (ATA_MAX_SECTORS, 256 sectors). A larger request is not split: a drive streams a
#: long sequential read at media rate, its cache reading on through the command turnaround.
MERGE_BYTES = 128 * 1024
#: A waiting request older than this is dispatched first (mq-deadline's default read_expire).
EXPIRE_S = 0.5


@dataclass(frozen=True)
class Breakdown:
    """Where the time of one request goes. ``kind`` is sequential/cache/skip/random/flat."""

    kind: str
    is_write: bool
    offset: int
    length: int
    arrival: float
    start: float
    finish: float
    overhead_s: float = 0.0
    seek_distance: int = 0
    seek_s: float = 0.0
    rotation_s: float = 0.0
    transfer_s: float = 0.0  # media transfer (incl. a skipped-over gap)
    cache_s: float = 0.0  # transfer from the drive cache over the interface
    write_penalty_s: float = 0.0  # write overhead + random-write penalty
    flat_s: float = 0.0

    @property
    def queue_s(self) -> float:
        return self.start - self.arrival

    @property
    def service_s(self) -> float:
        return self.finish - self.start

    @property
    def latency_s(self) -> float:
        return self.finish - self.arrival

    def as_dict(self) -> dict[str, object]:
        d = asdict(self)
        d.update(queue_s=self.queue_s, service_s=self.service_s, latency_s=self.latency_s)
        return d


@dataclass
class Waiting:
    """A request the host holds while the drive is busy (``command_queueing=False``)."""

    offset: int
    length: int
    is_write: bool
    arrival: float
    finish: float | None = None  # set once dispatched


@dataclass
class Counters:
    requests: int = 0
    reads: int = 0
    writes: int = 0
    bytes_read: int = 0
    bytes_written: int = 0
    seeks: int = 0  # non-sequential accesses that repositioned the head
    sequential: int = 0  # sequential continuations, incl. short forward skips
    cache_hits: int = 0
    merged: int = 0  # requests the host merged into the command before them
    busy_s: float = 0.0  # sum of service times (modelled device busy time)
    queue_s: float = 0.0  # sum of time spent queued behind other requests
    latency_s: float = 0.0  # sum of finish - arrival

    def as_dict(self) -> dict[str, float | int]:
        return asdict(self)


@dataclass
class _State:
    busy_until: float = -math.inf
    seg_lo: int = 0  # cached segment [seg_lo, seg_hi); the head sits at seg_hi
    seg_hi: int = 0
    ra_since: float | None = None  # read-ahead runs from this time (end of last read)
    ra_limit: int = 0  # read-ahead stops here: the segment is full of data not yet asked for


#: Commands a disk keeps in its log (`Disk.served`): a start of many thousand requests
#: fits many times over, a day of a busy bench does not grow the daemon without bound.
LOG_COMMANDS = 1 << 18


class Disk:
    """One actuator serving requests in arrival order on a virtual clock (seconds).

    `served` is the log of the last `LOG_COMMANDS` commands, each with how many requests
    it carried and where its time went: what a prediction of a start's requests is
    checked against (`served_since` takes the ones after a mark)."""

    def __init__(self, profile: Profile, capacity: int, log: int = LOG_COMMANDS) -> None:
        if capacity <= 0:
            raise ValueError(f"capacity must be > 0, got {capacity}")
        self.profile = profile
        self.capacity = int(capacity)
        self.counters = Counters()
        self.served: deque[tuple[int, Breakdown, int]] = deque(maxlen=max(log, 1))
        self.last: Breakdown | None = None
        self.last_end = 0  # where the last request ended (the head, as the host sees it)
        self._s = _State()
        o = profile.optical
        # optical: the bytes of the spiral from the inner to the outer radius
        self.span = max(self.capacity, o.medium_bytes) if o is not None else self.capacity
        self._block = o.block_bytes if o is not None else 1

    # -- geometry ---------------------------------------------------------------------------

    @property
    def head(self) -> int:
        """Byte offset under the head (end of the last request plus read-ahead so far)."""
        return self._s.seg_hi

    @property
    def busy_until(self) -> float:
        return self._s.busy_until

    def rate_at(self, offset: int) -> float:
        """Media read rate (bytes/s) at ``offset``; linear between the two edges (in the
        offset, or for an optical disc in the radius)."""
        p = self.profile
        o = p.optical
        if o is not None:
            frac = (o.radius_mm(offset, self.span) - o.r_inner_mm) / o.stroke_mm
            return p.rate_inner + (p.rate_outer - p.rate_inner) * frac
        frac = min(max(offset / self.capacity, 0.0), 1.0)
        if p.outer_at_start:
            return p.rate_outer + (p.rate_inner - p.rate_outer) * frac
        return p.rate_inner + (p.rate_outer - p.rate_inner) * frac

    def radius_mm(self, offset: int) -> float:
        """Radius of ``offset`` on an optical disc (see "Optical geometry")."""
        o = self.profile.optical
        if o is None:
            raise ValueError(f"profile {self.profile.name!r} has no optical geometry")
        return o.radius_mm(offset, self.span)

    def seek_time(self, distance: int, start: int = 0) -> float:
        """Seek from ``start`` to ``start + distance``. sqrt curve: 0 for 0, settle for the
        shortest seek, full stroke at capacity (``start`` does not matter); optical: the
        radial curve between the two radii."""
        if distance == 0:
            return 0.0
        p = self.profile
        if p.optical is not None:
            return p.optical.seek_s(self.radius_mm(start + distance) - self.radius_mm(start))
        frac = min(abs(distance) / self.capacity, 1.0)
        return min(p.settle_s + (p.full_stroke_s - p.settle_s) * math.sqrt(frac), p.full_stroke_s)

    # -- requests ---------------------------------------------------------------------------

    def cost_breakdown(self, offset: int, length: int, is_write: bool, now: float) -> Breakdown:
        """What :meth:`service` would charge for this request now, without doing it."""
        return self._plan(offset, length, is_write, now)[0]

    def service(self, offset: int, length: int, is_write: bool, now: float) -> tuple[float, float]:
        """Queue a request arriving at ``now``; return its (start, finish) on the clock."""
        b, state = self._plan(offset, length, is_write, now)
        self._s = state
        self.last = b
        self.last_end = offset + length
        c = self.counters
        self.served.append((c.requests, b, 1))
        c.requests += 1
        if is_write:
            c.writes += 1
            c.bytes_written += length
        else:
            c.reads += 1
            c.bytes_read += length
        if b.kind == "random":
            c.seeks += 1
        elif b.kind in ("sequential", "skip"):
            c.sequential += 1
        elif b.kind == "cache":
            c.cache_hits += 1
        c.busy_s += b.service_s
        c.queue_s += b.queue_s
        c.latency_s += b.latency_s
        return b.start, b.finish

    def served_since(self, mark: int) -> list[tuple[int, Breakdown, int]]:
        """The logged commands numbered `mark` and later (the number is the count of
        commands before it: take `counters.requests` as the mark), each (number, its
        breakdown, the requests it carried)."""
        return [entry for entry in self.served if entry[0] >= mark]

    def next_command(self, waiting: Sequence[Waiting], now: float) -> list[Waiting]:
        """The waiting requests the host dispatches as the drive's next command (see "Host
        queue" above): the first, then those merged into it, in offset order."""
        if not waiting:
            return []
        # the host knows where its last command ended, not how far the drive read on
        ahead = [w for w in waiting if w.offset >= self.last_end]
        behind = [w for w in waiting if w.offset < self.last_end]
        oldest = min(behind, key=lambda w: (w.arrival, w.offset)) if behind else None
        if oldest is not None and (not ahead or now - oldest.arrival > EXPIRE_S):
            first = oldest
        else:
            first = min(ahead, key=lambda w: (w.offset, w.arrival))
        # behind the head only if the pick itself came from behind: a command the host
        # takes as "ahead" starts ahead
        floor = 0 if first.offset < self.last_end else self.last_end
        return _merged(first, [w for w in waiting if w is not first], floor)

    def dispatch(self, group: Sequence[Waiting], arrival: float) -> float:
        """Serve ``group`` (from :meth:`next_command`) as one command that arrived at
        ``arrival``; every member gets its finish time, which is returned."""
        first = group[0]
        length = sum(w.length for w in group)
        _, finish = self.service(first.offset, length, first.is_write, arrival)
        self.counters.merged += len(group) - 1
        seq, b, _ = self.served[-1]
        self.served[-1] = (seq, b, len(group))
        for w in group:
            w.finish = finish
        return finish

    def _plan(
        self, offset: int, length: int, is_write: bool, now: float
    ) -> tuple[Breakdown, _State]:
        if offset < 0 or length < 0:
            raise ValueError(f"bad request: offset={offset} length={length}")
        p = self.profile
        s = self._s
        if isinstance(p, FlatProfile):
            b = Breakdown("flat", is_write, offset, length, now, now, now + p.delay_s,
                          flat_s=p.delay_s)
            return b, s

        start = max(now, s.busy_until)
        lo, hi = s.seg_lo, s.seg_hi
        # Read-ahead while the drive was idle since the end of the last read.
        if s.ra_since is not None and p.cache_bytes > 0 and start > s.ra_since:
            ahead = min(float(p.cache_bytes), (start - s.ra_since) * self.rate_at(hi))
            hi = max(hi, min(self.capacity, s.ra_limit,
                             hi + int(ahead) // self._block * self._block))
            lo = max(lo, hi - p.cache_bytes)
        head = hi
        end = offset + length
        blk = self._block
        # what the drive reads: whole blocks (optical ECC blocks; 1 byte otherwise)
        first = offset - offset % blk
        last = max(end, min(-(-end // blk) * blk, self.capacity))
        wrate = p.write_rate_factor
        parts: dict[str, float] = {}
        kind: str
        distance = 0

        if not is_write and p.cache_bytes > 0 and lo <= offset < hi:
            kind = "cache"
            hit = min(end, hi) - offset
            iface = p.interface_rate or self.rate_at(offset)
            parts["overhead_s"] = p.cache_hit_overhead_s
            parts["cache_s"] = hit / iface
            if end > hi:  # the rest streams on from the head
                parts["transfer_s"] = (last - hi) / self.rate_at(hi)
        else:
            rate = self.rate_at(first) * (wrate if is_write else 1.0)
            parts["overhead_s"] = p.command_overhead_s
            parts["transfer_s"] = (last - first) / rate
            if is_write:
                parts["write_penalty_s"] = p.write_overhead_s
            if first == head:
                kind = "sequential"
            else:
                gap = first - head
                reposition = self.seek_time(gap, head) + p.rotational_latency_s
                skip = (gap / self.rate_at(head) if p.rotational and gap > 0
                        and p.optical is None else math.inf)
                if skip < reposition:
                    kind = "skip"
                    parts["transfer_s"] += skip
                else:
                    kind = "random"
                    distance = abs(gap)
                    parts["seek_s"] = self.seek_time(gap, head)
                    parts["rotation_s"] = p.rotational_latency_s
                    if is_write:
                        parts["write_penalty_s"] += p.random_write_penalty_s

        service = sum(parts.values())
        finish = start + service
        b = Breakdown(kind, is_write, offset, length, now, start, finish,
                      seek_distance=distance, **parts)

        new = _State(busy_until=finish)
        if is_write:
            new.seg_lo = new.seg_hi = last
            new.ra_since = None
        else:
            new_hi = max(last, hi) if kind == "cache" else last
            new_lo = lo if kind in ("sequential", "skip", "cache") else first
            new.seg_hi = new_hi
            new.seg_lo = max(new_lo, new_hi - p.cache_bytes) if p.cache_bytes > 0 else new_hi
            new.ra_since = finish
            new.ra_limit = last + p.cache_bytes
        return b, new


def _merged(first: Waiting, others: Sequence[Waiting], floor: int) -> list[Waiting]:
    """``first`` and the waiting requests contiguous with it, in offset order, up to
    MERGE_BYTES: those that continue it, then those that end where it starts (the
    elevator's back and front merges; a burst issued downwards merges as well as one issued
    upwards), none starting below ``floor``. Of several at one place, the oldest that fits."""
    by_start: dict[int, list[Waiting]] = {}
    by_end: dict[int, list[Waiting]] = {}
    for w in sorted(others, key=lambda w: w.arrival):
        if w.is_write == first.is_write and w.length > 0:
            by_start.setdefault(w.offset, []).append(w)
            by_end.setdefault(w.offset + w.length, []).append(w)
    after: list[Waiting] = []
    before: list[Waiting] = []
    total, end, start = first.length, first.offset + first.length, first.offset
    while (w := _fitting(by_start.get(end, []), total, floor)) is not None:
        after.append(w)
        end, total = end + w.length, total + w.length
    while (w := _fitting(by_end.get(start, []), total, floor)) is not None:
        before.append(w)
        start, total = w.offset, total + w.length
    return [*reversed(before), first, *after]


def _fitting(candidates: list[Waiting], total: int, floor: int) -> Waiting | None:
    return next((w for w in candidates if w.offset >= floor and total + w.length <= MERGE_BYTES),
                None)


__all__ = [
    "EXPIRE_S",
    "LOG_COMMANDS",
    "MERGE_BYTES",
    "Breakdown",
    "Counters",
    "Disk",
    "Waiting",
]
