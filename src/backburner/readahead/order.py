"""In which order to read a pack, and what that order costs (pure: data in, data out).

A *piece* is a byte range of one file with its place on the device (from FIEMAP), or
without one where the filesystem cannot say. Replay reads pieces either in physical order
(one ascending sweep: on a rotating disk every jump is a seek) or in access order (the
order the start read them: on flash there is no seek, and what is needed first comes
first). `seeks` and `ascending_fraction` measure an order the way a disk would feel it:
a forward gap of at most `GAP` bytes is read through, not sought (a drive streams past
256 KiB in less time than a short seek plus half a revolution).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace

GAP = 256 << 10
CHUNK = 2 << 20  # what one readahead(2) call asks for: the deadline is checked between


@dataclass(frozen=True)
class Piece:
    file: int  # index of the file (its entry in the pack)
    logical: int  # byte offset in the file
    length: int
    physical: int | None = None  # byte offset on the device; None where unknown

    @property
    def physical_end(self) -> int | None:
        return None if self.physical is None else self.physical + self.length


def coalesce(pieces: Iterable[Piece]) -> list[Piece]:
    """Consecutive pieces of one file that continue each other (in the file and, where
    known, on the device) become one."""
    out: list[Piece] = []
    for p in pieces:
        if p.length <= 0:
            continue
        last = out[-1] if out else None
        if (last is not None and last.file == p.file
                and last.logical + last.length == p.logical
                and (last.physical is None) == (p.physical is None)
                and (p.physical is None or last.physical_end == p.physical)):
            out[-1] = replace(last, length=last.length + p.length)
        else:
            out.append(p)
    return out


def physical_order(pieces: Iterable[Piece]) -> list[Piece]:
    """One ascending sweep over the device; pieces with no known place first, in access
    order (they cost a read each wherever they are). The same device bytes named twice
    (hard links: one inode under two names) are read once."""
    ps = list(pieces)
    unknown = [p for p in ps if p.physical is None]
    known: dict[tuple[int, int], Piece] = {}
    for p in ps:
        if p.physical is not None:
            known.setdefault((p.physical, p.length), p)
    ordered = sorted(known.values(), key=lambda p: (p.physical, p.file, p.logical))
    return coalesce(unknown + ordered)


def access_order(pieces: Iterable[Piece]) -> list[Piece]:
    """As the start read them: files in first-access order, each file's ranges ascending."""
    return coalesce(sorted(pieces, key=lambda p: (p.file, p.logical)))


class _Head:
    """Where the previous read was: a piece continues the run when it starts inside it
    (the same bytes again: a hard link) or at most `gap` after its end."""

    def __init__(self, gap: int) -> None:
        self.gap = gap
        self.start: int | None = None
        self.end = 0

    def moves_to(self, p: Piece) -> bool:
        """Read p; True if that takes a seek."""
        if p.physical is None:
            self.start = None
            return True
        cont = self.start is not None and self.start <= p.physical <= self.end + self.gap
        if cont:
            self.end = max(self.end, p.physical + p.length)
        else:
            self.start, self.end = p.physical, p.physical + p.length
        return not cont


def seeks(pieces: Sequence[Piece], gap: int = GAP) -> int:
    """Head movements to read the pieces in this order: the first one, then every jump
    backwards or more than `gap` forwards; a piece of unknown place counts as one."""
    head = _Head(gap)
    return sum(1 for p in pieces if head.moves_to(p))


def ascending_fraction(pieces: Sequence[Piece], gap: int = GAP) -> float:
    """The largest share of the bytes read in one ascending run, in this order: a run goes
    on while each piece starts at most `gap` after the previous one ended. 1.0 means a
    cold start reading in this order is one sequential pass."""
    total = sum(p.length for p in pieces)
    if total == 0:
        return 1.0
    head = _Head(gap)
    best = run = 0
    for p in pieces:
        run = p.length if head.moves_to(p) else run + p.length
        best = max(best, run)
    return best / total


def span(pieces: Sequence[Piece]) -> int:
    """Bytes between the lowest and the highest known device offset (what a sweep crosses)."""
    known = [p for p in pieces if p.physical is not None]
    if not known:
        return 0
    return max(p.physical + p.length for p in known) - min(p.physical for p in known)


def within_budget(ranges: Sequence[Sequence[tuple[int, int]]], budget: int | None
                  ) -> tuple[list[list[tuple[int, int]]], bool]:
    """The files' ranges (in access order) cut at `budget` bytes: what comes first in the
    start is kept. Returns the kept ranges per file and whether anything was cut."""
    if budget is None:
        return [list(r) for r in ranges], False
    left = budget
    out: list[list[tuple[int, int]]] = []
    cut = False
    for file_ranges in ranges:
        kept = []
        for off, ln in file_ranges:
            if left <= 0:
                cut = True
                break
            take = min(ln, left)
            kept.append((off, take))
            left -= take
            cut = cut or take < ln
        out.append(kept)
    return out, cut


def chunks(piece: Piece, size: int = CHUNK) -> list[Piece]:
    """The piece cut into reads of at most `size` bytes."""
    out = []
    for off in range(0, piece.length, size):
        ln = min(size, piece.length - off)
        phys = None if piece.physical is None else piece.physical + off
        out.append(Piece(piece.file, piece.logical + off, ln, phys))
    return out
