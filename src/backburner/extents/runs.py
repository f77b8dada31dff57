"""Extents -> runs -> segments: the pure core of `extents` (data in, data out, no IO).

FIEMAP answers in pieces: a filesystem splits one contiguous allocation at its own limits
(ext4: 128 MiB per extent), and paging through a large file may hand back an extent that
overlaps the previous page. A tool that maps a file onto its device must turn that into
*runs* — maximal pieces that are contiguous both in the file and on the device and read the
same way — with no byte of the file mapped twice and none left out. `merge` does exactly
that, and refuses (DataError) extents that contradict each other rather than guessing.

`segments` then cuts the file ``[0, size)`` into runs and holes; everything else here
(totals, the device-mapper table, losetup arguments, the refusals) is computed from them.
"""

from __future__ import annotations

import bisect
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import NamedTuple

from ..base.errors import DataError

SECTOR = 512

# FIEMAP_EXTENT_* (include/uapi/linux/fiemap.h)
LAST = 0x1
UNKNOWN = 0x2
DELALLOC = 0x4
ENCODED = 0x8
ENCRYPTED = 0x80
NOT_ALIGNED = 0x100
INLINE = 0x200
TAIL = 0x400
UNWRITTEN = 0x800
MERGED = 0x1000
SHARED = 0x2000

FLAG_NAMES: dict[int, str] = {
    LAST: "last", UNKNOWN: "unknown", DELALLOC: "delalloc", ENCODED: "encoded",
    ENCRYPTED: "encrypted", NOT_ALIGNED: "not_aligned", INLINE: "inline", TAIL: "tail",
    UNWRITTEN: "unwritten", MERGED: "merged", SHARED: "shared",
}
#: Flags that say nothing about how the bytes are stored: they never keep extents apart.
NEUTRAL = LAST | MERGED
#: The device does not hold the file's bytes there at all (or not at a sector boundary).
UNMAPPABLE = UNKNOWN | DELALLOC | ENCODED | ENCRYPTED | NOT_ALIGNED | INLINE | TAIL


def flag_names(flags: int) -> list[str]:
    """0x2800 -> ['unwritten', 'shared']; unknown bits as hex, so nothing is hidden."""
    names = [name for bit, name in FLAG_NAMES.items() if flags & bit]
    rest = flags & ~sum(FLAG_NAMES)
    if rest:
        names.append(hex(rest))
    return names


def parse_flags(names: Iterable[str]) -> int:
    """The inverse of `flag_names` (for map files). DataError on a name we do not know."""
    by_name = {v: k for k, v in FLAG_NAMES.items()}
    flags = 0
    for name in names:
        if name in by_name:
            flags |= by_name[name]
        elif name.startswith("0x"):
            flags |= int(name, 16)
        else:
            raise DataError(f"unknown extent flag {name!r}")
    return flags


class Extent(NamedTuple):
    """One FIEMAP record: ``length`` bytes at file offset ``logical`` live at byte
    ``physical`` of the filesystem's block device. A tuple: a file may have millions."""

    logical: int
    physical: int
    length: int
    flags: int = 0


class Run(NamedTuple):
    """A maximal piece of the file contiguous in the file and on the device, one kind.

    ``physical`` is in bytes from the start of the filesystem's block device (the
    partition); ``extents`` counts the FIEMAP records merged into it. A tuple, like
    `Extent`: a layout may hold a million of them.
    """

    logical: int
    physical: int
    length: int
    flags: int = 0
    extents: int = 1

    @property
    def end(self) -> int:
        return self.logical + self.length

    @property
    def physical_end(self) -> int:
        return self.physical + self.length

    @property
    def kind(self) -> str:
        """'data' (the device holds the file's bytes), 'unwritten' (allocated, reads as
        zeros), or 'unmappable' (not yet allocated, compressed, encrypted, inline...)."""
        if self.flags & UNMAPPABLE:
            return "unmappable"
        if self.flags & UNWRITTEN:
            return "unwritten"
        return "data"

    def clip(self, start: int, end: int) -> Run:
        """The part of this run inside file bytes ``[start, end)`` (must intersect)."""
        lo, hi = max(start, self.logical), min(end, self.end)
        return Run(lo, self.physical + lo - self.logical, hi - lo, self.flags, self.extents)


class Segment(NamedTuple):
    """A piece of ``[0, size)``: a run, or a hole (``run`` is None) the filesystem reads
    as zeros without any device bytes behind it."""

    logical: int
    length: int
    run: Run | None

    @property
    def end(self) -> int:
        return self.logical + self.length

    @property
    def kind(self) -> str:
        return "hole" if self.run is None else self.run.kind


def _key(flags: int) -> int:
    return flags & ~NEUTRAL


def merge(extents: Iterable[Extent], size: int | None = None) -> list[Run]:
    """FIEMAP extents -> runs, each file byte in at most one run; clipped to ``size``.

    Extents are taken in file order. Two are merged when the second starts in the file
    where the first ends, starts on the device where the first ends there, and has the
    same storage flags (so written and unwritten space never merge). Where an extent
    overlaps bytes already covered (a FIEMAP page boundary, a filesystem that repeats
    itself) the overlap must map to the same device bytes with the same flags, and is
    then dropped; otherwise the file changed under us or the filesystem contradicts
    itself, and we refuse rather than guess which one is right.
    """
    runs: list[Run] = []
    covered = 0  # file offset up to which runs already cover
    for ext in sorted(extents, key=lambda e: e.logical):
        if ext.length <= 0:
            continue
        logical, physical, length = ext.logical, ext.physical, ext.length
        if runs and logical < covered:
            _check_overlap(runs, ext, min(ext.logical + ext.length, covered))
            cut = covered - logical
            if cut >= length:
                continue
            logical, physical, length = covered, physical + cut, length - cut
        last = runs[-1] if runs else None
        if (last is not None and last.end == logical and last.physical_end == physical
                and _key(last.flags) == _key(ext.flags)):
            runs[-1] = Run(last.logical, last.physical, last.length + length,
                           last.flags | (ext.flags & MERGED), last.extents + 1)
        else:
            runs.append(Run(logical, physical, length, ext.flags & ~LAST, 1))
        covered = logical + length
    if size is not None:
        runs = clip(runs, 0, size)
    return runs


def _check_overlap(runs: list[Run], ext: Extent, overlap_end: int) -> None:
    """Every run that ``ext`` overlaps must place the shared bytes where ``ext`` does."""
    i = len(runs) - 1
    while i >= 0 and runs[i].end > ext.logical:
        run = runs[i]
        lo = max(run.logical, ext.logical)
        if lo < min(run.end, overlap_end) and (
                run.physical - run.logical != ext.physical - ext.logical
                or _key(run.flags) != _key(ext.flags)):
            raise DataError(
                f"FIEMAP returned conflicting extents for file offset {lo}: device byte "
                f"{run.physical + lo - run.logical} and {ext.physical + lo - ext.logical}",
                "the file changed while it was mapped: try again")
        i -= 1


def clip(runs: Sequence[Run], start: int, end: int) -> list[Run]:
    """The runs restricted to file bytes ``[start, end)``."""
    return [r if start <= r.logical and r.logical + r.length <= end else r.clip(start, end)
            for r in runs if r.logical + r.length > start and r.logical < end]


def select(runs: Sequence[Run], ranges: Iterable[tuple[int, int]]) -> list[Run]:
    """The pieces of ``runs`` inside each (offset, length) range, in the order given.

    For readahead: the physical places to read for the byte ranges a program used.
    ``runs`` must be sorted and disjoint, as `merge` returns them. Holes yield nothing.
    """
    starts = [r.logical for r in runs]
    out: list[Run] = []
    for offset, length in ranges:
        if length <= 0:
            continue
        i = max(bisect.bisect_right(starts, offset) - 1, 0)
        while i < len(runs) and runs[i].logical < offset + length:
            if runs[i].end > offset:
                out.append(runs[i].clip(offset, offset + length))
            i += 1
    return out


def segments(runs: Sequence[Run], size: int) -> list[Segment]:
    """``[0, size)`` cut into runs and holes, in order, with nothing left out."""
    out: list[Segment] = []
    append = out.append  # a million-run file makes this loop hot
    pos = 0
    for run in clip(runs, 0, size):
        lo = run.logical
        if lo > pos:
            append(Segment(pos, lo - pos, None))
        append(Segment(lo, run.length, run))
        pos = lo + run.length
    if pos < size:
        append(Segment(pos, size - pos, None))
    return out


@dataclass(frozen=True)
class Totals:
    """What `extents show` sums up. ``jumps`` counts the places where reading the file in
    order has to move to another place on the device: fragmentation as a disk feels it."""

    size: int
    extents: int
    runs: int
    data_bytes: int
    unwritten_bytes: int
    unmappable_bytes: int
    shared_bytes: int
    holes: int
    hole_bytes: int
    jumps: int
    largest_run: int
    flags: int

    @property
    def allocated_bytes(self) -> int:
        return self.data_bytes + self.unwritten_bytes + self.unmappable_bytes


def totals(runs: Sequence[Run], size: int, extents: int | None = None,
           segs: Sequence[Segment] | None = None) -> Totals:
    """Sums over ``segments(runs, size)`` (pass ``segs`` when they are at hand)."""
    segs = segments(runs, size) if segs is None else segs
    by_kind = {"data": 0, "unwritten": 0, "unmappable": 0, "hole": 0}
    inside: list[Run] = []
    holes = flags = shared = jumps = largest = 0
    prev_end = None
    for s in segs:
        run = s.run
        if run is None:
            by_kind["hole"] += s.length
            holes += 1
            continue
        by_kind[run.kind] += s.length
        inside.append(run)
        flags |= run.flags
        if run.flags & SHARED:
            shared += run.length
        if prev_end is not None and run.physical != prev_end:
            jumps += 1
        prev_end = run.physical + run.length
        largest = max(largest, run.length)
    return Totals(
        size=size, extents=len(runs) if extents is None else extents, runs=len(inside),
        data_bytes=by_kind["data"], unwritten_bytes=by_kind["unwritten"],
        unmappable_bytes=by_kind["unmappable"], shared_bytes=shared, holes=holes,
        hole_bytes=by_kind["hole"], jumps=jumps, largest_run=largest, flags=flags)
